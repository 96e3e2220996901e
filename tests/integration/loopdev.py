# SPDX-License-Identifier: LGPL-2.1-or-later
"""Loop devices that a test creates itself, and removes even on failure.

Devices are made with LOOP_CTL_ADD at a fresh index (never one that existed
before the test), so a test can only ever touch its own devices; policies
and --device globs name exactly those."""
import atexit
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time

LOOP_CTL_ADD = 0x4C80
LOOP_CTL_REMOVE = 0x4C81
SKIP = 77


def fault_injection_built(blkpolicyd):
    """Test builds (-Dfault_injection=true) have the fake kernel and BLKPOLICYD_FAULTS."""
    return "+fault-injection" in subprocess.run([blkpolicyd, "--version"], capture_output=True, text=True).stdout


def require_fault_injection(blkpolicyd):
    """Skip on a build without it; CI builds with it, so there a skip is a failure."""
    if fault_injection_built(blkpolicyd):
        return
    why = "needs a test build (-Dfault_injection=true): the fake kernel and BLKPOLICYD_FAULTS"
    if os.environ.get("CI") == "true":
        print(f"FAIL: {why}, and CI=true requires every test to run")
        sys.exit(1)
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def require_root():
    """Skip without root outside CI; in CI (CI=true) missing root is a failure."""
    if os.geteuid() == 0 and os.path.exists("/dev/loop-control"):
        return
    why = "needs root and /dev/loop-control to create loop devices"
    if os.environ.get("CI") == "true":
        print(f"FAIL: {why}, and CI=true requires privileged tests to run")
        sys.exit(1)
    print(f"SKIP: {why}; run the test command as root (sudo) to include these tests")
    sys.exit(SKIP)


def sysfs(name, attr):
    with open(f"/sys/block/{name}/queue/{attr}") as f:
        return f.read().strip()


def scheduler(name):
    text = sysfs(name, "scheduler")
    return text[text.index("[") + 1:text.index("]")]


def record_path(state, name):
    """The daemon's state record for a disk: <state>/devices/<major>:<minor>."""
    with open(f"/sys/block/{name}/dev") as f:
        return os.path.join(state, "devices", f.read().strip())


def set_attr(name, attr, value):
    with open(f"/sys/block/{name}/queue/{attr}", "w") as f:
        f.write(value)


def wait_for(predicate, timeout, what):
    """Polls an observable condition until it holds or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)


class LoopDevices:
    """Creates loop devices at fresh indexes; remove_all() on exit or signal."""

    def __init__(self, base):
        self.base = base
        self.indexes = []
        self.free_hint = base
        self.attached = set()
        self.tmp = tempfile.mkdtemp(prefix="blkpolicyd-loop-", dir="/dev/shm")
        atexit.register(self.remove_all)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: sys.exit(1))

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
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(threads) as ex:
            list(ex.map(self.remove, names))

    def remove_all(self):
        self.remove_many([f"loop{i}" for i in list(self.indexes)])
        subprocess.run(["rm", "-rf", self.tmp], check=False)


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, cond, detail=""):
        if cond:
            self.passed += 1
            print(f"ok - {name}")
        else:
            self.failed += 1
            print(f"not ok - {name}\n  {detail}")

    def finish(self, label=""):
        print(f"{label}{self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)


def control_call(sock_path, req, timeout=5):
    """One request on the control socket; the whole reply (ok/result or error)."""
    import json
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        s.sendall(json.dumps(req).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    return json.loads(buf)


class Daemon:
    """blkpolicyd in the foreground: its log in a file, its readiness and
    reloads heard on a NOTIFY_SOCKET the test binds, as systemd would."""

    def __init__(self, blkpolicyd, work, args, env=None, append_log=False):
        """append_log: a restarted daemon continues the log of the one before."""
        import socket
        path = os.path.join(work, "notify")
        if os.path.exists(path):        # left by a daemon started before in the same work dir
            os.unlink(path)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(path)
        self.log_path = os.path.join(work, "daemon.log")
        if not append_log:
            open(self.log_path, "w").close()
        # O_APPEND, and text() reads through a file of its own: a seek on
        # this one would move the offset the daemon writes at
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen([blkpolicyd, *args], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, NOTIFY_SOCKET=path, **(env or {})))

    def wait_for(self, word, timeout=10):
        """Returns the sd_notify message that carries word (e.g. READY=1)."""
        self.notify.settimeout(timeout)
        while True:
            msg = self.notify.recv(4096).decode()
            if word in msg.split("\n"):
                return msg

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self, timeout=10):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
