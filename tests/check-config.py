# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyd --check-config: the shipped files pass; a broken policy or
config file fails with file:line on stderr; good files beside it still load."""
import os
import subprocess

import pytest


@pytest.fixture
def run(blkpolicyd):
    return lambda *args: subprocess.run([blkpolicyd, *args], capture_output=True, text=True)


def test_shipped_files_are_valid(run, top):
    r = run("--check-config", "--config", os.path.join(top, "conf/blkpolicyd.conf"),
            "--policy-dir", os.path.join(top, "policies"))
    shipped = sorted(f for f in os.listdir(os.path.join(top, "policies")) if f.endswith(".policy"))
    assert r.returncode == 0, r.stderr
    missing = [p for p in shipped if p not in r.stdout]
    assert not missing, f"shipped policies not listed: {missing}\n{r.stdout}"


def test_broken_policy(run, work):
    with open(os.path.join(work, "10-good.policy"), "w") as f:
        f.write("[Match]\nclass = loop\n[Queue]\nscheduler = none\n")
    with open(os.path.join(work, "20-bad.policy"), "w") as f:
        f.write("[Match]\nclass = loop\n[Queue]\nscheduler = none\nnr_requests = many\n")
    r = run("--check-config", "--config", "/dev/null", "--policy-dir", work)
    assert r.returncode != 0, "a broken policy must fail the check\n" + r.stdout + r.stderr
    assert f"{work}/20-bad.policy:5:" in r.stderr, "the error names file:line"
    # the good file still loads; files are counted, not errors
    assert "1 policy loaded, 1 file rejected, 1 error" in r.stdout


def test_broken_config(run, work):
    conf = os.path.join(work, "bad.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nrestore_on_exit = perhaps\n")
    r = run("--check-config", "--config", conf, "--policy-dir", work)
    assert r.returncode != 0 and f"{conf}:2:" in r.stderr, r.stderr


def test_missing_explicit_config_fails(run, work):
    r = run("--check-config", "--config", os.path.join(work, "missing.conf"))
    assert r.returncode != 0, r.stderr


def test_command_line(run):
    assert run("--help").returncode == 0, "--help exits 0"
    assert run("--frobnicate").returncode != 0, "an unknown option fails"
    assert run("sda").returncode != 0, "a stray argument fails"
