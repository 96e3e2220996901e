# SPDX-License-Identifier: LGPL-2.1-or-later
"""The command line as an admin uses it (issue 16, items 3 and 6), against a
real daemon on a copy of a fixture tree with the fake kernel (no root):

  exit codes an alerting system can use: verify exits 4 when a managed
  setting differs, status exits 4 while a policy file is rejected or the
  last reload failed, 0 again once fixed; options anywhere; --version on
  both programs; extra arguments refused by name; errors naming the device;
  a misspelled scheduler warned about at --check-config; a --replay with a
  rejected file refused; the man pages' and docs' [Dynamic] examples load
  as they are; inline comments; every option in the man pages.

The daemon tests share one daemon and run in file order (a drift, then a
rejected policy file, then a refused reload, then the stop)."""
import json
import os
import re
import shutil
import subprocess

import pytest

from blkptest.daemon import fixture_roots
from blkptest.require import fault_injection_built


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def run(*args, timeout=30):
    # man: wide lines, so that no option or example is broken across two
    env = dict(os.environ, MANWIDTH="250", LC_ALL="C.UTF-8")
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env)


def unbold(text):
    """man's output without its overstrike (bold, underline) sequences."""
    return re.sub(r".\x08", "", text)


@pytest.fixture
def ctl(blkpolicyctl, work):
    """blkpolicyctl on a socket nobody listens on: for usage errors, found before connecting."""
    return lambda *args: run(blkpolicyctl, "--socket", os.path.join(work, "control.sock"), *args)


def test_version_on_both_programs_from_anywhere(blkpolicyd, blkpolicyctl):
    r = run(blkpolicyctl, "--version")
    assert r.returncode == 0 and re.match(r"blkpolicyctl \d+\.\d+", r.stdout), r
    r = run(blkpolicyd, "--version")
    assert r.returncode == 0 and re.match(r"blkpolicyd \d+\.\d+", r.stdout), \
        f"blkpolicyd --version: name and version, as blkpolicyctl's: {r}"
    r = run(blkpolicyctl, "status", "--version")
    assert r.returncode == 0 and r.stdout.startswith("blkpolicyctl "), \
        f"blkpolicyctl status --version: the option after the command: {r}"


def test_extra_arguments_refused_by_name(blkpolicyd, ctl):
    # usage errors come before connecting (exit 2)
    r = ctl("status", "sda")
    assert r.returncode == 2 and "sda" in r.stderr, f"blkpolicyctl status sda: refused, naming sda: {r}"
    r = ctl("explain", "sda", "sdb", "sdc")
    assert r.returncode == 2 and "sdb sdc" in r.stderr and "sda" not in r.stderr.replace("sdb", ""), \
        f"blkpolicyctl explain sda sdb sdc: the extra ones named: {r}"
    r = ctl("explain")
    assert r.returncode == 2 and "device" in r.stderr, f"blkpolicyctl explain without a device: exit 2: {r}"
    r = ctl("top", "-n", "x")
    assert r.returncode == 2 and "'x'" in r.stderr, f"blkpolicyctl top -n x: exit 2, naming x: {r}"
    r = ctl("frobnicate")
    assert r.returncode == 2 and "frobnicate" in r.stderr, f"an unknown command is named: {r}"
    r = run(blkpolicyd, "sda", "--dry-run", "foo")
    assert r.returncode != 0 and "sda foo" in r.stderr, f"blkpolicyd sda foo: refused, naming both: {r}"


def test_check_config_warns_about_unknown_schedulers(blkpolicyd, kvm_fixture, work):
    bad = os.path.join(work, "typo")
    write(os.path.join(bad, "50-typo.policy"), "[Match]\nclass = loop\n[Queue]\nscheduler = bfqq none\n"
          "[Dynamic]\nenter = iops > 10\nleave = iops < 1\n[Busy]\nscheduler = kyberr\n")
    r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", bad,
            "--sysfs-root", os.path.join(kvm_fixture, "sys"))
    # a warning names file and name; the check still passes
    assert r.returncode == 0 and "50-typo.policy" in r.stderr and "bfqq" in r.stderr and "warning" in r.stderr \
        and "kyberr" in r.stderr and r.stderr.count("warning") == 2, \
        f"--check-config warns about scheduler=bfqq and names the file; exit 0 (a warning): {r}"
    write(os.path.join(bad, "50-typo.policy"), "[Match]\nclass = loop\n[Queue]\nscheduler = bfq none\n")
    r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", bad,
            "--sysfs-root", os.path.join(kvm_fixture, "sys"))
    assert r.returncode == 0 and "warning" not in r.stderr, f"no warning for known names: {r}"
    # what the kernel lists counts as known
    sysfs = os.path.join(work, "sysfs-sched")
    write(os.path.join(sysfs, "block", "sdq", "queue", "scheduler"), "none [adios] mq-deadline\n")
    write(os.path.join(bad, "50-typo.policy"), "[Match]\nclass = loop\n[Queue]\nscheduler = adios none\n")
    r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", bad, "--sysfs-root", sysfs)
    assert r.returncode == 0 and "warning" not in r.stderr, f"a scheduler a disk here lists is known: {r}"
    r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", os.path.join(work, "missing"))
    assert r.returncode != 0 and os.path.join(work, "missing") in r.stderr, \
        f"--check-config --policy-dir /missing fails, naming it: {r}"


def test_inline_comments(blkpolicyd, kvm_fixture, work):
    # '#' as ';', after white space; '#' inside a value stays
    inline = os.path.join(work, "inline")
    write(os.path.join(inline, "50-inline.policy"),
          "[Match]   # which disks\nname = loop0   # the loop disk\n[Queue]\nscheduler = kyber\t# tab\n"
          "read_ahead_kb = 512 ; the old way\n")
    r = run(blkpolicyd, "--once", "--dry-run", "--config", "/dev/null", "--policy-dir", inline,
            *fixture_roots(kvm_fixture), "--device", "loop0")
    try:
        s = json.loads(r.stdout)["devices"][0]["settings"]
        got = (s["scheduler"]["target"], s["read_ahead_kb"]["target"])
    except (ValueError, KeyError, IndexError):
        got = None
    assert got == ("kyber", "512"), f"inline '# ...' comments are comments, as '; ...' ones: {got}\n{r.stderr}"
    write(os.path.join(inline, "50-inline.policy"), "[Match]\nproperty = ID_SERIAL=a#b\n[Queue]\nscheduler = none\n")
    r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", inline)
    assert r.returncode == 0 and "1 policy loaded" in r.stdout, f"a '#' inside a value is not a comment: {r}"


def dynamic_examples(top):
    """The [Dynamic] examples of docs/policy-language.md and blkpolicyd.policy(5), as printed."""
    out = []
    with open(os.path.join(top, "docs", "policy-language.md")) as f:
        md = f.read()
    block = re.search(r"\n\n((?:    .*\n|\n)*?    \[Dynamic\]\n(?:    .*\n|\n)*)", md)
    if block:
        out.append(("docs/policy-language.md", "\n".join(line[4:] for line in block.group(1).splitlines())))
    page = run("man", "-l", "-Tutf8", os.path.join(top, "man", "blkpolicyd.policy.5"))
    text = unbold(page.stdout)
    # the EXAMPLES section's blocks that have a [Dynamic] section
    for m in re.finditer(r"\n((?:[ ]{7,}.*\n|\n)+)", text.split("\nEXAMPLES\n", 1)[-1]):
        if "[Dynamic]" in m.group(1):
            lines = [line for line in m.group(1).splitlines()]
            indent = min(len(x) - len(x.lstrip()) for x in lines if x.strip())
            out.append(("blkpolicyd.policy(5)", "\n".join(x[indent:] for x in lines)))
    return out, page


def test_dynamic_examples_load_as_printed(blkpolicyd, top, work):
    examples, page = dynamic_examples(top)
    assert len(examples) >= 2 and page.returncode == 0, \
        f"the docs and the man page each have a [Dynamic] example: {[e[0] for e in examples]}"
    for where, text in examples:
        d = os.path.join(work, "ex-" + where.split("/")[-1].split("(")[0])
        body = text if "[Match]" in text else "[Match]\nclass = loop\n\n" + text
        write(os.path.join(d, "50-example.policy"), body + "\n")
        r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", d)
        assert r.returncode == 0 and "1 policy loaded, 0 files rejected" in r.stdout, \
            f"the [Dynamic] example of {where} loads as printed\n{r.stdout}{r.stderr}{body}"
    assert "leave=SIGNAL OP NUMBER" in unbold(page.stdout), \
        "blkpolicyd.policy(5) renders leave=SIGNAL OP NUMBER with its spaces"


# every option of --help in the man page and its SYNOPSIS, EXAMPLES in section 8
@pytest.mark.parametrize("prog, page", [("blkpolicyd", "blkpolicyd.8"), ("blkpolicyctl", "blkpolicyctl.8")])
def test_man_page_documents_the_program(request, top, prog, page):
    helptext = run(request.getfixturevalue(prog), "--help").stdout
    opts = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", helptext)))
    man = run("man", "-l", "-Tutf8", os.path.join(top, "man", page))
    text = unbold(man.stdout)
    synopsis = text.split("SYNOPSIS", 1)[-1].split("DESCRIPTION", 1)[0]
    missing = [o for o in opts if o not in text]
    assert opts and not missing, f"{page} documents every option of --help; missing: {missing}"
    missing = [o for o in opts if o not in synopsis and o not in ("--help", "--version")]
    assert not missing, f"{page}: every option in the SYNOPSIS; missing: {missing}\n{synopsis}"
    assert "\nEXAMPLES\n" in text, f"{page} has EXAMPLES"
    if page == "blkpolicyctl.8":
        cmds = re.findall(r"^  ([a-z]+)(?: \[?DEV\]?)? {2,}", helptext, re.M)
        commands = text.split("COMMANDS", 1)[-1].split("OPTIONS", 1)[0]
        missing = [c for c in cmds if not re.search(rf"^ {{7}}{c}\b", commands, re.M)]
        assert len(cmds) >= 14 and not missing, f"{page} documents every command of --help ({len(cmds)}): {missing}"


def test_replay_with_a_rejected_file_is_refused(blkpolicyd, top, work):
    whatif = os.path.join(work, "whatif")
    shutil.copytree(os.path.join(top, "tests", "replay", "policies"), whatif)
    write(os.path.join(whatif, "90-broken.policy"), "[Match]\nclass = loop\n[Queue]\nscheduler = none\nbogus = 1\n")
    r = run(blkpolicyd, "--replay", os.path.join(top, "tests", "replay", "loop-phases.jsonl"), "--config",
            "/dev/null", "--policy-dir", whatif)
    assert r.returncode != 0 and "90-broken.policy:5" in r.stderr and "rejected" in r.stderr and r.stdout == "", \
        f"--replay with a rejected policy file exits non-zero, says so, prints no timeline: {r}"


# --- a daemon that writes (the fake kernel, no root): exit codes for alerting

@pytest.fixture(scope="module")
def env(module_daemons, blkpolicyd, blkpolicyctl, kvm_fixture):
    if not fault_injection_built(blkpolicyd):
        # as before the move to pytest: a skip, even in CI, which builds with it
        pytest.skip("the daemon part needs the fake kernel (-Dfault_injection=true)")
    work = module_daemons.work
    root = os.path.join(work, "root")
    policies = os.path.join(work, "policies")
    conf = os.path.join(work, "blkpolicyd.conf")
    write(conf, "[Daemon]\ntick_interval_ms = 50\ndrift_checks_per_tick = 0\n")
    write(os.path.join(policies, "50-loop.policy"),
          "[Match]\nname = loop0\n[Queue]\nscheduler = kyber\nread_ahead_kb = 4096\n")
    # the kvm-6.18 fixture, with the /sys/dev/block link the fake kernel needs
    shutil.copytree(kvm_fixture, root, symlinks=True)
    devblock = os.path.join(root, "sys", "dev", "block")
    os.makedirs(devblock, exist_ok=True)
    if not os.path.lexists(os.path.join(devblock, "7:0")):
        os.symlink("../../devices/virtual/block/loop0", os.path.join(devblock, "7:0"))
    d = module_daemons.start(["--config", conf, "--policy-dir", policies, *fixture_roots(root), "--state-dir",
                              os.path.join(work, "state"), "--socket", module_daemons.sock, "--device", "loop*"],
                             # the kernel refuses read_ahead_kb: a write error to count
                             env={"BLKPOLICYD_FAKE_KERNEL": "1",
                                  "BLKPOLICYD_FAULTS": "write:*/loop0/queue/read_ahead_kb:EIO"})
    return {"daemon": d, "conf": conf, "policies": policies,
            "scheduler": os.path.join(root, "sys", "block", "loop0", "queue", "scheduler"),
            "ctl": lambda *args: run(blkpolicyctl, "--socket", module_daemons.sock, *args)}


def test_all_well_exits_0_and_errors_are_counted(env):
    ctl = env["ctl"]
    r = ctl("status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["result"]["devices"] == 1, \
        f"blkpolicyctl status --json: options after the command, exit 0 when all is well: {r}"
    m = ctl("metrics").stdout
    errors = re.search(r"^blkpolicyd_sysfs_write_errors_total (\d+)$", m, re.M)
    assert errors and int(errors.group(1)) >= 1, \
        f"a write the kernel refused is counted: blkpolicyd_sysfs_write_errors_total >= 1\n{m[:3000]}"
    assert re.search(r'^blkpolicyd_sysfs_writes_total\{kind="scheduler"\} [1-9]', m, re.M) \
        and re.search(r'^blkpolicyd_sysfs_writes_total\{kind="other"\} [1-9]', m, re.M), \
        f"writes are counted by kind\n{m[:3000]}"
    r = ctl("top", "-n", "1")
    assert r.returncode == 0 and r.stdout.count("DEVICE") == 1 and "loop0" in r.stdout, \
        f"blkpolicyctl top -n 1: one frame: {r}"
    r = ctl("explain", "sdx")
    assert r.returncode == 1 and r.stderr.startswith("no-such-device: sdx"), \
        f"an error names the device: no-such-device: sdx: {r}"
    r = ctl("verify")
    assert r.returncode == 0 and "No drift" in r.stdout, f"verify: no drift, exit 0: {r}"


def test_verify_exits_4_on_drift(env):
    # a setting changed behind blkpolicyd's back: verify exits 4 and names it
    ctl = env["ctl"]
    with open(env["scheduler"]) as f:
        before = f.read()
    assert "[kyber]" in before, f"the daemon set loop0: {before}"
    write(env["scheduler"], before.replace("[kyber]", "kyber").replace("bfq", "[bfq]"))
    try:
        r = ctl("verify")
        assert r.returncode == 4 and "loop0: scheduler is bfq, blkpolicyd intends kyber" in r.stdout, \
            f"verify with drift: exit 4, naming the device and the setting: {r}"
        r = ctl("--json", "verify")
        assert r.returncode == 4 and json.loads(r.stdout)["result"]["drifted"] == 1, \
            f"verify --json with drift: exit 4 too: {r}"
    finally:
        # put back for the tests after this one, whatever happened
        write(env["scheduler"], before)
    r = ctl("verify")
    assert r.returncode == 0, f"verify once it is back: exit 0: {r}"


def test_status_exits_4_while_a_policy_file_is_rejected(env):
    ctl, d = env["ctl"], env["daemon"]
    broken = os.path.join(env["policies"], "90-broken.policy")
    write(broken, "[Match]\nname = loop0\n[Queue]\nnr_requests = lots\n")
    try:
        d.reload()
        r = ctl("status")
        assert r.returncode == 4 and "90-broken.policy:4" in r.stdout, \
            f"status with a rejected policy file: exit 4, and the file:line shown: {r}"
        assert ctl("status", "--json").returncode == 4, "status --json too: exit 4"
    finally:
        os.unlink(broken)
    d.reload()
    assert ctl("status").returncode == 0, "status once fixed: exit 0"


def test_status_exits_4_after_a_refused_reload(env):
    ctl, d = env["ctl"], env["daemon"]
    with open(env["conf"]) as f:
        good = f.read()
    write(env["conf"], good + "restore_on_exit = perhaps\n")
    try:
        d.reload()
        r = ctl("status")
        assert r.returncode == 4 and "last reload failed" in r.stdout, \
            f"status after a refused reload: exit 4, 'last reload failed': {r}"
        m = ctl("metrics")
        assert "\nblkpolicyd_last_reload_successful 0\n" in m.stdout, \
            f"metrics say so: blkpolicyd_last_reload_successful 0\n{m.stdout[:2000]}"
        assert "\nblkpolicyd_reload_failures_total 1\n" in m.stdout, \
            f"blkpolicyd_reload_failures_total counts it\n{m.stdout[:2000]}"
    finally:
        write(env["conf"], good)
    d.reload()
    r = ctl("status")
    assert r.returncode == 0 and "last reload failed" not in r.stdout, f"a good reload after it: exit 0: {r}"
    assert "\nblkpolicyd_last_reload_successful 1\n" in ctl("metrics").stdout, \
        "blkpolicyd_last_reload_successful 1 after the good reload"


def test_daemon_stops_cleanly(env):
    d = env["daemon"]
    assert d.stop() == 0, d.text()[-1500:]
