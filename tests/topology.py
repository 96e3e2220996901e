# SPDX-License-Identifier: LGPL-2.1-or-later
"""Stacks of block devices on the fake kernel (no root): a copy of
tests/fixtures/stacks-6.18, changed under a running daemon as dm, md and
NVMe multipath change sysfs, with the fake uevent socket bringing the
events the kernel sends.

The kernel sends no uevent for the disk below when dm loads a table on it
(block/holder.c bd_link_disk_holder() only links holders/ and slaves/):
only the map's own change event comes. The daemon then classifies the
map's slaves again, so a policy on stack = member follows the table; and
the map's removal leaves its disks alone again. explain prints the whole
stack."""
import json
import os
import shutil
import subprocess

import pytest

from blkptest import faketree
from blkptest.daemon import Daemon, control_call, ctl, fixture_roots

MEMBER_POLICY = "[Match]\nstack = member\nname = vd*\n\n[Queue]\nscheduler = bfq\n"


def link(path, target):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(os.path.relpath(target, os.path.dirname(path)), path)


class Stacks(faketree.Workspace):
    def __init__(self, blkpolicyd, fixture, work):
        super().__init__(blkpolicyd, fixture, work)
        self.uevents = faketree.Uevents(work)

    def disk_dir(self, dev):
        return os.path.realpath(os.path.join(self.root, "sys", "block", dev))

    def hold(self, lower, upper):
        """What bd_link_disk_holder() does: no event for lower."""
        lo, up = self.disk_dir(lower), self.disk_dir(upper)
        link(os.path.join(lo, "holders", upper), up)
        link(os.path.join(up, "slaves", lower), lo)

    def hold_partition(self, disk, part, upper):
        """What bd_link_disk_holder() does for a partition: its holders/,
        the map's slaves/; no event for the partition or its disk."""
        lo, up = os.path.join(self.disk_dir(disk), part), self.disk_dir(upper)
        link(os.path.join(lo, "holders", upper), up)
        link(os.path.join(up, "slaves", part), lo)

    def release_partition(self, disk, part, upper):
        os.unlink(os.path.join(self.disk_dir(disk), part, "holders", upper))
        os.unlink(os.path.join(self.disk_dir(upper), "slaves", part))

    def release(self, lower, upper):
        """bd_unlink_disk_holder(): the table that held lower is gone."""
        os.unlink(os.path.join(self.disk_dir(lower), "holders", upper))
        os.unlink(os.path.join(self.disk_dir(upper), "slaves", lower))

    def remove_disk(self, dev):
        d = self.disk_dir(dev)
        os.unlink(os.path.join(self.root, "sys", "block", dev))
        shutil.rmtree(d)

    def start(self, *extra):
        os.makedirs(self.policies, exist_ok=True)
        os.makedirs(self.state, exist_ok=True)
        with open(os.path.join(self.policies, "50-member.policy"), "w") as f:
            f.write(MEMBER_POLICY)
        args = ["--config", "/dev/null", "--policy-dir", self.policies, *fixture_roots(self.root),
                "--state-dir", self.state, "--socket", self.sock_path, *extra]
        d = Daemon(self.blkpolicyd, self.work, args,
                   env={"BLKPOLICYD_FAKE_KERNEL": "1", **self.uevents.env()})
        self.running.append(d)
        d.wait_for("READY=1", timeout=30)
        return d

    def device(self, dev):
        r = control_call(self.sock_path, {"command": "device", "device": dev})
        assert r.get("ok"), r
        return r["result"]

    def topology(self, dev):
        return self.device(dev)["topology"]


@pytest.fixture
def stacks(blkpolicyd, fixtures_dir, work, fault_injection):
    s = Stacks(blkpolicyd, os.path.join(fixtures_dir, "stacks-6.18"), work)
    shutil.copytree(s.fixture, s.root, symlinks=True)
    # dm-0 exists with no table yet (dmsetup create's add, before the load)
    s.release("vdb", "dm-0")
    yield s
    s.cleanup()
    s.uevents.close()


def test_a_table_loaded_makes_its_disk_a_member(stacks):
    stacks.start()
    assert stacks.topology("vdb")["stack"] == "alone" and stacks.live("vdb", "scheduler") == "mq-deadline", \
        f"no table: vdb is alone, no policy for it: {stacks.topology('vdb')}"
    ex = control_call(stacks.sock_path, {"command": "explain", "device": "vdb"})["result"]
    assert ex["stack"] is None, f"a disk in no stack has none to show: {ex['stack']}"
    # dmsetup load + resume: the links, and a change event for dm-0 only
    stacks.hold("vdb", "dm-0")
    stacks.uevents.send("change", "dm-0", 253, 0, 1)
    t = stacks.topology("vdb")
    assert t["stack"] == "member" and t["holders"] == ["dm-0"], f"dm-0's event classified vdb again: {t}"
    assert stacks.live("vdb", "scheduler") == "bfq", "and decided it again: stack = member holds"
    assert stacks.topology("dm-0")["slaves"] == ["vdb"]


def test_a_map_removed_leaves_its_disk_alone(stacks):
    stacks.hold("vdb", "dm-0")
    d = stacks.start()
    assert stacks.topology("vdb")["stack"] == "member" and stacks.live("vdb", "scheduler") == "bfq"
    # dmsetup remove: the table's devices put (the links go), then the disk
    stacks.release("vdb", "dm-0")
    stacks.remove_disk("dm-0")
    stacks.uevents.send("remove", "dm-0", 253, 0, 1)
    t = stacks.topology("vdb")
    assert t["stack"] == "alone" and t["holders"] == [], f"the map's removal classified vdb again: {t}"
    r = control_call(stacks.sock_path, {"command": "device", "device": "dm-0"})
    assert not r.get("ok"), f"dm-0 is gone: {r}"
    assert d.stop() == 0, "a clean exit (a sanitizer build: nothing leaked)"


def test_a_table_reload_releases_the_old_disk(stacks):
    # a table moved from vdb to vdc (pvmove's last step): one change event
    stacks.hold("vdb", "dm-0")
    stacks.start()
    stacks.release("vdb", "dm-0")
    stacks.hold("vdc", "dm-0")
    stacks.uevents.send("change", "dm-0", 253, 0, 1)
    assert stacks.topology("vdb")["stack"] == "alone", "the disk the old table held: classified again"
    assert sorted(stacks.topology("vdc")["holders"]) == ["dm-0", "dm-1"], "the new table's disk too"


def test_disks_next_to_a_map_stay_out_of_device_globs(stacks):
    # --device dm-*: dm-0's event must not make vdb one of the daemon's
    stacks.start("--device", "dm-*")
    stacks.hold("vdb", "dm-0")
    stacks.uevents.send("change", "dm-0", 253, 0, 1)
    assert stacks.topology("dm-0")["slaves"] == ["vdb"]
    r = control_call(stacks.sock_path, {"command": "device", "device": "vdb"})
    assert not r.get("ok") and stacks.live("vdb", "scheduler") == "mq-deadline", \
        f"vdb is not the daemon's: not refreshed, not written: {r}"


PATH_POLICY = "[Match]\nnvme_multipath = path\n\n[Queue]\nscheduler = mq-deadline\n"


def diskstats_lines(stacks, drop=None, add=None):
    """/proc/diskstats, the only place a hidden path's number shows."""
    path = os.path.join(stacks.root, "proc", "diskstats")
    with open(path) as f:
        lines = [line for line in f if not drop or line.split()[2] != drop]
    with open(path, "w") as f:
        f.writelines(lines + ([add] if add else []))


def test_an_nvme_controller_takes_its_path_and_brings_it_back(stacks):
    # what the kernel does (6.1, 6.12, 7.3 in QEMU, docs/vm.md): a path has
    # no dev attribute and no uevent of its own, nor does its head when the
    # path comes or goes; only the controller's nvme events come
    os.makedirs(stacks.policies, exist_ok=True)
    with open(os.path.join(stacks.policies, "60-path.policy"), "w") as f:
        f.write(PATH_POLICY)
    path_dir = stacks.disk_dir("nvme0c1n1")
    assert not os.path.exists(os.path.join(path_dir, "dev")), "the fixture's path has no dev, as on a real kernel"
    stacks.start()
    for p in ("nvme0c0n1", "nvme0c1n1"):
        d = stacks.device(p)
        assert stacks.live(p, "scheduler") == "mq-deadline" and d["topology"]["nvme_multipath"] == "path", \
            f"{p}: found without a dev attribute, its policy applied: {d}"
    assert stacks.device("nvme0c1n1")["facts"]["dev"] == "259:2", "the number diskstats gives it"
    ctrl = "/devices/pci0000:00/0000:00:07.0/nvme/nvme1"
    saved = os.path.join(stacks.work, "saved-path")
    shutil.copytree(path_dir, saved, symlinks=True)
    head = stacks.disk_dir("nvme0n1")

    # the controller goes: the path, its multipath/ link and its diskstats line with it
    os.unlink(os.path.join(head, "multipath", "nvme0c1n1"))
    stacks.remove_disk("nvme0c1n1")
    diskstats_lines(stacks, drop="nvme0c1n1")
    stacks.uevents.nvme_controller("remove", ctrl)
    r = control_call(stacks.sock_path, {"command": "device", "device": "nvme0c1n1"})
    assert not r.get("ok"), f"the controller's event forgot the path: {r}"
    t = stacks.topology("nvme0n1")
    assert t["nvme_multipath"] == "head" and t["nvme_paths"] == ["nvme0c0n1"], \
        f"and classified its head again: {t}"

    # it comes back: a new disk (new diskseq and queue), the kernel's none on it
    shutil.copytree(saved, path_dir, symlinks=True)
    link(os.path.join(stacks.root, "sys", "block", "nvme0c1n1"), path_dir)
    link(os.path.join(head, "multipath", "nvme0c1n1"), path_dir)
    with open(os.path.join(path_dir, "diskseq"), "w") as f:
        f.write("99")
    with open(os.path.join(path_dir, "queue", "scheduler"), "w") as f:
        f.write("[none] mq-deadline kyber bfq ")
    diskstats_lines(stacks, add=" 259       2 nvme0c1n1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
    stacks.uevents.nvme_controller("add", ctrl)
    d = stacks.device("nvme0c1n1")
    assert d["facts"]["diskseq"] == 99 and stacks.live("nvme0c1n1", "scheduler") == "mq-deadline", \
        f"the controller's add found the new path and applied its policy: {d}"
    assert stacks.topology("nvme0n1")["nvme_paths"] == ["nvme0c0n1", "nvme0c1n1"]


def test_a_table_on_a_partition_makes_its_disk_a_member(stacks):
    # vgcreate on /dev/vde2: no holder yet, vde is alone
    stacks.release_partition("vde", "vde2", "dm-6")
    stacks.start()
    assert stacks.topology("vde")["stack"] == "alone" and stacks.live("vde", "scheduler") == "mq-deadline", \
        f"vde2 unclaimed: vde is alone, no policy for it: {stacks.topology('vde')}"
    # lvcreate: dm-6's table claims vde2; the only event is dm-6's change
    stacks.hold_partition("vde", "vde2", "dm-6")
    stacks.uevents.send("change", "dm-6", 253, 6, 1)
    t = stacks.topology("vde")
    assert t["stack"] == "member" and t["holders"] == ["dm-6"], f"dm-6's event classified vde again: {t}"
    assert stacks.live("vde", "scheduler") == "bfq", "and decided it again: stack = member holds"
    assert stacks.topology("dm-6")["slaves"] == ["vde2"], "the map's own slaves are as the kernel names them"
    # lvremove: the table's release and the map's removal
    stacks.release_partition("vde", "vde2", "dm-6")
    stacks.remove_disk("dm-6")
    stacks.uevents.send("remove", "dm-6", 253, 6, 1)
    t = stacks.topology("vde")
    assert t["stack"] == "alone" and t["holders"] == [], f"the map's removal classified vde again: {t}"


def test_explain_shows_the_whole_stack(stacks, blkpolicyctl):
    stacks.hold("vdb", "dm-0")
    d = stacks.start()
    cases = {
        "md0": "sda + sdb -> [md0 (raid1)] -> dm-3 (LVM-, vg1-root)",
        "sda": "[sda] -> md0 (raid1) -> dm-3 (LVM-, vg1-root)",
        "dm-2": "vdc -> dm-1 (LVM-, vg0-secret) -> [dm-2 (CRYPT-, secret_crypt)]",
        "sdc": "[sdc] -> dm-4 (mpath-, mpatha) -> dm-5 (part, mpatha1)",
        "vdb": "[vdb] -> dm-0 (no uuid, linear0)",
        "nvme0c0n1": "[nvme0c0n1] -> nvme0n1",
        "nvme0n1": "nvme0c0n1 + nvme0c1n1 -> [nvme0n1]",
        # on partitions: the disks, as the daemon has them
        "md1": "sde + sdf -> [md1 (raid1)]",
        "sdf": "[sdf] -> md1 (raid1)",
        "dm-6": "vde -> [dm-6 (LVM-, vg2-data)]",
    }
    for dev, want in cases.items():
        r = ctl(blkpolicyctl, stacks.sock_path, "explain", dev)
        assert r.returncode == 0 and f"  stack: {want}\n" in r.stdout, f"explain {dev}: {r.stdout}{r.stderr}"
        ex = control_call(stacks.sock_path, {"command": "explain", "device": dev})["result"]
        assert ex["stack"] == want and "topology" in ex, json.dumps(ex)[:2000]
    assert d.stop() == 0, "a clean exit (a sanitizer build: nothing leaked)"


DM0_POLICY = "[Match]\nclass = bio-based\nname = dm-0\nstack = top\n\n[Queue]\nread_ahead_kb = 1024\n"


def record_of(stacks, devnum):
    path = os.path.join(stacks.state, "devices", devnum)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


def test_a_map_gets_its_settings_when_its_table_loads(stacks):
    """dmsetup create sends add before the table exists (dm-0 holds
    nothing: no stack); the load and resume send a change event
    (dm_kobject_uevent()). The map's own policy (stack = top) applies then,
    and its found value goes back at stop."""
    os.makedirs(stacks.policies, exist_ok=True)
    with open(os.path.join(stacks.policies, "60-dm0.policy"), "w") as f:
        f.write(DM0_POLICY)
    d = stacks.start()
    assert stacks.live("dm-0", "read_ahead_kb") == "128" and record_of(stacks, "253:0") is None, \
        "no table: dm-0 is in no stack, no policy for it"
    stacks.hold("vdb", "dm-0")
    stacks.uevents.send("change", "dm-0", 253, 0, 2)
    assert stacks.topology("dm-0")["stack"] == "top"
    assert stacks.live("dm-0", "read_ahead_kb") == "1024", "the table's change event applied the map's policy"
    assert "\nread_ahead_kb 128 1024 -\n" in record_of(stacks, "253:0")
    assert d.stop() == 0
    assert stacks.live("dm-0", "read_ahead_kb") == "128" and record_of(stacks, "253:0") is None


def test_a_map_renamed_keeps_its_records_and_settings(stacks):
    """dmsetup rename: dm/name changes, dm-N, its number, queue and uuid
    stay, and dm sends a change event. Records follow the queue, not the
    name: the record stays as it was (found 128), the setting stays
    blkpolicyd's (no override, no new medium), the found value back at stop."""
    stacks.hold("vdb", "dm-0")
    os.makedirs(stacks.policies, exist_ok=True)
    with open(os.path.join(stacks.policies, "60-dm0.policy"), "w") as f:
        f.write(DM0_POLICY)
    d = stacks.start()
    assert stacks.live("dm-0", "read_ahead_kb") == "1024"
    before = record_of(stacks, "253:0")
    assert "\nread_ahead_kb 128 1024 -\n" in before, before
    with open(os.path.join(stacks.disk_dir("dm-0"), "dm", "name"), "w") as f:
        f.write("renamed0\n")
    stacks.uevents.send("change", "dm-0", 253, 0, 2)
    dev = stacks.device("dm-0")
    assert dev["topology"]["dm"]["name"] == "renamed0", f"the new name is seen: {dev['topology']}"
    assert not dev["overridden"] and stacks.live("dm-0", "read_ahead_kb") == "1024"
    assert record_of(stacks, "253:0") == before, "the record as it was: same queue, same found value"
    assert "new media" not in d.text() and "new medium" not in d.text()
    assert d.stop() == 0
    assert stacks.live("dm-0", "read_ahead_kb") == "128" and record_of(stacks, "253:0") is None


def test_restore_finds_a_path_by_its_name_and_diskstats_number(stacks):
    # a path has no /sys/dev/block link: --restore takes its record's name,
    # and the path only if diskstats still gives that name the recorded number
    os.makedirs(stacks.policies, exist_ok=True)
    os.makedirs(stacks.state, exist_ok=True)
    with open(os.path.join(stacks.policies, "60-path.policy"), "w") as f:
        f.write(PATH_POLICY)
    args = [stacks.blkpolicyd, "--config", "/dev/null", "--policy-dir", stacks.policies, *fixture_roots(stacks.root),
            "--state-dir", stacks.state]
    env = dict(os.environ, BLKPOLICYD_FAKE_KERNEL="1")
    r = subprocess.run(args + ["--once"], capture_output=True, text=True, env=env, timeout=60)
    records = sorted(os.listdir(os.path.join(stacks.state, "devices")))
    assert r.returncode == 0 and stacks.live("nvme0c0n1", "scheduler") == "mq-deadline" \
        and stacks.live("nvme0c1n1", "scheduler") == "mq-deadline" and {"259:1", "259:2"} <= set(records), \
        f"--once set both paths and kept their records under their diskstats numbers: {records} {r.stderr[-800:]}"
    # nvme0c1n1 is another disk now: its controller went, came back, and
    # the kernel gave the new path another number; its admin set kyber
    diskstats_lines(stacks, drop="nvme0c1n1", add=" 259       7 nvme0c1n1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
    with open(os.path.join(stacks.disk_dir("nvme0c1n1"), "queue", "scheduler"), "w") as f:
        f.write("none mq-deadline [kyber] bfq ")
    r = subprocess.run(args + ["--restore"], capture_output=True, text=True, env=env, timeout=60)
    left = [n for n in os.listdir(os.path.join(stacks.state, "devices")) if n in ("259:1", "259:2")]
    assert r.returncode == 0 and stacks.live("nvme0c0n1", "scheduler") == "none" and not left, \
        f"--restore put the path it found back and dropped both records: {left} {r.stderr[-800:]}"
    assert stacks.live("nvme0c1n1", "scheduler") == "kyber", "the other disk at that name is not written"
