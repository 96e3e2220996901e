#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue #28's trial benchmark: a [Trial] on live traffic against the
static choices, side by side in one boot per kernel, QEMU (TCG).

Kernels: Debian's stock 6.12 (modules, -smp 2) and 7.3 + seed 002's
dispatch_direct (tests/vm/dd_kernel.py: no modules, everything built in,
-smp 1, module parameters on the kernel command line).

Devices, each alone in its cells:
  scsi-slow      scsi_debug ndelay=2000000 (2 ms a command) max_queue=8
                 (8 tags): the issue's slow, shallow disk;
  virtio-capped  virtio-blk, 1 queue, queue-size=16, QEMU
                 throttling.iops-total=400 (a capped cloud disk);
  nullb-fast     null_blk queue_mode=2 submit_queues=1 (fast, one queue);
  virtio-local   the same virtio-blk (1 queue, queue-size=16), not
                 throttled: a local disk of the same class as
                 virtio-capped, which sysfs cannot tell apart from it.
                 Both virtio images are 1 GiB raw files written through
                 with zeros before the boot (not sparse).
Loads, fio libaio direct 4k:
  write          sequential write flood, qd32;
  randread       random reads, qd16;
  phase          randread for the first half, then the write flood: a
                 verdict taken on the first half is wrong for the second.
Settings: the incumbent none (the shipped class choice); the candidate
mq-deadline on 6.12, mq-deadline+dispatch_direct on 7.3dd. The statics:
none and mq-deadline on 6.12; none, mq-deadline (dispatch_direct=0) and
mq-deadline+dispatch_direct (=1) on 7.3dd.

Per cell (device x load) and round, the statics' order and whether the
statics or the trial come first alternate between rounds:
  - statics: no daemon, each static set by hand, the load for --static-s,
    bytes from /proc/diskstats (sectors read + written) and guest time
    (/proc/uptime) around the measured span; fio's first second is not
    measured (the same for every run);
  - trial: blkpolicyd with one bench policy (scheduler = none, [Trial]
    candidates as above, window = 2, settle = 0.5, min_gain = 10%,
    max_switches_per_hour = 64, max_duration = --max-trial-s), its
    state dir's trials/ deleted before each start; the device set back
    to the kernel's own default before the daemon starts (what it finds);
    the load from 1 s after fio's start; `blkpolicyctl --json device`
    polled about once a second until the trial is done or stopped (a
    bound: --max-trial-s + 10 s); then 1 s for the last switch to land and
    --after-s on what was kept, its scheduler read each second (switches
    after the verdict); then SIGTERM: the daemon must exit 0 and the
    device be back on what it found;
  - phase: the randread half then the write half (--phase-s in all), each
    its own fio process, the first second of each half not measured; the
    trial's outcomes polled across the whole run (a re-trial on the
    workload's change shows as a second outcome).

Definitions (docs/benchmarks.md, "Trials on live traffic (#28)"):
  - best static: the static with the highest mean throughput in the cell
    over the rounds (phase: over the whole measured run);
  - final: throughput in the after-span on what the trial kept, over the
    best static's throughput (phase: the last --after-s of the write half,
    over the best static's in the same span of its runs);
  - time to verdict t_v: from the load's measured start to the poll that
    saw the trial done (phase: the first verdict, and the last);
  - cost over 10 min = (best x t_v - bytes moved from the load's start to
    the verdict) / (best x 600 s): the trial span as measured, the rest of
    a 10-minute run taken to be on what was kept (which `final` reports).
    A projection, not a 10-minute measurement. Phase: (best x T - bytes
    moved over the whole measured run T) / (best x 600 s);
  - spread: the better of the trial's two arms (none and the candidate)
    over the worse, as statics (on 7.3dd the third static, mq-deadline
    with dispatch_direct=0, is not an arm: only `final` weighs it);
  - goals per cell, each met only if met in every round: final >= 0.95;
    t_v <= 300 s where the arms differ by >= 1.3x; cost <= 3%; where
    they differ by < 1.1x, the incumbent (none) kept and no switch after
    the verdict (the scheduler read each second of the after-span, and
    no second verdict).

  sudo python3 bench/trial-vm.py [--kernel 6.12|7.3dd|all] [--devices LIST] [--loads LIST] [--cells D:L,...]
        [--rounds 3] [--first-round 1] [--static-s 8] [--max-trial-s 60] [--after-s 8] [--phase-s 60]
        [--raw FILE] [--serial FILE]

Exit status 0 whatever the goals say; non-zero only when the bench could
not run. Under TCG only ratios mean anything.
"""
import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "vm"))
import dd_kernel  # noqa: E402
import vmtest  # noqa: E402

DEVICES = ["scsi-slow", "virtio-capped", "nullb-fast", "virtio-local"]
LOADS = ["write", "randread", "phase"]
MODULES_612 = ["virtio_pci", "virtio_blk", "sd_mod", "scsi_debug", "null_blk"]
SCSI_PARAMS = "dev_size_mb=256 ndelay=2000000 max_queue=8"
KERNELS = {
    "6.12": {"statics": ["none", "mq-deadline"], "candidate": "mq-deadline", "smp": 2},
    "7.3dd": {"statics": ["none", "mq-deadline", "mq-deadline+dispatch_direct"],
              "candidate": "mq-deadline+dispatch_direct", "smp": 1},
}
GOAL_FINAL, GOAL_TV, GOAL_COST = 0.95, 300.0, 0.03
DIFFER, SAME = 1.3, 1.1

INIT = vmtest.MOUNTS + r"""export PATH=/bin
for m in $(cat /modules.list); do
        case $m in
                scsi_debug.ko) insmod /lib/modules/$m """ + SCSI_PARAMS + r""" ;;
                null_blk.ko) insmod /lib/modules/$m nr_devices=0 ;;
                *) insmod /lib/modules/$m ;;
        esac
done
""" + vmtest.NULLB + r"""mkdir -p /etc/blkpolicyd/bench /var/lib/blkpolicyd
printf '[Daemon]\ntick_interval_ms = 250\n' > /etc/blkpolicyd/bench.conf
echo "===KERNEL $(cat /proc/sys/kernel/osrelease)==="
ctl() { /bin/blkpolicyctl --socket /run/bench.sock "$@"; }
now() { cut -d' ' -f1 /proc/uptime; }
now_i() { cut -d. -f1 /proc/uptime; }
until_t() { while [ $(now_i) -lt $1 ]; do sleep 0.5; done; }
# st DEV: scheduler/dispatch_direct (- where there is none)
st() { echo "$(sed 's/.*\[\(.*\)\].*/\1/' /sys/block/$1/queue/scheduler)/$(cat /sys/block/$1/queue/iosched/dispatch_direct 2>/dev/null || echo -)"; }
setst() {      # DEV SCHED/DD (as st prints it)
        echo ${2%/*} > /sys/block/$1/queue/scheduler
        [ "${2#*/}" = - ] || echo ${2#*/} > /sys/block/$1/queue/iosched/dispatch_direct
}
setstatic() {  # DEV STATIC
        case $2 in
        none) echo none > /sys/block/$1/queue/scheduler ;;
        mq-deadline) echo mq-deadline > /sys/block/$1/queue/scheduler
                [ -e /sys/block/$1/queue/iosched/dispatch_direct ] && echo 0 > /sys/block/$1/queue/iosched/dispatch_direct ;;
        mq-deadline+dispatch_direct) echo mq-deadline > /sys/block/$1/queue/scheduler
                echo 1 > /sys/block/$1/queue/iosched/dispatch_direct ;;
        esac
}
# snap DEV: guest time/sectors read+written so far
snap() { set -- $(grep " $1 " /proc/diskstats); echo "$(now)/$(($6 + ${10}))"; }
# dj DEV: the device's JSON in /run/tj (printed as it is at the end of a
# trial); flat: the same without blanks, for grep
dj() { ctl --json device $1 > /run/tj; }
flat() { tr -d ' \n\t' < /run/tj; }
decided() { dj $1; flat | grep -o '"verdict":"[a-z-]*"' | grep -vc undecided; }
# tstate: the trial's phase|retrials|verdicts, from /run/tj
tstate() {
        f=$(flat)
        echo "$(echo "$f" | grep -o '"phase":"[a-z]*"' | head -n 1 | cut -d'"' -f4)|$(echo "$f" | grep -o '"retrials":[0-9]*' | cut -d: -f2)|$(echo "$f" | grep -o '"verdict":"[a-z-]*"' | cut -d'"' -f4 | tr '\n' ',')"
}
fio_start() {  # DEV LOAD: fio in the background, its pid in $fio
        case $2 in
        write) fa="--rw=write --iodepth=32" ;;
        randread) fa="--rw=randread --iodepth=16" ;;
        esac
        /bin/fio --name=$2 --filename=/dev/$1 --ioengine=libaio --direct=1 --bs=4k --time_based --runtime=900 \
                $fa --output-format=terse >/dev/null 2>&1 &
        fio=$!
}
fio_stop() { kill $fio 2>/dev/null; wait $fio 2>/dev/null; }
daemon_start() {       # DEV CANDIDATE
        cat > /etc/blkpolicyd/bench/99-bench.policy <<EOF
[Match]
name = $1

[Queue]
scheduler = none

[Trial]
candidates = $(echo $2 | tr , ' ')
window = 2
settle = 0.5
min_gain = 10%
max_switches_per_hour = 64
max_duration = @MAXT@
EOF
        # fresh each time: no verdict remembered from an earlier round
        # (trial_memory's default file; trials/ should it move there)
        rm -rf /var/lib/blkpolicyd/trials /var/lib/blkpolicyd/trial-verdicts.json
        setst $1 $(cat /run/default.$1)
        found=$(st $1)
        rm -f /run/bench.sock
        /bin/blkpolicyd --config /etc/blkpolicyd/bench.conf --policy-dir /etc/blkpolicyd/bench \
                --state-dir /var/lib/blkpolicyd --socket /run/bench.sock --device $1 2>/run/daemon.err &
        pid=$!
        for i in $(seq 100); do [ -S /run/bench.sock ] && break; sleep 0.1; done
        run=fail
        for i in $(seq 50); do dj $1; flat | grep -q '"phase":"running"' && run=ok && break; sleep 0.2; done
}
daemon_stop() {        # DEV: SIGTERM, its exit status in $rc, the device's state in $back
        kill -TERM $pid; wait $pid; rc=$?
        back=$(st $1)
        echo "===TJSON $cell $round==="; cat /run/tj; echo; echo "===TJSON-END==="
        if [ $rc != 0 ] || [ "$back" != "$found" ]; then
                echo "===DAEMON-LOG $cell $round==="; tail -n 30 /run/daemon.err; echo "===DAEMON-LOG-END==="
        fi
}
static() {     # CELL ROUND DEV LOAD STATIC
        setstatic $3 $5
        fio_start $3 $4
        sleep 1; a=$(snap $3)
        sleep @STATIC@
        b=$(snap $3)
        fio_stop
        echo "===STATIC $1 $2 $5 $(st $3) $a $b==="
}
trial() {      # CELL ROUND DEV LOAD CANDIDATE
        cell=$1 round=$2
        daemon_start $3 $5
        fio_start $3 $4
        sleep 1; a=$(snap $3)
        end=$(( ${a%%.*} + @MAXT@ + 10 ))
        r=timeout
        while [ $(now_i) -lt $end ]; do
                dj $3
                flat | grep -q -e '"phase":"done"' -e '"phase":"stopped"' && r=done && break
                sleep 1
        done
        v=$(snap $3); kept=$(st $3)
        sleep 1; b=$(snap $3)
        sw=0; last=$kept
        for i in $(seq @AFTER@); do sleep 1; s=$(st $3); [ "$s" != "$last" ] && sw=$((sw + 1)) && last=$s; done
        c=$(snap $3)
        fio_stop
        n=$(decided $3)
        daemon_stop $3
        echo "===TRIAL $1 $2 $r run=$run $a $v $b $c sw=$sw decided=$n kept=$kept end=$last found=$found back=$back rc=$rc==="
}
# watch DEV UNTIL: poll the trial about once a second until UNTIL (uptime,
# s), a line for each verdict reached, the scheduler's changes counted in $sw
watch() {
        while [ $(now_i) -lt $2 ]; do
                dj $1; k=$(tstate)
                [ "$k" != "$nd" ] && nd=$k && echo "===PV $cell $round $k $(snap $1) $(st $1)==="
                s=$(st $1); [ "$s" != "$last" ] && sw=$((sw + 1)) && last=$s
                sleep 1
        done
}
phase() {      # CELL ROUND DEV STATIC|trial [CANDIDATE]
        cell=$1 round=$2 h=$(( @PHASE@ / 2 ))
        if [ $4 = trial ]; then daemon_start $3 $5; else setstatic $3 $4; fi
        nd="" sw=0 last=$(st $3)
        fio_start $3 randread
        t=$(now_i); sleep 1; a=$(snap $3)
        if [ $4 = trial ]; then watch $3 $((t + h)); else until_t $((t + h)); fi
        b=$(snap $3)
        fio_stop
        fio_start $3 write
        t=$(now_i); sleep 1; c=$(snap $3)
        if [ $4 = trial ]; then watch $3 $((t + h - @AFTER@)); else until_t $((t + h - @AFTER@)); fi
        d=$(snap $3)
        if [ $4 = trial ]; then watch $3 $((t + h)); else until_t $((t + h)); fi
        e=$(snap $3)
        fio_stop
        if [ $4 = trial ]; then
                n=$(decided $3)
                daemon_stop $3
                echo "===PTRIAL $1 $2 run=$run $a $b $c $d $e sw=$sw decided=$n end=$last found=$found back=$back rc=$rc==="
        else
                echo "===PSTATIC $1 $2 $4 $(st $3) $a $b $c $d $e==="
        fi
}

# the devices, found by what they are; each one's state as the kernel set it
for i in $(seq 100); do for d in /sys/block/sd*; do grep -qs scsi_debug $d/device/model && SD=${d##*/}; done
        [ -n "$SD" ] && break; sleep 0.1; done
for d in /sys/block/vd*; do case $(cat $d/serial 2>/dev/null) in
        capped) VCAP=${d##*/} ;; local) VLOC=${d##*/} ;; esac; done
nullb nullb0 queue_mode=2 submit_queues=1 poll_queues=0 size=1024
for i in $(seq 50); do [ -e /sys/block/nullb0 ] && break; sleep 0.1; done
for d in $SD $VCAP $VLOC nullb0; do st $d > /run/default.$d; done
echo "===DEVICES scsi-slow=${SD:-none} virtio-capped=${VCAP:-none} virtio-local=${VLOC:-none} nullb-fast=nullb0 defaults=$(for d in $SD $VCAP $VLOC nullb0; do printf '%s:%s,' $d $(cat /run/default.$d); done)==="
@PLAN@
echo "===BENCH-DONE==="
poweroff -f
"""

DEV_VAR = {"scsi-slow": "$SD", "virtio-capped": "$VCAP", "nullb-fast": "nullb0", "virtio-local": "$VLOC"}


def candidates(kernel):
    """The [Trial]'s candidates, comma-separated for the guest's shell:
    --candidates, else the kernel's own."""
    return (ARGS.candidates or KERNELS[kernel]["candidate"]).replace(" ", ",")


def static_of(state):
    """The static a trial's end state is ("mq-deadline/1": scheduler and
    dispatch_direct, - where there is none)."""
    sched, _, dd = state.partition("/")
    return "mq-deadline+dispatch_direct" if sched == "mq-deadline" and dd == "1" else sched


def plan(kernel, cells, rounds):
    """The guest's calls, unrolled: per cell and round, the statics in an
    order that rotates, before the trial in odd rounds, after it in even
    ones. Returns the shell text and the number of guest seconds it may take."""
    k = KERNELS[kernel]
    lines, budget = [], 0.0
    for cell in cells:
        dev, load = cell.split(":")
        for r in range(ARGS.first_round, ARGS.first_round + rounds):
            n = (r - 1) % len(k["statics"])
            statics = k["statics"][n:] + k["statics"][:n]
            if load == "phase":
                st = [f"phase {cell} {r} {DEV_VAR[dev]} {s}" for s in statics]
                tr = [f"phase {cell} {r} {DEV_VAR[dev]} trial {candidates(kernel)}"]
                budget += (len(statics) + 1) * (ARGS.phase_s + 6) + 20
            else:
                st = [f"static {cell} {r} {DEV_VAR[dev]} {load} {s}" for s in statics]
                tr = [f"trial {cell} {r} {DEV_VAR[dev]} {load} {candidates(kernel)}"]
                budget += len(statics) * (ARGS.static_s + 4) + ARGS.max_trial_s + ARGS.after_s + 40
            lines += (st + tr) if r % 2 else (tr + st)
    return "\n".join(lines), budget


def written_disk(path, size=1 << 30):
    """A raw image written through (zeros), not sparse: a first write into
    a hole of the host's file costs an allocation its later writes do not,
    and a read of a hole costs nothing, so a sparse image makes a run's
    throughput depend on where on the disk it is."""
    chunk = bytes(1 << 20)
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(chunk)
    return path


def qemu_devices(work):
    disks = [written_disk(os.path.join(work, f"{n}.img")) for n in ("capped", "local")]
    return ["-drive", f"if=none,id=vcap,file={disks[0]},format=raw,throttling.iops-total=400",
            "-device", "virtio-blk-pci,drive=vcap,num-queues=1,queue-size=16,serial=capped",
            "-drive", f"if=none,id=vloc,file={disks[1]},format=raw",
            "-device", "virtio-blk-pci,drive=vloc,num-queues=1,queue-size=16,serial=local"]


def boot(kernel, blkpolicyd, serial_path, cells, rounds):
    """One boot; the serial console streams to serial_path. Returns its text."""
    script, budget = plan(kernel, cells, rounds)
    init = (INIT.replace("@PLAN@", script).replace("@MAXT@", str(ARGS.max_trial_s))
            .replace("@STATIC@", str(ARGS.static_s)).replace("@AFTER@", str(ARGS.after_s))
            .replace("@PHASE@", str(ARGS.phase_s)))
    work = tempfile.mkdtemp(prefix="blkpolicyd-trialbench-", dir="/var/tmp")
    try:
        initrd = os.path.join(work, "initrd.gz")
        if kernel == "6.12":
            kdir, kver = vmtest.fetch_kernel("6.12")
            vmtest.build_initramfs(kdir, kver, blkpolicyd, initrd, [], init=init, modules=MODULES_612)
            append = "console=ttyS0 panic=-1 loglevel=3"
        else:
            kdir, kver = dd_kernel.patched_73(log=lambda s: print(f"# 7.3dd: {s}", file=sys.stderr, flush=True))
            vmtest.build_initramfs(kdir, kver, blkpolicyd, initrd, [], init=init, modules=[])
            append = ("console=ttyS0 panic=-1 loglevel=3 null_blk.nr_devices=0 " +
                      " ".join(f"scsi_debug.{p}" for p in SCSI_PARAMS.split()))
        cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", "2048", "-smp", str(KERNELS[kernel]["smp"]),
               "-nographic", "-no-reboot", "-kernel", os.path.join(kdir, "boot", f"vmlinuz-{kver}"),
               "-initrd", initrd, "-append", append, *qemu_devices(work)]
        timeout = 300 + budget * 1.5
        print(f"# {kernel}: booting {kver}, at most {timeout:.0f} s", file=sys.stderr, flush=True)
        with open(serial_path, "w") as out:
            try:
                subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               timeout=timeout)
            except subprocess.TimeoutExpired:
                print(f"# {kernel}: the guest did not finish within {timeout:.0f} s", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(serial_path, errors="replace") as f:
        return f.read().replace("\r", "")


def snaps(fields):
    """'t/s' strings to (guest seconds, bytes)."""
    out = []
    for f in fields:
        t, s = f.split("/")
        out.append((float(t), int(s) * 512))
    return out


def rate(a, b):
    return (b[1] - a[1]) / (b[0] - a[0]) if b[0] > a[0] else float("nan")


def trial_json(serial, cell, rnd):
    m = re.search(r"===TJSON " + re.escape(cell) + " " + str(rnd) + r"===\n(.*?)===TJSON-END===", serial, re.S)
    try:
        return json.loads(m.group(1))["result"].get("trial") if m else None
    except (ValueError, KeyError, AttributeError):
        return None


def daemon_log(serial, cell, rnd):
    m = re.search(r"===DAEMON-LOG " + re.escape(cell) + " " + str(rnd) + r"===\n(.*?)===DAEMON-LOG-END===",
                  serial, re.S)
    return m.group(1).strip().splitlines()[-10:] if m else None


def outcome_fields(o):
    return {k: o.get(k) for k in ("candidate", "incumbent", "verdict", "kept", "estimate", "interval", "pairs",
                                  "windows", "reason")}


def parse(serial, kernel, kver):
    """Raw records, one per cell and round."""
    recs = {}

    def rec(cell, rnd):
        dev, load = cell.split(":")
        return recs.setdefault((cell, rnd), {"kernel": kernel, "release": kver, "cell": cell, "device": dev,
                                             "load": load, "round": rnd, "statics": {}, "order": [],
                                             "candidates": candidates(kernel)})

    for m in re.finditer(r"===STATIC (\S+) (\d+) (\S+) (\S+) (\S+) (\S+)===", serial):
        cell, rnd, static, state = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        a, b = snaps(m.groups()[4:6])
        r = rec(cell, rnd)
        r["order"].append(static)
        r["statics"][static] = {"state": state, "span_s": round(b[0] - a[0], 3), "bytes": b[1] - a[1],
                                "Bps": rate(a, b)}
    for m in re.finditer(r"===PSTATIC (\S+) (\d+) (\S+) (\S+) (\S+) (\S+) (\S+) (\S+) (\S+)===", serial):
        cell, rnd, static, state = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        a, b, c, d, e = snaps(m.groups()[4:9])
        r = rec(cell, rnd)
        r["order"].append(static)
        span = (b[0] - a[0]) + (e[0] - c[0])
        moved = (b[1] - a[1]) + (e[1] - c[1])
        r["statics"][static] = {"state": state, "span_s": round(span, 3), "bytes": moved, "Bps": moved / span,
                                "half1_Bps": rate(a, b), "half2_Bps": rate(c, e), "last_Bps": rate(d, e)}
    tre = (r"===TRIAL (\S+) (\d+) (\w+) run=(\w+) (\S+) (\S+) (\S+) (\S+) sw=(\d+) decided=(\d+) kept=(\S+) "
           r"end=(\S+) found=(\S+) back=(\S+) rc=(\d+)===")
    for m in re.finditer(tre, serial):
        cell, rnd = m.group(1), int(m.group(2))
        a, v, b, c = snaps(m.groups()[4:8])
        tj = trial_json(serial, cell, rnd)
        r = rec(cell, rnd)
        r["order"].append("trial")
        r["trial"] = {
            "verdict_seen": m.group(3) == "done", "running_at_load": m.group(4) == "ok",
            "t_v": round(v[0] - a[0], 3), "bytes_to_verdict": v[1] - a[1], "Bps_to_verdict": rate(a, v),
            "after_span_s": round(c[0] - b[0], 3), "after_Bps": rate(b, c),
            "switches_after_verdict": int(m.group(9)), "decided": int(m.group(10)),
            "kept_state": m.group(11), "end_state": m.group(12), "found": m.group(13), "back": m.group(14),
            "rc": int(m.group(15)), "phase": tj and tj.get("phase"),
            "outcomes": [outcome_fields(o) for o in (tj or {}).get("outcomes", [])],
            "daemon_log": daemon_log(serial, cell, rnd)}
    pre = (r"===PTRIAL (\S+) (\d+) run=(\w+) (\S+) (\S+) (\S+) (\S+) (\S+) sw=(\d+) decided=(\d+) end=(\S+) "
           r"found=(\S+) back=(\S+) rc=(\d+)===")
    for m in re.finditer(pre, serial):
        cell, rnd = m.group(1), int(m.group(2))
        a, b, c, d, e = snaps(m.groups()[3:8])
        tj = trial_json(serial, cell, rnd)
        verdicts = []
        events = []
        for p in re.finditer(r"===PV " + re.escape(cell) + " " + str(rnd) + r" (\S+) (\S+) (\S+)===", serial):
            (t, s), = snaps([p.group(2)])
            phase_, retrials, verdict_list = (p.group(1).split("|") + ["", ""])[:3]
            events.append({"t": round(t - a[0], 3), "bytes": s - a[1], "half": 1 if t <= b[0] else 2,
                           "t_half2": round(t - c[0], 3) if t > b[0] else None, "phase": phase_,
                           "retrials": int(retrials or 0), "verdicts": [v for v in verdict_list.split(",") if v],
                           "state": p.group(3)})
        # a verdict: the trial done (or stopped) where it was not at the
        # last poll, or done again after a re-trial
        prev = None
        for ev in events:
            ended = ev["phase"] in ("done", "stopped")
            if ended and (prev is None or prev["phase"] not in ("done", "stopped") or
                          prev["retrials"] != ev["retrials"]):
                verdicts.append({"t": ev["t"], "bytes": ev["bytes"], "half": ev["half"], "t_half2": ev["t_half2"],
                                 "verdicts": ev["verdicts"], "retrials": ev["retrials"], "state": ev["state"]})
            prev = ev
        span = (b[0] - a[0]) + (e[0] - c[0])
        moved = (b[1] - a[1]) + (e[1] - c[1])
        r = rec(cell, rnd)
        r["order"].append("trial")
        r["trial"] = {
            "running_at_load": m.group(3) == "ok", "span_s": round(span, 3), "bytes": moved,
            "Bps": moved / span, "half1_Bps": rate(a, b), "half2_Bps": rate(c, e), "last_Bps": rate(d, e),
            "half1_s": round(b[0] - a[0], 3), "half2_start": (round(c[0] - a[0], 3), c[1] - a[1]),
            "half2_end": (round(e[0] - a[0], 3), e[1] - a[1]),
            "verdict_times": verdicts, "events": events, "switches": int(m.group(9)), "decided": int(m.group(10)),
            "end_state": m.group(11), "found": m.group(12), "back": m.group(13), "rc": int(m.group(14)),
            "phase": tj and tj.get("phase"),
            "outcomes": [outcome_fields(o) for o in (tj or {}).get("outcomes", [])],
            "daemon_log": daemon_log(serial, cell, rnd)}
    return [recs[k] for k in sorted(recs, key=lambda k: (k[0], k[1]))]


def retrial_base(t):
    """The re-trial count the write half began with: a verdict of the
    workload's change is one of a trial counted above it (a first-half
    trial that ends in the second half is not)."""
    half1 = [ev for ev in t.get("events", []) if ev["half"] == 1]
    return half1[-1]["retrials"] if half1 else 0


def first_decision_half2(t):
    """Seconds from the workload's change to the re-trial's first
    candidate decided (its trial may go on with the next candidate: the
    goal's time is for arms that differ, and each candidate is its own
    pair), None when none came in the half."""
    base = retrial_base(t)
    for ev in t.get("events", []):
        if ev["half"] == 2 and ev["retrials"] > base and any(v != "undecided" for v in ev["verdicts"]):
            return ev["t_half2"]
    return None


def phase_trial_cost(t, rs, best):
    """A phase cell's trial cost in bytes: the spans a trial decides in,
    against the best static over the same spans: from the load's start to
    the first verdict, and from the workload's change (the write half's
    start) to the re-trial's verdict, the watch's seconds on the old verdict
    included (to the half's end when no verdict came). What runs after a
    verdict is the kept setting's: `final` judges it, and the daemon's own
    presence beside the load (its tick, the bench's polls) is not the
    trial's. Old records without the bytes at each poll: None."""
    vts = t.get("verdict_times", [])
    if "half2_start" not in t or any("bytes" not in v for v in vts):
        return None
    rate = {h: statistics.mean(x["statics"][best][f"half{h}_Bps"] for x in rs if best in x["statics"]) for h in (1, 2)}
    v1 = next((v for v in vts if v["half"] == 1), None)
    t1, b1 = (v1["t"], v1["bytes"]) if v1 else (t["half1_s"], t["half1_Bps"] * t["half1_s"])
    (c_t, c_b), (e_t, e_b) = t["half2_start"], t["half2_end"]
    v2 = next((v for v in vts if v["half"] == 2 and v["retrials"] > retrial_base(t)), None)
    t2, b2 = (v2["t"], v2["bytes"]) if v2 else (e_t, e_b)
    return (rate[1] * t1 - b1) + (rate[2] * (t2 - c_t) - (b2 - c_b))


def summarize(recs, kernel):
    """Per cell: the goals' figures and a row for the table."""
    rows = []
    cells = []
    for r in recs:
        if r["cell"] not in cells:
            cells.append(r["cell"])
    for cell in cells:
        rs = [r for r in recs if r["cell"] == cell and "trial" in r and r["statics"]]
        if not rs:
            continue
        phase = rs[0]["load"] == "phase"
        names = KERNELS[kernel]["statics"]
        mean = {s: statistics.mean(r["statics"][s]["Bps"] for r in rs if s in r["statics"]) for s in names
                if any(s in r["statics"] for r in rs)}
        best = max(mean, key=mean.get)
        # the goals' "differ" is between the trial's two arms (the issue's
        # "candidates"); on 7.3dd mq-deadline with dispatch_direct=0 is a
        # static the trial does not try, and only `final` weighs it
        # (phase: the write half's, where the arms part)
        key = "half2_Bps" if phase else "Bps"
        tried = ["none"] + [static_of(c.replace("+dispatch_direct", "/1")) for c in
                            (rs[0].get("candidates") or KERNELS[kernel]["candidate"]).replace(",", " ").split()]
        arms = [statistics.mean(r["statics"][s][key] for r in rs if s in r["statics"])
                for s in dict.fromkeys(tried) if s in mean]
        spread = max(arms) / min(arms)
        # the best static's own rounds against their mean: how far a final
        # can fall by the noise of one span alone
        own = [r["statics"][best]["Bps"] / mean[best] for r in rs if best in r["statics"]]
        row = {"cell": cell, "rounds": len(rs), "statics_MBps": {s: mean[s] / 1e6 for s in mean}, "best": best,
               "best_own": (min(own), max(own)),
               "spread": spread, "verdicts": [], "t_v": [], "cost": [], "final": [], "after": [], "switches": [],
               "kept": [], "restored": [], "retrials": []}
        for r in rs:
            t = r["trial"]
            outs = t["outcomes"]
            if phase:    # every verdict of the run, a re-trial's too
                row["verdicts"].append(" then ".join(v["verdicts"][-1] for v in t["verdict_times"] if v["verdicts"])
                                       or "(none)")
            else:
                row["verdicts"].append("+".join(o["verdict"] for o in outs) or "(none)")
            row["kept"].append(t["end_state"])
            row["restored"].append(t["rc"] == 0 and t["back"] == t["found"])
            if phase:
                bestB = mean[best]
                last = {s: statistics.mean(x["statics"][s]["last_Bps"] for x in rs if s in x["statics"]) for s in mean}
                half2 = {s: statistics.mean(x["statics"][s]["half2_Bps"] for x in rs if s in x["statics"]) for s in mean}
                row["after"].append(t["last_Bps"] / max(last.values()))
                # the kept setting's static over the write half (54 s), as
                # the other cells' final takes a static's whole run; its
                # last 8 s alone, the first tables' final, in the round's line
                row["final"].append(half2.get(static_of(t["end_state"]), 0) / max(half2.values()))
                row.setdefault("final_last8", []).append(last.get(static_of(t["end_state"]), 0) / max(last.values()))
                cost = phase_trial_cost(t, rs, best)
                row["cost"].append(None if cost is None else cost / (bestB * 600))
                row.setdefault("run_shortfall", []).append((bestB * t["span_s"] - t["bytes"]) / (bestB * 600))
                # the verdict that matters is the write half's: its time
                # from that half's start (the workload's change)
                row["t_v"].append(first_decision_half2(t))
                row["retrials"].append(len(outs))
                row["switches"].append(t["switches"])
                row.setdefault("phase_rounds", []).append(
                    f"{r['round']}: " + (", ".join(f"{'+'.join(v['verdicts'])} at {v['t']:.0f} s (half {v['half']}"
                                                   + (f", {v['t_half2']:.0f} s into it" if v['half'] == 2 else "") + ", "
                                                   f"on {v['state']})" for v in t["verdict_times"]) or "no verdict") +
                    f", re-trials {t['events'][-1]['retrials'] if t['events'] else 0}" +
                    f", {t['switches']} scheduler changes seen, ended on {t['end_state']}, whole run's shortfall "
                    f"{row['run_shortfall'][-1] * 100:.1f}% of 10 min, final on the last 8 s "
                    f"{row['final_last8'][-1]:.2f}")
            else:
                bestB = mean[best]
                row["after"].append(t["after_Bps"] / bestB)
                row["final"].append(mean.get(static_of(t["end_state"]), 0) / bestB)
                row["cost"].append((bestB * t["t_v"] - t["bytes_to_verdict"]) / (bestB * 600))
                row["t_v"].append(t["t_v"] if t["verdict_seen"] else None)
                # a verdict more than one a candidate is a second trial: a flip
                n_cand = len((r.get("candidates") or KERNELS[kernel]["candidate"]).replace(",", " ").split())
                row["switches"].append(t["switches_after_verdict"] + max(0, t["decided"] - n_cand))
        tv = [x for x in row["t_v"] if x is not None]
        row["goals"] = {
            "final>=0.95": all(f >= GOAL_FINAL for f in row["final"]),
            "cost<=3%": all(c is not None and c <= GOAL_COST for c in row["cost"]),
            "t_v<=300s": (len(tv) == len(row["t_v"]) and all(x <= GOAL_TV for x in tv)) if spread >= DIFFER
            else None,
            "keeps none, no flip": (all(k.startswith("none/") for k in row["kept"]) and
                                    not any(row["switches"])) if spread < SAME else None,
        }
        if phase:     # a phase cell's "keeps none" is for its first half only: not a goal here
            row["goals"]["keeps none, no flip"] = None
        rows.append(row)
    return rows


def rng(xs, fmt):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    if len(xs) == 1:
        return fmt.format(xs[0])
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def print_table(rows, kernel, kver):
    names = KERNELS[kernel]["statics"]
    print(f"\n### {kernel} ({kver})\n")
    print("| cell | " + " | ".join(f"{n} MB/s" for n in names) + " | arms' spread | verdicts (kept) | time to verdict s, "
          "median (range) | cost / 10 min | final: kept's static / best | after-span / best | "
          "best static's rounds / its mean | restored |")
    print("|---|" + "---:|" * len(names) + "---:|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        st = " | ".join(f"{row['statics_MBps'][n]:.2f}" + ("*" if n == row["best"] else "")
                        if n in row["statics_MBps"] else "-" for n in names)
        vk = ", ".join(f"{n}x {v} -> {k}" for (v, k), n in
                       collections.Counter(zip(row["verdicts"], row["kept"])).items())
        print(f"| {row['cell']} | {st} | {row['spread']:.2f}x | {vk} | {rng(row['t_v'], '{:.1f}')} | "
              f"{rng([c * 100 for c in row['cost']], '{:.1f}%')} | {rng(row['final'], '{:.2f}')} | "
              f"{rng(row['after'], '{:.2f}')} | "
              f"{row['best_own'][0]:.2f}-{row['best_own'][1]:.2f} | "
              f"{sum(row['restored'])}/{len(row['restored'])} |")
    for row in rows:
        if row.get("phase_rounds"):
            print(f"\n{row['cell']}, per round: " + "; ".join(row["phase_rounds"]))
    print("\n| cell | " + " | ".join(["final >= 0.95", "t_v <= 300 s (spread >= 1.3x)", "cost <= 3%",
                                       "keeps none, no flip (spread < 1.1x)"]) + " |")
    print("|---|---|---|---|---|")
    for row in rows:
        g = row["goals"]
        cols = [g["final>=0.95"], g["t_v<=300s"], g["cost<=3%"], g["keeps none, no flip"]]
        text = ["n/a" if c is None else ("PASS" if c else "FAIL") for c in cols]
        below = sum(f < GOAL_FINAL for f in row["final"])
        if below:     # how it failed: in how many rounds, and where the median is
            text[0] += f" ({below} of {len(row['final'])} rounds below; median {statistics.median(row['final']):.2f})"
        print(f"| {row['cell']} | " + " | ".join(text) + " |")


def blkpolicyd_tree(blkpolicyd):
    """The commit of the tree the binary was built from (and whether that
    tree had changes): which daemon ran."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(blkpolicyd))))
    r = subprocess.run(["git", "-C", top, "describe", "--always", "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or None


def run_kernel(kernel, args, raw):
    serial_path = args.serial or os.path.join(tempfile.gettempdir(), f"trial-vm-{kernel}.serial")
    if args.serial and args.kernel == "all":
        serial_path = f"{args.serial}.{kernel}"
    load0 = os.getloadavg()
    t0 = time.monotonic()
    serial = boot(kernel, args.blkpolicyd, serial_path, args.cells, args.rounds)
    load1 = os.getloadavg()
    m = re.search(r"===KERNEL (\S+)===", serial)
    kver = m.group(1) if m else "?"
    recs = parse(serial, kernel, kver)
    done = "===BENCH-DONE===" in serial
    head = {"type": "run", "kernel": kernel, "release": kver, "host_loadavg_start": load0,
            "host_loadavg_end": load1, "host_cpus": os.cpu_count(), "wall_s": round(time.monotonic() - t0),
            "finished": done, "blkpolicyd_tree": blkpolicyd_tree(args.blkpolicyd), "args": {k: v for k, v in vars(args).items() if k not in ("raw", "serial")},
            "devices_found": (re.search(r"===DEVICES ([^=]*)===", serial) or [None, None])[1]}
    with open(raw, "a") as f:
        f.write(json.dumps(head) + "\n")
        for r in recs:
            f.write(json.dumps(r) + "\n")
    if not recs:
        print(f"# {kernel}: no cell ran; the console's end:\n" + serial[-3000:], file=sys.stderr)
        return False
    if not done:
        print(f"# {kernel}: the guest did not reach its end; what ran is reported", file=sys.stderr)
    rows = summarize(recs, kernel)
    print(f"\n# {kernel}: {kver}, QEMU TCG -smp {KERNELS[kernel]['smp']}, host load average "
          f"{load0[0]:.2f} at the start, {load1[0]:.2f} at the end, {head['wall_s']} s")
    print_table(rows, kernel, kver)
    return True


def raw_from_serial(args):
    """A run's console parsed again (its own parse failed at the end, say):
    the raw lines appended to --raw, the host's load averages unknown."""
    if args.kernel == "all":
        sys.exit("--from-serial needs --kernel")
    with open(args.from_serial, errors="replace") as f:
        serial = f.read().replace("\r", "")
    m = re.search(r"===KERNEL (\S+)===", serial)
    kver = m.group(1) if m else "?"
    recs = parse(serial, args.kernel, kver)
    head = {"type": "run", "kernel": args.kernel, "release": kver, "host_loadavg_start": None,
            "host_loadavg_end": None, "host_cpus": os.cpu_count(), "wall_s": None,
            "finished": "===BENCH-DONE===" in serial, "blkpolicyd_tree": None, "from_serial": args.from_serial,
            "args": {k: v for k, v in vars(args).items() if k not in ("raw", "serial")},
            "devices_found": (re.search(r"===DEVICES ([^=]*)===", serial) or [None, None])[1]}
    with open(args.raw, "a") as f:
        f.write(json.dumps(head) + "\n")
        for r in recs:
            f.write(json.dumps(r) + "\n")
    return bool(recs)


def report_raw(path):
    """The tables again from raw JSON lines: several runs of a kernel in
    one table; a cell's round that more than one run has, from the latest."""
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    run = -1
    for x in lines:        # each run's header comes before its records
        run += x.get("type") == "run"
        x["_run"] = run
    for kernel in KERNELS:
        runs = [x for x in lines if x.get("type") == "run" and x["kernel"] == kernel]
        recs = [x for x in lines if x.get("kernel") == kernel and "cell" in x]
        # a round of a cell run again (a later run, same cell and round
        # number) counts from its latest run only
        last = {(x["cell"], x["round"]): x["_run"] for x in recs}
        recs = [x for x in recs if x["_run"] == last[(x["cell"], x["round"])]]
        if not recs:
            continue
        for x in runs:
            load = (f"host load average {x['host_loadavg_start'][0]:.2f} at the start, "
                    f"{x['host_loadavg_end'][0]:.2f} at the end, {x['wall_s']} s" if x["host_loadavg_start"]
                    else f"parsed again from {x.get('from_serial')}")
            print(f"# {kernel}: {x['release']}, {', '.join(x['args'].get('cells') or [])}: {load}, "
                  f"finished: {x['finished']}")
        print_table(summarize(recs, kernel), kernel, recs[0]["release"])


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="all", choices=list(KERNELS) + ["all"])
    ap.add_argument("--devices", default=",".join(DEVICES))
    ap.add_argument("--loads", default="write,randread,phase")
    ap.add_argument("--cells", help="DEVICE:LOAD,... in this order, instead of --devices x --loads")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--first-round", type=int, default=1, help="the first round's number (more rounds of a cell "
                    "in another boot; the order alternates by it)")
    ap.add_argument("--candidates", help="the [Trial]'s candidates, e.g. 'mq-deadline mq-deadline+dispatch_direct' "
                    "(default: mq-deadline on 6.12, mq-deadline+dispatch_direct on 7.3dd)")
    ap.add_argument("--static-s", type=int, default=8)
    ap.add_argument("--max-trial-s", type=int, default=60)
    ap.add_argument("--after-s", type=int, default=8)
    ap.add_argument("--phase-s", type=int, default=60, help="both halves of a phase run, seconds")
    ap.add_argument("--raw", default="trial-vm.jsonl", help="raw JSON lines, appended")
    ap.add_argument("--serial", help="the guest's console (with --kernel all: FILE.KERNEL)")
    ap.add_argument("--from-raw", metavar="FILE", help="print the tables of a raw file, boot nothing")
    ap.add_argument("--from-serial", metavar="FILE", help="a console kept with --serial, parsed again into --raw "
                    "(with --kernel and the run's own options), boot nothing")
    ap.add_argument("--blkpolicyd", default=os.path.join(TOP, "build", "daemon", "blkpolicyd"))
    args = ap.parse_args()
    args.devices = args.devices.split(",")
    args.loads = args.loads.split(",")
    if not set(args.devices) <= set(DEVICES) or not set(args.loads) <= set(LOADS):
        ap.error(f"devices: {DEVICES}; loads: {LOADS}")
    args.cells = args.cells.split(",") if args.cells else [f"{d}:{l}" for d in args.devices for l in args.loads]
    if any(c.count(":") != 1 or c.split(":")[0] not in DEVICES or c.split(":")[1] not in LOADS for c in args.cells):
        ap.error("--cells: DEVICE:LOAD,...")
    if args.phase_s < 2 * (args.after_s + 4):
        ap.error("--phase-s must leave each half --after-s + 4 s")
    ARGS = args
    if args.from_raw:
        report_raw(args.from_raw)
        return
    if args.from_serial:
        sys.exit(0 if raw_from_serial(args) else 1)
    ok = True
    for kernel in (list(KERNELS) if args.kernel == "all" else [args.kernel]):
        ok = run_kernel(kernel, args, args.raw) and ok
    sys.exit(0 if ok else 1)


ARGS = None

if __name__ == "__main__":
    main()
