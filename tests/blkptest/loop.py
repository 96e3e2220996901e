# SPDX-License-Identifier: LGPL-2.1-or-later
"""Loop devices that a test creates itself, and removes even on failure.

Devices are made with LOOP_CTL_ADD at a fresh index (never one that existed
before the test), so a test can only ever touch its own devices; policies
and --device globs name exactly those. Each test file starts at its own
index base so that files run one after the other, or by hand beside each
other, never collide."""
import atexit
import concurrent.futures
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time

LOOP_CTL_ADD = 0x4C80
LOOP_CTL_REMOVE = 0x4C81


def sysfs(name, attr):
    with open(f"/sys/block/{name}/queue/{attr}") as f:
        return f.read().strip()


def scheduler(name):
    text = sysfs(name, "scheduler")
    return text[text.index("[") + 1:text.index("]")]


def unset_after(names, want, timeout, poll):
    """Watches names, every poll seconds, until each one's scheduler is want
    or timeout seconds have passed; returns those whose scheduler is not."""
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        pending = {name for name in pending if scheduler(name) != want}
        if pending:
            time.sleep(poll)
    return pending


def record_path(state, name):
    """The daemon's state record for a disk: <state>/devices/<major>:<minor>."""
    with open(f"/sys/block/{name}/dev") as f:
        return os.path.join(state, "devices", f.read().strip())


def set_attr(name, attr, value):
    with open(f"/sys/block/{name}/queue/{attr}", "w") as f:
        f.write(value)


def exit_on_signals():
    """For a script that makes loop devices (bench/, tools/demo.py): a
    SIGTERM or ^C exits through atexit, which removes them. Under pytest,
    conftest.py turns SIGTERM into an interrupt and the fixtures remove them."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(1))


class LoopDevices:
    """Creates loop devices at fresh indexes from base; remove_all() at the
    end (the loops fixture calls it at teardown, whatever the test did)."""

    def __init__(self, base):
        self.base = base
        self.indexes = []
        self.free_hint = base
        self.attached = set()
        self.tmp = tempfile.mkdtemp(prefix="blkpolicyd-loop-", dir="/dev/shm")
        # a backstop for the fixture's teardown: removing twice is harmless
        atexit.register(self.remove_all)

    def add(self):
        """LOOP_CTL_ADD at the first free index from base: an 'add' uevent."""
        fd = os.open("/dev/loop-control", os.O_RDWR)
        try:
            # from the lowest index that may be free: still the first free one
            # from base (tests match index ranges), without 10,000 adds
            # scanning 10,000² names
            for i in range(self.free_hint, self.base + 20000):
                if os.path.exists(f"/sys/block/loop{i}"):
                    continue
                try:
                    fcntl.ioctl(fd, LOOP_CTL_ADD, i)
                except OSError:
                    continue
                self.indexes.append(i)
                self.free_hint = i + 1
                return f"loop{i}"
        finally:
            os.close(fd)
        raise RuntimeError("no free loop index")

    def attach(self, name, size_mb=16):
        """Attaches a backing file: a 'change' uevent, not 'add'."""
        backing = os.path.join(self.tmp, name + ".img")
        with open(backing, "wb") as f:
            f.truncate(size_mb << 20)
        subprocess.run(["losetup", f"/dev/{name}", backing], check=True)
        self.attached.add(name)

    def detach(self, name):
        subprocess.run(["losetup", "-d", f"/dev/{name}"], check=False)
        self.attached.discard(name)

    def remove(self, name):
        if name in self.attached:
            self.detach(name)
        i = int(name[4:])
        fd = os.open("/dev/loop-control", os.O_RDWR)
        try:
            for _ in range(50):
                try:
                    fcntl.ioctl(fd, LOOP_CTL_REMOVE, i)
                    break
                except OSError:
                    time.sleep(0.02)  # EBUSY while the device is still open elsewhere
        finally:
            os.close(fd)
        if i in self.indexes:
            self.indexes.remove(i)
        self.free_hint = min(self.free_hint, i)

    def remove_many(self, names, threads=16):
        """LOOP_CTL_REMOVE is ~35 ms each: 10,000 one after the other take 6 min."""
        with concurrent.futures.ThreadPoolExecutor(threads) as ex:
            list(ex.map(self.remove, names))

    def remove_all(self):
        self.remove_many([f"loop{i}" for i in list(self.indexes)])
        subprocess.run(["rm", "-rf", self.tmp], check=False)
