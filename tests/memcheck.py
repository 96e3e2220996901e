# SPDX-License-Identifier: LGPL-2.1-or-later
"""valgrind memcheck over the daemon's paths: --once on every fixture
machine, --check-config, --replay, and a daemon on a fixture serving every
control request, a reload and SIGTERM. No error and no leak allowed
(--error-exitcode, --errors-for-leak-kinds=definite,indirect)."""
import os
import shutil
import signal
import socket
import subprocess

import pytest

from blkptest import require
from blkptest.daemon import Daemon, control_call, fixture_roots

VALGRIND = ["valgrind", "--quiet", "--error-exitcode=99", "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect", "--show-leak-kinds=definite,indirect"]
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
# the fixture trees a daemon can read (a sys/), not the data files beside
# them (trial/: diskstats series for test-trial)
MACHINES = sorted(m for m in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, m, "sys")))


@pytest.fixture(scope="module", autouse=True)
def valgrind_usable(blkpolicyd):
    if not shutil.which("valgrind"):
        require.skip_or_fail("valgrind is not installed")
    with open(os.path.join(os.path.dirname(blkpolicyd), "..", "build.ninja")) as f:
        if "-fsanitize" in f.read():
            pytest.skip("valgrind cannot run an ASan build; the plain build runs this test")


@pytest.fixture
def vg(blkpolicyd):
    return lambda *args: subprocess.run([*VALGRIND, blkpolicyd, *args], capture_output=True, text=True)


@pytest.mark.parametrize("machine", MACHINES)
def test_once(vg, top, work, machine):
    r = vg("--once", "--dry-run", "--config", "/dev/null", "--policy-dir", os.path.join(top, "policies"),
           *fixture_roots(os.path.join(FIXTURES, machine)), "--state-dir", os.path.join(work, "state"))
    assert r.returncode == 0, r.stderr[-3000:]


def test_check_config_with_broken_policies(vg, top):
    r = vg("--check-config", "--config", os.path.join(top, "conf/blkpolicyd.conf"), "--policy-dir",
           os.path.join(top, "fuzz/corpus/policy"))
    assert r.returncode == 1, "exit 1 is the verdict, 99 an error\n" + r.stderr[-3000:]


@pytest.mark.parametrize("recording", ["loop-phases", "loop-trial", "trial-notes"])
def test_replay(vg, top, recording):
    r = vg("--replay", os.path.join(top, f"tests/replay/{recording}.jsonl"), "--config", "/dev/null",
           "--policy-dir", os.path.join(top, "tests/replay/policies"))
    assert r.returncode == 0, r.stderr[-3000:]


def test_daemon_requests_reload_and_sigterm(blkpolicyd, top, work):
    sock = os.path.join(work, "sock")
    pol = os.path.join(work, "policies")
    shutil.copytree(os.path.join(top, "policies"), pol)
    conflicts = os.path.join(FIXTURES, "conflicts")
    # valgrind passes NOTIFY_SOCKET on: READY=1 says the socket listens
    d = Daemon(VALGRIND[0], work, [*VALGRIND[1:], blkpolicyd, "--dry-run", "--config", "/dev/null",
                                   "--policy-dir", pol, *fixture_roots(conflicts),
                                   "--root", os.path.join(conflicts, "root"),
                                   "--state-dir", os.path.join(work, "state"), "--socket", sock])
    try:
        d.wait_for("READY=1", timeout=120)
        for req in [{"command": "status"}, {"command": "devices"}, {"command": "explain", "device": "vda"},
                    {"command": "policies"}, {"command": "verify"}, {"command": "metrics"},
                    {"command": "doctor"}, {"command": "pause", "device": "vda"}, {"command": "resume"},
                    {"command": "reload"}, {"command": "nope"}, {"command": "device", "device": "sdz"},
                    # verify --policy: a file added, one in place of a shipped one, a mask, errors
                    *({"command": "verify", "policy": {"name": name, "text": text}} for name, text in (
                        ("90-new.policy", "[Match]\nname = vd*\n[Queue]\nread_ahead_kb = 1024\n"),
                        ("20-fast-virtual.policy", "[Match]\nclass = virtio\n[Queue]\nscheduler = kyber\n"),
                        ("20-fast-virtual.policy", ""), ("90-bad.policy", "[Queue]\nnr_requests = x\nbogus\n"),
                        ("bad-name", "")))]:
            control_call(sock, req, timeout=60)
        # and one that is not JSON
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(60)
            s.connect(sock)
            s.sendall(b"{bad json\n")
            s.recv(1 << 20)
        with open(os.path.join(pol, "99-broken.policy"), "w") as f:
            f.write("[Queue]\nnr_requests = x\n")
        d.reload(timeout=120)       # a reload that rejects a file, then SIGTERM
        st = control_call(sock, {"command": "status"}, timeout=60)
        assert st["result"]["policy_files_rejected"] >= 1, f"the reload after SIGHUP did not reject the file: {st}"
        d.signal(signal.SIGTERM)
        rc = d.proc.wait(timeout=120)
    finally:
        d.cleanup()     # never leave valgrind running behind a failed request
    report = "\n".join(line for line in d.text().splitlines() if line.startswith("=="))
    assert rc == 0, report


def test_daemon_shipped_sets_and_reloads(blkpolicyd, work):
    """The shipped sets' paths: set 1 of two on a root laid out as
    installed (the shipped files that differ listed), a reload to set 2, one
    to a set that is not shipped (refused), and SIGTERM."""
    out = subprocess.run([blkpolicyd, "--help"], capture_output=True, text=True).stdout
    vendor = os.path.join(work, "root") + out.split("(default ")[2].split()[0]
    sets = {vendor: "2", os.path.join(os.path.dirname(vendor), "policy-sets", "1"): "1"}
    for d, n in sets.items():
        os.makedirs(d)
        with open(os.path.join(d, "policy-set"), "w") as f:
            f.write(n + "\n")
        with open(os.path.join(d, "20-loop.policy"), "w") as f:
            f.write(f"[Match]\nname = loop*\n[Queue]\nread_ahead_kb = {n}00\n")
    conf = os.path.join(work, "c.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\npolicy_set = 1\n")
    sock = os.path.join(work, "sock")
    d = Daemon(VALGRIND[0], work, [*VALGRIND[1:], blkpolicyd, "--dry-run", "--config", conf,
                                   "--root", os.path.join(work, "root"), *fixture_roots(os.path.join(FIXTURES, "kvm-6.18")),
                                   "--state-dir", os.path.join(work, "state"), "--socket", sock])
    try:
        d.wait_for("READY=1", timeout=120)
        st = control_call(sock, {"command": "status"}, timeout=60)["result"]["policy_set"]
        assert st == {"in_use": 1, "newest": 2, "differs": ["20-loop.policy"]}, st
        for n, in_use in (("2", 2), ("7", 2)):
            with open(conf, "w") as f:
                f.write(f"[Daemon]\npolicy_set = {n}\n")
            d.reload(timeout=120)
            st = control_call(sock, {"command": "status"}, timeout=60)["result"]
            assert st["policy_set"]["in_use"] == in_use and bool(st["reload_errors"]) == (n == "7"), st
        d.signal(signal.SIGTERM)
        rc = d.proc.wait(timeout=120)
    finally:
        d.cleanup()
    report = "\n".join(line for line in d.text().splitlines() if line.startswith("=="))
    assert rc == 0, report
