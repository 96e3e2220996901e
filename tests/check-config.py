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


def test_values_the_kernel_will_not_keep(run, work, kvm_fixture):
    # the running kernel's HZ from <root>/boot/config-RELEASE, as Debian installs it
    with open(os.path.join(kvm_fixture, "proc/sys/kernel/osrelease")) as f:
        release = f.read().strip()
    os.makedirs(os.path.join(work, "root/boot"))
    with open(os.path.join(work, f"root/boot/config-{release}"), "w") as f:
        f.write("CONFIG_HZ_250=y\nCONFIG_HZ=250\n")
    os.mkdir(os.path.join(work, "p"))
    with open(os.path.join(work, "p/50-j.policy"), "w") as f:
        f.write("[Match]\nclass = loop\n[Queue]\nread_ahead_kb = 99999999\n[mq-deadline]\nread_expire = 1\n"
                "write_expire = 5000\n")
    with open(os.path.join(work, "p/60-bio.policy"), "w") as f:
        f.write("[Match]\nclass = bio-based\n[Queue]\nscheduler = none\nread_ahead_kb = 1024\n")
    r = run("--check-config", "--config", "/dev/null", "--policy-dir", os.path.join(work, "p"),
            "--root", os.path.join(work, "root"), "--proc-root", os.path.join(kvm_fixture, "proc"))
    assert r.returncode == 0 and "2 policies loaded, 0 files rejected, 0 errors" in r.stdout, \
        f"warnings, not errors: {(r.returncode, r.stdout, r.stderr)}"
    assert "50-j.policy: warning: [mq-deadline] read_expire = 1: the kernel keeps it in jiffies and will show 4 " \
           "(HZ=250)" in r.stderr and "write_expire" not in r.stderr, r.stderr
    assert "50-j.policy: warning: [Queue] read_ahead_kb = 99999999" in r.stderr, r.stderr
    assert "60-bio.policy: warning: [Queue] scheduler: the policy matches only bio-based disks" in r.stderr \
        and "read_ahead_kb = 1024" not in r.stderr, r.stderr


def test_writer_words(run, work):
    conf = os.path.join(work, "w.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nreassert_over = tuned:scheduler gce-guest-agent\nyield_to = udev\n")
    r = run("--check-config", "--config", conf, "--policy-dir", work)
    assert r.returncode == 0, f"writers as doctor names them, a setting after a colon: {r.stderr}"
    for bad in ("tunedd", "tuned:schedulerr", "udev:"):
        with open(conf, "w") as f:
            f.write(f"[Daemon]\nyield_to = udev\n  {bad}\n")
        r = run("--check-config", "--config", conf, "--policy-dir", work)
        assert r.returncode != 0 and f"{conf}:" in r.stderr and "expected WRITER" in r.stderr, \
            f"{bad}: an unknown writer or setting is an error at file:line: {r.stderr}"
