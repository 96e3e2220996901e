# SPDX-License-Identifier: LGPL-2.1-or-later
"""Root is never locked out of the control socket. Needs root for the
setuid children (socket_group members of other uids) and for prlimit on
the daemon; no loop devices: the daemon runs dry on a fixture tree.
- per-uid cap: a uid past max_clients_per_uid is refused with a
  too-many-clients reply, the others are not disturbed;
- root's slot: with max_clients held by other uids, root still connects,
  and no newcomer of another uid evicts root's connections;
- a reconnect flood by a group member: every one of root's requests is
  answered, and the log lines about it are rate limited;
- out of fds (RLIMIT_NOFILE cut under the daemon): accept() does not spin,
  refused clients hear so at once, root is still served, the accept()
  error is logged a bounded number of times.

Each test has its own daemon; the fixtures kill it, and any client child
still running, whatever the test did."""
import json
import os
import resource
import select
import socket
import struct
import time

import pytest

from blkptest import require
from blkptest.daemon import fixture_roots

GROUP, GID = "nogroup", 65534
UID_A, UID_B, UID_C = 65534, 65533, 65532
children = []       # forked clients, killed at each test's end if still there


@pytest.fixture(scope="module", autouse=True)
def needs_root():
    if os.geteuid() != 0:
        require.skip_or_fail("needs root for setuid clients and prlimit on the daemon",
                             "run the test command as root (sudo) to include these tests")


@pytest.fixture(autouse=True)
def no_child_left():
    yield
    for ch in list(children):
        try:
            os.kill(ch.pid, 9)
            os.waitpid(ch.pid, 0)
        except OSError:
            pass
        children.remove(ch)


@pytest.fixture
def start(daemons, top, kvm_fixture):
    """A dry-run daemon with socket_group set; its socket, once READY=1."""
    os.chmod(daemons.work, 0o755)   # the unprivileged clients must reach the socket

    def start(conf_text):
        conf = os.path.join(daemons.work, "blkpolicyd.conf")
        with open(conf, "w") as f:
            f.write(f"[Daemon]\nsocket_group = {GROUP}\n{conf_text}")
        daemon = daemons.start(["--dry-run", "--config", conf, "--policy-dir", os.path.join(top, "policies"),
                                *fixture_roots(kvm_fixture), "--state-dir", os.path.join(daemons.work, "state"),
                                "--socket", daemons.sock])
        return daemon, daemons.sock
    return start


def request(s, req=None, timeout=5):
    """One request on an open connection: 'ok', the error code, or why nothing came."""
    s.settimeout(timeout)
    try:
        try:
            s.sendall(json.dumps(req or {"command": "status"}).encode() + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            pass        # refused and closed before we wrote: the reason is still there to read
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                return "closed"
            buf += chunk
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return f"errno {e.errno}"
    reply = json.loads(buf)
    return "ok" if reply["ok"] else reply["error"]["code"]


def connect(sock):
    """As blkpolicyctl does: a blocking connect(), which waits while the
    listen backlog is full (bounded here by SO_SNDTIMEO, which is what the
    kernel waits with)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 5, 0))
    s.connect(sock)
    return s


def root_call(sock):
    s = connect(sock)
    try:
        return request(s)
    finally:
        s.close()


class Child:
    """A forked client as another uid of socket_group, driven line by line:
    the parent sends a command, the child answers with a JSON line."""

    def __init__(self, uid, serve):
        r1, w1 = os.pipe()      # parent -> child
        r2, w2 = os.pipe()      # child -> parent
        self.pid = os.fork()
        if self.pid == 0:
            os.close(w1)
            os.close(r2)
            code = 0
            try:
                os.setgroups([])
                os.setgid(GID)
                os.setuid(uid)
                cmds = os.fdopen(r1)
                out = os.fdopen(w2, "w", buffering=1)
                serve(lambda: cmds.readline().strip(), lambda obj: out.write(json.dumps(obj) + "\n"),
                      lambda: select.select([r1], [], [], 0)[0] != [])
            except BaseException as e:  # noqa: B036: report anything to the parent
                os.write(w2, (json.dumps({"exception": repr(e)}) + "\n").encode())
                code = 1
            os._exit(code)
        os.close(r1)
        os.close(w2)
        self.cmd = os.fdopen(w1, "w", buffering=1)
        self.out = os.fdopen(r2)
        children.append(self)

    def ask(self, cmd):
        self.cmd.write(cmd + "\n")
        return self.recv()

    def recv(self):
        line = self.out.readline()
        return json.loads(line) if line else {"exception": "the child died"}

    def finish(self):
        try:
            self.cmd.write("exit\n")
            self.cmd.flush()
        except OSError:
            pass
        os.waitpid(self.pid, 0)
        children.remove(self)


def holder(sock, n):
    """Opens n connections one after the other, a status request on each;
    keeps the accepted ones open and asks again on 'again'."""
    def serve(cmd, send, _pending):
        conns, got = [], []
        for _ in range(n):
            s = connect(sock)
            r = request(s)
            got.append(r)
            if r == "ok":
                conns.append(s)
            else:
                s.close()
        send(got)
        while cmd() == "again":
            send([request(s) for s in conns])
    return serve


def flooder(sock):
    """Connects and closes as fast as it can until the parent writes."""
    def serve(_cmd, send, pending):
        n, told = 0, False
        while not pending():
            for _ in range(50):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(sock)
                    n += 1
                except OSError:
                    pass
                s.close()
            if n >= 200 and not told:
                send({"started": n})
                told = True
        send({"connects": n})
    return serve


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_per_uid_cap_and_roots_slot(start):
    # --- per-uid cap and root's slot
    daemon, sock = start("max_clients = 8\nmax_clients_per_uid = 4\n")
    a = Child(UID_A, holder(sock, 6))
    got = a.recv()
    assert got == ["ok"] * 4 + ["too-many-clients"] * 2, \
        f"uid A: 4 connections served, the 5th and 6th refused with too-many-clients: {got}"
    b = Child(UID_B, holder(sock, 4))
    got = b.recv()
    assert got == ["ok"] * 4, \
        f"uid B: its own 4 are served (max_clients 8 now full of non-root clients): {got}"
    root1 = connect(sock)
    assert request(root1) == "ok", \
        "root connects beyond max_clients"
    again = a.ask("again") + b.ask("again")
    assert again == ["ok"] * 8, \
        f"... in its own slot: nobody was evicted for it: {again}"
    root2 = connect(sock)
    assert request(root2) == "ok", \
        "a second root connection gets in (evicting an idle non-root one)"
    c = Child(UID_C, holder(sock, 1))
    got = c.recv()
    assert got == ["ok"], \
        f"a newcomer of another uid gets in: {got}"
    assert request(root1) == "ok" and request(root2) == "ok", \
        "... and never by evicting root"
    log = daemon.text()
    assert "uid 65534 has max_clients_per_uid=4" in log, \
        f"the refusal is logged with uid and cap: {log[-2000:]}"
    for ch in (a, b, c):
        ch.finish()
    root1.close()
    root2.close()
    assert daemon.stop() == 0, \
        "exits 0"


def test_reconnect_flood(start):
    # a reconnect flood by a group member
    daemon, sock = start("")
    flooders = [Child(UID_A, flooder(sock)) for _ in range(4)]
    started = [f.recv() for f in flooders]
    assert all("started" in s for s in started), \
        f"4 flooders are connecting and closing: {started}"
    t0 = time.monotonic()
    answers = []
    for _ in range(100):
        try:
            answers.append(root_call(sock))
        except OSError as e:
            answers.append(f"connect: errno {e.errno}")
    elapsed = time.monotonic() - t0
    ok = answers.count("ok")
    assert ok == 100, \
        f"under the flood, root's 100 status requests are all answered ({elapsed:.2f} s): " \
        f"{[a for a in answers if a != 'ok'][:5]}"
    counts = [f.ask("stop") for f in flooders]
    total = sum(c.get("connects", 0) for c in counts)
    for f in flooders:
        f.finish()
    elapsed = time.monotonic() - t0
    log = daemon.text()
    full = log.count("Control socket full")
    refused = log.count("has max_clients_per_uid=")
    print(f"  {total} flood connections in {elapsed:.1f} s; log lines: {full} 'socket full', {refused} 'refused'")
    assert total > 1000, \
        f"the flood was a flood (over 1000 connections): {total}"
    assert full <= elapsed + 2 and refused <= elapsed + 2, \
        f"log lines about it are rate limited (at most one of a kind per second): {(full, refused)}"
    assert daemon.stop() == 0, \
        "exits 0"


def test_out_of_file_descriptors(start):
    # out of file descriptors
    daemon, sock = start("max_clients = 100\nmax_clients_per_uid = 100\n")
    pid = daemon.proc.pid
    old = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    n_fds = len(os.listdir(f"/proc/{pid}/fd"))
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (n_fds + 4, old[1]))
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    a = Child(UID_A, holder(sock, 10))
    got = a.recv()
    cpu, elapsed = cpu_seconds(pid) - cpu0, time.monotonic() - t0
    # the limit counts fd numbers, not fds: a hole in the table leaves room for one more
    assert got.count("ok") in (4, 5) and got.count("ok") + got.count("too-many-clients") == 10, \
        f"at EMFILE: the clients that fit are served, the others refused at once, none hangs: {got}"
    assert cpu < 0.5 * max(elapsed, 1), \
        f"accept() does not spin: {cpu:.2f} s CPU in {elapsed:.2f} s: {cpu}"
    assert root_call(sock) == "ok", \
        "root is still served at EMFILE"
    log = daemon.text()
    n_lines = log.count("accept() on the control socket failed")
    assert 1 <= n_lines <= elapsed + 2, \
        f"the accept() error is logged, rate limited ({n_lines} lines in {elapsed:.1f} s): {log[-2000:]}"
    resource.prlimit(pid, resource.RLIMIT_NOFILE, old)
    a.finish()
    assert daemon.stop() == 0, \
        "exits 0"
