#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue #31's read-ahead trade on real kernels in QEMU (TCG): what
read_ahead_kb 8192 (Debian 7.3's default for a virtio-blk disk, which
reports rotational=1) costs against 128 (6.12's default for the same disk).

One boot per kernel, guest memory small (-m 320) and a 1 GiB file on ext4
(mke2fs runs in the guest) on a single-queue virtio-blk disk, so the page
cache cannot hold the file. Every run starts from drop_caches. Workloads:

- rand-psync: fio 4k random reads, buffered, psync (read(2));
- rand-mmap:  fio 4k random reads through mmap (page faults);
- seq-read:   fio 128k sequential buffered reads, the side that gains.

fio runs with fadvise_hint=0: its default advises POSIX_FADV_RANDOM /
MADV_RANDOM, which turns read-ahead off and would measure nothing here; an
application that gives no hint (most do not) gets the kernel's read-ahead.

read_ahead_kb 128 and 8192 alternate inside every round (the order flips
each round); medians of the rounds. Beside fio's IOPS and MiB/s, the disk's
own read sectors (/sys/block/vda/stat) over the run give the KiB the disk
read per KiB the application asked for: that is read amplification, and it
does not depend on how fast TCG or the host's page cache is. Under TCG only
ratios and amplification mean anything.

With --throttle the disk gets a cloud disk's caps in QEMU (3000 IOPS,
125 MiB/s: an AWS gp3 volume's baseline), so the read amplification costs
what it costs on such a disk rather than what the host's page cache
serves.

  sudo python3 bench/readahead-vm.py [--kernel 6.12|7.3|all] [--rounds 3] [--seconds 4] [--throttle]
"""
import argparse
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
import vmtest  # noqa: E402
from readahead import kernel  # noqa: E402  tests/vm/readahead.py: 6.12 or Debian's stock 7.3

MODULES = ["virtio_pci", "virtio_blk", "ext4"]
RA_VALUES = (128, 8192)
WORKLOADS = {
    "rand-psync": "--rw=randread --bs=4k --ioengine=psync",
    "rand-mmap": "--rw=randread --bs=4k --ioengine=mmap",
    "seq-read": "--rw=read --bs=128k --ioengine=psync",
}
FILE_MB = 1024
GUEST_MB = 320
# an AWS gp3 volume's baseline: 3000 IOPS, 125 MiB/s
THROTTLE = ",throttling.iops-total=3000,throttling.bps-total=131072000"

INIT = vmtest.MOUNTS + r"""for m in $(cat /modules.list); do insmod /lib/modules/$m 2>/dev/null; done
Q=/sys/block/vda/queue
for i in $(seq 100); do [ -e $Q/read_ahead_kb ] && break; sleep 0.05; done
echo "===KERNEL-GIVES rotational=$(cat $Q/rotational) read_ahead_kb=$(cat $Q/read_ahead_kb) \
max_sectors_kb=$(cat $Q/max_sectors_kb) max_hw_sectors_kb=$(cat $Q/max_hw_sectors_kb) \
optimal_io_size=$(cat $Q/optimal_io_size) minimum_io_size=$(cat $Q/minimum_io_size) \
scheduler=$(cat $Q/scheduler | tr ' ' ,) nr_requests=$(cat $Q/nr_requests)==="
/bin/mke2fs -q -F -t ext4 /dev/vda || echo "===FAILED mke2fs==="
mkdir -p /mnt
mount -t ext4 /dev/vda /mnt || echo "===FAILED mount==="
dd if=/dev/zero of=/mnt/data bs=1M count=@FILE_MB@ 2>/dev/null
sync
echo "===LAID-OUT $(ls -l /mnt/data | tr -s ' ' | cut -d' ' -f5)==="
sectors() { set -- $(cat /sys/block/vda/stat); echo $3; }
run() {   # round workload ra fio-args
        echo $3 > $Q/read_ahead_kb
        sync; echo 3 > /proc/sys/vm/drop_caches
        s0=$(sectors)
        out=$(/bin/fio --name=r --filename=/mnt/data --size=@FILE_MB@m --fadvise_hint=0 --invalidate=1 \
                --runtime=@SECONDS@ --time_based --output-format=terse $4 2>&1)
        s1=$(sectors)
        echo "===RUN $1 $2 $3 $(cat $Q/read_ahead_kb) $((s1 - s0)) $(echo "$out" | grep '^3;' | cut -d';' -f6-8 | tr ';' ' ')==="
}
@RUNS@
umount /mnt
poweroff -f
"""


def runs_script(rounds):
    """Every workload in every round, both read-ahead values side by side,
    the one that goes first alternating from round to round."""
    lines = []
    for r in range(rounds):
        order = RA_VALUES if r % 2 == 0 else tuple(reversed(RA_VALUES))
        for name, args in WORKLOADS.items():
            for ra in order:
                lines.append(f'run {r} {name} {ra} "{args}"')
    return "\n".join(lines)


def extras_cpio(out):
    """fio and mke2fs with their libraries, appended to vmtest's busybox
    initramfs as a second archive (the kernel unpacks them one after the
    other)."""
    root = tempfile.mkdtemp(prefix="blkpolicyd-ra-extras-")
    try:
        os.makedirs(os.path.join(root, "bin"))
        os.makedirs(os.path.join(root, "etc"))
        for prog in ("fio", "mke2fs"):
            path = shutil.which(prog) or os.path.join("/usr/sbin", prog)
            shutil.copy2(path, os.path.join(root, "bin", prog))
            vmtest.copy_libs(path, root)
        if os.path.exists("/etc/mke2fs.conf"):
            shutil.copy2("/etc/mke2fs.conf", os.path.join(root, "etc", "mke2fs.conf"))
        for applet in ("sync",):
            if applet not in vmtest.APPLETS:
                os.symlink("busybox", os.path.join(root, "bin", applet))
        subprocess.run(f"cd {root} && find . | cpio -o -H newc --quiet | gzip -1 >> {out}", shell=True, check=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def boot(kdir, kver, initrd, work, timeout, throttle):
    disk = os.path.join(work, "ra.img")
    with open(disk, "wb") as f:
        f.truncate((FILE_MB + 512) << 20)
    cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", str(GUEST_MB), "-smp", "2", "-nographic", "-no-reboot",
           "-kernel", os.path.join(kdir, "boot", f"vmlinuz-{kver}"), "-initrd", initrd,
           "-append", "console=ttyS0 panic=-1 loglevel=3",
           "-drive", f"if=none,id=d0,file={disk},format=raw,cache=writeback{THROTTLE if throttle else ''}",
           "-device", "virtio-blk-pci,drive=d0,num-queues=1"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout


def measure(which, rounds, seconds, throttle):
    kdir, kver = kernel(which)
    work = tempfile.mkdtemp(prefix="blkpolicyd-ra-", dir="/var/tmp")
    t0 = time.monotonic()
    try:
        init = (INIT.replace("@RUNS@", runs_script(rounds)).replace("@SECONDS@", str(seconds))
                .replace("@FILE_MB@", str(FILE_MB)))
        initrd = os.path.join(work, "initrd.gz")
        vmtest.build_initramfs(kdir, kver, None, initrd, [], init=init, modules=MODULES)
        extras_cpio(initrd)
        serial = boot(kdir, kver, initrd, work, timeout=300 + rounds * len(WORKLOADS) * 2 * (seconds + 20),
                      throttle=throttle)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return kver, serial, time.monotonic() - t0


def summarize(which, kver, serial, elapsed):
    gives = re.search(r"===KERNEL-GIVES (.*?)===", serial)
    print(f"\n### {kver} ({elapsed:.0f} s)\n")
    print(f"The kernel gives the virtio-blk disk: {gives.group(1) if gives else 'nothing reported'}\n")
    runs = {}
    for rnd, name, ra, ra_live, sectors, io_kb, bw_kb, iops in \
            re.findall(r"===RUN (\d+) (\S+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)===", serial):
        if ra != ra_live:
            print(f"read_ahead_kb {ra} did not stick (reads {ra_live})")
            continue
        disk_kb = int(sectors) / 2
        runs.setdefault((name, int(ra)), []).append(
            {"iops": int(iops), "bw": int(bw_kb) / 1024, "amp": disk_kb / max(int(io_kb), 1)})
    if not runs or any(f in serial for f in ("===FAILED", "Kernel panic")):
        print(f"failed:\n```\n{serial[-2000:]}\n```")
        return
    lo, hi = RA_VALUES
    print(f"| workload | IOPS @{lo} | IOPS @{hi} | MiB/s @{lo} | MiB/s @{hi} | {hi} / {lo} (throughput) | "
          f"disk KiB per KiB read @{lo} | @{hi} | rounds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in WORKLOADS:
        a, b = runs.get((name, lo), []), runs.get((name, hi), [])
        if not a or not b:
            print(f"| {name} | missing runs | | | | | | | |")
            continue

        def med(rs, key):
            return statistics.median(r[key] for r in rs)
        ratios = [y["bw"] / x["bw"] for x, y in zip(a, b) if x["bw"]]
        print(f"| {name} | {med(a, 'iops'):,.0f} | {med(b, 'iops'):,.0f} | {med(a, 'bw'):,.1f} | "
              f"{med(b, 'bw'):,.1f} | **{statistics.median(ratios):.2f}** "
              f"({min(ratios):.2f}-{max(ratios):.2f}) | {med(a, 'amp'):.2f} | {med(b, 'amp'):.2f} | {len(ratios)} |")
    print(f"\n<!-- {kver} runs: {runs} -->")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="all", choices=["6.12", "7.3", "all"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--throttle", action="store_true", help="cap the disk at 3000 IOPS and 125 MiB/s")
    args = ap.parse_args()
    if args.rounds < 1 or args.seconds < 1:
        sys.exit("--rounds and --seconds must be at least 1")
    print(f"read_ahead_kb {RA_VALUES[0]} vs {RA_VALUES[1]}: a {FILE_MB} MiB file on ext4 on virtio-blk "
          f"(1 queue), guest -m {GUEST_MB}, QEMU TCG, {args.rounds} alternating rounds of {args.seconds} s fio runs, "
          f"drop_caches before each; {'disk capped at 3000 IOPS, 125 MiB/s; ' if args.throttle else ''}"
          f"host {os.uname().release}")
    for which in (["6.12", "7.3"] if args.kernel == "all" else [args.kernel]):
        summarize(which, *measure(which, args.rounds, args.seconds, args.throttle))


if __name__ == "__main__":
    main()
