# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyd in the foreground as systemd would run it, its control socket,
and blkpolicyctl."""
import json
import os
import signal
import socket
import subprocess
import threading
import time


def wait_for(predicate, timeout, what):
    """Polls an observable condition until it holds or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)


class Listener(threading.Thread):
    """Every sd_notify datagram on sock with its arrival time, read as it
    comes: a reader that lags would fill the socket's queue (max_dgram_qlen)
    and block the daemon's sendmsg, which is not what a test measures."""

    def __init__(self, sock):
        super().__init__(daemon=True)
        self.sock = sock
        self.got = []
        self.start()

    def run(self):
        self.sock.settimeout(0.2)
        while True:
            try:
                self.got.append((time.monotonic(), self.sock.recv(4096).decode()))
            except socket.timeout:
                continue
            except OSError:
                return

    def times(self, word):
        """When each datagram that carries word (e.g. READY=1) came."""
        return [t for t, m in list(self.got) if word in m.split("\n")]


def fixture_roots(tree):
    """The daemon's view of a fixture tree instead of the real /sys, /proc and debugfs."""
    return ["--sysfs-root", os.path.join(tree, "sys"), "--proc-root", os.path.join(tree, "proc"),
            "--debugfs-root", os.path.join(tree, "debug")]


def control_connect(sock_path, timeout=5):
    """A client connection to the control socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
    except BaseException:
        s.close()
        raise
    return s


def recv_line(s):
    """What the daemon sends up to a newline, or until it closes (b"" if nothing)."""
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
    return buf


def control_request(sock_path, req, timeout=5):
    """One request on the control socket; its reply line as sent (b"" when
    the daemon closed without one)."""
    s = control_connect(sock_path, timeout)
    try:
        s.sendall(json.dumps(req).encode() + b"\n")
        return recv_line(s)
    finally:
        s.close()


def control_call(sock_path, req, timeout=5):
    """One request on the control socket; the whole reply (ok/result or error)."""
    return json.loads(control_request(sock_path, req, timeout))


def ctl(blkpolicyctl, sock_path, *args, env=None, timeout=30):
    """blkpolicyctl against one daemon's socket, its output captured."""
    return subprocess.run([blkpolicyctl, "--socket", sock_path, *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


class Daemon:
    """blkpolicyd in the foreground: its log in a file, its readiness and
    reloads heard on a NOTIFY_SOCKET the test binds, as systemd would."""

    def __init__(self, blkpolicyd, work, args, env=None, append_log=False, ):
        """append_log: a restarted daemon continues the log of the one before."""
        path = os.path.join(work, "notify")
        if os.path.exists(path):        # left by a daemon started before in the same work dir
            os.unlink(path)
        self.notify_path = path
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(path)
        self.log_path = os.path.join(work, "daemon.log")
        if not append_log:
            open(self.log_path, "w").close()
        # O_APPEND, and text() reads through a file of its own: a seek on
        # this one would move the offset the daemon writes at
        self.log = open(self.log_path, "a")
        full_env = dict(os.environ, NOTIFY_SOCKET=path)
        for key, value in (env or {}).items():
            if value is None:           # None: not inherited from the test's environment
                full_env.pop(key, None)
            else:
                full_env[key] = value
        self.proc = subprocess.Popen([blkpolicyd, *args], stdout=self.log, stderr=subprocess.STDOUT, env=full_env)

    def receive_until(self, word, timeout=10):
        """Every sd_notify message (with its arrival time) up to the one
        that carries word, or all that came before the timeout."""
        got = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.notify.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                msg = self.notify.recv(4096).decode()
            except socket.timeout:
                break
            got.append((time.monotonic(), msg))
            if word in msg.split("\n"):
                break
        return got

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

    def signal(self, sig):
        self.proc.send_signal(sig)

    def reload(self, timeout=10):
        """SIGHUP, and back when the daemon says READY=1 again."""
        self.proc.send_signal(signal.SIGHUP)
        return self.wait_for("READY=1", timeout)

    def stop(self, timeout=10):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def cleanup(self):
        """Kills a daemon a failed test left running; never leaves one behind."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        self.notify.close()
