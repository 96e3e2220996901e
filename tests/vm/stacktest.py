#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyd on real storage stacks (issue #31): Debian's 6.1, 6.12 and 7.3
under QEMU (TCG), one boot each.

In the guest, from Debian's own tools (dmsetup, lvm2, mdadm, cryptsetup,
fetched with `apt-get download` and unpacked with `dpkg-deb -x`, never
installed on the host) and the kernel package's modules:

  vda -> linear0 (dm-linear)
  vdb -> vg0-secret (LVM) -> secret_crypt (dm-crypt, plain)
  sda + sdb -> md0 (raid1) -> vg1-root (LVM)
  sdc, sdd (one disk, two paths) -> mpatha (dm-multipath) -> mpatha1 (kpartx-like)
  nvme0c0n1 + nvme0c1n1 (two controllers, one shared namespace) -> nvme0n1

blkpolicyd runs as a daemon with the shipped policies and
tests/vm/stack-policies, and the host checks, per layer, the settings it
ends with, its records and what `explain` says of its stack; then an NVMe
controller's PCI remove and rescan (its hidden path forgotten and found
again, with no uevent of its own); then a rename,
a table reload, a tear-down and a re-creation (nothing stale applied or
recorded); then SIGTERM (every layer back to what it had before the daemon
started). The shipped and test policies' choice per layer is compared with
tests/golden/stacks-vm-<kernel>.json (--regen-golden writes them).

  sudo python3 tests/vm/stacktest.py [--kernel 6.1|6.12|7.3|all] [--blkpolicyd PATH] [--regen-golden]

Prints TAP-like lines and "stacks: N passed, N failed".
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "tests"))
sys.path.insert(0, HERE)
from blkptest.require import script_prerequisites  # noqa: E402
from blkptest.results import Results  # noqa: E402
import dd_kernel  # noqa: E402
import vmtest  # noqa: E402

KERNELS = ["6.1", "6.12", "7.3"]
GOLDEN = os.path.join(TOP, "tests", "golden", "stacks-vm-{}.json")

# Debian's packages of the guest's tools; the host has the other libraries
# they link (libc, libudev, libblkid, libaio, libedit, libcrypto, ...)
TOOL_PACKAGES = ["dmsetup", "libdevmapper1.02.1", "lvm2", "libdevmapper-event1.02.1", "mdadm",
                 "cryptsetup-bin", "libcryptsetup12", "libpopt0"]
TOOLS = ["sbin/dmsetup", "sbin/lvm", "sbin/mdadm", "sbin/cryptsetup"]

# the modules, deps first (vmtest.module_order): ecb and xts for dm-crypt's
# aes-xts-plain64 (the kernel's request_module has no modprobe to call here),
# bfq for the multipath map
MODULES = ["virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "nvme", "bfq", "dm_mod", "ecb", "xts", "dm_crypt",
           "dm_multipath", "dm_round_robin", "raid1"]

MPATH_WWN = "0x5000c50015ea71ac"

INIT = vmtest.MOUNTS + r"""for m in $(cat /modules.list); do insmod /lib/modules/$m; done
mkdir -p /run/lock/lvm /run/cryptsetup /run/mdadm /etc/lvm /tmp
: > /etc/lvm/lvm.conf
# no udevd: libdevmapper (dmsetup, lvm, cryptsetup) makes its own nodes, waits for no cookie
export DM_DISABLE_UDEV=1
LVMCONF='devices { use_devicesfile=0 obtain_device_list_from_udev=0 } activation { udev_sync=0 udev_rules=0 monitoring=0 } global { use_lvmpolld=0 } backup { backup=0 archive=0 }'
lvm() { /bin/lvm "$@" --config "$LVMCONF" >/dev/null 2>/run/lvm.err || { echo "===FAIL lvm $*: $(cat /run/lvm.err)==="; }; }
run() { "$@" >/dev/null 2>/run/cmd.err || echo "===FAIL $*: $(cat /run/cmd.err)==="; }
ctl() { /bin/blkpolicyctl --socket /run/blkpolicyd.sock "$@"; }
# name, scheduler (- where the file lists none), read_ahead_kb
st() { s=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/block/$1/queue/scheduler 2>/dev/null); echo "$1 ${s:--} $(cat /sys/block/$1/queue/read_ahead_kb)"; }
snap() { echo "===SNAP $1==="; for d in /sys/block/*; do st ${d##*/}; done; echo "===SNAP-END==="; }
dmdev() { for d in /sys/block/dm-*; do [ "$(cat $d/dm/name)" = "$1" ] && echo ${d##*/}; done; }
records() { echo "===RECORDS $1==="; for f in /run/blkpolicyd/devices/*; do [ -f "$f" ] && echo "--- ${f##*/}" && cat "$f"; done; echo "===RECORDS-END==="; }
# until CMD succeeds, 10 s at most; prints ok or fail
until_ok() { for i in $(seq 500); do "$@" >/dev/null 2>&1 && echo ok && return; sleep 0.02; done; echo fail; }
known() { ctl devices | grep -qw "$1"; }
gone() { ! ctl devices | grep -qw "$1"; }
# the JSON comes indented with tabs: compare it without white space
first_pass() { ctl --json status | tr -d ' \t\n' | grep -q '"first_pass_done":true'; }
dm_named() { ctl --json device $1 | tr -d ' \t\n' | grep -q "\"name\":\"$2\""; }
ra_is() { [ "$(cat /sys/block/$1/queue/read_ahead_kb)" = "$2" ]; }

for i in $(seq 100); do [ $(ls -d /sys/block/sd* 2>/dev/null | wc -l) -ge 4 ] && [ -e /sys/block/nvme0n1 ] && break; sleep 0.1; done
by_model() { for d in /sys/block/sd*; do grep -q "$1" $d/device/model && echo ${d##*/}; done; }
set -- $(by_model MDDISK); m1=$1; m2=$2
set -- $(by_model MPATHDISK); p1=$1; p2=$2
echo "===DISKS md=$m1,$m2 paths=$p1,$p2 wwid=$(cat /sys/block/$p1/device/wwid),$(cat /sys/block/$p2/device/wwid)==="

# the stacks, bottom-up
run dmsetup create linear0 --table "0 $(cat /sys/block/vda/size) linear $(cat /sys/block/vda/dev) 0"
lvm pvcreate -y /dev/vdb; lvm vgcreate vg0 /dev/vdb; lvm lvcreate -y -Zn -Wn -n secret -L 16M vg0
dd if=/dev/urandom of=/run/key bs=32 count=1 2>/dev/null
run cryptsetup open --type plain --cipher aes-xts-plain64 --key-size 256 --key-file /run/key /dev/mapper/vg0-secret secret_crypt
run mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --metadata=1.2 --assume-clean /dev/$m1 /dev/$m2
lvm pvcreate -y /dev/md0; lvm vgcreate vg1 /dev/md0; lvm lvcreate -y -Zn -Wn -n root -L 16M vg1
# what multipath-tools would make: the map, uuid mpath-<wwid as scsi_id says it>
wwid=3$(sed 's/^naa\.//' /sys/block/$p1/device/wwid)
run dmsetup create mpatha --uuid mpath-$wwid --table "0 $(cat /sys/block/$p1/size) multipath 0 0 1 1 round-robin 0 2 1 $(cat /sys/block/$p1/dev) 1000 $(cat /sys/block/$p2/dev) 1000"
mp=$(dmdev mpatha)
run dmsetup create mpatha1 --uuid part1-mpath-$wwid --table "0 32768 linear $(cat /sys/block/$mp/dev) 2048"
echo "===LAYOUT==="
for d in /sys/block/*; do
        echo "${d##*/} holders=$(ls $d/holders | tr '\n' ,) slaves=$(ls $d/slaves | tr '\n' ,) dev=$(cat $d/dev 2>/dev/null) mq=$([ -d $d/mq ] && echo yes || echo no) hidden=$(cat $d/hidden 2>/dev/null) dm=$(cat $d/dm/name 2>/dev/null)/$(cat $d/dm/uuid 2>/dev/null) md=$(cat $d/md/level 2>/dev/null) multipath=$(ls $d/multipath 2>/dev/null | tr '\n' ,) parent=$(basename $(readlink -f $d/device) 2>/dev/null)"
done
echo "===LAYOUT-END==="
echo "===T built $(cut -d' ' -f1 /proc/uptime)==="
snap BEFORE

""" + vmtest.start_daemon("stack-policies").replace("2>/dev/null &", "2>/run/blkpolicyd.err &") + r"""echo "===FIRST-PASS $(until_ok first_pass)==="
snap SETTLED
records SETTLED
echo "===T settled $(cut -d' ' -f1 /proc/uptime)==="
ls -la /run/blkpolicyd/devices
echo "===DEVICES==="; ctl --json devices; echo "===DEVICES-END==="
for d in /sys/block/*; do
        n=${d##*/}; echo "===EXPLAIN $n==="; ctl explain $n | grep '^  stack:'; echo "===EXPLAIN-END==="
done
echo "===T explained $(cut -d' ' -f1 /proc/uptime)==="

# an NVMe controller goes and comes back (PCI remove, rescan): its path goes
# and comes with it; the kernel sends only the controller's nvme events
one_path() { p=$(ls -d /sys/class/nvme/$1/nvme*c*n* 2>/dev/null | head -1); echo ${p##*/}; }
pkeep=$(one_path nvme0); pgone=$(one_path nvme1)
echo 1 > $(readlink -f /sys/class/nvme/nvme1/device)/remove
echo "===PATH-GONE $pgone forgotten=$(until_ok gone $pgone)==="
echo 1 > /sys/bus/pci/rescan
new_path() { for p in /sys/block/nvme*c*n*; do [ "${p##*/}" != "$pkeep" ] && echo ${p##*/}; done; }
has_new_path() { [ -n "$(new_path)" ]; }
until_ok has_new_path >/dev/null; pnew=$(new_path)
path_set() { known $1 && [ "$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/block/$1/queue/scheduler)" = mq-deadline ]; }
echo "===PATH-BACK ${pnew:-none} set=$(until_ok path_set $pnew) $(st $pnew) diskseq=$(cat /sys/block/$pnew/diskseq)==="

# a map renamed in /dev/mapper keeps its dm-N and what was set on it
lin=$(dmdev linear0)
run dmsetup rename linear0 linear1
echo "===RENAME $lin named=$(until_ok dm_named $lin linear1) $(st $lin)==="
records RENAMED
# a table reload (change event; 6.10 on, the queue limits' commit resets read-ahead)
run dmsetup reload linear1 --table "0 $(cat /sys/block/vda/size) linear $(cat /sys/block/vda/dev) 0"
run dmsetup resume linear1
# (polled up to 10 s, for the value and the pass that wrote it: the daemon
# hears the change event at once, TCG may be slow)
reload_done() { ra_is $1 2048 && ctl --json device $1 | tr -d ' \t\n' | grep -Eq '"read_ahead_kb":\{[^}]*"result":"(applied|unchanged)"'; }
kept=fail; for i in $(seq 500); do reload_done $lin && kept=ok && break; sleep 0.02; done
echo "===RELOAD $lin kept=$kept $(st $lin) $(ctl --json device $lin | tr -d ' \t\n' | sed 's/.*"read_ahead_kb":{\([^}]*\)}.*/\1/')==="

# tear-down: the map goes; an error map without slaves takes its dm-N; an admin
# sets its read-ahead; then linear0 again, elsewhere
run dmsetup remove linear1
g=$(until_ok gone $lin)
run dmsetup create err0 --table "0 2048 error"
z=$(dmdev err0)
echo 3000 > /sys/block/$z/queue/read_ahead_kb
echo "===TEARDOWN $lin gone=$g err0=$z known=$(until_ok dm_named $z err0) $(st $z)==="
run dmsetup create linear0 --table "0 $(cat /sys/block/vda/size) linear $(cat /sys/block/vda/dev) 0"
l2=$(dmdev linear0)
echo "===RECREATE linear0=$l2 set=$(until_ok ra_is $l2 2048) $(st $l2) err0: $(st $z)==="
records RECREATED
echo "===T events $(cut -d' ' -f1 /proc/uptime)==="
echo "===DEVICES-AFTER==="; ctl --json devices; echo "===DEVICES-AFTER-END==="

kill -TERM $pid
wait $pid
echo "===EXIT $?==="
echo "===DAEMON-LOG==="; grep -v '^<7>' /run/blkpolicyd.err | tail -40; echo "===DAEMON-LOG-END==="
snap RESTORED
echo "===T restored $(cut -d' ' -f1 /proc/uptime)==="
records RESTORED
poweroff -f
"""


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def candidate(pkg):
    m = re.search(r"Candidate: (\S+)", sh("apt-cache", "policy", pkg))
    if not m or m.group(1) == "(none)":
        raise SystemExit(f"stacktest: apt has no candidate for {pkg}")
    return m.group(1)


def fetch_tools(log):
    """Debian's dmsetup, lvm2, mdadm and cryptsetup, unpacked (never
    installed) in $CACHE/stack-tools-<hash of the package versions>/root."""
    versions = [f"{p}={candidate(p)}" for p in TOOL_PACKAGES]
    key = hashlib.sha256(" ".join(versions).encode()).hexdigest()[:12]
    tdir = os.path.join(vmtest.CACHE, f"stack-tools-{key}")
    if os.path.isdir(tdir):
        return os.path.join(tdir, "root")
    log(f"cache miss: {tdir}: apt-get download {' '.join(versions)}")
    tmp = tdir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "debs"))
    subprocess.run(["apt-get", "download", "-qq", *versions], cwd=os.path.join(tmp, "debs"), check=True,
                   capture_output=True)
    for deb in sorted(os.listdir(os.path.join(tmp, "debs"))):
        sh("dpkg-deb", "-x", os.path.join(tmp, "debs", deb), os.path.join(tmp, "root"))
    os.rename(tmp, tdir)
    return os.path.join(tdir, "root")


def tools_archive(tools_root, out):
    """A second initramfs archive (the kernel unpacks them one after the
    other): the tools in /bin, their libraries where the loader looks, and
    tests/vm/stack-policies."""
    root = tempfile.mkdtemp(prefix="blkpolicyd-stacktools-")
    libdirs = [os.path.join(tools_root, d) for d in ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu")]
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(libdirs))
    try:
        os.makedirs(os.path.join(root, "bin"))
        for tool in TOOLS:
            path = os.path.join(tools_root, tool)
            shutil.copy2(path, os.path.join(root, "bin"))
            for line in subprocess.run(["ldd", path], env=env, check=True, capture_output=True,
                                       text=True).stdout.splitlines():
                if "not found" in line:
                    raise SystemExit(f"stacktest: {tool}: {line.strip()} (a library neither the host nor "
                                     f"{' '.join(TOOL_PACKAGES)} has)")
                m = re.search(r"=> (/\S+)", line)
                if not m:
                    continue
                lib = os.path.realpath(m.group(1))
                inside = lib.startswith(tools_root + "/")
                dest = os.path.join(root, os.path.relpath(m.group(1), tools_root) if inside else m.group(1)[1:])
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                shutil.copy2(lib, dest)
        shutil.copytree(os.path.join(HERE, "stack-policies"), os.path.join(root, "etc/blkpolicyd/stack-policies"))
        subprocess.run(f"cd {root} && find . | cpio -o -H newc --quiet | gzip -1 > {out}", shell=True, check=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def boot(kdir, kver, initrd, work):
    d = vmtest.scratch_disks(work, ["vda", "vdb", "md0", "md1", "mpath", "ns"])
    devices = [
        "-drive", f"if=none,id=v0,file={d[0]},format=raw", "-device", "virtio-blk-pci,drive=v0,num-queues=1",
        "-drive", f"if=none,id=v1,file={d[1]},format=raw", "-device", "virtio-blk-pci,drive=v1,num-queues=1",
        "-device", "virtio-scsi-pci,id=scsi,num_queues=1",
        # md members: rotational (no rotation rate)
        "-drive", f"if=none,id=s0,file={d[2]},format=raw", "-device", "scsi-hd,drive=s0,product=MDDISK,serial=md0",
        "-drive", f"if=none,id=s1,file={d[3]},format=raw", "-device", "scsi-hd,drive=s1,product=MDDISK,serial=md1",
        # one disk, two paths: the same image, serial and WWN, non-rotational
        *[a for i in (2, 3) for a in (
            "-drive", f"if=none,id=s{i},file={d[4]},format=raw,file.locking=off",
            "-device", f"scsi-hd,drive=s{i},product=MPATHDISK,serial=mpath0,wwn={MPATH_WWN},rotation_rate=1,"
            "share-rw=on")],
        # NVMe native multipath: one subsystem, two controllers, one shared namespace
        "-device", "nvme-subsys,id=subsys0,nqn=blkpolicyd-stacks",
        "-device", "nvme,id=nvme0,serial=stacks0,subsys=subsys0",
        "-device", "nvme,id=nvme1,serial=stacks0,subsys=subsys0",
        "-drive", f"if=none,id=n0,file={d[5]},format=raw", "-device", "nvme-ns,drive=n0,bus=nvme0,nsid=1,shared=on"]
    return vmtest.qemu(kdir, kver, initrd, "console=ttyS0 panic=-1 loglevel=3", devices, timeout=600)


def section(serial, name):
    m = re.search(r"===" + name + r"===\r?\n(.*?)===" + name + r"-END===", serial, re.S)
    return m.group(1).replace("\r", "") if m else None


def snap(serial, tag):
    text = re.search(r"===SNAP " + tag + r"===\r?\n(.*?)===SNAP-END===", serial, re.S)
    return {f[0]: (f[1], f[2]) for f in (line.split() for line in text.group(1).splitlines()) if len(f) == 3} \
        if text else {}


def records(serial, tag):
    """{"M:m": text} of the state dir at that point."""
    m = re.search(r"===RECORDS " + tag + r"===\r?\n(.*?)===RECORDS-END===", serial, re.S)
    out = {}
    for part in re.split(r"^--- ", m.group(1).replace("\r", ""), flags=re.M)[1:] if m else []:
        name, _, body = part.partition("\n")
        out[name.strip()] = body
    return out


def record_of(text):
    """A record (daemon/io/state-file.c, v2): its device line and, per
    attribute, the value found before the first write."""
    out = {}
    for line in (text or "").splitlines():
        f = line.split()
        if len(f) >= 4 and f[0] == "device":
            out["device"] = (f[1], f[2], dict(kv.split("=", 1) for kv in f[3:] if "=" in kv).get("diskseq"))
        elif len(f) >= 3 and not line.startswith("#"):
            out[f[0]] = f[1]
    return out


def roles(devs):
    """Each layer's role -> its device objects (by what the tools made, not
    by dm-N: the numbers are the kernel's)."""
    out = {}
    for d in devs.values():
        t, f = d["topology"], d["facts"]
        dm = (t.get("dm") or {}).get("name")
        if dm:
            role = f"dm {dm}"
        elif t.get("md"):
            role = d["name"]
        elif t.get("nvme_multipath") in ("head", "path"):
            role = f"nvme {t['nvme_multipath']}"
        elif f.get("model") in ("MDDISK", "MPATHDISK"):
            role = {"MDDISK": "md member", "MPATHDISK": "mpath path"}[f["model"]]
        elif d["name"] in ("vda", "vdb"):
            role = d["name"]
        else:
            continue
        out.setdefault(role, []).append(d)
    return out


def choice(d):
    """What the policies choose for a layer: its classes, stack, the files
    that match and each setting's target and source."""
    return {"classes": d["classes"], "stack": d["topology"]["stack"], "managed": d["managed"],
            "matched": d["matched"],
            "settings": {a: {"target": s.get("target"), "source": s.get("source")}
                         for a, s in sorted(d["settings"].items()) if s.get("result") != "unsupported"}}


def golden_table(devs):
    table = {}
    for role, ds in sorted(roles(devs).items()):
        table[role] = choice(ds[0])
        if any(choice(x) != table[role] for x in ds[1:]):
            table[role] = [choice(x) for x in ds]     # the two disks of a role differ: show both
    return table


def check(res, which, serial, regen):
    w = which
    dm = re.search(r"===DISKS md=(\w+),(\w+) paths=(\w+),(\w+) wwid=(\S+),(\S+)===", serial)
    res.check(f"{w}: booted; two md disks and two paths, one wwid for both paths",
              dm is not None and dm.group(5) == dm.group(6) and dm.group(5) == "naa." + MPATH_WWN[2:],
              serial[-3000:] if dm is None else dm.groups())
    fails = re.findall(r"===FAIL (.*?)===", serial, re.S)
    res.check(f"{w}: the guest's tools built every stack (dmsetup, lvm, cryptsetup, mdadm)", not fails, fails)
    layout = section(serial, "LAYOUT")
    if layout:
        print(f"# {w}: layout\n# " + "\n# ".join(layout.splitlines()))
    m = re.search(r"===FIRST-PASS (\w+)===", serial)
    res.check(f"{w}: the daemon's first pass is done (status first_pass_done)", m and m.group(1) == "ok",
              m and m.group(0))
    text = section(serial, "DEVICES")
    try:
        devs = {d["name"]: d for d in json.loads(text)["result"]} if text else {}
    except ValueError:
        devs = {}
    res.check(f"{w}: blkpolicyctl --json devices answered", devs, text and text[:2000])
    if not devs:
        return
    before, settled = snap(serial, "BEFORE"), snap(serial, "SETTLED")
    by_role = roles(devs)

    def one(role):
        ds = by_role.get(role) or []
        return ds[0] if ds else None

    def layer(role, label, classes, stack, sched=None, ra=None, extra=True):
        """Every device of the role: classified so, and live as it must end."""
        ds = by_role.get(role) or []
        ok = bool(ds) and extra
        for d in ds:
            live = settled.get(d["name"], ("?", "?"))
            ok = ok and set(classes) <= set(d["classes"]) and d["topology"]["stack"] == stack \
                and (sched is None or live[0] == sched) and (ra is None or live[1] == str(ra))
        want = ", ".join(x for x in (sched and f"runs {sched}", ra and f"read_ahead_kb {ra}") if x)
        res.check(f"{w}: {label}: {'+'.join(classes)}, stack={stack}" + (f", {want}" if want else ""), ok,
                  [(d["name"], d["classes"], d["topology"], settled.get(d["name"]), d["settings"]) for d in ds])

    layer("vda", "vda below dm-linear", ["virtio", "single-queue"], "member", sched="none")
    layer("dm linear0", "dm-linear on vda", ["bio-based"], "top", ra=2048)
    layer("vdb", "vdb, the PV of vg0", ["virtio", "single-queue"], "member", sched="none")
    lv0 = one("dm vg0-secret")
    layer("dm vg0-secret", "the LV below dm-crypt, untouched", ["bio-based"], "member",
          ra=before.get(lv0["name"], ("", ""))[1] if lv0 else None,
          extra=lv0 is not None and lv0["topology"]["dm"]["uuid_prefix"] == "LVM-" and not lv0["managed"])
    cr = one("dm secret_crypt")
    layer("dm secret_crypt", "dm-crypt on the LV (91-stack-crypt over 90-stack-top)", ["bio-based"], "top", ra=4096,
          extra=cr is not None and cr["topology"]["dm"]["uuid_prefix"] == "CRYPT-"
          and cr["settings"]["read_ahead_kb"]["source"].endswith("91-stack-crypt.policy"))
    layer("md member", "md members", ["scsi", "rotational", "single-queue"], "member", sched="mq-deadline")
    md = one("md0")
    layer("md0", "md raid1, below LVM, untouched", ["bio-based"], "member",
          ra=before.get("md0", ("", ""))[1],
          extra=md is not None and md["topology"]["md"]["level"] == "raid1" and not md["managed"])
    layer("dm vg1-root", "the LV on md0", ["bio-based"], "top", ra=2048)
    mp = one("dm mpatha")
    layer("dm mpatha", "the dm-multipath map: request-based, a scheduler of its own", ["single-queue"], "member",
          sched="bfq", extra=mp is not None and "bio-based" not in mp["classes"]
          and mp["topology"]["dm"]["uuid_prefix"] == "mpath-")
    layer("mpath path", "the multipath map's paths", ["scsi", "single-queue"], "member", sched="none",
          extra=all("rotational" not in d["classes"] for d in by_role.get("mpath path", [])))
    layer("dm mpatha1", "a kpartx-like partition map on the multipath map", ["bio-based"], "top", ra=2048,
          extra=(one("dm mpatha1") or {}).get("topology", {}).get("dm", {}).get("uuid_prefix") == "part")
    head = one("nvme head")
    lay = {f[0]: dict(kv.split("=", 1) for kv in f[1:] if "=" in kv)
           for f in (line.split() for line in (layout or "").splitlines()) if f}
    paths = sorted(n for n, kv in lay.items() if kv.get("hidden") == "1" and n.startswith("nvme"))
    # the head lists its paths in multipath/ from 6.15 on; before, nothing in its own directory names them
    want_paths = paths if lay.get(head["name"] if head else "", {}).get("multipath") else []
    layer("nvme head", "the NVMe multipath head", ["nvme", "bio-based"], "alone", ra=512,
          extra=head is not None and head["topology"]["nvme_multipath"] == "head"
          and head["topology"]["nvme_paths"] == want_paths)
    # a hidden disk has no dev_t (no dev attribute): blkpolicyd knows it by
    # the number /proc/diskstats gives it (daemon/io/sysfs.h)
    res.check(f"{w}: two hidden NVMe paths, with no dev attribute, both among blkpolicyd's devices",
              len(paths) == 2 and all(not lay[p].get("dev") for p in paths) and set(paths) <= set(devs)
              and all(devs[p]["facts"]["hidden"] for p in paths), (paths, [lay[p] for p in paths]))
    layer("nvme path", "the NVMe multipath paths (95-stack-nvme-paths over 50-multipath-path)",
          ["nvme", "multi-queue"], "alone", sched="mq-deadline",
          extra=len(by_role.get("nvme path", [])) == 2 and all(
              d["settings"]["scheduler"]["source"].endswith("95-stack-nvme-paths.policy")
              for d in by_role.get("nvme path", [])))
    # its controller goes and comes back: only the controller's events come
    pg = re.search(r"===PATH-GONE (\S+) forgotten=(\w+)===", serial)
    res.check(f"{w}: a controller removed (PCI remove): its path is forgotten on the controller's event",
              pg and pg.group(2) == "ok" and pg.group(1) in paths, pg and pg.groups())
    pb = re.search(r"===PATH-BACK (\S+) set=(\w+) (\S+) (\S+) (\S+) diskseq=(\d+)===", serial)
    res.check(f"{w}: ... and rescanned: the new path (a new diskseq) is found and runs mq-deadline",
              pb and pb.group(2) == "ok" and pb.group(4) == "mq-deadline", pb and pb.groups())

    # explain's stack line, as the fixture tests expect it
    def explained(dev):
        m = re.search(r"===EXPLAIN " + re.escape(dev) + r"===\r?\n(.*?)===EXPLAIN-END===", serial, re.S)
        return m.group(1).replace("\r", "").strip() if m else None
    n = {role: [d["name"] for d in ds] for role, ds in by_role.items()}
    if all(k in n for k in ("md member", "md0", "dm vg1-root", "dm vg0-secret", "dm secret_crypt", "dm mpatha",
                            "dm mpatha1", "mpath path", "nvme head", "dm linear0")):
        a, b = sorted(n["md member"])
        p1 = sorted(n["mpath path"])[0]
        h = n["nvme head"][0]
        want = {
            "md0": f"stack: {a} + {b} -> [md0 (raid1)] -> {n['dm vg1-root'][0]} (LVM-, vg1-root)",
            n["dm secret_crypt"][0]: f"stack: vdb -> {n['dm vg0-secret'][0]} (LVM-, vg0-secret) -> "
                                     f"[{n['dm secret_crypt'][0]} (CRYPT-, secret_crypt)]",
            p1: f"stack: [{p1}] -> {n['dm mpatha'][0]} (mpath-, mpatha) -> {n['dm mpatha1'][0]} (part, mpatha1)",
            "vda": f"stack: [vda] -> {n['dm linear0'][0]} (no uuid, linear0)",
            # a head in no stack (before 6.15: no paths it can name) has no stack line
            h: f"stack: {' + '.join(want_paths)} -> [{h}]" if want_paths else "",
        }
        for dev, line in want.items():
            got = explained(dev)
            res.check(f"{w}: explain {dev}: {line or 'no stack'}", got == line, got)
    else:
        res.check(f"{w}: every layer is there for explain", False, n)

    # records: one per device blkpolicyd wrote, holding the value found before
    recs = records(serial, "SETTLED")
    for role, attr in (("dm linear0", "read_ahead_kb"), ("dm secret_crypt", "read_ahead_kb"),
                       ("dm vg1-root", "read_ahead_kb"), ("dm mpatha1", "read_ahead_kb"), ("nvme head", "read_ahead_kb"),
                       ("dm mpatha", "scheduler"), ("mpath path", "scheduler"), ("vda", "scheduler"),
                       ("nvme path", "scheduler")):
        for d in by_role.get(role, []):
            rec = record_of(recs.get(d["facts"]["dev"]))
            found = before.get(d["name"], ("?", "?"))[0 if attr == "scheduler" else 1]
            res.check(f"{w}: {role} {d['name']}: its record holds the {attr} found before the first write ({found})",
                      rec.get("device", ("",))[0] == d["name"] and rec.get(attr) == found, (rec, found))
    for role in ("dm vg0-secret", "md0"):
        d = one(role)
        res.check(f"{w}: {role}: no record (nothing written there)", d and d["facts"]["dev"] not in recs,
                  d and recs.get(d["facts"]["dev"]))

    # rename, reload, tear-down, re-creation
    lin = one("dm linear0")
    m = re.search(r"===RENAME (\S+) named=(\w+) (\S+) (\S+) (\S+)===", serial)
    res.check(f"{w}: dmsetup rename linear0 linear1: same dm-N, the daemon knows the new name, read-ahead kept",
              m and m.group(2) == "ok" and m.group(5) == "2048" and lin and m.group(1) == lin["name"],
              m and m.groups())
    rr = records(serial, "RENAMED")
    res.check(f"{w}: ... and its record is the same (no new found value taken)",
              lin and rr.get(lin["facts"]["dev"]) == recs.get(lin["facts"]["dev"]),
              lin and (recs.get(lin["facts"]["dev"]), rr.get(lin["facts"]["dev"])))
    m = re.search(r"===RELOAD (\S+) kept=(\w+) (\S+) (\S+) (\S+) ?(.*?)===", serial)
    # the resume's limits update resets read-ahead to the kernel's default on
    # 6.1 and 7.3 (6.12.26 on keeps a larger one): the change event's pass
    # takes that for the kernel's, not an admin's, and writes 2048 again
    res.check(f"{w}: dmsetup reload + resume of linear1: read_ahead_kb is 2048 again (or kept), blkpolicyd's "
              "setting, not taken for somebody else's",
              m and m.group(2) == "ok" and re.search(r'"result":"(applied|unchanged)"', m.group(6)) is not None,
              m and m.groups())
    m = re.search(r"===TEARDOWN (\S+) gone=(\w+) err0=(\S+) known=(\w+) (\S+) (\S+) (\S+)===", serial)
    res.check(f"{w}: dmsetup remove: the map is forgotten", m and m.group(2) == "ok", m and m.groups())
    after_text = section(serial, "DEVICES-AFTER")
    try:
        after = {d["name"]: d for d in json.loads(after_text)["result"]} if after_text else {}
    except ValueError:
        after = {}
    z = after.get(m.group(3)) if m else None
    reuse = bool(m and lin and m.group(3) == lin["name"])
    print(f"# {w}: err0 took {'the same' if reuse else 'another'} dm-N ({m and m.group(3)})")
    rc = records(serial, "RECREATED")
    res.check(f"{w}: an error map (no slaves, alone) on a dm-N a map held: no policy, no record, the admin's 3000 left",
              m and m.group(4) == "ok" and z is not None and not z["managed"] and z["topology"]["stack"] == "alone"
              and z["facts"]["dev"] not in rc and m.group(7) == "3000", (m and m.groups(), z and z["settings"]))
    m2 = re.search(r"===RECREATE linear0=(\S+) set=(\w+) (\S+) (\S+) (\S+) err0: (\S+) (\S+) (\S+)===", serial)
    l2 = after.get(m2.group(1)) if m2 else None
    res.check(f"{w}: linear0 made again: stack=top, read_ahead_kb 2048", m2 and m2.group(2) == "ok" and l2
              and l2["topology"]["stack"] == "top", m2 and m2.groups())
    rec2 = rc.get(l2["facts"]["dev"], "") if l2 else ""
    r1, r2 = record_of(recs.get(lin["facts"]["dev"]) if lin else ""), record_of(rec2)
    res.check(f"{w}: ... its record is the new map's (its own diskseq, not the first map's) with the value it found",
              l2 and r2.get("device") == (l2["name"], l2["facts"]["dev"], str(l2["facts"]["diskseq"]))
              and r2.get("device") != r1.get("device") and r2.get("read_ahead_kb") == r1.get("read_ahead_kb"),
              (r1, r2))
    res.check(f"{w}: ... and the error map still has the admin's 3000", m2 and m2.group(8) == "3000",
              m2 and m2.groups())

    # SIGTERM: every layer back
    m = re.search(r"===EXIT (\d+)===", serial)
    res.check(f"{w}: SIGTERM: the daemon exits 0", m and m.group(1) == "0", m and m.group(0))
    restored = snap(serial, "RESTORED")
    # the dm-Ns of the removed map, of the error map and of the new linear0;
    # the NVMe path that went and came back (6.1 names it anew)
    moved = {lin and lin["name"], z and z["name"], m2 and m2.group(1), pg and pg.group(1), pb and pb.group(1)}
    wrong = {dev: (before[dev], restored.get(dev)) for dev in before
             if dev not in moved and before[dev] != restored.get(dev)}
    res.check(f"{w}: SIGTERM: every layer that stayed is back to what it had before the daemon "
              f"({len([d for d in before if d not in moved])} devices)", restored and not wrong, wrong)
    if m2 and lin:
        res.check(f"{w}: ... the re-created linear0 is back to its found value, the error map keeps 3000",
                  restored.get(m2.group(1), ("", ""))[1] == before.get(lin["name"], ("", "?"))[1]
                  and restored.get(z["name"] if z else "", ("", ""))[1] == "3000",
                  (restored.get(m2.group(1)), z and restored.get(z["name"])))
    if pb:
        res.check(f"{w}: ... the NVMe path that came back is back to the kernel's none",
                  restored.get(pb.group(1), ("",))[0] == "none", restored.get(pb.group(1)))
    res.check(f"{w}: ... and no record is left", not records(serial, "RESTORED"), records(serial, "RESTORED"))

    # what the kernel gave each layer, for the report
    for role, ds in sorted(by_role.items()):
        for d in ds:
            print(f"# {w}: {role} {d['name']}: before {before.get(d['name'])} settled {settled.get(d['name'])}")

    # the golden table of the policies' choice per layer
    table = golden_table(devs)
    path = GOLDEN.format(which)
    if regen:
        with open(path, "w") as f:
            json.dump(table, f, indent=2, sort_keys=True)
            f.write("\n")
        print(f"# {w}: wrote {os.path.relpath(path, TOP)}")
    try:
        with open(path) as f:
            gold = json.load(f)
    except FileNotFoundError:
        gold = None
    diff = sorted(r for r in set(table) | set(gold or {}) if table.get(r) != (gold or {}).get(r))
    res.check(f"{w}: the policies' choice per layer is {os.path.relpath(path, TOP)} (--regen-golden to rewrite)",
              gold is not None and not diff,
              {r: {"now": table.get(r), "golden": (gold or {}).get(r)} for r in diff} if gold else "no golden")


def run(res, which, blkpolicyd, tools_root, work, regen, serial_dir):
    if which == "7.3":
        k = dd_kernel.stock_73()
        if k is None:
            res.check("7.3: trixie-backports has a linux-image-7.3.*", False, "no third stock kernel")
            return
        kdir, kver = k
    else:
        kdir, kver = vmtest.fetch_kernel(which)
    base, tools, initrd = (os.path.join(work, n) for n in ("base.gz", "tools.gz", "initrd.gz"))
    vmtest.build_initramfs(kdir, kver, blkpolicyd, base, [], init=INIT, modules=MODULES)
    tools_archive(tools_root, tools)
    with open(initrd, "wb") as out:
        for part in (base, tools):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    serial = boot(kdir, kver, initrd, work)
    if serial_dir:
        with open(os.path.join(serial_dir, f"stacks-{which}.serial"), "w") as f:
            f.write(serial)
    check(res, which, serial, regen)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="all", choices=KERNELS + ["all"])
    ap.add_argument("--blkpolicyd", default=os.path.join(TOP, "build", "daemon", "blkpolicyd"))
    ap.add_argument("--regen-golden", action="store_true",
                    help="write tests/golden/stacks-vm-<kernel>.json from this run")
    ap.add_argument("--serial", metavar="DIR", help="keep each guest's serial console in DIR/stacks-<kernel>.serial")
    args = ap.parse_args()
    script_prerequisites("stacks", ("qemu-system-x86_64", "apt-get", "dpkg-deb", "cpio", "busybox"))
    res = Results()
    tools_root = fetch_tools(lambda line: print(f"# stacks: {line}", flush=True))
    for which in (KERNELS if args.kernel == "all" else [args.kernel]):
        work = tempfile.mkdtemp(prefix="blkpolicyd-stacks-")
        t0 = time.monotonic()
        try:
            run(res, which, args.blkpolicyd, tools_root, work, args.regen_golden, args.serial)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            print(f"# {which}: {time.monotonic() - t0:.0f} s", flush=True)
    res.finish("stacks: ")


if __name__ == "__main__":
    main()
