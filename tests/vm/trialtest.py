#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A trial end to end on real kernels (issue #28): Debian's 6.12 and 7.3
under QEMU (TCG), one boot each, the daemon with the shipped policies and
tests/vm/trial-policies (2 s windows, 0.5 s settle, a 10% margin).

  - a slow, shallow scsi_debug (ndelay=10000000 max_queue=8: 10 ms a
    command, 8 tags) under a fio sequential write flood (4k, qd32): the
    incumbent none, the candidate mq-deadline, which merges; it must end
    on mq-deadline;
  - a fast single-queue null_blk under fio random reads (4k, qd16): the
    same incumbent and candidate; it must end on none;
  - a third null_blk, set by hand before the daemon starts (kyber,
    read_ahead_kb 512, nr_requests 32), whose policy sets none, 64 and
    16: `blkpolicyctl trial nullb1 mq-deadline` under light reads, and
    SIGTERM once the candidate is in force: every value back to what was
    read before the daemon started, and no record left.

The guest waits on the daemon's state (`blkpolicyctl --json device DEV`:
the trial's phase and arm), each wait bounded; the host prints each
verdict with its estimate and interval, and the time from the load's
start to the verdict.

  sudo python3 tests/vm/trialtest.py [--kernel 6.12|7.3|all] [--blkpolicyd PATH]

Prints "ok"/"not ok" lines and "trial: N passed, N failed"; the exit
status says the same.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dd_kernel  # noqa: E402
import vmtest  # noqa: E402
# vmtest put tests/ on the path: the shared harness, as vmtest's own
from blkptest.results import Results  # noqa: E402

MODULES = ["sd_mod", "scsi_debug", "null_blk", "kyber-iosched"]
# a bound on each wait for a verdict: the trials' own max_duration is 300 s
VERDICT_WAIT_S = 240

INIT = vmtest.MOUNTS + r"""for m in $(cat /modules.list); do
        case $m in
                scsi_debug.ko) ;;       # loaded below, once the daemon runs
                null_blk.ko) insmod /lib/modules/$m nr_devices=0 ;;
                *) insmod /lib/modules/$m ;;
        esac
done
""" + vmtest.NULLB + r"""ctl() { /bin/blkpolicyctl --socket /run/blkpolicyd.sock "$@"; }
now() { cut -d' ' -f1 /proc/uptime; }
sched() { sed 's/.*\[\(.*\)\].*/\1/' /sys/block/$1/queue/scheduler; }
vals() { echo "$(sched $1) $(cat /sys/block/$1/queue/read_ahead_kb) $(cat /sys/block/$1/queue/nr_requests)"; }
flat() { ctl --json device $1 | tr -d ' \n\t'; }
# until_trial DEV PATTERN N STEP: until the device's JSON (no blanks) has
# PATTERN, asked at most N times, STEP s apart (each ask costs the guest's
# CPU under TCG, which the load shares)
until_trial() {
        for i in $(seq $3); do flat $1 | grep -q "$2" && echo ok && return; sleep $4; done
        echo fail
}
# sectors DEV: sectors read and written so far
sectors() { set -- $(grep " $1 " /proc/diskstats); echo $(($6 + ${10})); }
device_json() { echo "===DEVICE $1==="; ctl --json device $1; echo "===DEVICE-END==="; }
# trial DEV FIO-ARGS...: the load in the background, then the verdict
trial() {
        dev=$1; shift
        /bin/fio --name=load --filename=/dev/$dev --ioengine=libaio --direct=1 --bs=4k --time_based --runtime=600 \
                "$@" --output-format=terse >/dev/null 2>&1 &
        fio=$!
        t0=$(now); s0=$(sectors $dev)
        r=$(until_trial $dev '"phase":"done"' """ + str(VERDICT_WAIT_S * 2) + r""" 0.5)
        t1=$(now); s1=$(sectors $dev)
        # the same load on what the trial kept, for its cost: a second to
        # let the last switch land, then 8 s measured (a measure, not a wait)
        sleep 1
        t2=$(now); s2=$(sectors $dev)
        sleep 8
        t3=$(now); s3=$(sectors $dev)
        kill $fio; wait $fio
        echo "===VERDICT $dev $r load=$t0 verdict=$t1 now=$(sched $dev)==="
        echo "===RATES $dev trial=$t0/$s0/$t1/$s1 kept=$t2/$s2/$t3/$s3==="
        device_json $dev
}

mkdir -p /var/lib
# the third disk, set by hand before the daemon starts
nullb nullb1 queue_mode=2 submit_queues=1 poll_queues=0 size=64
echo kyber > /sys/block/nullb1/queue/scheduler
echo 512 > /sys/block/nullb1/queue/read_ahead_kb
echo 32 > /sys/block/nullb1/queue/nr_requests
BEFORE=$(vals nullb1)
""" + vmtest.start_daemon("trial-policies").replace("2>/dev/null &", "2>/run/blkpolicyd.err &") + r"""
set=$(for i in $(seq 100); do [ "$(vals nullb1)" = "none 64 16" ] && echo ok && break; sleep 0.1; done)
echo "===SET nullb1 ${set:-fail} before=[$BEFORE] now=[$(vals nullb1)]==="

# a slow, shallow scsi_debug, hotplugged: none by the policy, then the trial
t=$(now)
insmod /lib/modules/scsi_debug.ko dev_size_mb=64 ndelay=10000000 max_queue=8 || echo "===INSMOD-FAILED==="
sd=""
for i in $(seq 300); do
        for d in /sys/block/sd*; do grep -qs scsi_debug $d/device/model && sd=${d##*/}; done
        [ -n "$sd" ] && break
        sleep 0.1
done
# taken by the daemon: its trial waits for I/O, the policy's none in force
r=fail
[ -n "$sd" ] && r=$(until_trial $sd '"phase":"waiting"' 300 0.2)
[ -n "$sd" ] && [ "$(sched $sd)" != none ] && r=fail
echo "===ADDED scsi_debug ${sd:-none} $r at=$t set=$(now)==="
[ -n "$sd" ] && trial $sd --rw=write --iodepth=32

# the workload changes under the kept verdict: random reads now, where
# none and mq-deadline tie; the trial is taken again (retrials 1)
if [ -n "$sd" ]; then
        /bin/fio --name=shape --filename=/dev/$sd --ioengine=libaio --direct=1 --bs=4k --rw=randread --iodepth=16 \
                --time_based --runtime=600 --output-format=terse >/dev/null 2>&1 &
        fio=$!
        t0=$(now)
        r=$(until_trial $sd '"retrials":1' 240 0.5)
        t1=$(now)
        echo "===SHAPE-DEVICE==="; ctl --json device $sd; echo "===DEVICE-END==="
        kill $fio; wait $fio
        echo "===RETRIAL $sd $r load=$t0 retrial=$t1==="
fi

# a fast single-queue null_blk, hotplugged, under random reads
t=$(now)
nullb nullb0 queue_mode=2 submit_queues=1 poll_queues=0 size=256
r=$(until_trial nullb0 '"phase":"waiting"' 300 0.2)
echo "===ADDED nullb0 $r at=$t set=$(now)==="
trial nullb0 --rw=randread --iodepth=16

# SIGTERM mid-trial: the candidate in force on nullb1, under light reads
/bin/fio --name=light --filename=/dev/nullb1 --ioengine=libaio --direct=1 --bs=4k --rw=randread --iodepth=4 \
        --time_based --runtime=600 --output-format=terse >/dev/null 2>&1 &
fio=$!
ctl trial nullb1 mq-deadline >/dev/null
arm=$(until_trial nullb1 '"arm":"candidate"' 300 0.2)
written=fail
for i in $(seq 300); do [ "$(sched nullb1)" = mq-deadline ] && written=ok && break; sleep 0.1; done
device_json nullb1
rec=/run/blkpolicyd/devices/$(cat /sys/block/nullb1/dev)
[ -e $rec ] && had=yes || had=no
echo "===MID-TRIAL arm=$arm written=$written record=$had now=[$(vals nullb1)]==="
kill -TERM $pid
wait $pid
echo "===STOPPED rc=$?==="
kill $fio; wait $fio
echo "===RESTORED nullb1 [$(vals nullb1)] before=[$BEFORE]==="
echo "===RECORDS $(ls /run/blkpolicyd/devices 2>/dev/null | tr '\n' ' ')==="

# a restart: the scsi_debug's verdict on writes is remembered
# (/var/lib/blkpolicyd/trial-verdicts.json), taken with no trial
if [ -n "$sd" ]; then
        echo "===MEMORY $(grep -c '"identity"' /var/lib/blkpolicyd/trial-verdicts.json 2>/dev/null)==="
        before=$(sched $sd)
""" + vmtest.start_daemon("trial-policies").replace("2>/dev/null &", "2>>/run/blkpolicyd.err &").replace("\n", "\n        ") + r"""        r=$(until_trial $sd '"recalled":{' 100 0.2)
        echo "===RECALL-DEVICE==="; ctl --json device $sd; echo "===DEVICE-END==="
        echo "===RECALL $sd $r before=$before now=$(sched $sd)==="
        kill -TERM $pid
        wait $pid
fi
echo "===DAEMON-LOG==="
tail -n 40 /run/blkpolicyd.err
echo "===DAEMON-LOG-END==="
poweroff -f
"""


def policies_archive(out):
    """A second initramfs archive (the kernel unpacks them one after the
    other): tests/vm/trial-policies in /etc/blkpolicyd/trial-policies."""
    root = tempfile.mkdtemp(prefix="blkpolicyd-trialpol-")
    try:
        shutil.copytree(os.path.join(HERE, "trial-policies"), os.path.join(root, "etc/blkpolicyd/trial-policies"))
        subprocess.run(f"cd {root} && find . | cpio -o -H newc --quiet | gzip -1 > {out}", shell=True, check=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def kernel(which):
    if which == "7.3":
        return dd_kernel.stock_73()
    return vmtest.fetch_kernel(which)


def boot(which, blkpolicyd, work):
    kdir, kver = kernel(which)
    base, pols, initrd = (os.path.join(work, n) for n in ("base.gz", "policies.gz", "initrd.gz"))
    vmtest.build_initramfs(kdir, kver, blkpolicyd, base, [], init=INIT, modules=MODULES)
    policies_archive(pols)
    with open(initrd, "wb") as out:
        for part in (base, pols):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    return vmtest.qemu(kdir, kver, initrd, "console=ttyS0 panic=-1 loglevel=3", [], timeout=900)


def device(serial, name):
    m = re.search(r"===DEVICE " + re.escape(name) + r"===\r?\n(.*?)===DEVICE-END===", serial, re.S)
    try:
        return json.loads(m.group(1).replace("\r", ""))["result"] if m else None
    except ValueError:
        return None


def marked_json(serial, marker):
    m = re.search(r"===" + marker + r"===\r?\n(.*?)===DEVICE-END===", serial, re.S)
    try:
        return json.loads(m.group(1).replace("\r", ""))["result"] if m else None
    except ValueError:
        return None


def check_memory(res, which, serial, sd):
    """The verdict taken again when the workload changes (writes to random
    reads), and remembered across a restart."""
    m = re.search(r"===RETRIAL \S+ (\w+) load=([\d.]+) retrial=([\d.]+)===", serial)
    t = (marked_json(serial, "SHAPE-DEVICE") or {}).get("trial") or {}
    if m:
        print(f"# {which}: random reads after the write flood's verdict: taken again "
              f"{float(m.group(3)) - float(m.group(2)):.1f} s after they began (the new trial {t.get('phase')})", flush=True)
    res.check(f"{which}: writes to random reads on the scsi_debug: its trial is taken again",
              m and m.group(1) == "ok" and t.get("retrials") == 1 and t.get("recalled") is None,
              (m and m.groups(), t))
    m = re.search(r"===MEMORY (\d*)===", serial)
    res.check(f"{which}: its verdict is remembered in /var/lib/blkpolicyd/trial-verdicts.json",
              m and m.group(1) and int(m.group(1)) >= 1, m and m.group(0))
    m = re.search(r"===RECALL \S+ (\w+) before=(\S*) now=(\S*)===", serial)
    t = (marked_json(serial, "RECALL-DEVICE") or {}).get("trial") or {}
    r = t.get("recalled") or {}
    res.check(f"{which}: a restart takes the remembered verdict, with no trial",
              m and m.group(1) == "ok" and t.get("phase") == "done" and t.get("outcomes") == [] and
              r.get("verdict") in ("candidate-wins", "equal", "incumbent", "aborted", "inconclusive") and
              m.group(3) == (t.get("in_force") or m.group(3)), (m and m.groups(), t))


def outcome(d):
    t = d and d.get("trial")
    return t["outcomes"][0] if t and t.get("outcomes") else None


def verdict(res, which, serial, label, name, ends_on, verdicts):
    """The device's trial is done within the bound, on ends_on, with one of
    verdicts; prints the estimate, its interval and the time to it."""
    m = re.search(r"===VERDICT " + re.escape(name) + r" (\w+) load=([\d.]+) verdict=([\d.]+) now=(\S+)===", serial)
    d = device(serial, name)
    o = outcome(d)
    if m and o:
        print(f"# {which}: {label}: {o['verdict']}, kept {o['kept']}: {o.get('estimate', 0):.2f}x "
              f"{o.get('interval')}, {o['pairs']} pairs, {o['windows']} windows, "
              f"{float(m.group(3)) - float(m.group(2)):.1f} s from the load's start to the verdict", flush=True)
        print(f"#   reason: {o.get('reason')}", flush=True)
    r = re.search(r"===RATES " + re.escape(name) + r" trial=([\d.]+)/(\d+)/([\d.]+)/(\d+) "
                  r"kept=([\d.]+)/(\d+)/([\d.]+)/(\d+)===", serial)
    if r:
        t0, s0, t1, s1, t2, s2, t3, s3 = (float(x) for x in r.groups())
        during, after = (s1 - s0) * 512 / (t1 - t0) / 1e6, (s3 - s2) * 512 / (t3 - t2) / 1e6
        print(f"#   {during:.1f} MB/s from the load's start to the verdict, {after:.1f} MB/s on what it kept "
              f"after: the trial ran at {during / after:.2f}x", flush=True)
    res.check(f"{which}: {label}: the trial reaches its end within {VERDICT_WAIT_S} s",
              m and m.group(1) == "ok" and d and d["trial"]["phase"] == "done", (m and m.groups(), d and d.get("trial")))
    res.check(f"{which}: {label}: mq-deadline tried against none, verdict {' or '.join(verdicts)}",
              o is not None and (o["candidate"], o["incumbent"]) == ("mq-deadline", "none")
              and o["verdict"] in verdicts and o["kept"] == ends_on, o)
    res.check(f"{which}: {label}: ends on {ends_on} (sysfs)", m and m.group(4) == ends_on, m and m.groups())


def check(res, which, serial):
    res.check(f"{which}: booted and ran to the end", "===RECORDS" in serial, serial[-3000:])
    m = re.search(r"===SET nullb1 (\w+) before=\[([^]]*)\] now=\[([^]]*)\]===", serial)
    res.check(f"{which}: nullb1, kyber 512 32 by hand, is set to none 64 16 by its policy",
              m and m.group(1) == "ok" and m.group(2) == "kyber 512 32", m and m.groups())
    m = re.search(r"===ADDED scsi_debug (\S+) (\w+) at=([\d.]+) set=([\d.]+)===", serial)
    sd = m and m.group(1)
    res.check(f"{which}: a hotplugged scsi_debug (10 ms, 8 tags) is taken, its trial waiting for I/O on none",
              m and sd != "none" and m.group(2) == "ok", m and m.group(0))
    if m:
        print(f"# {which}: {sd}'s trial waiting {float(m.group(4)) - float(m.group(3)):.1f} s after insmod",
              flush=True)
    if sd and sd != "none":
        verdict(res, which, serial, "scsi_debug under a write flood", sd, "mq-deadline", ["candidate-wins"])
        check_memory(res, which, serial, sd)
    m = re.search(r"===ADDED nullb0 (\w+) at=([\d.]+) set=([\d.]+)===", serial)
    res.check(f"{which}: a hotplugged single-queue null_blk is taken, its trial waiting for I/O",
              m and m.group(1) == "ok", m and m.group(0))
    if m:
        print(f"# {which}: nullb0's trial waiting {float(m.group(3)) - float(m.group(2)):.1f} s after it was made",
              flush=True)
    verdict(res, which, serial, "null_blk under random reads", "nullb0", "none", ["incumbent", "aborted"])
    m = re.search(r"===MID-TRIAL arm=(\w+) written=(\w+) record=(\w+) now=\[([^]]*)\]===", serial)
    d = device(serial, "nullb1")
    res.check(f"{which}: blkpolicyctl trial nullb1 mq-deadline: the candidate in force, written, a record kept",
              m and m.groups()[:3] == ("ok", "ok", "yes") and d and d["trial"]["started_by"] == "blkpolicyctl"
              and d["trial"]["phase"] == "running",
              (m and m.groups(), d and d.get("trial")))
    m = re.search(r"===STOPPED rc=(\d+)===", serial)
    res.check(f"{which}: SIGTERM mid-trial: the daemon exits 0", m and m.group(1) == "0", m and m.group(0))
    m = re.search(r"===RESTORED nullb1 \[([^]]*)\] before=\[([^]]*)\]===", serial)
    res.check(f"{which}: ... and puts back every value read before it started (scheduler, read_ahead_kb, "
              "nr_requests), not the incumbent", m and m.group(1) == m.group(2) == "kyber 512 32", m and m.groups())
    m = re.search(r"===RECORDS ([^=]*)===", serial)
    res.check(f"{which}: ... and leaves no record", m and m.group(1).strip() == "", m and m.group(1))
    if res.failed:
        m = re.search(r"===DAEMON-LOG===\r?\n(.*?)===DAEMON-LOG-END===", serial, re.S)
        print("# daemon log:\n# " + "\n# ".join((m.group(1) if m else "(none)").splitlines()), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="all", choices=["6.12", "7.3", "all"])
    ap.add_argument("--blkpolicyd", default=os.path.join(vmtest.TOP, "build", "daemon", "blkpolicyd"))
    ap.add_argument("--serial", help="write each boot's serial console to this directory")
    args = ap.parse_args()
    res = Results()
    for which in (["6.12", "7.3"] if args.kernel == "all" else [args.kernel]):
        if which == "7.3" and dd_kernel.stock_73() is None:
            res.check("7.3: trixie-backports has a linux-image-7.3.*", False, "no third stock kernel")
            continue
        work = tempfile.mkdtemp(prefix="blkpolicyd-trial-")
        t0 = time.monotonic()
        try:
            serial = boot(which, args.blkpolicyd, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if args.serial:
            with open(os.path.join(args.serial, f"trial-{which}.serial"), "w") as f:
                f.write(serial)
        check(res, which, serial)
        print(f"# {which}: {time.monotonic() - t0:.0f} s (one boot)", flush=True)
    res.finish("trial: ")


if __name__ == "__main__":
    main()
