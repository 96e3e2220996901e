# SPDX-License-Identifier: LGPL-2.1-or-later
"""A fixture tree for the fake kernel (BLKPOLICYD_FAKE_KERNEL, test builds):
a copy of tests/fixtures/kvm-6.18 with a second loop disk and the
/sys/dev/block links --restore and a pass read, so the daemon can write to it as to
sysfs, with no root."""
import os
import shutil
import socket

from .daemon import fixture_roots

DISKS = ("loop0", "loop1")


def disks(n):
    """The names make(n=...) gives its disks."""
    return tuple(f"loop{i}" for i in range(n))


def make(fixture, root, n=len(DISKS)):
    """The fixture with n loop disks, copies of its loop0 (7:0, 7:1, ...)."""
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(fixture, root, symlinks=True)
    virt = os.path.join(root, "sys", "devices", "virtual", "block")
    for i, dev in enumerate(disks(n)[1:], 1):
        shutil.copytree(os.path.join(virt, "loop0"), os.path.join(virt, dev), symlinks=True)
        with open(os.path.join(virt, dev, "dev"), "w") as f:
            f.write(f"7:{i}\n")
        os.symlink(f"../devices/virtual/block/{dev}", os.path.join(root, "sys", "block", dev))
    devblock = os.path.join(root, "sys", "dev", "block")
    os.makedirs(devblock, exist_ok=True)
    # every disk of the tree, as the kernel links them: a pass opens its
    # queue by number
    sysblock = os.path.join(root, "sys", "block")
    for dev in sorted(os.listdir(sysblock)):
        target = os.readlink(os.path.join(sysblock, dev))
        with open(os.path.join(sysblock, dev, "dev")) as f:
            link = os.path.join(devblock, f.read().strip())
        if not os.path.lexists(link):
            os.symlink(os.path.join("..", target), link)


def write(path, value):
    """A value as the kernel shows an attribute: whole or not at all, never
    a truncated file for the daemon to read (a rename over it)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(value + "\n")
    os.replace(path + ".tmp", path)


def qfile(root, dev, attr):
    return os.path.join(root, "sys", "block", dev, "queue", attr)


def live(root, dev, attr):
    """A queue attribute as the daemon reads it; the bracketed scheduler; None if absent."""
    try:
        with open(qfile(root, dev, attr)) as f:
            text = f.read().strip()
    except FileNotFoundError:
        return None
    if attr == "scheduler":
        return text[text.index("[") + 1:text.index("]")]
    return text


def read_ahead_default(root, dev, version=(6, 18)):
    """The read_ahead_kb a queue-limits update leaves at most, as
    blk_apply_bdi_limits() (block/blk-settings.c) computes it: twice
    optimal_io_size in whole pages, never below VM_READAHEAD_PAGES (128 KiB);
    since 6.17 (459779d04ae8) twice max_sectors_kb on a rotational queue
    without one. 4 KiB pages."""
    io_opt = int(live(root, dev, "optimal_io_size") or 0)
    if io_opt == 0 and live(root, dev, "rotational") == "1" and version >= (6, 17):
        io_opt = int(live(root, dev, "max_sectors_kb")) * 1024
    return max(io_opt * 2 // 4096 * 4, 128)


def revalidate(root, dev, io_opt=None, max_sectors_kb=None, rotational=None, version=(6, 18)):
    """A revalidation of dev, as the kernel's (sd_revalidate_disk() on a
    SCSI rescan, an NVMe rescan, a dm table load, a virtio-blk resize):
    the driver's new limits, if any, then queue_limits_commit_update() ->
    blk_apply_bdi_limits(). Since 6.15 (7b720c720253, and 6.12.26) it never
    lowers read_ahead_kb: ra = max3(ra, default); before, ra = default.
    max_sectors_kb (max_user_sectors since 6.9), nr_requests, the scheduler
    and its tunables, wbt_lat_usec: kept. Returns read_ahead_kb as left."""
    for attr, value in (("optimal_io_size", io_opt), ("max_sectors_kb", max_sectors_kb),
                        ("rotational", rotational)):
        if value is not None:
            write(qfile(root, dev, attr), str(value))
    default = read_ahead_default(root, dev, version)
    ra = default if version < (6, 15) else max(int(live(root, dev, "read_ahead_kb")), default)
    write(qfile(root, dev, "read_ahead_kb"), str(ra))
    return ra


class Workspace:
    """One test's work directory on the fake kernel: the tree (root/), the
    daemon's state/ and policies/, its control socket, and the arguments
    that point a daemon at them."""

    def __init__(self, blkpolicyd, fixture, work):
        self.blkpolicyd = blkpolicyd
        self.fixture = fixture
        self.work = work
        self.root = os.path.join(work, "root")
        self.state = os.path.join(work, "state")
        self.policies = os.path.join(work, "policies")
        self.sock_path = os.path.join(work, "control.sock")
        self.running = []       # every daemon started, for cleanup() to kill whatever happened

    def qfile(self, dev, attr):
        return qfile(self.root, dev, attr)

    def live(self, dev, attr):
        return live(self.root, dev, attr)

    def cleanup(self):
        """Kills every daemon started (Daemon objects in self.running), the
        last one's log tail printed for a failed test."""
        for d in self.running:
            d.cleanup()
        if self.running:
            print(f"--- daemon log\n{self.running[-1].text()[-4000:]}")

    def daemon_args(self, conf, *extra):
        """blkpolicyd's arguments for this tree, on every loop disk; the
        trials' verdicts remembered in the work dir, never the host's."""
        return ["--config", conf, "--policy-dir", self.policies, *fixture_roots(self.root), "--state-dir", self.state,
                "--socket", self.sock_path, "--device", "loop*", "--trial-memory", self.trial_memory, *extra]

    @property
    def trial_memory(self):
        return os.path.join(self.work, "trial-verdicts.json")


class Uevents:
    """The daemon's fake uevent socket (BLKPOLICYD_FAKE_UEVENTS=path, test
    builds): kernel-format uevents for a fixture tree, which has none. The
    daemon answers each datagram with "settled" once it is handled and no
    pass runs or waits (daemon/loop/discover.h); send() waits for that."""

    def __init__(self, work):
        self.path = os.path.join(work, "uevents.sock")         # the daemon binds it
        reply = os.path.join(work, "uevents.reply")
        if os.path.exists(reply):
            os.unlink(reply)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(reply)
        self.outstanding = 0
        self.seqnum = 0

    def env(self):
        return {"BLKPOLICYD_FAKE_UEVENTS": self.path}

    def restarted(self):
        """A daemon killed with replies owed never sends them."""
        self.outstanding = 0
        self.sock.setblocking(False)
        try:
            while True:
                self.sock.recv(64)
        except BlockingIOError:
            pass
        self.sock.setblocking(True)

    def _send(self, payload, wait, timeout):
        assert self.outstanding < 8, "the daemon keeps at most 8 senders waiting"
        self.sock.sendto(payload, self.path)
        self.outstanding += 1
        if wait:
            self.settled(timeout)

    def change(self, dev, major, minor, diskseq, wait=True, timeout=30):
        """The change event a revalidation sends when it sends one: a new
        size (set_capacity_and_notify(), RESIZE=1) or a dm resume
        (dm_kobject_uevent()); a SCSI rescan at the same size sends none."""
        self.send("change", dev, major, minor, diskseq, wait, timeout)

    def send(self, action, dev, major, minor, diskseq, wait=True, timeout=30):
        self.seqnum += 1
        devpath = f"/devices/virtual/block/{dev}"
        fields = [f"{action}@{devpath}", f"ACTION={action}", f"DEVPATH={devpath}", "SUBSYSTEM=block",
                  f"DEVNAME={dev}", "DEVTYPE=disk", f"MAJOR={major}", f"MINOR={minor}", f"DISKSEQ={diskseq}",
                  f"SEQNUM={self.seqnum}"]
        self._send("\0".join(fields).encode() + b"\0", wait, timeout)

    def nvme_controller(self, action, devpath, wait=True, timeout=30):
        """An NVMe controller's event (SUBSYSTEM=nvme): all the kernel sends
        when a controller, and with it its multipath paths, comes or goes;
        the hidden paths' own events stay suppressed (block/genhd.c)."""
        self.seqnum += 1
        ctrl = devpath.rsplit("/", 1)[1]
        fields = [f"{action}@{devpath}", f"ACTION={action}", f"DEVPATH={devpath}", "SUBSYSTEM=nvme",
                  f"DEVNAME={ctrl}", "MAJOR=245", f"MINOR={ctrl[4:]}", f"SEQNUM={self.seqnum}"]
        self._send("\0".join(fields).encode() + b"\0", wait, timeout)

    def settle(self, timeout=30):
        """Returns once no pass runs or waits in the daemon."""
        self._send(b"settle", True, timeout)

    def settled(self, timeout=30):
        self.sock.settimeout(timeout)
        while self.outstanding:
            reply = self.sock.recv(64)
            assert reply == b"settled", reply
            self.outstanding -= 1

    def close(self):
        self.sock.close()
