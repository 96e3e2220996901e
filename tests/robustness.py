#!/usr/bin/env python3
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
  status and metrics."""
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

blkpolicyd, blkpolicyctl, fixture, top = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
from loopdev import Results  # noqa: E402

res = Results()
check = res.check
work = tempfile.mkdtemp(prefix="blkpolicyd-robust-")
shipped = os.path.join(top, "policies")
ROOTS = ["--sysfs-root", f"{fixture}/sys", "--proc-root", f"{fixture}/proc", "--debugfs-root", f"{fixture}/debug"]
BROKEN_20 = "[Match]\nclass = single-queue\ndriver = virtio_blk\n[Queue]\nscheduler = none\nnr_requets = 64\nfoo = 1\n"


def fresh(name):
    d = os.path.join(work, name)
    os.mkdir(d)
    return d


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


daemons = []


class Daemon:
    """A dry-run daemon on the fixture, its log in a file unless stderr is given."""

    def __init__(self, name, policy_dirs, conf_text="[Daemon]\ntick_interval_ms = 100\n", conf=None,
                 extra=(), stderr=None, wait=True):
        self.dir = fresh(name)
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
        args = [blkpolicyd, "--dry-run", "--config", self.conf, *ROOTS,
                "--state-dir", os.path.join(self.dir, "state"), "--socket", self.sock, *extra]
        for d in policy_dirs:
            args += ["--policy-dir", d]
        self.proc = subprocess.Popen(args, stderr=stderr if stderr is not None else self.log,
                                     stdout=subprocess.DEVNULL, env=dict(os.environ, NOTIFY_SOCKET=notify))
        daemons.append(self)
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
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.sock)
            s.sendall(json.dumps(req).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            return json.loads(buf) if buf else None
        finally:
            s.close()

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


def once(policy_dirs, conf="/dev/null", extra=()):
    args = [blkpolicyd, "--once", "--dry-run", "--config", conf, *ROOTS,
            "--state-dir", fresh(f"once-{time.monotonic_ns()}"), *extra]
    for d in policy_dirs:
        args += ["--policy-dir", d]
    return subprocess.run(args, capture_output=True, text=True, timeout=10)


def settings(devices):
    """What a device is given: name -> (policy, {attr: (target, source path-independent)})."""
    return {d["name"]: (d["policy"], {k: (v["target"], v["source"]) for k, v in d["settings"].items()})
            for d in devices}


def run_check(*args):
    return subprocess.run([blkpolicyd, "--check-config", *args], capture_output=True, text=True, timeout=10)


def scenario_fifo_policy():
    # --- a FIFO named *.policy: rejected as "not a regular file", nothing blocks
    fifo_dir = fresh("fifo-policies")
    for f in os.listdir(shipped):
        shutil.copy(os.path.join(shipped, f), fifo_dir)
    d = Daemon("fifo-policy", [fifo_dir])
    os.mkfifo(os.path.join(fifo_dir, "90-fifo.policy"))
    t0 = time.monotonic()
    try:
        r = d.reload()
    except OSError as e:
        r = repr(e)
    check(f"reload with a FIFO *.policy answers at once ({(time.monotonic() - t0) * 1000:.0f} ms)",
          isinstance(r, dict) and r["ok"] and r["result"]["files_rejected"] == 1 and time.monotonic() - t0 < 2, r)
    t0 = time.monotonic()
    rc = d.stop()
    check(f"... and SIGTERM ends it, exit 0 ({(time.monotonic() - t0) * 1000:.0f} ms)", rc == 0, d.text()[-2000:])
    d = Daemon("fifo-policy-start", [fifo_dir])
    st = d.call({"command": "status"})["result"]
    check("a FIFO *.policy at start: rejected as not a regular file, the others load",
          st["policy_files_rejected"] == 1 and st["policies_loaded"] == 8
          and st["policy_errors"][0]["message"] == "not a regular file", st)
    check("... SIGTERM, exit 0", d.stop() == 0)


def scenario_fifo_config():
    # --- a FIFO as --config: refused at start; at reload, the running config stays
    fifo_conf = os.path.join(work, "fifo.conf")
    os.mkfifo(fifo_conf)
    r = subprocess.run([blkpolicyd, "--check-config", "--config", fifo_conf, "--policy-dir", shipped],
                       capture_output=True, text=True, timeout=10)
    check("--config FIFO: fails at once, 'not a regular file'",
          r.returncode != 0 and f"{fifo_conf}: not a regular file" in r.stderr, r.stderr)
    d = Daemon("fifo-config", [shipped])
    os.rename(d.conf, d.conf + ".real")
    os.mkfifo(d.conf)
    t0 = time.monotonic()
    r = d.reload()
    check(f"reload with a FIFO config answers reload-failed at once ({(time.monotonic() - t0) * 1000:.0f} ms)",
          r and not r["ok"] and r["error"]["code"] == "reload-failed", r)
    st = d.call({"command": "status"})["result"]
    check("status says why the running config stays", st["reload_errors"] and st["reload_errors"][0]["path"] == d.conf,
          st)
    check("the log names the file", f"{d.conf}: not a regular file" in d.text(), d.text()[-2000:])
    t0 = time.monotonic()
    rc = d.stop()
    check(f"... and SIGTERM ends it, exit 0 ({(time.monotonic() - t0) * 1000:.0f} ms)", rc == 0, d.text()[-2000:])


def scenario_dead_log_pipe():
    # --- a dead log pipe: stderr's reader is gone before the daemon logs anything
    rd, wr = os.pipe()
    os.close(rd)
    d = Daemon("dead-log", [shipped], conf_text="[Daemon]\ntick_interval_ms = 100\nlog_level = debug\n",
               stderr=wr, wait=False)
    os.close(wr)
    try:
        d.wait_ready()
        answered = True
    except AssertionError as e:
        answered = False
        print(f"  {e}")
    r = d.reload() if answered else None   # logs, into the dead pipe
    check("a dead log pipe: the daemon keeps answering (status, reload)", answered and r and r["ok"], r)
    rc = d.stop()
    check("... and exits 0 on SIGTERM (no death by SIGPIPE)", rc == 0, rc)


def scenario_metrics_links():
    # --- metrics textfile: a planted symlink at the temp file's name is not followed
    prom_dir = fresh("textfile")
    os.chmod(prom_dir, 0o1777)
    victim = os.path.join(work, "victim")
    write(victim, "precious\n")
    os.symlink(victim, os.path.join(prom_dir, ".blkpolicyd.prom.tmp"))
    victim2 = os.path.join(work, "victim2")
    write(victim2, "precious too\n")
    os.symlink(victim2, os.path.join(prom_dir, "blkpolicyd.prom"))
    d = Daemon("metrics", [shipped], conf_text="[Daemon]\ntick_interval_ms = 50\nmetrics_every_ticks = 1\n"
               f"metrics_textfile_dir = {prom_dir}\n")
    prom = os.path.join(prom_dir, "blkpolicyd.prom")
    deadline = time.monotonic() + 5
    while os.path.islink(prom) and time.monotonic() < deadline:
        time.sleep(0.01)
    st_prom = os.lstat(prom)
    check("the textfile is written as a regular file of its own",
          stat.S_ISREG(st_prom.st_mode) and "blkpolicyd_ticks_total" in open(prom).read(), d.text()[-2000:])
    check("... the symlinks planted at its temp name and its name were not followed",
          open(victim).read() == "precious\n" and open(victim2).read() == "precious too\n")
    check("... and no temp file is left", not os.path.lexists(os.path.join(prom_dir, ".blkpolicyd.prom.tmp")))
    check("... mode 0644", stat.S_IMODE(st_prom.st_mode) == 0o644, oct(st_prom.st_mode))
    d.stop()


def scenario_record_links():
    # --- --record: a symlink or a FIFO is refused, a new file is 0600
    victim = os.path.join(work, "victim-record")
    write(victim, "precious\n")
    rec_link = os.path.join(work, "rec-link.jsonl")
    os.symlink(victim, rec_link)
    d = Daemon("record-link", [shipped], extra=["--record", rec_link], wait=False)
    rc = d.proc.wait(timeout=10)
    check("--record onto a symlink: refused, exit non-zero", rc != 0 and "symbolic link" in d.text(), d.text())
    check("... the symlink's target is untouched", open(victim).read() == "precious\n")
    rec_fifo = os.path.join(work, "rec.fifo")
    os.mkfifo(rec_fifo)
    d = Daemon("record-fifo", [shipped], extra=["--record", rec_fifo], wait=False)
    rc = d.proc.wait(timeout=10)
    check("--record onto a FIFO: refused at once, 'not a regular file'",
          rc != 0 and "not a regular file" in d.text(), d.text())
    r = subprocess.run([blkpolicyd, "--replay", rec_fifo, "--config", "/dev/null", "--policy-dir", shipped],
                       capture_output=True, text=True, timeout=10)
    check("--replay of a FIFO: refused at once, 'not a regular file'",
          r.returncode != 0 and "not a regular file" in r.stderr, r.stderr)
    rec_hard = os.path.join(work, "rec-hard.jsonl")
    os.link(victim, rec_hard)
    d = Daemon("record-hardlink", [shipped], extra=["--record", rec_hard], wait=False)
    rc = d.proc.wait(timeout=10)
    check("--record onto a hard link of another file: refused", rc != 0 and "hard links" in d.text(), d.text())
    check("... the linked file is untouched", open(victim).read() == "precious\n")
    rec = os.path.join(work, "rec.jsonl")
    d = Daemon("record", [shipped], extra=["--record", rec])
    check("--record creates a new file 0600", stat.S_IMODE(os.stat(rec).st_mode) == 0o600, oct(os.stat(rec).st_mode))
    d.stop()
    d = Daemon("record-again", [shipped], extra=["--record", rec])
    d.stop()
    with open(rec) as f:
        headers = sum(1 for line in f if "blkpolicyd_recording" in line)
    check("... and appends to its own file on the next run", headers == 2, headers)


def scenario_socket_on_file():
    # --- --socket on a regular file: refused, the file kept
    not_sock = os.path.join(work, "not-a-socket")
    write(not_sock, "keep me\n")
    d = Daemon("socket-file", [shipped], extra=["--socket", not_sock], wait=False)
    rc = d.proc.wait(timeout=10)
    check("--socket on a regular file: refused, exit non-zero, the path named",
          rc != 0 and f"{not_sock} exists and is not a socket" in d.text(), d.text())
    check("... and the file is not deleted", open(not_sock).read() == "keep me\n")


def scenario_broken_override():
    # --- a broken /etc override: the shipped file stays in force, at start and at reload alike
    vendor = fresh("vendor")
    for f in os.listdir(shipped):
        shutil.copy(os.path.join(shipped, f), vendor)
    admin = fresh("admin")
    base = once([vendor])
    write(os.path.join(admin, "20-fast-virtual.policy"), BROKEN_20)
    started = once([vendor, admin])
    check("--once with a broken override: same settings as without it",
          base.returncode == 0 and started.returncode == 0
          and settings(json.loads(base.stdout)["devices"]) == settings(json.loads(started.stdout)["devices"]),
          started.stderr)
    check("... the log says which file stays in force",
          f"{admin}/20-fast-virtual.policy is rejected: {vendor}/20-fast-virtual.policy stays in force"
          in started.stderr, started.stderr)
    d = Daemon("override", [vendor, admin])
    at_start = d.call({"command": "devices"})["result"]
    vda = next(x for x in at_start if x["name"] == "vda")
    check("the daemon manages vda with the shipped file",
          vda["managed"] and vda["policy"] == "20-fast-virtual.policy"
          and vda["settings"]["scheduler"]["target"] == "none", vda)
    r = d.reload()
    at_reload = d.call({"command": "devices"})["result"]
    check("reload with the same files: accepted, same devices, same settings",
          r["ok"] and settings(at_start) == settings(at_reload), r)
    loaded = {p["name"]: p["path"] for p in r["result"]["loaded"]}
    check("... the shipped 20-fast-virtual.policy is the one loaded",
          loaded.get("20-fast-virtual.policy") == os.path.join(vendor, "20-fast-virtual.policy"), loaded)
    os.unlink(os.path.join(admin, "20-fast-virtual.policy"))
    d.stop()
    # the same files, broken only at reload
    d = Daemon("override-reload", [vendor, admin])
    before = d.call({"command": "devices"})["result"]
    write(os.path.join(admin, "20-fast-virtual.policy"), BROKEN_20)
    r = d.reload()
    after = d.call({"command": "devices"})["result"]
    check("an override broken at reload: accepted, nothing changes for the devices",
          r["ok"] and r["result"]["files_rejected"] == 1 and settings(before) == settings(after), r)
    st = d.call({"command": "status"})["result"]
    check("status: 1 file rejected, its 2 errors listed",
          st["policy_files_rejected"] == 1 and len(st["policy_errors"]) == 2, st)
    m = d.call({"command": "metrics"})["result"]["text"]
    check("metrics: a gauge of rejected files, one of errors",
          "blkpolicyd_policy_files_rejected 1\n" in m and "blkpolicyd_policy_errors 2\n" in m, m[:600])
    check("the log counts files, not errors",
          "Policies: 8 policies loaded, 1 file rejected, 2 errors" in d.text(), d.text()[-2000:])
    d.stop()


def scenario_long_lines():
    # --- long exclude= lines: refused with file:line, never cut; continuation lines append
    exclude = " ".join(f"sdx{i}" for i in range(60)) + " vda"
    long_conf = os.path.join(work, "long.conf")
    write(long_conf, f"[Daemon]\nexclude = {exclude}\n")
    check("the test line is longer than inih's 200-byte buffer", len(exclude) > 200)
    r = run_check("--config", long_conf, "--policy-dir", shipped)
    check("--check-config: a long exclude= line fails, naming file:line",
          r.returncode != 0 and f"{long_conf}:2: line longer than" in r.stderr, r.stderr)
    r = once([shipped], conf=long_conf)
    check("--once refuses it too (never runs with a cut list)", r.returncode != 0, r.stdout[:300])
    split_conf = os.path.join(work, "split.conf")
    write(split_conf, "[Daemon]\nexclude = vda " + " ".join(f"sdx{i}" for i in range(30)) + "\n"
          "  " + " ".join(f"sdx{i}" for i in range(30, 60)) + "\nexclude = loop0\n")
    r = once([shipped], conf=split_conf)
    devs = {x["name"]: x for x in json.loads(r.stdout)["devices"]} if r.returncode == 0 else {}
    check("a list over a continuation line and a repeated key: all of it holds (vda and loop0 excluded)",
          all(devs.get(n, {}).get("managed") is False and "excluded" in (devs[n].get("reason") or "")
              for n in ("vda", "loop0")), r.stderr)


def scenario_check_config():
    # --- --check-config: a missing policy dir, counts of files
    missing = os.path.join(work, "no-such-dir")
    r = run_check("--config", "/dev/null", "--policy-dir", shipped, "--policy-dir", missing)
    check("--check-config with a missing --policy-dir fails and names it",
          r.returncode != 0 and missing in r.stderr, r.stderr)
    conf_missing = os.path.join(work, "missing-dirs.conf")
    write(conf_missing, f"[Daemon]\npolicy_dirs = {shipped} {missing}\n")
    r = run_check("--config", conf_missing)
    check("--check-config with a missing configured policy_dirs= fails", r.returncode != 0 and missing in r.stderr,
          r.stderr)
    r = run_check("--config", "/dev/null", "--policy-dir", shipped)
    check("--check-config with existing dirs passes", r.returncode == 0, r.stderr)
    bad = fresh("bad-counts")
    write(os.path.join(bad, "10-good.policy"), "[Match]\nclass = loop\n[Queue]\nscheduler = none\n")
    write(os.path.join(bad, "20-typos.policy"), "[Match]\nclas = loop\n[Queue]\nschedulr = none\nnr_request = 4\n")
    r = run_check("--config", "/dev/null", "--policy-dir", bad)
    check("--check-config counts files: '1 policy loaded, 1 file rejected, 3 errors'",
          r.returncode != 0 and "1 policy loaded, 1 file rejected, 3 errors" in r.stdout, r.stdout + r.stderr)


try:
    for scenario in [v for k, v in list(globals().items()) if k.startswith("scenario_")]:
        try:
            scenario()
        except Exception as e:  # noqa: BLE001: one scenario's crash is its failure, the others still run
            check(f"{scenario.__name__} ran to the end", False, repr(e))
finally:
    for d in daemons:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
    shutil.rmtree(work, ignore_errors=True)

res.finish()
