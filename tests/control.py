#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The control protocol against a real daemon on a fixture tree (dry run, no
root needed): every request, every error, reload with a broken and a fixed
policy set, abuse (huge lines, garbage, bad UTF-8, deep nesting, 200 idle
clients, a client that never reads), and blkpolicyctl's output and exit
codes, including a Prometheus parse of `metrics`."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

blkpolicyd, blkpolicyctl, fixture, top = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
from loopdev import Results  # noqa: E402

res = Results()
check = res.check


work = tempfile.mkdtemp(prefix="blkpolicyd-control-")
sock_path = os.path.join(work, "control.sock")
policies = os.path.join(work, "policies")
shutil.copytree(os.path.join(top, "policies"), policies)
conf = os.path.join(work, "blkpolicyd.conf")
with open(conf, "w") as f:
    f.write("[Daemon]\ntick_interval_ms = 100\nclient_timeout_ms = 3000\nmax_clients = 300\nmax_clients_per_uid = 300\n"
            f"metrics_textfile_dir = {work}\nmetrics_every_ticks = 2\n")
log = open(os.path.join(work, "daemon.log"), "w+")
daemon = subprocess.Popen([blkpolicyd, "--dry-run", "--config", conf, "--policy-dir", policies,
                           "--sysfs-root", f"{fixture}/sys", "--proc-root", f"{fixture}/proc",
                           "--debugfs-root", f"{fixture}/debug", "--state-dir", os.path.join(work, "state"),
                           "--socket", sock_path], stderr=log)


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(sock_path)
    return s


def recv_line(s):
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def call(req, s=None):
    own = s is None
    s = s or connect()
    s.sendall((req if isinstance(req, (bytes, str)) else json.dumps(req)).encode()
              if not isinstance(req, bytes) else req)
    if not (req.endswith(b"\n") if isinstance(req, bytes) else str(req).endswith("\n")):
        s.sendall(b"\n")
    line = recv_line(s)
    if own:
        s.close()
    return json.loads(line) if line else None


def ctl(*args):
    return subprocess.run([blkpolicyctl, "--socket", sock_path, *args], capture_output=True, text=True)


def error_code(reply):
    return reply and not reply["ok"] and reply["error"]["code"]


try:
    deadline = time.monotonic() + 10
    while not os.path.exists(sock_path):
        if time.monotonic() > deadline or daemon.poll() is not None:
            raise SystemExit("the daemon did not create its socket")
        time.sleep(0.01)

    st = call({"command": "status"})
    check("status", st["ok"] and st["result"]["devices"] == 4 and st["result"]["dry_run"] is True, st)
    devs = call({"command": "devices"})
    check("devices sorted by name", [d["name"] for d in devs["result"]] == ["dm-0", "loop0", "vda", "zram0"], devs)
    d = call({"command": "device", "device": "vda"})
    check("device", d["ok"] and d["result"]["policy"] == "20-fast-virtual.policy" and "paused" in d["result"], d)
    ex = call({"command": "explain", "device": "vda"})
    pol = {p["name"]: p for p in ex["result"]["policies"]}
    check("explain: every policy with the first failed condition",
          pol["20-fast-virtual.policy"]["matched"] and pol["10-ublk.policy"]["failed"] == "class"
          and pol["50-multipath-path.policy"]["failed"] == "hidden", ex)
    check("explain: the setting names its file",
          ex["result"]["settings"]["scheduler"]["source"] == "20-fast-virtual.policy", ex)
    p = call({"command": "policies"})
    check("policies", len(p["result"]["loaded"]) == 8 and p["result"]["errors"] == [], p)
    v = call({"command": "verify"})
    check("verify: nothing held in a dry run, no drift", v["ok"] and v["result"]["drifted"] == 0, v)
    m = call({"command": "metrics"})
    check("metrics", m["ok"] and "blkpolicyd_devices 4" in m["result"]["text"], m)

    # errors
    check("unknown command", error_code(call({"command": "frobnicate"})) == "unknown-command")
    check("command not a string", error_code(call({"command": 7})) == "invalid-request")
    check("not an object", error_code(call([1, 2])) == "invalid-request")
    check("device missing", error_code(call({"command": "explain"})) == "invalid-argument")
    check("device not a string", error_code(call({"command": "device", "device": ["vda"]})) == "invalid-argument")
    check("no such device", error_code(call({"command": "device", "device": "sdz"})) == "no-such-device")
    check("malformed JSON", error_code(call("{not json")) == "malformed-json")
    check("invalid UTF-8", error_code(call(b'{"command": "status", "x": "\xff\xfe"}\n')) == "invalid-utf8")
    check("deep nesting", error_code(call("[" * 5000 + "]" * 5000)) == "malformed-json")

    # reload: a broken file is skipped as at start, the others stay; a fixed one takes effect
    with open(os.path.join(policies, "90-broken.policy"), "w") as f:
        f.write("[Match]\nname = vda\n[Queue]\nscheduler = none\nnr_requests = lots\n")
    r = call({"command": "reload"})
    errs = r["result"]["errors"] if r["ok"] else []
    check("reload with a broken policy: accepted, the file rejected with file:line",
          r["ok"] and r["result"]["files_rejected"] == 1 and errs and errs[0]["line"] == 5
          and errs[0]["path"].endswith("90-broken.policy"), r)
    check("the other policies stay", len(call({"command": "policies"})["result"]["loaded"]) == 8)
    st = call({"command": "status"})["result"]
    check("status counts the rejected file and lists its error",
          st["policy_files_rejected"] == 1 and st["policy_errors"][0]["line"] == 5 and st["reload_errors"] is None, st)
    with open(os.path.join(policies, "90-broken.policy"), "w") as f:
        f.write("[Match]\nname = vda\n[Queue]\nscheduler = kyber\n")
    r = call({"command": "reload"})
    check("reload with a fixed policy", r["ok"] and len(r["result"]["loaded"]) == 9, r)
    d = call({"command": "device", "device": "vda"})["result"]
    check("the new decision is in force", d["settings"]["scheduler"]["target"] == "kyber"
          and d["policy"] == "90-broken.policy", d)

    # pause / resume
    check("pause", call({"command": "pause", "device": "vda"})["ok"]
          and call({"command": "device", "device": "vda"})["result"]["paused"] is True)
    check("resume", call({"command": "resume", "device": "vda"})["ok"]
          and call({"command": "device", "device": "vda"})["result"]["paused"] is False)
    call({"command": "pause"})
    check("pause all", call({"command": "status"})["result"]["paused_all"] is True)
    call({"command": "resume"})

    # abuse
    s = connect()
    try:
        s.sendall(b"x" * (1 << 20))
    except (BrokenPipeError, ConnectionResetError):
        pass    # the daemon stopped reading at 64 KiB and closed
    try:
        reply = json.loads(recv_line(s))
    except (OSError, ValueError):
        reply = None
    try:
        closed = s.recv(1) == b""
    except OSError:
        closed = True
    check("1 MiB without a newline: request-too-large, then closed",
          error_code(reply) == "request-too-large" and closed, reply)
    s.close()

    s = connect()
    s.sendall(b"garbage\n" * 10000)
    got = 0
    buf = b""
    while got < 10000:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        buf += chunk
        got = buf.count(b"\n")
    check("10,000 garbage lines get 10,000 error replies", got == 10000 and b'"malformed-json"' in buf, got)
    s.close()

    idle = [connect() for _ in range(200)]
    hog = connect()
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.sendall(b'{"command": "devices"}\n' * 2000)  # never reads a reply
    tick0 = call({"command": "status"})["result"]["tick"]["count"]
    t0 = time.monotonic()
    st = call({"command": "status"})
    elapsed = time.monotonic() - t0
    check(f"a good client is answered beside 200 idle ones and a hog ({elapsed * 1000:.1f} ms)",
          st and st["ok"] and elapsed < 0.1, elapsed)
    deadline = time.monotonic() + 2
    while call({"command": "status"})["result"]["tick"]["count"] < tick0 + 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    check("the tick keeps running", call({"command": "status"})["result"]["tick"]["count"] >= tick0 + 3)
    check("the daemon is still up", daemon.poll() is None)
    for c in idle:
        c.close()
    hog.close()

    # blkpolicyctl
    r = ctl("status")
    check("blkpolicyctl status", r.returncode == 0 and "devices 4, managed 2" in r.stdout, r.stdout + r.stderr)
    r = ctl("devices")
    check("blkpolicyctl devices", r.returncode == 0 and re.search(r"^vda\s+single-queue,virtio\s+mq-deadline", r.stdout, re.M),
          r.stdout)
    r = ctl("explain", "vda")
    check("blkpolicyctl explain", r.returncode == 0 and "20-fast-virtual.policy           matched" in r.stdout, r.stdout)
    r = ctl("--json", "device", "loop0")
    check("blkpolicyctl --json", r.returncode == 0 and json.loads(r.stdout)["result"]["name"] == "loop0")
    r = ctl("explain", "nope")
    check("blkpolicyctl: error reply exits 1", r.returncode == 1 and "no-such-device" in r.stderr, r.stderr)
    r = ctl("explain")
    check("blkpolicyctl: usage exits 2", r.returncode == 2)
    r = ctl("frobnicate")
    check("blkpolicyctl: unknown command exits 2", r.returncode == 2)
    r = subprocess.run([blkpolicyctl, "--socket", os.path.join(work, "nothere.sock"), "status"],
                       capture_output=True, text=True)
    check("blkpolicyctl: no daemon exits 3 and says so", r.returncode == 3 and "Is blkpolicyd running" in r.stderr,
          r.stderr)
    r = ctl("verify")
    # a dry run enforces nothing: what it would change is pending, never "no drift", and exit 4
    check("blkpolicyctl verify in a dry run: pending changes, exit 4",
          r.returncode == 4 and "pending" in r.stdout and "No drift" not in r.stdout, r.stdout)
    r = ctl("policies")
    check("blkpolicyctl policies", r.returncode == 0 and "90-broken.policy" in r.stdout)
    r = ctl("-n", "2", "top")
    check("blkpolicyctl top", r.returncode == 0 and r.stdout.count("DEVICE") == 2 and "vda" in r.stdout, r.stdout)
    r = ctl("metrics")
    samples = {}
    metric_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\S+)$')
    ok = r.returncode == 0
    for line in r.stdout.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        mm = metric_re.match(line)
        if not mm:
            ok = False
            print(f"  unparsable metrics line: {line!r}")
            continue
        float(mm.group(5))
        samples[mm.group(1)] = samples.get(mm.group(1), 0) + 1
    check("metrics parse as Prometheus text", ok and samples.get("blkpolicyd_device_scheduler") == 2, samples)
    prom = os.path.join(work, "blkpolicyd.prom")
    check("metrics are written for the textfile collector",
          os.path.exists(prom) and "blkpolicyd_ticks_total" in open(prom).read()
          and not os.path.exists(os.path.join(work, ".blkpolicyd.prom.tmp")))
    r = ctl("pause", "vda")
    check("blkpolicyctl pause as root", r.returncode == 0 if os.geteuid() == 0 else r.returncode == 1)
    ctl("resume", "vda")
finally:
    daemon.terminate()
    rc = daemon.wait(timeout=10)
    check("exits 0 on SIGTERM", rc == 0)
    check("removes its socket", not os.path.exists(sock_path))
    log.seek(0)
    if res.failed:
        print(log.read()[-3000:])
    shutil.rmtree(work, ignore_errors=True)

res.finish()
