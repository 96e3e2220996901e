#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""valgrind memcheck over the daemon's paths: --once on every fixture
machine, --check-config, --replay, and a daemon on a fixture serving every
control request, a reload and SIGTERM. No error and no leak allowed
(--error-exitcode, --errors-for-leak-kinds=definite,indirect)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
from loopdev import SKIP, Results  # noqa: E402

blkpolicyd, top = sys.argv[1:3]
if not shutil.which("valgrind"):
    if os.environ.get("CI") == "true":
        sys.exit("FAIL: valgrind is not installed")
    print("SKIP: valgrind is not installed")
    sys.exit(SKIP)
if "-fsanitize" in open(os.path.join(os.path.dirname(blkpolicyd), "..", "build.ninja")).read():
    print("SKIP: valgrind cannot run an ASan build; the plain build runs this test")
    sys.exit(SKIP)
VALGRIND = ["valgrind", "--quiet", "--error-exitcode=99", "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect", "--show-leak-kinds=definite,indirect"]
fixtures = os.path.join(top, "tests", "fixtures")
policies = os.path.join(top, "policies")
res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-memcheck-")


def roots(machine):
    m = os.path.join(fixtures, machine)
    return ["--sysfs-root", f"{m}/sys", "--proc-root", f"{m}/proc", "--debugfs-root", f"{m}/debug"]


def vg(*args, **kw):
    return subprocess.run([*VALGRIND, blkpolicyd, *args], capture_output=True, text=True, **kw)


try:
    for machine in sorted(os.listdir(fixtures)):
        if not os.path.isdir(os.path.join(fixtures, machine)):
            continue
        r = vg("--once", "--dry-run", "--config", "/dev/null", "--policy-dir", policies, *roots(machine),
               "--state-dir", os.path.join(work, "state"))
        res.check(f"--once on {machine}: clean", r.returncode == 0, r.stderr[-3000:])
    r = vg("--check-config", "--config", os.path.join(top, "conf/blkpolicyd.conf"), "--policy-dir",
           os.path.join(top, "fuzz/corpus/policy"))
    res.check("--check-config with broken policies: clean (exit 1 is the verdict, not 99)",
              r.returncode == 1, r.stderr[-3000:])
    r = vg("--replay", os.path.join(top, "tests/replay/loop-phases.jsonl"), "--config", "/dev/null",
           "--policy-dir", os.path.join(top, "tests/replay/policies"))
    res.check("--replay: clean", r.returncode == 0, r.stderr[-3000:])

    sock = os.path.join(work, "sock")
    pol = os.path.join(work, "policies")
    shutil.copytree(policies, pol)
    d = subprocess.Popen([*VALGRIND, blkpolicyd, "--dry-run", "--config", "/dev/null", "--policy-dir", pol,
                          *roots("conflicts"), "--root", os.path.join(fixtures, "conflicts", "root"),
                          "--state-dir", os.path.join(work, "state"), "--socket", sock],
                         stderr=subprocess.PIPE, text=True)

    def request(req):
        """One request; the socket file exists at bind(), a moment before
        listen(): a refused connection is retried until the deadline."""
        deadline = time.monotonic() + 120
        while True:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(60)
            try:
                s.connect(sock)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                s.close()
                if time.monotonic() > deadline or d.poll() is not None:
                    raise
                time.sleep(0.05)
        s.sendall(req.encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
        s.close()
        return json.loads(buf)

    try:
        for req in ['{"command": "status"}', '{"command": "devices"}', '{"command": "explain", "device": "vda"}',
                    '{"command": "policies"}', '{"command": "verify"}', '{"command": "metrics"}',
                    '{"command": "doctor"}', '{"command": "pause", "device": "vda"}', '{"command": "resume"}',
                    '{"command": "reload"}', '{"command": "nope"}', '{bad json',
                    '{"command": "device", "device": "sdz"}']:
            request(req)
        with open(os.path.join(pol, "99-broken.policy"), "w") as f:
            f.write("[Queue]\nnr_requests = x\n")
        d.send_signal(signal.SIGHUP)       # a reload that rejects a file, then SIGTERM
        deadline = time.monotonic() + 120
        while request('{"command": "status"}')["result"]["policy_files_rejected"] < 1:
            if time.monotonic() > deadline:
                raise AssertionError("the reload after SIGHUP never showed the rejected file")
            time.sleep(0.05)
    except BaseException:
        d.kill()            # never leave valgrind running behind a failed request
        d.communicate()
        raise
    d.send_signal(signal.SIGTERM)
    _, err = d.communicate(timeout=120)
    res.check("daemon serving every request, a failed reload and SIGTERM: clean", d.returncode == 0,
              "\n".join(l for l in err.splitlines() if l.startswith("==")))
finally:
    shutil.rmtree(work, ignore_errors=True)
res.finish()
