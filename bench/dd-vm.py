#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""mq-deadline's dispatch_direct (seed 002) on a real kernel: Debian's 7.3.4
with the seed's patch (tests/vm/dd_kernel.py), in QEMU/TCG, one boot. Every
configuration runs on the same device in the same boot, the order rotates
every round, and the figures are medians. Under TCG only ratios mean
anything.

  seed  : the seed's table on a single-queue null_blk: none, mq-deadline
          dispatch_direct=0, =1, blkpolicyd --once (shipped policies) and
          blkpolicyd running the dispatch_direct flip policy; 4k randread
          qd16, the seed's sequential 4k writes qd16 with 1 job and with
          several jobs; context switches per I/O (/proc/stat ctxt).
  phases: random reads with spare capacity (4k randread qd4), then a small
          sequential write flood (4k writes qd32) on a slow, shallow
          scsi_debug (ndelay=200000 max_queue=8): none, dd=0, dd=1, the
          flip policy; per phase, the whole run, flips per run.
  flip  : what a flip costs: a fio reader (4k randread qd1) beside a writer
          that flips every 100 ms, a scheduler switch (mq-deadline <-> none)
          against a dispatch_direct write (1 <-> 0) and, as the floor of
          any sysfs store, read_ahead_kb (256 <-> 128), on null_blk and on
          a loop device; the writer's time per write, the reader's p99,
          p99.9 and max completion latency.
  ublk  : (not in the default) tests/vm/ublk-null, 4k randread qd16:
          none, dd=0, dd=1.

  sudo python3 bench/dd-vm.py [--sections seed,phases,flip,ublk] [--rounds 5] [--seconds 3]
                              [--ndelay NS] [--max-queue N]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "vm"))
import dd_kernel  # noqa: E402
import vmtest  # noqa: E402

# The candidate flip policy: dispatch_direct on while the device has spare
# capacity, off (sorting, merging, FIFOs, priorities back) while writes flood.
# Signals are per second; under TCG a flood is a few thousand IOPS.
FLIP_POLICY = """[Match]
name = {dev}

[Queue]
scheduler = mq-deadline

[mq-deadline]
dispatch_direct = 1

[Dynamic]
enter = wiops > 200
enter_ticks = 2
leave = wiops < 50
leave_ticks = 2
min_dwell_ticks = 2

[Busy mq-deadline]
dispatch_direct = 0
"""

INIT = vmtest.MOUNTS + r"""mount -t configfs configfs /sys/kernel/config
export PATH=/bin
S=@SECONDS@
d=/sys/kernel/config/nullb/nullb0
mkdir $d
echo 2 > $d/queue_mode; echo 1 > $d/submit_queues; echo 0 > $d/poll_queues; echo 1024 > $d/size; echo 1 > $d/power
dd if=/dev/zero of=/loop.img bs=1M count=256 2>/dev/null
losetup /dev/loop0 /loop.img
for i in $(seq 50); do ls /sys/block/ | grep -q sd && break; sleep 0.1; done
SD=$(ls /sys/block | grep sd | head -1)
echo "===DEVICES nullb0 loop0 $SD==="
echo "[Daemon]" > /etc/blkpolicyd/bench.conf
echo "tick_interval_ms = 250" >> /etc/blkpolicyd/bench.conf
ctxt() { grep ctxt /proc/stat | cut -d' ' -f2; }
st() { echo "$(sed 's/.*\[\(.*\)\].*/\1/' /sys/block/$1/queue/scheduler) $(cat /sys/block/$1/queue/iosched/dispatch_direct 2>/dev/null || echo -)"; }
setcfg() {     # device config: none, dd0, dd1, blkpolicyd, flip
        q=/sys/block/$1/queue
        case $2 in
        none) echo none > $q/scheduler ;;
        dd0) echo mq-deadline > $q/scheduler; echo 0 > $q/iosched/dispatch_direct ;;
        dd1) echo mq-deadline > $q/scheduler; echo 1 > $q/iosched/dispatch_direct ;;
        blkpolicyd) echo mq-deadline > $q/scheduler; echo 0 > $q/iosched/dispatch_direct
                /bin/blkpolicyd --once --config /dev/null --policy-dir /etc/blkpolicyd/policies \
                        --state-dir /run/once-$1 --device $1 >/dev/null 2>&1; rm -rf /run/once-$1 ;;
        flip) echo mq-deadline > $q/scheduler; echo 1 > $q/iosched/dispatch_direct
                mkdir -p /etc/blkpolicyd/flip-$1
                sed "s/{dev}/$1/" /etc/blkpolicyd/flip.policy > /etc/blkpolicyd/flip-$1/90-flip.policy
                rm -rf /run/st-$1
                /bin/blkpolicyd --config /etc/blkpolicyd/bench.conf --policy-dir /etc/blkpolicyd/policies \
                        --policy-dir /etc/blkpolicyd/flip-$1 --state-dir /run/st-$1 --socket /run/bench.sock \
                        --device $1 --log-level info 2>/run/daemon.log &
                DAEMON=$!
                for i in $(seq 100); do [ -S /run/bench.sock ] && break; sleep 0.05; done
                sleep 0.5 ;;
        esac
}
unset_cfg() {
        [ "$2" = flip ] || return 0
        kill -TERM $DAEMON; wait $DAEMON
        echo "===FLIPS $1 $(grep -c -e '-> busy' -e '-> base' /run/daemon.log)==="
}
fiorun() {     # section config workload device fio-args...
        sec=$1 cfg=$2 wl=$3 dev=$4; shift 4
        c0=$(ctxt)
        out=$(/bin/fio --name=$wl --filename=/dev/$dev --direct=1 --ioengine=libaio --time_based --runtime=$S \
                --output-format=json --group_reporting "$@" 2>/dev/null)
        c1=$(ctxt)
        echo "===RUN $sec $cfg $wl $((c1 - c0)) $(st $dev)==="
        echo "$out"
        echo "===RUN-END==="
}
rotate() { n=$1; shift; i=0; for x in "$@"; do [ $i -ge $n ] && printf '%s ' $x; i=$((i+1)); done
        i=0; for x in "$@"; do [ $i -lt $n ] && printf '%s ' $x; i=$((i+1)); done; }
/bin/fio --name=fill --filename=/dev/nullb0 --rw=write --bs=1M --direct=1 --size=256M >/dev/null 2>&1
/bin/fio --name=fill --filename=/dev/$SD --rw=write --bs=1M --direct=1 >/dev/null 2>&1
for r in $(seq @ROUNDS@); do
        case ",@SECTIONS@," in *,seed,*)
        for c in $(rotate $((r % 5)) none dd0 dd1 blkpolicyd flip); do
                setcfg nullb0 $c
                echo "===CONFIG seed $c $(st nullb0)==="
                fiorun seed $c randread nullb0 --rw=randread --bs=4k --iodepth=16 --size=256M
                fiorun seed $c write-1job nullb0 --rw=write --bs=4k --iodepth=16 --numjobs=1 --size=256M
                fiorun seed $c write-@JOBS@jobs nullb0 --rw=write --bs=4k --iodepth=16 --numjobs=@JOBS@ --size=256M
                unset_cfg seed $c
        done ;; esac
        case ",@SECTIONS@," in *,phases,*)
        for c in $(rotate $((r % 4)) none dd0 dd1 flip); do
                setcfg $SD $c
                echo "===CONFIG phases $c $(st $SD)==="
                fiorun phases $c reads $SD --rw=randread --bs=4k --iodepth=4
                fiorun phases $c writes $SD --rw=write --bs=4k --iodepth=32
                unset_cfg phases $c
        done ;; esac
        case ",@SECTIONS@," in *,flip,*)
        for dev in nullb0 loop0; do
                for m in $(rotate $((r % 4)) baseline scheduler dispatch_direct read_ahead_kb); do
                        echo mq-deadline > /sys/block/$dev/queue/scheduler
                        echo 1 > /sys/block/$dev/queue/iosched/dispatch_direct
                        n=$(( (S - 1) * 10 ))
                        wpid=""
                        case $m in
                        scheduler) (sleep 0.5; /bin/flip-writer /sys/block/$dev/queue/scheduler none mq-deadline $n 100 \
                                        > /run/writer.out) & wpid=$! ;;
                        dispatch_direct) (sleep 0.5; /bin/flip-writer /sys/block/$dev/queue/iosched/dispatch_direct 0 1 \
                                        $n 100 > /run/writer.out) & wpid=$! ;;
                        read_ahead_kb) (sleep 0.5; /bin/flip-writer /sys/block/$dev/queue/read_ahead_kb 256 128 \
                                        $n 100 > /run/writer.out) & wpid=$! ;;
                        *) echo > /run/writer.out ;;
                        esac
                        fiorun flip $m reader-$dev $dev --rw=randread --bs=4k --iodepth=1 --size=256M \
                                --percentile_list=99:99.9
                        [ -n "$wpid" ] && wait $wpid
                        echo "===WRITER $dev $m $(cat /run/writer.out)==="
                done
        done ;; esac
        case ",@SECTIONS@," in *,ublk,*)
        [ -n "$UB" ] || { /bin/ublk-null > /run/ublk.name 2>/dev/null & for i in $(seq 500); do [ -s /run/ublk.name ] && break; sleep 0.02; done; UB=$(cat /run/ublk.name); }
        for c in $(rotate $((r % 3)) none dd0 dd1); do
                setcfg $UB $c
                fiorun ublk $c randread $UB --rw=randread --bs=4k --iodepth=16
        done ;; esac
done
echo "===BENCH-DONE==="
poweroff -f
"""


PHASE_DEV = [200000, 8]


def parse(serial):
    runs = []
    for m in re.finditer(r"===RUN (\S+) (\S+) (\S+) (\d+) ([^=]*)===\r?\n(.*?)===RUN-END===", serial, re.S):
        sec, cfg, wl, ctxt, state, text = m.groups()
        try:
            j = json.loads(text.replace("\r", ""))["jobs"][0]
        except (ValueError, KeyError, IndexError):
            continue
        ios = j["read"]["total_ios"] + j["write"]["total_ios"]
        pct = j["read"]["clat_ns"].get("percentile", {})
        runs.append({"sec": sec, "cfg": cfg, "wl": wl, "state": state.strip(),
                     "iops": j["read"]["iops"] + j["write"]["iops"],
                     "mbps": (j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1e6,
                     "ctx_per_io": int(ctxt) / max(ios, 1),
                     "p99_us": pct.get("99.000000", 0) / 1e3, "p999_us": pct.get("99.900000", 0) / 1e3,
                     "max_us": j["read"]["clat_ns"]["max"] / 1e3})
    writers = {}
    for dev, mode, line in re.findall(r"===WRITER (\S+) (\S+) ([^=]*)===", serial):
        f = line.split()
        if f:
            writers.setdefault((dev, mode), []).append({f[i]: float(f[i + 1]) for i in range(0, len(f) - 1, 2)})
    flips = {}
    for sec, n in re.findall(r"===FLIPS (\S+) (\d+)===", serial):
        flips.setdefault(sec, []).append(int(n))
    return runs, writers, flips


def med(runs, key, **where):
    v = [r[key] for r in runs if all(r[k] == x for k, x in where.items())]
    return statistics.median(v) if v else float("nan")


def report_seed(runs, flips, jobs):
    cfgs = ["none", "dd0", "dd1", "blkpolicyd", "flip"]
    names = {"none": "none", "dd0": "mq-deadline dd=0", "dd1": "mq-deadline dd=1",
             "blkpolicyd": "blkpolicyd (shipped)", "flip": "blkpolicyd + dd flip policy"}
    wls = ["randread", "write-1job", f"write-{jobs}jobs"]
    print("\n### The seed's table: single-queue null_blk, libaio qd16\n")
    print("| config | state | " + " | ".join(f"{w} IOPS" for w in wls) + " | " +
          " | ".join(f"{w} / none" for w in wls) + " | " + " | ".join(f"{w} / dd=0" for w in wls) +
          " | ctx/IO (randread) |")
    print("|---|---|" + "---:|" * (3 * len(wls) + 1))
    for c in cfgs:
        state = sorted({r["state"] for r in runs if r["sec"] == "seed" and r["cfg"] == c})
        iops = [med(runs, "iops", sec="seed", cfg=c, wl=w) for w in wls]
        none = [med(runs, "iops", sec="seed", cfg="none", wl=w) for w in wls]
        dd0 = [med(runs, "iops", sec="seed", cfg="dd0", wl=w) for w in wls]
        print(f"| {names[c]} | {', '.join(state)} | " + " | ".join(f"{x:,.0f}" for x in iops) + " | " +
              " | ".join(f"{x / n:.2f}" for x, n in zip(iops, none)) + " | " +
              " | ".join(f"{x / n:.2f}" for x, n in zip(iops, dd0)) +
              f" | {med(runs, 'ctx_per_io', sec='seed', cfg=c, wl='randread'):.2f} |")
    print("\ncontext switches per I/O, all workloads:\n")
    print("| config | " + " | ".join(wls) + " |")
    print("|---|" + "---:|" * len(wls))
    for c in cfgs:
        print(f"| {names[c]} | " + " | ".join(f"{med(runs, 'ctx_per_io', sec='seed', cfg=c, wl=w):.2f}"
                                             for w in wls) + " |")
    if flips.get("seed"):
        print(f"\nflip policy, flips per round (3 workloads): {flips['seed']}")


def report_phases(runs, flips):
    cfgs = ["none", "dd0", "dd1", "flip"]
    metric = {"reads": ("iops", "read IOPS"), "writes": ("mbps", "write MB/s")}
    best = {p: max(med(runs, k, sec="phases", cfg=c, wl=p) for c in cfgs[:3]) for p, (k, _) in metric.items()}
    print(f"\n### Phases: slow, shallow scsi_debug (ndelay={PHASE_DEV[0]} max_queue={PHASE_DEV[1]}), libaio\n")
    print("| config | reads: 4k randread qd4, IOPS | vs best static | writes: 4k seq write qd32, MB/s | "
          "vs best static | whole run (geometric mean) | flips per run |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c in cfgs:
        rel = [med(runs, k, sec="phases", cfg=c, wl=p) / best[p] for p, (k, _) in metric.items()]
        fl = statistics.median(flips["phases"]) if c == "flip" and flips.get("phases") else "-"
        print(f"| {c} | {med(runs, 'iops', sec='phases', cfg=c, wl='reads'):,.0f} | {rel[0]:.3f} | "
              f"{med(runs, 'mbps', sec='phases', cfg=c, wl='writes'):.2f} | {rel[1]:.3f} | "
              f"{statistics.geometric_mean(rel):.3f} | {fl} |")
    if flips.get("phases"):
        print(f"\nflips per round: {flips['phases']}")


def report_flip(runs, writers):
    print("\n### What a flip costs: reader 4k randread qd1 beside a flip every 100 ms\n")
    print("| device | flip | write median (us) | write max (us) | reader IOPS | reader p99 (us) | "
          "reader p99.9 (us) | reader max (us) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for dev in ("nullb0", "loop0"):
        for m in ("baseline", "scheduler", "dispatch_direct", "read_ahead_kb"):
            w = writers.get((dev, m), [])
            wmed = statistics.median(x["median_us"] for x in w) if w else 0
            wmax = statistics.median(x["max_us"] for x in w) if w else 0
            q = dict(sec="flip", cfg=m, wl=f"reader-{dev}")
            print(f"| {dev} | {m} | {wmed:,.0f} | {wmax:,.0f} | {med(runs, 'iops', **q):,.0f} | "
                  f"{med(runs, 'p99_us', **q):,.0f} | {med(runs, 'p999_us', **q):,.0f} | "
                  f"{med(runs, 'max_us', **q):,.0f} |")


def print_raw(runs):
    """Every run's figure (IOPS, or MB/s for the phases' writes), in run order."""
    raw = {}
    for r in runs:
        raw.setdefault(f"{r['sec']} {r['wl']} {r['cfg']}", []).append(
            round(r["mbps"] if r["wl"] == "writes" else r["iops"], 1))
    print(f"\n<!-- runs: {json.dumps(raw)} -->")


def report_ublk(runs):
    print("\n### ublk (tests/vm/ublk-null), 4k randread qd16 libaio\n")
    print("| config | IOPS | / none | ctx/IO |")
    print("|---|---:|---:|---:|")
    none = med(runs, "iops", sec="ublk", cfg="none", wl="randread")
    for c, name in (("none", "none"), ("dd0", "mq-deadline dd=0"), ("dd1", "mq-deadline dd=1")):
        x = med(runs, "iops", sec="ublk", cfg=c, wl="randread")
        print(f"| {name} | {x:,.0f} | {x / none:.2f} | {med(runs, 'ctx_per_io', sec='ublk', cfg=c, wl='randread'):.2f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default="seed,phases,flip")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--blkpolicyd", default=os.path.join(TOP, "build", "daemon", "blkpolicyd"))
    ap.add_argument("--ndelay", type=int, default=200000, help="scsi_debug's completion delay (ns), phases")
    ap.add_argument("--max-queue", type=int, default=8, help="scsi_debug's queue depth, phases")
    ap.add_argument("--serial", help="keep the serial console output here")
    args = ap.parse_args()
    PHASE_DEV[:] = [args.ndelay, args.max_queue]
    kdir, kver = dd_kernel.patched_73(log=lambda s: print(f"# {s}", file=sys.stderr, flush=True))
    work = tempfile.mkdtemp(prefix="blkpolicyd-ddbench-", dir="/var/tmp")
    try:
        writer = os.path.join(work, "flip-writer")
        subprocess.run(["gcc", "-O2", "-static", "-o", writer, os.path.join(TOP, "bench", "flip-writer.c")],
                       check=True)
        init = (INIT.replace("@SECONDS@", str(args.seconds)).replace("@ROUNDS@", str(args.rounds))
                .replace("@SECTIONS@", args.sections).replace("@JOBS@", str(args.jobs)))
        initrd = os.path.join(work, "initrd.gz")
        # flip-writer and the flip policy go in through the payload directory
        extra = os.path.join(work, "extra")
        os.makedirs(os.path.join(extra, "bin"))
        os.makedirs(os.path.join(extra, "etc", "blkpolicyd"))
        shutil.copy2(writer, os.path.join(extra, "bin", "flip-writer"))
        with open(os.path.join(extra, "etc", "blkpolicyd", "flip.policy"), "w") as f:
            f.write(FLIP_POLICY)
        vmtest.build_initramfs(kdir, kver, args.blkpolicyd, initrd, [], init=init, modules=[])
        subprocess.run(f"cd {extra} && find . | cpio -o -H newc --quiet | gzip -1 >> {initrd}", shell=True,
                       check=True)
        per_round = (15 * ("seed" in args.sections) + 8 * ("phases" in args.sections) +
                     8 * ("flip" in args.sections) + 3 * ("ublk" in args.sections)) * (args.seconds + 4)
        append = (vmtest.DD_APPEND.replace("scsi_debug.dev_size_mb=16", "scsi_debug.dev_size_mb=64") +
                  f" scsi_debug.ndelay={args.ndelay} scsi_debug.max_queue={args.max_queue}")
        serial = vmtest.qemu(kdir, kver, initrd, append, [], timeout=300 + per_round * args.rounds, smp=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.serial:
        with open(args.serial, "w") as f:
            f.write(serial)
    if "===BENCH-DONE===" not in serial:
        sys.exit("the VM did not finish:\n" + serial[-3000:])
    runs, writers, flips = parse(serial)
    print(f"kernel {kver} (Debian 7.3.4 + seed 002), QEMU TCG -smp 1 on a {os.cpu_count()}-CPU host, "
          f"{args.rounds} rounds x {args.seconds} s per run, configurations rotated every round, medians. "
          "TCG emulates the CPU: read the ratios only.")
    if "seed" in args.sections:
        report_seed(runs, flips, args.jobs)
    if "phases" in args.sections:
        report_phases(runs, flips)
    if "flip" in args.sections:
        report_flip(runs, writers)
    if "ublk" in args.sections:
        report_ublk(runs)
    print_raw(runs)


if __name__ == "__main__":
    main()
