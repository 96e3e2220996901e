#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyd on real kernels: Debian's 6.1 and 6.12 under QEMU (TCG).

For each kernel: fetch the Debian package (apt-get download; cached outside
the repo), build a busybox initramfs with blkpolicyd, its shared libraries,
the shipped policies and the needed modules, and boot it with virtio-blk
disks (1 and 2 queues), a rotational virtio-scsi disk, an IDE disk and an
NVMe controller with a conventional and a zoned namespace. Inside, make
null_blk devices (single-queue, single-queue plus a poll queue, zoned,
multi-queue), a scsi_debug disk and, on 6.12, a ublk disk served by
tests/vm/ublk-null; run `blkpolicyd --once` (the VM's own devices: it
applies for real) and check the JSON report against what each device must
get. Then start the daemon and follow, from raw kernel uevents: a null_blk
and a ublk disk coming and going, scsi_debug unloaded and loaded again as a
host-managed zoned disk, a dynamic flip under fio, and restore on SIGTERM.

  sudo python3 tests/vm/vmtest.py [--kernel 6.1|6.12|all] [--blkpolicyd PATH]

Cache: $BLKPOLICYD_VM_CACHE or /var/cache/blkpolicyd-vm. Prints TAP-like
lines and "N passed, N failed"; the exit status says the same.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# a script scripts/test.sh runs (one VM boot for many checks), not a pytest
# file: tests/ is not on its path by itself. Its checks and the "vm: N
# passed, N failed" line come from the one harness the other suites share.
sys.path.insert(0, os.path.join(TOP, "tests"))
from blkptest.results import Results  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dd_kernel  # noqa: E402

CACHE = os.environ.get("BLKPOLICYD_VM_CACHE", "/var/cache/blkpolicyd-vm")
MODULES = ["virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "scsi_debug", "null_blk", "zram", "nvme", "bfq",
           "kyber-iosched", "ata_piix"]
APPLETS = ["sh", "mount", "mkdir", "rmdir", "cat", "echo", "sleep", "insmod", "poweroff", "ls", "grep", "xargs",
           "kill", "seq", "rmmod", "umount", "switch_root", "sed", "wc", "head", "tr", "cut", "date", "dd", "losetup"]

# every init script starts here; bench/vm-nullblk.py uses it too
MOUNTS = r"""#!/bin/sh
echo "===INIT==="
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t debugfs debugfs /sys/kernel/debug
"""

# pieces of both init scripts (INIT, DD_INIT):
# nullb NAME KEY=VALUE...: a null_blk disk made through configfs
NULLB = r"""mount -t configfs configfs /sys/kernel/config
nullb() {
        d=/sys/kernel/config/nullb/$1; shift
        mkdir $d
        for kv in "$@"; do echo "${kv#*=}" > $d/"${kv%%=*}" 2>/dev/null; done
        echo 1 > $d/power
}
"""
# ublk_start NAME: a ublk disk served by tests/vm/ublk-null; ublk0 at once
UBLK = r"""ublk_start() {
        /bin/ublk-null > /run/$1.name 2>/run/$1.err &
        echo $! > /run/$1.pid
        for i in $(seq 500); do [ -s /run/$1.name ] && break; sleep 0.02; done
}
[ -c /dev/ublk-control ] && ublk_start ublk0 && echo "===UBLK-START $(cat /run/ublk0.name /run/ublk0.err)==="
"""
# `blkpolicyd --once` on the VM's own devices: the JSON report check_kernel reads
ONCE_REPORT = r"""echo "===BLKPOLICYD-REPORT==="
/bin/blkpolicyd --once --config /dev/null --policy-dir /etc/blkpolicyd/policies --state-dir /run/blkpolicyd 2>/dev/null
echo "===BLKPOLICYD-END==="
"""


def start_daemon(policy_dir):
    """The daemon with the shipped policies and /etc/blkpolicyd/policy_dir,
    its socket at /run/blkpolicyd.sock, its pid in $pid."""
    return r"""echo "[Daemon]" > /etc/blkpolicyd/vm.conf
echo "tick_interval_ms = 200" >> /etc/blkpolicyd/vm.conf
echo "drift_sweep_seconds = 4" >> /etc/blkpolicyd/vm.conf
/bin/blkpolicyd --config /etc/blkpolicyd/vm.conf --policy-dir /etc/blkpolicyd/policies \
        --policy-dir /etc/blkpolicyd/""" + policy_dir + r""" --state-dir /run/blkpolicyd --socket /run/blkpolicyd.sock 2>/dev/null &
pid=$!
for i in $(seq 100); do [ -S /run/blkpolicyd.sock ] && break; sleep 0.05; done
"""


INIT = MOUNTS + r"""for m in $(cat /modules.list); do
        case $m in
                scsi_debug.ko) insmod /lib/modules/$m dev_size_mb=16 ;;
                null_blk.ko) insmod /lib/modules/$m nr_devices=0 ;;
                zram.ko) insmod /lib/modules/$m num_devices=1 ;;
                *) insmod /lib/modules/$m ;;
        esac
done
""" + NULLB + r"""nullb nullb0 queue_mode=2 submit_queues=1 poll_queues=0 size=64
nullb nullb1 queue_mode=2 submit_queues=1 poll_queues=1 size=64
nullb nullb2 queue_mode=2 submit_queues=1 poll_queues=0 zoned=1 zone_size=16 size=64
nullb nullb3 queue_mode=2 submit_queues=4 poll_queues=0 size=64
echo 16M > /sys/block/zram0/disksize
# ublk (Debian's 6.1 does not build ublk_drv): a disk served by tests/vm/ublk-null
""" + UBLK + r"""# the SCSI scan is asynchronous: wait (bounded) for the three SCSI disks
for i in $(seq 50); do [ $(ls -d /sys/block/sd* 2>/dev/null | wc -l) -ge 3 ] && break; sleep 0.1; done
SCHEDULERS_BEFORE=$(cat /sys/block/vda/queue/scheduler)
# the virtio-scsi disk, and its read-ahead as the kernel gave it
for d in /sys/block/sd*; do grep -q "QEMU HARDDISK" $d/device/model && vs=${d##*/}; done
RA_BEFORE=$(cat /sys/block/$vs/queue/read_ahead_kb)
""" + ONCE_REPORT + r"""
# the daemon: follows hotplug from raw kernel uevents (no udevd here)
""" + start_daemon("vm-policies") + r"""nullb nullb4 queue_mode=2 submit_queues=1 poll_queues=0 size=64
r=fail
for i in $(seq 100); do grep -q '\[none\]' /sys/block/nullb4/queue/scheduler && r=ok && break; sleep 0.02; done
echo "===HOTPLUG-ADD $r $(cat /sys/block/nullb4/queue/scheduler)==="
echo 0 > /sys/kernel/config/nullb/nullb4/power
rmdir /sys/kernel/config/nullb/nullb4
for i in $(seq 100); do /bin/blkpolicyctl --socket /run/blkpolicyd.sock devices | grep -q nullb4 || break; sleep 0.02; done
# a second ublk disk, added and stopped while the daemon runs
if [ -c /dev/ublk-control ]; then
        ublk_start ublk1
        ub=$(cat /run/ublk1.name)
        add=fail
        for i in $(seq 100); do grep -q '\[none\]' /sys/block/$ub/queue/scheduler 2>/dev/null && add=ok && break; sleep 0.02; done
        kill -TERM $(cat /run/ublk1.pid)
        wait $(cat /run/ublk1.pid)
        gone=fail
        for i in $(seq 100); do /bin/blkpolicyctl --socket /run/blkpolicyd.sock devices | grep -qw "$ub" || { gone=ok; break; }; sleep 0.02; done
        echo "===UBLK-HOTPLUG $ub add=$add gone=$gone==="
fi
# scsi_debug unloaded, then loaded again as a host-managed zoned disk
for d in /sys/block/sd*; do grep -q scsi_debug $d/device/model && old=${d##*/}; done
rmmod scsi_debug
gone=fail
for i in $(seq 100); do /bin/blkpolicyctl --socket /run/blkpolicyd.sock devices | grep -qw "$old" || { gone=ok; break; }; sleep 0.02; done
insmod /lib/modules/scsi_debug.ko dev_size_mb=32 zbc=host-managed zone_size_mb=4
new=none
for i in $(seq 250); do
        for d in /sys/block/sd*; do grep -q host-managed $d/queue/zoned && new=${d##*/}; done
        [ $new != none ] && /bin/blkpolicyctl --socket /run/blkpolicyd.sock devices | grep -qw "$new" && break
        sleep 0.02
done
echo "===SCSI-HOTPLUG old=$old gone=$gone new=$new==="
echo "===DEVICES==="
/bin/blkpolicyctl --socket /run/blkpolicyd.sock --json devices
echo "===DEVICES-END==="

# a SCSI rescan after the daemon set the virtio-scsi disk's read_ahead_kb
# (tests/vm/policies/91-vm-revalidate.policy): the kernel's limits update
# puts its default back (6.12, 7.3; 6.1's sd keeps it), the daemon sets 64
# again, within its drift sweep (no uevent comes), and marks no override
ra() { cat /sys/block/$vs/queue/read_ahead_kb; }
set=fail; for i in $(seq 250); do [ "$(ra)" = 64 ] && set=ok && break; sleep 0.02; done
echo 1 > /sys/block/$vs/device/rescan
after=$(ra)
back=fail; for i in $(seq 300); do [ "$(ra)" = 64 ] && back=ok && break; sleep 0.1; done
ov=$(/bin/blkpolicyctl --socket /run/blkpolicyd.sock --json device $vs | grep -c '"overridden": *true')
echo "===REVALIDATE $vs set=$set before=$RA_BEFORE after_rescan=$after back=$back now=$(ra) overridden=$ov limits=$(cat /sys/block/$vs/queue/optimal_io_size)/$(cat /sys/block/$vs/queue/max_sectors_kb)/$(cat /sys/block/$vs/queue/rotational)==="

# the dynamic policy: a slow, shallow null_blk under a fio write flood
nullb nullb5 queue_mode=2 submit_queues=1 poll_queues=0 irqmode=2 completion_nsec=50000 hw_queue_depth=4 size=64
for i in $(seq 100); do grep -q '\[none\]' /sys/block/nullb5/queue/scheduler && break; sleep 0.02; done
/bin/fio --name=flood --filename=/dev/nullb5 --rw=write --bs=4k --iodepth=32 --ioengine=libaio --direct=1 \
        --runtime=4 --time_based --output-format=terse >/dev/null 2>&1 &
fio=$!
busy=fail
for i in $(seq 200); do grep -q '\[mq-deadline\]' /sys/block/nullb5/queue/scheduler && busy=ok && break; sleep 0.02; done
wait $fio
base=fail
for i in $(seq 200); do grep -q '\[none\]' /sys/block/nullb5/queue/scheduler && base=ok && break; sleep 0.02; done
echo "===DYNAMIC busy=$busy base=$base==="
kill -TERM $pid
wait $pid
echo "===RESTORED vda: $(cat /sys/block/vda/queue/scheduler) (before: $SCHEDULERS_BEFORE)==="
echo "===REVALIDATE-RESTORED $vs $(ra) (before: $RA_BEFORE)==="
poweroff -f
"""


# The patched 7.3 kernel (tests/vm/dd_kernel.py): everything built in, module
# parameters on the command line. The checks are about mq-deadline's
# dispatch_direct: the --once report, an admin's switch away and back then
# `blkpolicyctl resume`, a flip within mq-deadline, a flip through none, and
# restore on SIGTERM.
DD_INIT = MOUNTS + NULLB + r"""# name, scheduler, dispatch_direct (- where the scheduler has none)
st() { echo "$1 $(sed 's/.*\[\(.*\)\].*/\1/' /sys/block/$1/queue/scheduler) $(cat /sys/block/$1/queue/iosched/dispatch_direct 2>/dev/null || echo -)"; }
until_st() { for i in $(seq 250); do [ "$(st $1)" = "$1 $2 $3" ] && echo ok && return; sleep 0.02; done; echo fail; }
ctl() { /bin/blkpolicyctl --socket /run/blkpolicyd.sock "$@"; }
nullb nullb0 queue_mode=2 submit_queues=1 poll_queues=0 size=64
""" + UBLK + r"""for i in $(seq 50); do [ $(ls -d /sys/block/sd* 2>/dev/null | wc -l) -ge 2 ] && break; sleep 0.1; done
BEFORE=$(st vda)
""" + ONCE_REPORT + r"""echo "===DD-STATE==="
for d in /sys/block/*; do st ${d##*/}; done
echo "===DD-STATE-END==="

# what the daemon must put back on SIGTERM: nullb7 on mq-deadline with
# dispatch_direct=0, nullb8 on none, both set so by the admin before it starts
nullb nullb6 queue_mode=2 submit_queues=1 poll_queues=0 size=64
nullb nullb7 queue_mode=2 submit_queues=1 poll_queues=0 size=64
nullb nullb8 queue_mode=2 submit_queues=1 poll_queues=0 size=64
echo mq-deadline > /sys/block/nullb7/queue/scheduler; echo 0 > /sys/block/nullb7/queue/iosched/dispatch_direct
echo none > /sys/block/nullb8/queue/scheduler
echo "===DD-ADMIN $(st nullb7) / $(st nullb8)==="
""" + start_daemon("dd-policies") + r"""echo "===DD-DAEMON nullb6=$(until_st nullb6 mq-deadline 0) nullb7=$(until_st nullb7 mq-deadline 1) nullb8=$(until_st nullb8 mq-deadline 1)==="

# an admin switches vda away; blkpolicyd leaves it (overridden) until resume
echo none > /sys/block/vda/queue/scheduler
overridden() { for i in $(seq 50); do ctl --json device $1 | grep -q '"overridden":.*true' && echo yes && return; sleep 0.05; done; echo no; }
ov=$(overridden vda)
away=$(st vda)
ctl resume vda >/dev/null
echo "===DD-RESUME vda overridden=$ov away=[$away] back=$(until_st vda mq-deadline 1) $(st vda)==="
# ... and nullb6 away and back: the kernel's switch resets dispatch_direct to 1
echo none > /sys/block/nullb6/queue/scheduler; echo mq-deadline > /sys/block/nullb6/queue/scheduler
reset=$(st nullb6)
ov=$(overridden nullb6)
ctl resume nullb6 >/dev/null
echo "===DD-RESUME nullb6 overridden=$ov reset=[$reset] back=$(until_st nullb6 mq-deadline 0) $(st nullb6)==="

# flips: nullb5 within mq-deadline (92-vm-dd-flip.policy), nullb9 through none (93-...)
flood() {
        nullb $1 queue_mode=2 submit_queues=1 poll_queues=0 irqmode=2 completion_nsec=50000 hw_queue_depth=4 size=64
        until_st $1 mq-deadline $2 >/dev/null
        /bin/fio --name=flood --filename=/dev/$1 --rw=write --bs=4k --iodepth=32 --ioengine=libaio --direct=1 \
                --runtime=4 --time_based --output-format=terse >/dev/null 2>&1 &
        fio=$!
        seen=""
        busy=fail
        for i in $(seq 250); do
                s=$(st $1); case " $seen " in *" ${s#* }/"*) ;; *) seen="$seen ${s#* }/" ;; esac
                [ "$s" = "$1 $3" ] && busy=ok && break
                sleep 0.02
        done
        while kill -0 $fio 2>/dev/null; do
                s=$(st $1); case " $seen " in *" ${s#* }/"*) ;; *) seen="$seen ${s#* }/" ;; esac
                sleep 0.02
        done
        wait $fio
        base=$(until_st $1 mq-deadline $2)
        echo "===DD-FLIP $1 busy=$busy base=$base seen=[$seen ] now=$(st $1)==="
}
flood nullb5 1 "mq-deadline 0"
flood nullb9 0 "none -"
for d in nullb5 nullb9; do echo "===DD-EXPLAIN $d==="; ctl --json explain $d; echo "===DD-EXPLAIN-END==="; done
kill -TERM $pid
wait $pid
echo "===DD-RESTORED vda=[$(st vda)] before=[$BEFORE] nullb7=[$(st nullb7)] nullb8=[$(st nullb8)]==="
poweroff -f
"""


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def fetch_kernel(which):
    os.makedirs(CACHE, exist_ok=True)
    if which == "6.1":
        names = [l.split()[0] for l in sh("apt-cache", "search", "--names-only", r"^linux-image-6\.1\.0-[0-9]+-amd64$").splitlines()]
        pkg = sorted(names, key=lambda n: int(re.search(r"6\.1\.0-(\d+)", n).group(1)))[-1]
    else:
        deps = sh("apt-cache", "depends", "linux-image-6.12-amd64")
        pkg = re.search(r"Depends: (linux-image-6\.12\.\S+-amd64)", deps).group(1)
    kver = pkg[len("linux-image-"):]
    kdir = os.path.join(CACHE, kver)
    if not os.path.isdir(kdir):
        debs = glob.glob(os.path.join(CACHE, pkg + "_*.deb"))
        if not debs:
            subprocess.run(["apt-get", "download", "-qq", pkg], cwd=CACHE, check=True, capture_output=True)
            debs = glob.glob(os.path.join(CACHE, pkg + "_*.deb"))
        sh("dpkg-deb", "-x", debs[0], kdir + ".tmp")
        sh("/sbin/depmod", "-b", kdir + ".tmp", kver)   # the package ships no modules.dep
        os.rename(kdir + ".tmp", kdir)
    return kdir, kver


def module_order(kdir, kver, name):
    out = subprocess.run(["/sbin/modprobe", "-d", kdir, "-S", kver, "--show-depends", name],
                         capture_output=True, text=True).stdout
    return [line.split()[1] for line in out.splitlines() if line.startswith("insmod ")]


def copy_libs(binary, root):
    for line in sh("ldd", binary).splitlines():
        m = re.search(r"(/\S+\.so[^\s]*)", line)
        if m and os.path.exists(m.group(1)):
            dest = root + m.group(1)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(m.group(1), dest)


def built_beside(blkpolicyd, *path):
    """Another program of the same meson build as build/daemon/blkpolicyd."""
    return os.path.join(os.path.dirname(os.path.dirname(blkpolicyd)), *path)


def copy_payload(blkpolicyd, root):
    """blkpolicyd, blkpolicyctl, ublk-null and fio with their libraries, the policies."""
    shutil.copy2(blkpolicyd, os.path.join(root, "bin/blkpolicyd"))
    copy_libs(blkpolicyd, root)
    ctl = built_beside(blkpolicyd, "ctl", "blkpolicyctl")
    shutil.copy2(ctl, os.path.join(root, "bin/blkpolicyctl"))
    copy_libs(ctl, root)
    ublk_null = built_beside(blkpolicyd, "tests", "vm", "ublk-null")
    if os.path.exists(ublk_null):
        shutil.copy2(ublk_null, os.path.join(root, "bin/ublk-null"))
        copy_libs(ublk_null, root)
    shutil.copy2(shutil.which("fio"), os.path.join(root, "bin/fio"))
    copy_libs(shutil.which("fio"), root)
    shutil.copytree(os.path.join(TOP, "tests", "vm", "policies"), os.path.join(root, "etc/blkpolicyd/vm-policies"))
    shutil.copytree(os.path.join(TOP, "tests", "vm", "dd-policies"), os.path.join(root, "etc/blkpolicyd/dd-policies"))
    shutil.copytree(os.path.join(TOP, "policies"), os.path.join(root, "etc/blkpolicyd/policies"),
                    ignore=shutil.ignore_patterns("meson.build"))


def build_initramfs(kdir, kver, blkpolicyd, out, extra_modules, init=INIT, modules=MODULES):
    """blkpolicyd=None: busybox and the modules only (the systemd test's root mounter)."""
    root = tempfile.mkdtemp(prefix="blkpolicyd-initramfs-")
    try:
        for d in ("bin", "proc", "sys", "dev", "run", "lib/modules", "etc/blkpolicyd"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        shutil.copy2("/bin/busybox", os.path.join(root, "bin/busybox"))
        for a in APPLETS:
            os.symlink("busybox", os.path.join(root, "bin", a))
        if blkpolicyd:
            copy_payload(blkpolicyd, root)
        order = []
        for m in modules + extra_modules:
            for path in module_order(kdir, kver, m):
                base = os.path.basename(path).replace(".xz", "")
                if base in order:
                    continue
                order.append(base)
                dest = os.path.join(root, "lib/modules", base)
                if path.endswith(".xz"):
                    with open(dest, "wb") as f:
                        subprocess.run(["xz", "-dc", path], stdout=f, check=True)
                else:
                    shutil.copy2(path, dest)
        with open(os.path.join(root, "modules.list"), "w") as f:
            f.write("\n".join(order) + "\n")
        with open(os.path.join(root, "init"), "w") as f:
            f.write(init)
        os.chmod(os.path.join(root, "init"), 0o755)
        subprocess.run(f"cd {root} && find . | cpio -o -H newc --quiet | gzip -1 > {out}", shell=True, check=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def scratch_disks(work, names, size=64 << 20):
    """Sparse raw images in work, one per name."""
    paths = []
    for name in names:
        path = os.path.join(work, f"{name}.img")
        with open(path, "wb") as f:
            f.truncate(size)
        paths.append(path)
    return paths


def qemu(kdir, kver, initrd, append, devices, timeout, smp=2):
    """Boots the kernel under TCG with devices (-drive/-device arguments);
    returns what it printed on the serial console."""
    cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", "2048", "-smp", str(smp), "-nographic", "-no-reboot",
           "-kernel", os.path.join(kdir, "boot", f"vmlinuz-{kver}"), "-initrd", initrd, "-append", append, *devices]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout
    if "Kernel panic" in out and "===INIT===" not in out:
        # The guest's own kernel died in its early init, before any code of
        # ours ran (seen once: 7.3 under TCG, set_next_task_fair in
        # inet_init): once more, said in the output, never more.
        print(f"# {kver}: the guest kernel panicked before init ran; booting it once more")
        print("# " + "\n# ".join(l for l in out.splitlines() if "RIP:" in l or "panic" in l))
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout
    return out


def boot(kdir, kver, initrd, work):
    disks = scratch_disks(work, [f"disk{i}" for i in range(6)])
    devices = [
        "-drive", f"if=none,id=d0,file={disks[0]},format=raw", "-device", "virtio-blk-pci,drive=d0,num-queues=1",
        "-drive", f"if=none,id=d1,file={disks[1]},format=raw", "-device", "virtio-blk-pci,drive=d1,num-queues=2",
        "-device", "virtio-scsi-pci,id=scsi",
        "-drive", f"if=none,id=d2,file={disks[2]},format=raw", "-device", "scsi-hd,drive=d2,rotation_rate=7200",
        # an NVMe controller with a conventional and a zoned (ZNS) namespace
        "-device", "nvme,id=nvme0,serial=blkpolicyd0",
        "-drive", f"if=none,id=d3,file={disks[3]},format=raw", "-device", "nvme-ns,drive=d3,bus=nvme0,nsid=1",
        "-drive", f"if=none,id=d4,file={disks[4]},format=raw",
        "-device", "nvme-ns,drive=d4,bus=nvme0,nsid=2,zoned=true,zoned.zone_size=4M,zoned.zone_capacity=4M",
        # an IDE disk on the PC machine's own PIIX controller (no rotation rate: rotational)
        "-drive", f"if=none,id=d5,file={disks[5]},format=raw", "-device", "ide-hd,drive=d5,bus=ide.0,model=BLKPOLICYD IDE"]
    return qemu(kdir, kver, initrd, "console=ttyS0 panic=-1 loglevel=3", devices, timeout=600)


# the patched kernel has no modules: their parameters go on the command line
DD_APPEND = "console=ttyS0 panic=-1 loglevel=3 null_blk.nr_devices=0 scsi_debug.dev_size_mb=16"


def boot_dd(kdir, kver, initrd, work, init_devices=None, timeout=600):
    """The patched kernel (no SMP): a single-queue virtio-blk disk and a
    rotational virtio-scsi disk; null_blk, scsi_debug and ublk come from
    the init script."""
    disks = scratch_disks(work, ["dd0", "dd1"])
    devices = init_devices or [
        "-drive", f"if=none,id=d0,file={disks[0]},format=raw", "-device", "virtio-blk-pci,drive=d0,num-queues=1",
        "-device", "virtio-scsi-pci,id=scsi",
        "-drive", f"if=none,id=d1,file={disks[1]},format=raw", "-device", "scsi-hd,drive=d1,rotation_rate=7200"]
    return qemu(kdir, kver, initrd, DD_APPEND, devices, timeout=timeout, smp=1)


def report_of(serial):
    m = re.search(r"===BLKPOLICYD-REPORT===\r?\n(.*?)===BLKPOLICYD-END===", serial, re.S)
    return json.loads(m.group(1).replace("\r", "")) if m else None


def check_kernel(res, which, report, serial):
    devs = {d["name"]: d for d in report["devices"]}
    by_model = {d["facts"]["model"]: d for d in report["devices"] if d["facts"]["model"]}

    def target(d):
        return d["settings"].get("scheduler", {}).get("target")

    def current(d):
        return d["settings"].get("scheduler", {}).get("current") or d["facts"]["scheduler"]

    def expect(label, d, classes, sched, extra=True):
        ok = d is not None and all(c in d["classes"] for c in classes) and current(d) == sched and extra
        res.check(f"{which}: {label} is {'+'.join(classes)} and runs {sched}", ok,
                  d and (d["classes"], d["settings"], d["reason"]))

    expect("virtio-blk with 1 queue", devs.get("vda"), ["virtio", "single-queue"], "none",
           devs.get("vda") and "rotational" not in devs["vda"]["classes"] and devs["vda"]["facts"]["rotational"])
    expect("virtio-blk with 2 queues", devs.get("vdb"), ["virtio", "multi-queue"], "none")
    expect("a 7200 rpm virtio-scsi disk", by_model.get("QEMU HARDDISK"), ["scsi", "rotational"], "mq-deadline")
    expect("scsi_debug", by_model.get("scsi_debug"), ["scsi", "single-queue"], "none")
    expect("null_blk, one queue", devs.get("nullb0"), ["null_blk", "single-queue"], "none")
    expect("null_blk, one queue plus a poll queue", devs.get("nullb1"), ["null_blk", "single-queue"], "none",
           devs.get("nullb1") and devs["nullb1"]["facts"]["hw_queues"] == 2 and devs["nullb1"]["facts"]["poll_queues"] == 1)
    expect("null_blk, four queues", devs.get("nullb3"), ["null_blk", "multi-queue"], "none")
    zoned_sched = "mq-deadline" if which == "6.1" else "none"
    expect("zoned null_blk", devs.get("nullb2"), ["null_blk", "zoned"], zoned_sched)
    ns = {d["facts"]["zoned"]: d for d in report["devices"] if "nvme" in d["classes"]}
    expect("an NVMe namespace", ns.get("none"), ["nvme", "multi-queue"], "none")
    expect("a zoned NVMe namespace", ns.get("host-managed"), ["nvme", "zoned"], zoned_sched)
    expect("an IDE disk", by_model.get("BLKPOLICYD IDE"), ["scsi", "rotational"], "mq-deadline")
    if which != "6.1":          # Debian's 6.1 does not build ublk_drv
        m = re.search(r"===UBLK-START (\w+)===", serial)
        u = devs.get(m.group(1)) if m else None
        expect("a ublk disk (tests/vm/ublk-null), mq-deadline by the kernel,", u, ["ublk", "single-queue"], "none",
               u and u["facts"]["scheduler"] == "mq-deadline")
    z = devs.get("zram0")
    res.check(f"{which}: zram is bio-based and untouched", z and z["classes"] == ["bio-based"] and not z["managed"]
              and z["settings"] == {}, z)
    res.check(f"{which}: the report names the kernel", report["kernel"].startswith(which + "."), report["kernel"])
    touched = [d["name"] for d in report["devices"] if "iosched/dispatch_direct" in d["settings"]]
    res.check(f"{which}: no dispatch_direct here (report: no), and no device's plan touches it",
              report["capabilities"]["dispatch_direct"] == "no" and not touched, (report["capabilities"], touched))


def check_daemon(res, which, serial):
    m = re.search(r"===HOTPLUG-ADD (\w+) ([^=]*)===", serial)
    res.check(f"{which}: a null_blk added after the daemon started is set from a raw uevent",
              m and m.group(1) == "ok", m and m.group(2))
    m = re.search(r"===DEVICES===\r?\n(.*?)===DEVICES-END===", serial, re.S)
    devs = {d["name"]: d for d in json.loads(m.group(1).replace("\r", ""))["result"]} if m else {}
    res.check(f"{which}: the removed null_blk is forgotten, the others are known",
              m and "nullb4" not in devs and "nullb0" in devs, list(devs))
    if which != "6.1":
        m = re.search(r"===UBLK-HOTPLUG (\S+) add=(\w+) gone=(\w+)===", serial)
        res.check(f"{which}: a ublk disk started after the daemon is set to none, and forgotten when stopped",
                  m and m.group(2) == "ok" and m.group(3) == "ok" and m.group(1) not in devs, m and m.groups())
    m = re.search(r"===SCSI-HOTPLUG old=(\S+) gone=(\w+) new=(\S+)===", serial)
    res.check(f"{which}: rmmod scsi_debug: its disk is forgotten", m and m.group(2) == "ok", m and m.groups())
    z = devs.get(m.group(3)) if m else None
    zoned_sched = "mq-deadline" if which == "6.1" else "none"
    res.check(f"{which}: scsi_debug loaded again with zbc=host-managed: scsi+zoned, runs {zoned_sched}",
              z is not None and {"scsi", "zoned"} <= set(z["classes"]) and z["facts"]["zoned"] == "host-managed"
              and z["settings"].get("scheduler", {}).get("current") == zoned_sched,
              z and (z["classes"], z["settings"]))
    m = re.search(r"===DYNAMIC busy=(\w+) base=(\w+)===", serial)
    res.check(f"{which}: a slow, shallow null_blk flips to busy under a fio write flood", m and m.group(1) == "ok",
              m and m.groups())
    res.check(f"{which}: ... and back to base when it stops", m and m.group(2) == "ok", m and m.groups())
    check_revalidate(res, which, serial)
    m = re.search(r"===RESTORED vda: ([^(]*)\(before: ([^)]*)\)===", serial)
    res.check(f"{which}: SIGTERM restores what the kernel had",
              m and m.group(1).strip() == m.group(2).strip(), m and m.groups())


def check_revalidate(res, which, serial):
    """A SCSI rescan resets read_ahead_kb to the kernel's default (6.12, 7.3:
    blk_apply_bdi_limits() from sd_revalidate_disk(); 6.1's sd kept it):
    blkpolicyd sets it again, no override, and puts back the found value at
    SIGTERM."""
    m = re.search(r"===REVALIDATE (\S+) set=(\w+) before=(\d+) after_rescan=(\d+) back=(\w+) now=(\d+) "
                  r"overridden=(\d+) limits=(\S+)===", serial)
    if m:
        print(f"# {which}: {m.group(1)} (io_opt/max_sectors_kb/rotational {m.group(8)}): read_ahead_kb "
              f"{m.group(3)} found, 64 set, {m.group(4)} after the rescan, {m.group(6)} after the sweep", flush=True)
    res.check(f"{which}: the virtio-scsi disk's read_ahead_kb is set to 64 by the daemon", m and m.group(2) == "ok",
              m and m.groups())
    if which != "6.1":
        res.check(f"{which}: a SCSI rescan puts read_ahead_kb back to the kernel's default (here: the found value)",
                  m and m.group(4) == m.group(3), m and m.groups())
    else:
        res.check(f"{which}: a SCSI rescan keeps read_ahead_kb (6.1's sd sets io_opt without blk_queue_io_opt())",
                  m and m.group(4) == "64", m and m.groups())
    res.check(f"{which}: ... and blkpolicyd sets 64 again, no override",
              m and m.group(5) == "ok" and m.group(6) == "64" and m.group(7) == "0", m and m.groups())
    m = re.search(r"===REVALIDATE-RESTORED (\S+) (\d+) \(before: (\d+)\)===", serial)
    res.check(f"{which}: SIGTERM puts the found read_ahead_kb back after the rescan",
              m and m.group(2) == m.group(3), m and m.groups())


def check_dd(res, serial):
    """The patched kernel: dispatch_direct detected, applied, re-applied, flipped and restored."""
    w = "7.3+dd"
    report = report_of(serial)
    res.check(f"{w}: booted and reported", report is not None, serial[-3000:])
    if not report:
        return
    res.check(f"{w}: the report says dispatch_direct: yes", report["capabilities"]["dispatch_direct"] == "yes",
              report["capabilities"])
    m = re.search(r"===DD-STATE===\r?\n(.*?)===DD-STATE-END===", serial, re.S)
    live = {f[0]: f[1:] for f in (line.split() for line in (m.group(1) if m else "").splitlines()) if len(f) == 3}
    devs = {d["name"]: d for d in report["devices"]}
    by_model = {d["facts"]["model"]: d for d in report["devices"] if d["facts"]["model"]}
    m = re.search(r"===UBLK-START (\w+)===", serial)
    ublk = devs.get(m.group(1)) if m else None

    def dd_setting(d):
        return d and d["settings"].get("iosched/dispatch_direct", {})

    for label, d in (("virtio-blk with 1 queue", devs.get("vda")), ("null_blk, one queue", devs.get("nullb0")),
                     ("scsi_debug", by_model.get("scsi_debug"))):
        ok = (d is not None and "single-queue" in d["classes"] and dd_setting(d).get("target") == "1"
              and dd_setting(d).get("result") in ("applied", "unchanged") and live.get(d["name"]) == ["mq-deadline", "1"])
        res.check(f"{w}: {label} ends on mq-deadline with dispatch_direct=1 (shipped policy)", ok,
                  d and (d["name"], d["settings"], live.get(d["name"])))
    # 10-ublk.policy asks for none, whatever the kernel has
    res.check(f"{w}: a ublk disk runs what 10-ublk.policy says: none, dispatch_direct untouched",
              ublk is not None and live.get(ublk["name"]) == ["none", "-"] and not dd_setting(ublk),
              ublk and (ublk["settings"], live.get(ublk["name"])))
    rot = by_model.get("QEMU HARDDISK")
    res.check(f"{w}: a rotational disk gets mq-deadline, and its dispatch_direct is left to the kernel",
              rot is not None and "rotational" in rot["classes"] and live.get(rot["name"], [""])[0] == "mq-deadline"
              and not dd_setting(rot), rot and (rot["settings"], live.get(rot["name"])))
    m = re.search(r"===DD-ADMIN (.*)===", serial)
    res.check(f"{w}: an admin can set dispatch_direct (0 on nullb7) and none (nullb8)",
              m and m.group(1).split() == ["nullb7", "mq-deadline", "0", "/", "nullb8", "none", "-"], m and m.group(1))
    m = re.search(r"===DD-DAEMON nullb6=(\w+) nullb7=(\w+) nullb8=(\w+)===", serial)
    res.check(f"{w}: the daemon sets new null_blks: dispatch_direct=0 by a policy, =1 by the shipped one, "
              "also from none", m and m.groups() == ("ok", "ok", "ok"), m and m.groups())
    m = re.search(r"===DD-RESUME vda overridden=(\w+) away=\[([^]]*)\] back=(\w+) ([^=]*)===", serial)
    res.check(f"{w}: vda switched to none by an admin is left alone (overridden) ...",
              m and m.group(1) == "yes" and m.group(2) == "vda none -", m and m.groups())
    res.check(f"{w}: ... and after resume is back on mq-deadline with dispatch_direct=1",
              m and m.group(3) == "ok", m and m.groups())
    m = re.search(r"===DD-RESUME nullb6 overridden=(\w+) reset=\[([^]]*)\] back=(\w+) ([^=]*)===", serial)
    res.check(f"{w}: switching away and back resets dispatch_direct to 1 (the kernel's doing)",
              m and m.group(2) == "nullb6 mq-deadline 1", m and m.groups())
    res.check(f"{w}: ... blkpolicyd notices, and resume writes dispatch_direct=0 again",
              m and m.group(1) == "yes" and m.group(3) == "ok", m and m.groups())
    m = re.search(r"===DD-FLIP nullb5 busy=(\w+) base=(\w+) seen=\[([^]]*)\] now=([^=]*)===", serial)
    seen = m.group(3).split("/") if m else []
    seen = sorted({x.strip() for x in seen if x.strip()})
    res.check(f"{w}: a dispatch_direct flip: 0 under a write flood, 1 after",
              m and m.group(1) == "ok" and m.group(2) == "ok", m and m.groups())
    res.check(f"{w}: ... with no scheduler switch: only mq-deadline was ever seen",
              m and seen == ["mq-deadline 0", "mq-deadline 1"], seen)
    m = re.search(r"===DD-FLIP nullb9 busy=(\w+) base=(\w+) seen=\[([^]]*)\] now=([^=]*)===", serial)
    res.check(f"{w}: a flip through none comes back to mq-deadline with dispatch_direct=0 written again",
              m and m.group(1) == "ok" and m.group(2) == "ok", m and m.groups())
    for name in ("nullb5", "nullb9"):
        m = re.search(r"===DD-EXPLAIN " + name + r"===\r?\n(.*?)===DD-EXPLAIN-END===", serial, re.S)
        try:
            hist = json.loads(m.group(1).replace("\r", ""))["result"]["dynamic"]["history"] if m else None
        except (ValueError, KeyError, TypeError):
            hist = None
        print(f"# {w}: {name} flips: " + ", ".join(f"{h['to']} {h['cost_ms']:.2f} ms" for h in hist or []))
    m = re.search(r"===DD-RESTORED vda=\[([^]]*)\] before=\[([^]]*)\] nullb7=\[([^]]*)\] nullb8=\[([^]]*)\]===",
                  serial)
    # vda: --once found it as the policy wants it and wrote nothing; the
    # first value blkpolicyd replaced there is the admin's none (above)
    res.check(f"{w}: SIGTERM puts back what blkpolicyd found before its first write: nullb7 mq-deadline with "
              "dispatch_direct=0, nullb8 none, vda the admin's none", m and m.group(1) == "vda none -"
              and m.group(2) == "vda mq-deadline 1" and m.group(3) == "nullb7 mq-deadline 0"
              and m.group(4) == "nullb8 none -", m and m.groups())


KERNELS = ["6.1", "6.12", "7.3", "7.3+dd"]


def run_stock(res, which, blkpolicyd, work):
    if which == "7.3":
        k = dd_kernel.stock_73()
        if k is None:
            print("# 7.3: trixie-backports has no linux-image-7.3.*; no third stock kernel")
            return
        kdir, kver = k
    else:
        kdir, kver = fetch_kernel(which)
    if which != "6.1":
        ublk_null = built_beside(blkpolicyd, "tests", "vm", "ublk-null")
        res.check(f"{which}: tests/vm/ublk-null is built (it needs liburing-dev)", os.path.exists(ublk_null),
                  ublk_null)
    initrd = os.path.join(work, "initrd.gz")
    build_initramfs(kdir, kver, blkpolicyd, initrd, ["ublk_drv"] if which != "6.1" else [])
    serial = boot(kdir, kver, initrd, work)
    report = report_of(serial)
    res.check(f"{which}: booted and reported", report is not None, serial[-3000:])
    if report:
        check_kernel(res, which, report, serial)
        check_daemon(res, which, serial)


def run_dd(res, blkpolicyd, work):
    kdir, kver = dd_kernel.patched_73(log=lambda line: print(f"# 7.3+dd: {line}", flush=True))
    initrd = os.path.join(work, "initrd.gz")
    build_initramfs(kdir, kver, blkpolicyd, initrd, [], init=DD_INIT, modules=[])
    check_dd(res, boot_dd(kdir, kver, initrd, work))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="all", choices=KERNELS + ["all"])
    ap.add_argument("--blkpolicyd", default=os.path.join(TOP, "build", "daemon", "blkpolicyd"))
    args = ap.parse_args()
    res = Results()
    for which in (KERNELS if args.kernel == "all" else [args.kernel]):
        work = tempfile.mkdtemp(prefix="blkpolicyd-vm-")
        t0 = time.monotonic()
        try:
            if which == "7.3+dd":
                run_dd(res, args.blkpolicyd, work)
            else:
                run_stock(res, which, args.blkpolicyd, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            print(f"# {which}: {time.monotonic() - t0:.0f} s", flush=True)
    res.finish("vm: ")


if __name__ == "__main__":
    main()
