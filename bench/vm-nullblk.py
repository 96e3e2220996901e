#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The seeds' experiment on real kernels in QEMU: a single-queue null_blk,
fio io_uring 4k randread at qd16, three ways on the same device in one boot:
the kernel's default (mq-deadline), static none, and blkpolicyd (--once with
the shipped policies). Configurations alternate, medians of the repeats.
Under TCG only the ratios mean anything.

  sudo python3 bench/vm-nullblk.py [--kernel 6.1|6.12|all] [--repeats 3] [--seconds 5]
"""
import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "vm"))
import vmtest  # noqa: E402

INIT = vmtest.MOUNTS + r"""for m in $(cat /modules.list); do
        case $m in
                null_blk.ko) insmod /lib/modules/$m nr_devices=0 ;;
                scsi_debug.ko|zram.ko) ;;
                *) insmod /lib/modules/$m ;;
        esac
done
mount -t configfs configfs /sys/kernel/config
d=/sys/kernel/config/nullb/nullb0
mkdir $d
echo 2 > $d/queue_mode; echo 1 > $d/submit_queues; echo 0 > $d/poll_queues 2>/dev/null; echo 1024 > $d/size
echo 1 > $d/power
S=/sys/block/nullb0/queue/scheduler
echo "===DEFAULT $(cat $S)==="
for c in @SEQUENCE@; do
                echo mq-deadline > $S
                case $c in
                        none) echo none > $S ;;
                        blkpolicyd) /bin/blkpolicyd --once --config /dev/null --policy-dir /etc/blkpolicyd/policies \
                                        --state-dir /run/st --device nullb0 >/dev/null 2>&1 ;;
                esac
                sched=$(cat $S)
                out=$(/bin/fio --name=r --filename=/dev/nullb0 --rw=randread --bs=4k --iodepth=16 --ioengine=io_uring \
                        --direct=1 --runtime=@SECONDS@ --time_based --output-format=terse 2>/dev/null)
                echo "===BENCH $c $(echo "$out" | cut -d';' -f8) $sched==="
done
poweroff -f
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="all", choices=["6.1", "6.12", "all"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--blkpolicyd", default=os.path.join(TOP, "build", "daemon", "blkpolicyd"))
    args = ap.parse_args()
    configs = ["default", "none", "blkpolicyd"]
    print("| kernel | kernel default (mq-deadline) IOPS | static none IOPS | blkpolicyd IOPS | none / default | "
          "blkpolicyd / default | blkpolicyd / none |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for which in (["6.1", "6.12"] if args.kernel == "all" else [args.kernel]):
        kdir, kver = vmtest.fetch_kernel(which)
        work = tempfile.mkdtemp(prefix="blkpolicyd-vmbench-")
        try:
            # alternate: each repeat starts with the next configuration
            seq = [configs[(r + i) % len(configs)] for r in range(args.repeats) for i in range(len(configs))]
            init = INIT.replace("@SEQUENCE@", " ".join(seq)).replace("@SECONDS@", str(args.seconds))
            initrd = os.path.join(work, "initrd.gz")
            vmtest.build_initramfs(kdir, kver, args.blkpolicyd, initrd, [], init=init)
            serial = vmtest.boot(kdir, kver, initrd, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        runs = {c: [] for c in configs}
        for c, iops, sched in re.findall(r"===BENCH (\S+) (\d+) ([^=]*)===", serial):
            runs[c].append(int(iops))
        if not all(runs.values()):
            print(f"| {which} | failed: {serial[-500:]!r} |")
            continue
        med = {c: statistics.median(v) for c, v in runs.items()}
        print(f"| {kver} | {med['default']:,.0f} | {med['none']:,.0f} | {med['blkpolicyd']:,.0f} | "
              f"{med['none'] / med['default']:.2f} | {med['blkpolicyd'] / med['default']:.2f} | "
              f"{med['blkpolicyd'] / med['none']:.2f} |")
        print(f"<!-- {which} runs: {runs} -->")


if __name__ == "__main__":
    main()
