# SPDX-License-Identifier: LGPL-2.1-or-later
"""The control protocol against a real daemon on a fixture tree (dry run, no
root needed): every request, every error, reload with a broken and a fixed
policy set, abuse (huge lines, garbage, bad UTF-8, deep nesting, 200 idle
clients, a client that never reads), and blkpolicyctl's output and exit
codes, including a Prometheus parse of `metrics`.

One daemon serves the whole file; the tests run in file order (the reload
test leaves 90-broken.policy in force for the blkpolicyctl tests)."""
import json
import os
import re
import shutil
import socket
import subprocess
import time

import pytest

from blkptest.daemon import control_connect as connect, fixture_roots, recv_line, wait_for


@pytest.fixture(scope="module")
def env(module_daemons, kvm_fixture, top):
    work = module_daemons.work
    policies = os.path.join(work, "policies")
    shutil.copytree(os.path.join(top, "policies"), policies)
    conf = os.path.join(work, "blkpolicyd.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\ntick_interval_ms = 100\nclient_timeout_ms = 3000\nmax_clients = 300\n"
                f"max_clients_per_uid = 300\nmetrics_textfile_dir = {work}\nmetrics_every_ticks = 2\n"
                "metrics_per_device = yes\n")
    d = module_daemons.start(["--dry-run", "--config", conf, "--policy-dir", policies, *fixture_roots(kvm_fixture),
                              "--state-dir", os.path.join(work, "state"), "--socket", module_daemons.sock])
    shipped = len([n for n in os.listdir(policies) if n.endswith(".policy")])
    return {"work": work, "policies": policies, "sock": module_daemons.sock, "daemon": d, "shipped": shipped}


@pytest.fixture
def sock_path(env):
    return env["sock"]


@pytest.fixture
def ctl(run_ctl, sock_path):
    return lambda *args: run_ctl(sock_path, *args)


@pytest.fixture
def call(sock_path):
    """One request (a dict as JSON, or raw str/bytes), its reply parsed."""
    def call(req, s=None):
        own = s is None
        s = s or connect(sock_path)
        s.sendall((req if isinstance(req, (bytes, str)) else json.dumps(req)).encode()
                  if not isinstance(req, bytes) else req)
        if not (req.endswith(b"\n") if isinstance(req, bytes) else str(req).endswith("\n")):
            s.sendall(b"\n")
        line = recv_line(s)
        if own:
            s.close()
        return json.loads(line) if line else None
    return call


def error_code(reply):
    return reply and not reply["ok"] and reply["error"]["code"]


def test_requests(call, env):
    st = call({"command": "status"})
    assert st["ok"] and st["result"]["devices"] == 4 and st["result"]["dry_run"] is True, st
    devs = call({"command": "devices"})
    assert [d["name"] for d in devs["result"]] == ["dm-0", "loop0", "vda", "zram0"], f"devices sorted by name: {devs}"
    d = call({"command": "device", "device": "vda"})
    # 6.18: the virtio read-ahead file of set 2 matches after the scheduler's; the last one names the device
    assert d["ok"] and d["result"]["matched"] == ["20-fast-virtual.policy", "21-virtio-trial.policy",
                                                 "22-virtio-read-ahead.policy"] \
        and d["result"]["policy"] == "22-virtio-read-ahead.policy" and "paused" in d["result"], d
    ex = call({"command": "explain", "device": "vda"})
    pol = {p["name"]: p for p in ex["result"]["policies"]}
    # every policy with the first failed condition
    assert pol["20-fast-virtual.policy"]["matched"] and pol["10-ublk.policy"]["failed"] == "class" \
        and pol["50-multipath-path.policy"]["failed"] == "hidden", ex
    assert ex["result"]["settings"]["scheduler"]["source"] == "20-fast-virtual.policy", \
        f"explain: the setting names its file: {ex}"
    p = call({"command": "policies"})
    assert len(p["result"]["loaded"]) == env["shipped"] and p["result"]["errors"] == [], p
    v = call({"command": "verify"})
    assert v["ok"] and v["result"]["drifted"] == 0, f"verify: nothing held in a dry run, no drift: {v}"
    m = call({"command": "metrics"})
    assert m["ok"] and "blkpolicyd_devices 4" in m["result"]["text"], m


@pytest.mark.parametrize("req, code", [
    ({"command": "frobnicate"}, "unknown-command"),
    ({"command": 7}, "invalid-request"),
    ([1, 2], "invalid-request"),
    ({"command": "explain"}, "invalid-argument"),                     # device missing
    ({"command": "device", "device": ["vda"]}, "invalid-argument"),   # device not a string
    ({"command": "device", "device": "sdz"}, "no-such-device"),
    ("{not json", "malformed-json"),
    (b'{"command": "status", "x": "\xff\xfe"}\n', "invalid-utf8"),
    ("[" * 5000 + "]" * 5000, "malformed-json"),                     # deep nesting
], ids=["unknown-command", "command-not-string", "not-an-object", "device-missing", "device-not-string",
        "no-such-device", "malformed-json", "invalid-utf8", "deep-nesting"])
def test_errors(call, req, code):
    assert error_code(call(req)) == code


def test_reload(call, env):
    # a broken file is skipped as at start, the others stay; a fixed one takes effect
    broken = os.path.join(env["policies"], "90-broken.policy")
    with open(broken, "w") as f:
        f.write("[Match]\nname = vda\n[Queue]\nscheduler = none\nnr_requests = lots\n")
    r = call({"command": "reload"})
    errs = r["result"]["errors"] if r["ok"] else []
    assert r["ok"] and r["result"]["files_rejected"] == 1 and errs and errs[0]["line"] == 5 \
        and errs[0]["path"].endswith("90-broken.policy"), \
        f"reload with a broken policy: accepted, the file rejected with file:line: {r}"
    assert len(call({"command": "policies"})["result"]["loaded"]) == env["shipped"], "the other policies stay"
    st = call({"command": "status"})["result"]
    assert st["policy_files_rejected"] == 1 and st["policy_errors"][0]["line"] == 5 \
        and st["reload_errors"] is None, f"status counts the rejected file and lists its error: {st}"
    with open(broken, "w") as f:
        f.write("[Match]\nname = vda\n[Queue]\nscheduler = kyber\n")
    r = call({"command": "reload"})
    assert r["ok"] and len(r["result"]["loaded"]) == env["shipped"] + 1, f"reload with a fixed policy: {r}"
    d = call({"command": "device", "device": "vda"})["result"]
    assert d["settings"]["scheduler"]["target"] == "kyber" and d["policy"] == "90-broken.policy", \
        f"the new decision is in force: {d}"


def test_pause_resume(call):
    assert call({"command": "pause", "device": "vda"})["ok"]
    assert call({"command": "device", "device": "vda"})["result"]["paused"] is True
    assert call({"command": "resume", "device": "vda"})["ok"]
    assert call({"command": "device", "device": "vda"})["result"]["paused"] is False
    call({"command": "pause"})
    assert call({"command": "status"})["result"]["paused_all"] is True, "pause all"
    call({"command": "resume"})


def test_huge_line_is_refused_then_closed(sock_path):
    s = connect(sock_path)
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
    s.close()
    # 1 MiB without a newline: request-too-large, then closed
    assert error_code(reply) == "request-too-large" and closed, reply


def test_garbage_lines_each_get_an_error(sock_path):
    s = connect(sock_path)
    s.sendall(b"garbage\n" * 10000)
    got = 0
    buf = b""
    while got < 10000:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        buf += chunk
        got = buf.count(b"\n")
    s.close()
    assert got == 10000 and b'"malformed-json"' in buf, got


def test_idle_clients_and_a_hog(call, sock_path, env):
    idle = [connect(sock_path) for _ in range(200)]
    hog = connect(sock_path)
    try:
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hog.sendall(b'{"command": "devices"}\n' * 2000)  # never reads a reply
        tick0 = call({"command": "status"})["result"]["tick"]["count"]
        t0 = time.monotonic()
        st = call({"command": "status"})
        elapsed = time.monotonic() - t0
        # a good client is answered beside 200 idle ones and a hog
        assert st and st["ok"] and elapsed < 0.1, elapsed
        deadline = time.monotonic() + 2
        while call({"command": "status"})["result"]["tick"]["count"] < tick0 + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert call({"command": "status"})["result"]["tick"]["count"] >= tick0 + 3, "the tick keeps running"
        assert env["daemon"].proc.poll() is None, "the daemon is still up"
    finally:
        for c in idle:
            c.close()
        hog.close()


def test_blkpolicyctl(ctl, blkpolicyctl, env):
    r = ctl("status")
    assert r.returncode == 0 and "devices 4, managed 2" in r.stdout, r.stdout + r.stderr
    r = ctl("devices")
    assert r.returncode == 0 and re.search(r"^vda\s+single-queue,virtio\s+mq-deadline", r.stdout, re.M), r.stdout
    r = ctl("explain", "vda")
    assert r.returncode == 0 and "20-fast-virtual.policy           matched" in r.stdout, r.stdout
    r = ctl("--json", "device", "loop0")
    assert r.returncode == 0 and json.loads(r.stdout)["result"]["name"] == "loop0"
    r = ctl("explain", "nope")
    assert r.returncode == 1 and "no-such-device" in r.stderr, f"an error reply exits 1: {r.stderr}"
    assert ctl("explain").returncode == 2, "usage exits 2"
    assert ctl("frobnicate").returncode == 2, "an unknown command exits 2"
    r = subprocess.run([blkpolicyctl, "--socket", os.path.join(env["work"], "nothere.sock"), "status"],
                       capture_output=True, text=True)
    assert r.returncode == 3 and "Is blkpolicyd running" in r.stderr, f"no daemon exits 3 and says so: {r.stderr}"
    r = ctl("verify")
    # a dry run enforces nothing: what it would change is pending, never "no drift", and exit 4
    assert r.returncode == 4 and "pending" in r.stdout and "No drift" not in r.stdout, r.stdout
    r = ctl("policies")
    assert r.returncode == 0 and "90-broken.policy" in r.stdout
    r = ctl("-n", "2", "top")
    assert r.returncode == 0 and r.stdout.count("DEVICE") == 2 and "vda" in r.stdout, r.stdout


def test_metrics(ctl, env):
    r = ctl("metrics")
    samples = {}
    metric_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\S+)$')
    unparsable = []
    for line in r.stdout.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        mm = metric_re.match(line)
        if not mm:
            unparsable.append(line)
            continue
        float(mm.group(5))
        samples[mm.group(1)] = samples.get(mm.group(1), 0) + 1
    assert r.returncode == 0 and not unparsable, f"metrics parse as Prometheus text; unparsable: {unparsable}"
    assert samples.get("blkpolicyd_device_scheduler") == 2, samples
    prom = os.path.join(env["work"], "blkpolicyd.prom")
    # written for the textfile collector, by rename
    assert os.path.exists(prom) and "blkpolicyd_ticks_total" in open(prom).read()
    # the temp file exists only while a write is under way: the textfile
    # is rewritten every 2 ticks, so it may be seen mid-write, but it must
    # go (renamed into place) rather than stay
    tmp = os.path.join(env["work"], ".blkpolicyd.prom.tmp")
    wait_for(lambda: not os.path.exists(tmp), 10, "the textfile's temp file renamed away")


def test_reload_moves_the_textfile(call, env):
    """A reload that moves metrics_textfile_dir, then drops it: the file
    left in the old dir would be served frozen (blkpolicyd_build_info 1
    after the daemon stopped writing it). Only blkpolicyd.prom goes."""
    work = env["work"]
    conf = os.path.join(work, "blkpolicyd.conf")
    with open(conf) as f:
        original = f.read()
    old, new = os.path.join(work, "blkpolicyd.prom"), os.path.join(work, "moved", "blkpolicyd.prom")
    other = os.path.join(work, "node.prom")
    with open(other, "w") as f:
        f.write("node_other 1\n")       # another collector's file in the same dir
    os.makedirs(os.path.dirname(new), exist_ok=True)
    wait_for(lambda: os.path.exists(old), 10, "the textfile in the configured dir")
    try:
        with open(conf, "w") as f:
            f.write(original.replace(f"metrics_textfile_dir = {work}\n",
                                     f"metrics_textfile_dir = {os.path.dirname(new)}\n"))
        assert call({"command": "reload"})["ok"]
        assert not os.path.exists(old) and os.path.exists(new) and "blkpolicyd_build_info" in open(new).read() \
            and os.path.exists(other), \
            f"a moved dir: the old file is gone at the reply, the new one written, others' stay: {os.listdir(work)}"
        with open(conf, "w") as f:
            f.write(original.replace(f"metrics_textfile_dir = {work}\n", ""))
        assert call({"command": "reload"})["ok"]
        assert not os.path.exists(new) and not os.path.exists(old) and os.path.exists(other), \
            "a dropped dir: the file is gone"
    finally:
        with open(conf, "w") as f:
            f.write(original)
        call({"command": "reload"})
        os.unlink(other)
    assert os.path.exists(old), "back in the first dir: written at the reload"


def test_pause_needs_root(ctl):
    r = ctl("pause", "vda")
    assert r.returncode == (0 if os.geteuid() == 0 else 1)
    ctl("resume", "vda")


def test_sigterm_exits_0_and_removes_socket(env):
    assert env["daemon"].stop() == 0, "exits 0 on SIGTERM"
    assert not os.path.exists(env["sock"]), "removes its socket"
