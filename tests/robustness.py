# SPDX-License-Identifier: LGPL-2.1-or-later
"""Hostile and careless files around a real daemon on a fixture tree (dry
run, no root needed):
- a FIFO named *.policy, and a FIFO as --config: start, reload and SIGTERM
  answer at once, nothing blocks in open();
- a dead log pipe: the daemon keeps answering and exits 0 on SIGTERM;
- planted symlinks: the metrics textfile's temp name, --record; a regular
  file at --socket: never followed, never deleted;
- a broken /etc override falls back to the shipped file, the same at start
  and at reload;
- a long exclude= line is refused, never cut; continuation lines append;
- --check-config with a missing --policy-dir fails;
- counts are of files rejected, not of errors, in --check-config, the log,
  status and metrics.

Each scenario is a test with its own work directory; every daemon it
started is killed at its end, pass or fail."""
import glob
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import time

import pytest

from blkptest.daemon import control_request, fixture_roots

BROKEN_20 = "[Match]\nclass = single-queue\ndriver = virtio_blk\n[Queue]\nscheduler = none\nnr_requets = 64\nfoo = 1\n"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class Daemon:
    """A dry-run daemon on the fixture, its log in a file unless stderr is given."""

    def __init__(self, env, name, policy_dirs, conf_text="[Daemon]\ntick_interval_ms = 100\n", conf=None,
                 extra=(), stderr=None, wait=True):
        self.dir = env.fresh(name)
        self.sock = os.path.join(self.dir, "control.sock")
        self.conf = conf or os.path.join(self.dir, "blkpolicyd.conf")
        if conf is None:
            write(self.conf, conf_text)
        self.log_path = os.path.join(self.dir, "daemon.log")
        self.log = open(self.log_path, "w+") if stderr is None else None
        # readiness and reloads heard as systemd would: reload is root-only
        # on the socket, and without root the test reloads with SIGHUP
        notify = os.path.join(self.dir, "notify")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(notify)
        args = [env.blkpolicyd, "--dry-run", "--config", self.conf, *env.roots,
                "--state-dir", os.path.join(self.dir, "state"), "--socket", self.sock, *extra]
        for d in policy_dirs:
            args += ["--policy-dir", d]
        self.proc = subprocess.Popen(args, stderr=stderr if stderr is not None else self.log,
                                     stdout=subprocess.DEVNULL, env=dict(os.environ, NOTIFY_SOCKET=notify))
        env.daemons.append(self)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the daemon exited with {self.proc.returncode}:\n{self.text()}")
            try:
                if self.call({"command": "status"}, timeout=1):
                    return
            except OSError:
                pass
            time.sleep(0.01)
        raise AssertionError("the daemon did not answer on its socket")

    def call(self, req, timeout=5):
        """The reply, parsed; None if the daemon closed without one."""
        buf = control_request(self.sock, req, timeout)
        return json.loads(buf) if buf else None

    def reload(self, timeout=5):
        """The reload reply: from the socket as root, else SIGHUP, READY=1, and
        the same reply made of status and policies."""
        if os.geteuid() == 0:
            return self.call({"command": "reload"}, timeout=timeout)
        self.notify.setblocking(False)
        try:
            while self.notify.recv(4096):
                pass
        except BlockingIOError:
            pass
        self.notify.settimeout(timeout)
        self.proc.send_signal(signal.SIGHUP)
        while "READY=1" not in self.notify.recv(4096).decode().split("\n"):
            pass
        st = self.call({"command": "status"})["result"]
        if st["reload_errors"]:
            return {"ok": False, "error": {"code": "reload-failed", "errors": st["reload_errors"]}}
        return self.call({"command": "policies"})

    def text(self):
        if not self.log:
            return ""
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self, timeout=5):
        """SIGTERM; the exit code, or None if it did not exit within timeout."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def settings(devices):
    """What a device is given: name -> (policy, {attr: (target, source path-independent)})."""
    return {d["name"]: (d["policy"], {k: (v["target"], v["source"]) for k, v in d["settings"].items()})
            for d in devices}


class Env:
    """One test's work directory, the daemons it started, and the programs as
    every scenario runs them."""

    def __init__(self, blkpolicyd, work, fixture, top):
        self.blkpolicyd = blkpolicyd
        self.work = work
        self.roots = fixture_roots(fixture)
        self.shipped = os.path.join(top, "policies")
        self.daemons = []

    def fresh(self, name):
        d = os.path.join(self.work, name)
        os.mkdir(d)
        return d

    def daemon(self, *args, **kw):
        return Daemon(self, *args, **kw)

    def once(self, policy_dirs, conf="/dev/null", extra=()):
        args = [self.blkpolicyd, "--once", "--dry-run", "--config", conf, *self.roots,
                "--state-dir", self.fresh(f"once-{time.monotonic_ns()}"), *extra]
        for d in policy_dirs:
            args += ["--policy-dir", d]
        return subprocess.run(args, capture_output=True, text=True, timeout=10)

    def run_check(self, *args):
        return subprocess.run([self.blkpolicyd, "--check-config", *args], capture_output=True, text=True, timeout=10)

    def cleanup(self):
        for d in self.daemons:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
            if d.log:
                print(f"--- {d.log_path}\n{d.text()[-2000:]}")
                d.log.close()
            d.notify.close()


@pytest.fixture
def env(blkpolicyd, work, kvm_fixture, top):
    e = Env(blkpolicyd, work, kvm_fixture, top)
    yield e
    e.cleanup()


def test_fifo_policy(env):
    # --- a FIFO named *.policy: rejected as "not a regular file", nothing blocks
    fifo_dir = env.fresh("fifo-policies")
    for f in glob.glob(os.path.join(env.shipped, "*.policy")):
        shutil.copy(f, fifo_dir)
    d = env.daemon("fifo-policy", [fifo_dir])
    os.mkfifo(os.path.join(fifo_dir, "90-fifo.policy"))
    t0 = time.monotonic()
    try:
        r = d.reload()
    except OSError as e:
        r = repr(e)
    assert isinstance(r, dict) and r["ok"] and r["result"]["files_rejected"] == 1 and time.monotonic() - t0 < 2, \
        f"reload with a FIFO *.policy answers at once ({(time.monotonic() - t0) * 1000:.0f} ms): {r}"
    t0 = time.monotonic()
    rc = d.stop()
    assert rc == 0, \
        f"... and SIGTERM ends it, exit 0 ({(time.monotonic() - t0) * 1000:.0f} ms): {d.text()[-2000:]}"
    d = env.daemon("fifo-policy-start", [fifo_dir])
    st = d.call({"command": "status"})["result"]
    assert (st["policy_files_rejected"] == 1
            and st["policies_loaded"] == len(glob.glob(os.path.join(env.shipped, "*.policy")))
            and st["policy_errors"][0]["message"] == "not a regular file"), \
        f"a FIFO *.policy at start: rejected as not a regular file, the others load: {st}"
    assert d.stop() == 0, \
        "... SIGTERM, exit 0"


def test_fifo_config(env):
    # --- a FIFO as --config: refused at start; at reload, the running config stays
    fifo_conf = os.path.join(env.work, "fifo.conf")
    os.mkfifo(fifo_conf)
    r = subprocess.run([env.blkpolicyd, "--check-config", "--config", fifo_conf, "--policy-dir", env.shipped],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode != 0 and f"{fifo_conf}: not a regular file" in r.stderr, \
        f"--config FIFO: fails at once, 'not a regular file': {r.stderr}"
    d = env.daemon("fifo-config", [env.shipped])
    os.rename(d.conf, d.conf + ".real")
    os.mkfifo(d.conf)
    t0 = time.monotonic()
    r = d.reload()
    assert r and not r["ok"] and r["error"]["code"] == "reload-failed", \
        f"reload with a FIFO config answers reload-failed at once ({(time.monotonic() - t0) * 1000:.0f} ms): {r}"
    st = d.call({"command": "status"})["result"]
    assert st["reload_errors"] and st["reload_errors"][0]["path"] == d.conf, \
        f"status says why the running config stays: {st}"
    assert f"{d.conf}: not a regular file" in d.text(), \
        f"the log names the file: {d.text()[-2000:]}"
    t0 = time.monotonic()
    rc = d.stop()
    assert rc == 0, \
        f"... and SIGTERM ends it, exit 0 ({(time.monotonic() - t0) * 1000:.0f} ms): {d.text()[-2000:]}"


def test_dead_log_pipe(env):
    # --- a dead log pipe: stderr's reader is gone before the daemon logs anything
    rd, wr = os.pipe()
    os.close(rd)
    d = env.daemon("dead-log", [env.shipped], conf_text="[Daemon]\ntick_interval_ms = 100\nlog_level = debug\n",
                   stderr=wr, wait=False)
    os.close(wr)
    try:
        d.wait_ready()
        answered = True
    except AssertionError as e:
        answered = False
        print(f"  {e}")
    r = d.reload() if answered else None   # logs, into the dead pipe
    assert answered and r and r["ok"], \
        f"a dead log pipe: the daemon keeps answering (status, reload): {r}"
    rc = d.stop()
    assert rc == 0, \
        f"... and exits 0 on SIGTERM (no death by SIGPIPE): {rc}"


def test_metrics_links(env):
    # --- metrics textfile: a planted symlink at the temp file's name is not followed
    prom_dir = env.fresh("textfile")
    os.chmod(prom_dir, 0o1777)
    victim = os.path.join(env.work, "victim")
    write(victim, "precious\n")
    os.symlink(victim, os.path.join(prom_dir, ".blkpolicyd.prom.tmp"))
    victim2 = os.path.join(env.work, "victim2")
    write(victim2, "precious too\n")
    os.symlink(victim2, os.path.join(prom_dir, "blkpolicyd.prom"))
    d = env.daemon("metrics", [env.shipped], conf_text="[Daemon]\ntick_interval_ms = 50\nmetrics_every_ticks = 1\n"
                   f"metrics_textfile_dir = {prom_dir}\n")
    prom = os.path.join(prom_dir, "blkpolicyd.prom")
    deadline = time.monotonic() + 5
    while os.path.islink(prom) and time.monotonic() < deadline:
        time.sleep(0.01)
    st_prom = os.lstat(prom)
    assert stat.S_ISREG(st_prom.st_mode) and "blkpolicyd_ticks_total" in open(prom).read(), \
        f"the textfile is written as a regular file of its own: {d.text()[-2000:]}"
    assert open(victim).read() == "precious\n" and open(victim2).read() == "precious too\n", \
        "... the symlinks planted at its temp name and its name were not followed"
    assert stat.S_IMODE(st_prom.st_mode) == 0o644, \
        f"... mode 0644: {oct(st_prom.st_mode)}"
    d.stop()
    # only once it has ended: running, it writes the next file every tick,
    # through a temp file of that name
    assert not os.path.lexists(os.path.join(prom_dir, ".blkpolicyd.prom.tmp")), \
        "... and no temp file is left"


def refused_record(env, name, file_name, make):
    """make(path) puts a file at <work>/file_name; a daemon started with
    --record onto it must refuse it at start. Returns the path, the
    daemon's exit status (it must exit within 10 s) and its log."""
    path = os.path.join(env.work, file_name)
    make(path)
    d = env.daemon(name, [env.shipped], extra=["--record", path], wait=False)
    return path, d.proc.wait(timeout=10), d.text()


def test_record_links(env):
    # --- --record: a symlink or a FIFO is refused, a new file is 0600
    victim = os.path.join(env.work, "victim-record")
    write(victim, "precious\n")
    _, rc, text = refused_record(env, "record-link", "rec-link.jsonl", lambda path: os.symlink(victim, path))
    assert rc != 0 and "symbolic link" in text, \
        f"--record onto a symlink: refused, exit non-zero: {text}"
    assert open(victim).read() == "precious\n", \
        "... the symlink's target is untouched"
    rec_fifo, rc, text = refused_record(env, "record-fifo", "rec.fifo", os.mkfifo)
    assert rc != 0 and "not a regular file" in text, \
        f"--record onto a FIFO: refused at once, 'not a regular file': {text}"
    r = subprocess.run([env.blkpolicyd, "--replay", rec_fifo, "--config", "/dev/null", "--policy-dir", env.shipped],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode != 0 and "not a regular file" in r.stderr, \
        f"--replay of a FIFO: refused at once, 'not a regular file': {r.stderr}"
    _, rc, text = refused_record(env, "record-hardlink", "rec-hard.jsonl", lambda path: os.link(victim, path))
    assert rc != 0 and "hard links" in text, \
        f"--record onto a hard link of another file: refused: {text}"
    assert open(victim).read() == "precious\n", \
        "... the linked file is untouched"
    rec = os.path.join(env.work, "rec.jsonl")
    d = env.daemon("record", [env.shipped], extra=["--record", rec])
    assert stat.S_IMODE(os.stat(rec).st_mode) == 0o600, \
        f"--record creates a new file 0600: {oct(os.stat(rec).st_mode)}"
    d.stop()
    d = env.daemon("record-again", [env.shipped], extra=["--record", rec])
    d.stop()
    with open(rec) as f:
        headers = sum(1 for line in f if "blkpolicyd_recording" in line)
    assert headers == 2, \
        f"... and appends to its own file on the next run: {headers}"


def test_socket_on_file(env):
    # --- --socket on a regular file: refused, the file kept
    not_sock = os.path.join(env.work, "not-a-socket")
    write(not_sock, "keep me\n")
    d = env.daemon("socket-file", [env.shipped], extra=["--socket", not_sock], wait=False)
    rc = d.proc.wait(timeout=10)
    assert rc != 0 and f"{not_sock} exists and is not a socket" in d.text(), \
        f"--socket on a regular file: refused, exit non-zero, the path named: {d.text()}"
    assert open(not_sock).read() == "keep me\n", \
        "... and the file is not deleted"


def test_socket_path_appears_listening(daemons, kvm_fixture, fault_injection):
    # --- a client that finds the control socket's path can connect: the
    # socket is bound under a name of its own and linked into place once it
    # listens (held 1 s between bind() and listen() here; a path that came
    # at bind() would refuse connections all that time)
    d = daemons.start(["--dry-run", "--config", "/dev/null", *fixture_roots(kvm_fixture), "--state-dir",
                       daemons.state, "--socket", daemons.sock],
                      env={"BLKPOLICYD_FAULTS": "listen:*:DELAY=1000"}, ready=False)
    deadline = time.monotonic() + 20
    while not os.path.exists(daemons.sock) and time.monotonic() < deadline and d.proc.poll() is None:
        time.sleep(0.001)       # the pace of the look, not a wait for anything
    assert "fault injection: listen" in d.text() and os.path.exists(daemons.sock), \
        f"the socket was held before listen(), then its path came: {d.text()[-1500:]}"
    reply = json.loads(control_request(daemons.sock, {"command": "status"}, 5))
    assert reply["ok"], f"the first connect to the path that appeared is answered: {reply}"
    assert [f for f in os.listdir(daemons.work) if f.endswith(".new")] == [], \
        "no temporary name is left beside it"
    assert d.stop() == 0 and not os.path.exists(daemons.sock), "... and it is removed at stop"


def test_broken_override(env):
    # --- a broken /etc override: the shipped file stays in force, at start and at reload alike
    vendor = env.fresh("vendor")
    for f in glob.glob(os.path.join(env.shipped, "*.policy")):      # not sets/, the frozen ones
        shutil.copy(f, vendor)
    admin = env.fresh("admin")
    base = env.once([vendor])
    write(os.path.join(admin, "20-fast-virtual.policy"), BROKEN_20)
    started = env.once([vendor, admin])
    assert (base.returncode == 0 and started.returncode == 0
            and settings(json.loads(base.stdout)["devices"]) == settings(json.loads(started.stdout)["devices"])), \
        f"--once with a broken override: same settings as without it: {started.stderr}"
    assert (f"{admin}/20-fast-virtual.policy is rejected: {vendor}/20-fast-virtual.policy stays in force"
            in started.stderr), \
        f"... the log says which file stays in force: {started.stderr}"
    d = env.daemon("override", [vendor, admin])
    at_start = d.call({"command": "devices"})["result"]
    vda = next(x for x in at_start if x["name"] == "vda")
    assert (vda["managed"] and vda["settings"]["scheduler"]["source"] == "20-fast-virtual.policy"
            and vda["settings"]["scheduler"]["target"] == "none"), \
        f"the daemon manages vda with the shipped file: {vda}"
    r = d.reload()
    at_reload = d.call({"command": "devices"})["result"]
    assert r["ok"] and settings(at_start) == settings(at_reload), \
        f"reload with the same files: accepted, same devices, same settings: {r}"
    loaded = {p["name"]: p["path"] for p in r["result"]["loaded"]}
    assert loaded.get("20-fast-virtual.policy") == os.path.join(vendor, "20-fast-virtual.policy"), \
        f"... the shipped 20-fast-virtual.policy is the one loaded: {loaded}"
    os.unlink(os.path.join(admin, "20-fast-virtual.policy"))
    d.stop()
    # the same files, broken only at reload
    d = env.daemon("override-reload", [vendor, admin])
    before = d.call({"command": "devices"})["result"]
    write(os.path.join(admin, "20-fast-virtual.policy"), BROKEN_20)
    r = d.reload()
    after = d.call({"command": "devices"})["result"]
    assert r["ok"] and r["result"]["files_rejected"] == 1 and settings(before) == settings(after), \
        f"an override broken at reload: accepted, nothing changes for the devices: {r}"
    st = d.call({"command": "status"})["result"]
    assert st["policy_files_rejected"] == 1 and len(st["policy_errors"]) == 2, \
        f"status: 1 file rejected, its 2 errors listed: {st}"
    m = d.call({"command": "metrics"})["result"]["text"]
    assert "blkpolicyd_policy_files_rejected 1\n" in m and "blkpolicyd_policy_errors 2\n" in m, \
        f"metrics: a gauge of rejected files, one of errors: {m[:600]}"
    n_loaded = len(glob.glob(os.path.join(vendor, "*.policy")))
    assert f"Policies: {n_loaded} policies loaded, 1 file rejected, 2 errors" in d.text(), \
        f"the log counts files, not errors: {d.text()[-2000:]}"
    d.stop()


def test_long_lines(env):
    # --- long exclude= lines: refused with file:line, never cut; continuation lines append
    exclude = " ".join(f"sdx{i}" for i in range(60)) + " vda"
    long_conf = os.path.join(env.work, "long.conf")
    write(long_conf, f"[Daemon]\nexclude = {exclude}\n")
    assert len(exclude) > 200, \
        "the test line is longer than inih's 200-byte buffer"
    r = env.run_check("--config", long_conf, "--policy-dir", env.shipped)
    assert r.returncode != 0 and f"{long_conf}:2: line longer than" in r.stderr, \
        f"--check-config: a long exclude= line fails, naming file:line: {r.stderr}"
    r = env.once([env.shipped], conf=long_conf)
    assert r.returncode != 0, \
        f"--once refuses it too (never runs with a cut list): {r.stdout[:300]}"
    split_conf = os.path.join(env.work, "split.conf")
    write(split_conf, "[Daemon]\nexclude = vda " + " ".join(f"sdx{i}" for i in range(30)) + "\n"
          "  " + " ".join(f"sdx{i}" for i in range(30, 60)) + "\nexclude = loop0\n")
    r = env.once([env.shipped], conf=split_conf)
    devs = {x["name"]: x for x in json.loads(r.stdout)["devices"]} if r.returncode == 0 else {}
    assert (all(devs.get(n, {}).get("managed") is False and "excluded" in (devs[n].get("reason") or "")
            for n in ("vda", "loop0"))), \
        f"a list over a continuation line and a repeated key: all of it holds (vda and loop0 excluded): {r.stderr}"


def test_check_config(env):
    # --- --check-config: a missing policy dir, counts of files
    missing = os.path.join(env.work, "no-such-dir")
    r = env.run_check("--config", "/dev/null", "--policy-dir", env.shipped, "--policy-dir", missing)
    assert r.returncode != 0 and missing in r.stderr, \
        f"--check-config with a missing --policy-dir fails and names it: {r.stderr}"
    conf_missing = os.path.join(env.work, "missing-dirs.conf")
    write(conf_missing, f"[Daemon]\npolicy_dirs = {env.shipped} {missing}\n")
    r = env.run_check("--config", conf_missing)
    assert r.returncode != 0 and missing in r.stderr, \
        f"--check-config with a missing configured policy_dirs= fails: {r.stderr}"
    r = env.run_check("--config", "/dev/null", "--policy-dir", env.shipped)
    assert r.returncode == 0, \
        f"--check-config with existing dirs passes: {r.stderr}"
    bad = env.fresh("bad-counts")
    write(os.path.join(bad, "10-good.policy"), "[Match]\nclass = loop\n[Queue]\nscheduler = none\n")
    write(os.path.join(bad, "20-typos.policy"), "[Match]\nclas = loop\n[Queue]\nschedulr = none\nnr_request = 4\n")
    r = env.run_check("--config", "/dev/null", "--policy-dir", bad)
    assert r.returncode != 0 and "1 policy loaded, 1 file rejected, 3 errors" in r.stdout, \
        f"--check-config counts files: '1 policy loaded, 1 file rejected, 3 errors': {r.stdout + r.stderr}"


