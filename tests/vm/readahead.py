#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Shipped set 2's virtio read-ahead on real kernels: Debian's 6.12 and 7.3
under QEMU (TCG), two virtio-blk disks (1 and 2 queues), the shipped
policies only.

  - what the kernel gives them: 128 KiB on 6.12, 8192 on 7.3 (6.17's
    rule for rotational disks, docs/benchmarks.md);
  - `blkpolicyd --once`: on 7.3, 22-virtio-read-ahead.policy sets 128 on
    both (written, read back); on 6.12 it does not match and read_ahead_kb
    is not in any plan;
  - the daemon, started over --once's records, keeps 128, and SIGTERM puts
    back the kernel's own value (8192 on 7.3), not its own 128.

  sudo python3 tests/vm/readahead.py [--kernel 6.12|7.3|all] [--blkpolicyd PATH]

Prints "ok"/"not ok" lines and "readahead: N passed, N failed"; the exit
status says the same.
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dd_kernel  # noqa: E402
import vmtest  # noqa: E402
# vmtest put tests/ on the path: the shared harness, as vmtest's own
from blkptest.results import Results  # noqa: E402

MODULES = ["virtio_pci", "virtio_blk"]
POLICY = "22-virtio-read-ahead.policy"
# what each kernel gives a virtio-blk disk (rotational=1, no optimal I/O size)
KERNEL_GIVES = {"6.12": "128", "7.3": "8192"}

INIT = vmtest.MOUNTS + r"""for m in $(cat /modules.list); do insmod /lib/modules/$m; done
for i in $(seq 100); do [ -e /sys/block/vdb/queue/read_ahead_kb ] && break; sleep 0.05; done
ra() { echo "vda=$(cat /sys/block/vda/queue/read_ahead_kb) vdb=$(cat /sys/block/vdb/queue/read_ahead_kb)"; }
echo "===GIVES $(ra)==="
""" + vmtest.ONCE_REPORT + r"""echo "===AFTER-ONCE $(ra)==="
mkdir -p /etc/blkpolicyd/none
""" + vmtest.start_daemon("none") + r"""# its first pass over the disks done: it has taken them over from the records
first=no
for i in $(seq 200); do
        /bin/blkpolicyctl --socket /run/blkpolicyd.sock --json status | tr -d ' \n\t' | grep -q '"first_pass_done":true' &&
                first=yes && break
        sleep 0.05
done
echo "===UNDER-DAEMON $(ra) first_pass=$first==="
kill $pid
wait $pid
echo "===RESTORED $(ra)==="
poweroff -f
"""


def values(serial, tag):
    m = re.search(rf"==={tag} vda=(\d+) vdb=(\d+)", serial)
    return m and {"vda": m.group(1), "vdb": m.group(2)}


def kernel(which):
    """(kdir, kver) of Debian's 6.12 or stock 7.3 (bench/readahead-vm.py too)."""
    if which == "7.3":
        k = dd_kernel.stock_73()
        if k is None:
            sys.exit("trixie-backports has no linux-image-7.3.*")
        return k
    return vmtest.fetch_kernel(which)


def boot(which, blkpolicyd):
    kdir, kver = kernel(which)
    work = tempfile.mkdtemp(prefix="blkpolicyd-ra-test-")
    try:
        initrd = os.path.join(work, "initrd.gz")
        vmtest.build_initramfs(kdir, kver, blkpolicyd, initrd, [], init=INIT, modules=MODULES)
        disks = vmtest.scratch_disks(work, ["vda", "vdb"])
        devices = ["-drive", f"if=none,id=d0,file={disks[0]},format=raw", "-device", "virtio-blk-pci,drive=d0,num-queues=1",
                   "-drive", f"if=none,id=d1,file={disks[1]},format=raw", "-device", "virtio-blk-pci,drive=d1,num-queues=2"]
        return vmtest.qemu(kdir, kver, initrd, "console=ttyS0 panic=-1 loglevel=3", devices, timeout=600)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check(res, which, serial):
    gives = KERNEL_GIVES[which]
    report = vmtest.report_of(serial)
    res.check(f"{which}: booted and reported", report is not None, serial[-3000:])
    if not report:
        return
    given = values(serial, "GIVES")
    res.check(f"{which}: the kernel gives both virtio disks {gives} KiB", given == {"vda": gives, "vdb": gives},
              given)
    devs = {d["name"]: d for d in report["devices"]}
    for name in ("vda", "vdb"):
        d = devs.get(name, {})
        item = d.get("settings", {}).get("read_ahead_kb")
        if which == "7.3":
            res.check(f"{which}: --once sets {name}'s read_ahead_kb from {gives} to 128, by {POLICY}",
                      POLICY in d.get("matched", []) and item and item["source"] == POLICY
                      and item["target"] == "128" and item["result"] == "applied", (d.get("matched"), item))
        else:
            res.check(f"{which}: {POLICY} does not match {name} before 6.17, read_ahead_kb in no plan",
                      d and POLICY not in d["matched"] and item is None, d and (d["matched"], d["settings"]))
    want = "128" if which == "7.3" else gives
    after = values(serial, "AFTER-ONCE")
    res.check(f"{which}: sysfs reads {want} on both after --once", after == {"vda": want, "vdb": want}, after)
    under = values(serial, "UNDER-DAEMON")
    res.check(f"{which}: the daemon, over --once's records, keeps {want}",
              under == {"vda": want, "vdb": want} and "first_pass=yes" in serial, under)
    restored = values(serial, "RESTORED")
    res.check(f"{which}: SIGTERM puts back the kernel's {gives}, not blkpolicyd's own value",
              restored == {"vda": gives, "vdb": gives}, restored)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="all", choices=["6.12", "7.3", "all"])
    ap.add_argument("--blkpolicyd", default=os.path.join(vmtest.TOP, "build", "daemon", "blkpolicyd"))
    args = ap.parse_args()
    res = Results()
    for which in (["6.12", "7.3"] if args.kernel == "all" else [args.kernel]):
        check(res, which, boot(which, args.blkpolicyd))
    res.finish("readahead: ")


if __name__ == "__main__":
    main()
