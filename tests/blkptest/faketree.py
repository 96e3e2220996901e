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
        """blkpolicyd's arguments for this tree, on every loop disk."""
        return ["--config", conf, "--policy-dir", self.policies, *fixture_roots(self.root), "--state-dir", self.state,
                "--socket", self.sock_path, "--device", "loop*", *extra]


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

    def send(self, action, dev, major, minor, diskseq, wait=True, timeout=30):
        self.seqnum += 1
        devpath = f"/devices/virtual/block/{dev}"
        fields = [f"{action}@{devpath}", f"ACTION={action}", f"DEVPATH={devpath}", "SUBSYSTEM=block",
                  f"DEVNAME={dev}", "DEVTYPE=disk", f"MAJOR={major}", f"MINOR={minor}", f"DISKSEQ={diskseq}",
                  f"SEQNUM={self.seqnum}"]
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
