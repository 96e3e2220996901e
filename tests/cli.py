#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The command line as an admin uses it (issue 16, items 3 and 6), against a
real daemon on a copy of a fixture tree with the fake kernel (no root):

  exit codes an alerting system can use: verify exits 4 when a managed
  setting differs, status exits 4 while a policy file is rejected or the
  last reload failed, 0 again once fixed; options anywhere; --version on
  both programs; extra arguments refused by name; errors naming the device;
  a misspelled scheduler warned about at --check-config; a --replay with a
  rejected file refused; the man pages' and docs' [Dynamic] examples load
  as they are; inline comments; every option in the man pages."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

blkpolicyd, blkpolicyctl, fixture, top = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
from loopdev import Daemon, Results, fault_injection_built  # noqa: E402

res = Results()
check = res.check
fake_kernel = fault_injection_built(blkpolicyd)
work = tempfile.mkdtemp(prefix="blkpolicyd-cli-")
root = os.path.join(work, "root")
policies = os.path.join(work, "policies")
conf = os.path.join(work, "blkpolicyd.conf")
sock = os.path.join(work, "control.sock")
RUNNING = []


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def run(*args, timeout=30):
    # man: wide lines, so that no option or example is broken across two
    env = dict(os.environ, MANWIDTH="250", LC_ALL="C.UTF-8")
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env)


def ctl(*args):
    return run(blkpolicyctl, "--socket", sock, *args)


def make_tree():
    """The kvm-6.18 fixture, with the /sys/dev/block link the fake kernel needs."""
    shutil.copytree(fixture, root, symlinks=True)
    devblock = os.path.join(root, "sys", "dev", "block")
    os.makedirs(devblock, exist_ok=True)
    if not os.path.lexists(os.path.join(devblock, "7:0")):
        os.symlink("../../devices/virtual/block/loop0", os.path.join(devblock, "7:0"))


def scheduler_file():
    return os.path.join(root, "sys", "block", "loop0", "queue", "scheduler")


def reload(d):
    d.proc.send_signal(signal.SIGHUP)
    d.wait_for("READY=1")


def dynamic_examples():
    """The [Dynamic] examples of docs/policy-language.md and blkpolicyd.policy(5), as printed."""
    out = []
    with open(os.path.join(top, "docs", "policy-language.md")) as f:
        md = f.read()
    block = re.search(r"\n\n((?:    .*\n|\n)*?    \[Dynamic\]\n(?:    .*\n|\n)*)", md)
    if block:
        out.append(("docs/policy-language.md", "\n".join(line[4:] for line in block.group(1).splitlines())))
    page = run("man", "-l", "-Tutf8", os.path.join(top, "man", "blkpolicyd.policy.5"))
    text = re.sub(r".\x08", "", page.stdout)
    # the EXAMPLES section's blocks that have a [Dynamic] section
    for m in re.finditer(r"\n((?:[ ]{7,}.*\n|\n)+)", text.split("\nEXAMPLES\n", 1)[-1]):
        if "[Dynamic]" in m.group(1):
            lines = [line for line in m.group(1).splitlines()]
            indent = min(len(x) - len(x.lstrip()) for x in lines if x.strip())
            out.append(("blkpolicyd.policy(5)", "\n".join(x[indent:] for x in lines)))
    return out, page


try:
    os.mkdir(policies)
    write(conf, "[Daemon]\ntick_interval_ms = 50\ndrift_checks_per_tick = 0\n")
    write(os.path.join(policies, "50-loop.policy"),
          "[Match]\nname = loop0\n[Queue]\nscheduler = kyber\nread_ahead_kb = 4096\n")

    # --version on both programs, from anywhere on the line
    r = run(blkpolicyctl, "--version")
    check("blkpolicyctl --version", r.returncode == 0 and re.match(r"blkpolicyctl \d+\.\d+", r.stdout), r)
    r = run(blkpolicyd, "--version")
    check("blkpolicyd --version: name and version, as blkpolicyctl's", r.returncode == 0
          and re.match(r"blkpolicyd \d+\.\d+", r.stdout), r)
    r = run(blkpolicyctl, "status", "--version")
    check("blkpolicyctl status --version: the option after the command", r.returncode == 0
          and r.stdout.startswith("blkpolicyctl "), r)

    # extra arguments refused, by name; usage errors before connecting (exit 2)
    r = ctl("status", "sda")
    check("blkpolicyctl status sda: refused, naming sda", r.returncode == 2 and "sda" in r.stderr, r)
    r = ctl("explain", "sda", "sdb", "sdc")
    check("blkpolicyctl explain sda sdb sdc: the extra ones named", r.returncode == 2
          and "sdb sdc" in r.stderr and "sda" not in r.stderr.replace("sdb", ""), r)
    r = ctl("explain")
    check("blkpolicyctl explain without a device: exit 2", r.returncode == 2 and "device" in r.stderr, r)
    r = ctl("top", "-n", "x")
    check("blkpolicyctl top -n x: exit 2, naming x", r.returncode == 2 and "'x'" in r.stderr, r)
    r = ctl("frobnicate")
    check("an unknown command is named", r.returncode == 2 and "frobnicate" in r.stderr, r)
    r = run(blkpolicyd, "sda", "--dry-run", "foo")
    check("blkpolicyd sda foo: refused, naming both", r.returncode != 0 and "sda foo" in r.stderr, r)

    # --check-config: a misspelled scheduler warns, naming file and name; the check still passes
    bad = os.path.join(work, "typo")
    write(os.path.join(bad, "50-typo.policy"), "[Match]\nclass = loop\n[Queue]\nscheduler = bfqq none\n"
          "[Dynamic]\nenter = iops > 10\nleave = iops < 1\n[Busy]\nscheduler = kyberr\n")
    r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", bad,
            "--sysfs-root", os.path.join(fixture, "sys"))
    check("--check-config warns about scheduler=bfqq and names the file; exit 0 (a warning)",
          r.returncode == 0 and "50-typo.policy" in r.stderr and "bfqq" in r.stderr and "warning" in r.stderr
          and "kyberr" in r.stderr and r.stderr.count("warning") == 2, r)
    write(os.path.join(bad, "50-typo.policy"), "[Match]\nclass = loop\n[Queue]\nscheduler = bfq none\n")
    r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", bad,
            "--sysfs-root", os.path.join(fixture, "sys"))
    check("... and no warning for known names", r.returncode == 0 and "warning" not in r.stderr, r)
    # what the kernel lists counts as known
    sysfs = os.path.join(work, "sysfs-sched")
    write(os.path.join(sysfs, "block", "sdq", "queue", "scheduler"), "none [adios] mq-deadline\n")
    write(os.path.join(bad, "50-typo.policy"), "[Match]\nclass = loop\n[Queue]\nscheduler = adios none\n")
    r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", bad, "--sysfs-root", sysfs)
    check("a scheduler a disk here lists is known", r.returncode == 0 and "warning" not in r.stderr, r)
    r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", os.path.join(work, "missing"))
    check("--check-config --policy-dir /missing fails, naming it",
          r.returncode != 0 and os.path.join(work, "missing") in r.stderr, r)

    # inline comments, '#' as ';', after white space; '#' inside a value stays
    inline = os.path.join(work, "inline")
    write(os.path.join(inline, "50-inline.policy"),
          "[Match]   # which disks\nname = loop0   # the loop disk\n[Queue]\nscheduler = kyber\t# tab\n"
          "read_ahead_kb = 512 ; the old way\n")
    r = run(blkpolicyd, "--once", "--dry-run", "--config", "/dev/null", "--policy-dir", inline,
            "--sysfs-root", os.path.join(fixture, "sys"), "--proc-root", os.path.join(fixture, "proc"),
            "--debugfs-root", os.path.join(fixture, "debug"), "--device", "loop0")
    try:
        s = json.loads(r.stdout)["devices"][0]["settings"]
        got = (s["scheduler"]["target"], s["read_ahead_kb"]["target"])
    except (ValueError, KeyError, IndexError):
        got = None
    check("inline '# ...' comments are comments, as '; ...' ones", got == ("kyber", "512"), (got, r.stderr))
    write(os.path.join(inline, "50-inline.policy"), "[Match]\nproperty = ID_SERIAL=a#b\n[Queue]\nscheduler = none\n")
    r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", inline)
    check("a '#' inside a value is not a comment", r.returncode == 0 and "1 policy loaded" in r.stdout, r)

    # the [Dynamic] examples, copied as printed, load
    examples, page = dynamic_examples()
    check("the docs and the man page each have a [Dynamic] example", len(examples) >= 2 and page.returncode == 0,
          [e[0] for e in examples])
    for where, text in examples:
        d = os.path.join(work, "ex-" + where.split("/")[-1].split("(")[0])
        body = text if "[Match]" in text else "[Match]\nclass = loop\n\n" + text
        write(os.path.join(d, "50-example.policy"), body + "\n")
        r = run(blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", d)
        check(f"the [Dynamic] example of {where} loads as printed", r.returncode == 0
              and "1 policy loaded, 0 files rejected" in r.stdout, r.stdout + r.stderr + body)
    check("blkpolicyd.policy(5) renders leave=SIGNAL OP NUMBER with its spaces",
          "leave=SIGNAL OP NUMBER" in re.sub(r".\x08", "", page.stdout), "")

    # man pages: every option of --help, a full SYNOPSIS, EXAMPLES in section 8
    for prog, page in ((blkpolicyd, "blkpolicyd.8"), (blkpolicyctl, "blkpolicyctl.8")):
        helptext = run(prog, "--help").stdout
        opts = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", helptext)))
        man = run("man", "-l", "-Tutf8", os.path.join(top, "man", page))
        text = re.sub(r".\x08", "", man.stdout)
        synopsis = text.split("SYNOPSIS", 1)[-1].split("DESCRIPTION", 1)[0]
        missing = [o for o in opts if o not in text]
        check(f"{page} documents every option of --help", opts and not missing, missing)
        missing = [o for o in opts if o not in synopsis and o not in ("--help", "--version")]
        check(f"{page}: every option in the SYNOPSIS", not missing, (missing, synopsis))
        check(f"{page} has EXAMPLES", "\nEXAMPLES\n" in text, "")
        if page == "blkpolicyctl.8":
            cmds = re.findall(r"^  ([a-z]+)(?: \[?DEV\]?)? {2,}", helptext, re.M)
            commands = text.split("COMMANDS", 1)[-1].split("OPTIONS", 1)[0]
            missing = [c for c in cmds if not re.search(rf"^ {{7}}{c}\b", commands, re.M)]
            check(f"{page} documents every command of --help ({len(cmds)})", len(cmds) >= 14 and not missing,
                  missing)

    # --replay of a what-if set with a rejected file: refused, and it says so
    whatif = os.path.join(work, "whatif")
    shutil.copytree(os.path.join(top, "tests", "replay", "policies"), whatif)
    write(os.path.join(whatif, "90-broken.policy"), "[Match]\nclass = loop\n[Queue]\nscheduler = none\nbogus = 1\n")
    r = run(blkpolicyd, "--replay", os.path.join(top, "tests", "replay", "loop-phases.jsonl"), "--config",
            "/dev/null", "--policy-dir", whatif)
    check("--replay with a rejected policy file exits non-zero, says so, prints no timeline",
          r.returncode != 0 and "90-broken.policy:5" in r.stderr and "rejected" in r.stderr and r.stdout == "", r)

    if not fake_kernel:
        print("SKIP: the daemon part needs the fake kernel (-Dfault_injection=true)")
        res.finish()
    # a daemon that writes (the fake kernel, no root): exit codes for alerting
    make_tree()
    d = Daemon(blkpolicyd, work, ["--config", conf, "--policy-dir", policies, "--sysfs-root",
                                  os.path.join(root, "sys"), "--proc-root", os.path.join(root, "proc"),
                                  "--debugfs-root", os.path.join(root, "debug"), "--state-dir",
                                  os.path.join(work, "state"), "--socket", sock, "--device", "loop*"],
               # the kernel refuses read_ahead_kb: a write error to count
               env={"BLKPOLICYD_FAKE_KERNEL": "1", "BLKPOLICYD_FAULTS": "write:*/loop0/queue/read_ahead_kb:EIO"})
    RUNNING.append(d)
    d.wait_for("READY=1", timeout=30)

    r = ctl("status", "--json")
    check("blkpolicyctl status --json: options after the command, exit 0 when all is well",
          r.returncode == 0 and json.loads(r.stdout)["result"]["devices"] == 1, r)
    m = ctl("metrics").stdout
    errors = re.search(r"^blkpolicyd_sysfs_write_errors_total (\d+)$", m, re.M)
    check("a write the kernel refused is counted: blkpolicyd_sysfs_write_errors_total >= 1",
          errors and int(errors.group(1)) >= 1, m[:3000])
    check("... and writes by kind", re.search(r'^blkpolicyd_sysfs_writes_total\{kind="scheduler"\} [1-9]', m, re.M)
          and re.search(r'^blkpolicyd_sysfs_writes_total\{kind="other"\} [1-9]', m, re.M), m[:3000])
    r = ctl("top", "-n", "1")
    check("blkpolicyctl top -n 1: one frame", r.returncode == 0 and r.stdout.count("DEVICE") == 1
          and "loop0" in r.stdout, r)
    r = ctl("explain", "sdx")
    check("an error names the device: no-such-device: sdx", r.returncode == 1
          and r.stderr.startswith("no-such-device: sdx"), r)
    r = ctl("verify")
    check("verify: no drift, exit 0", r.returncode == 0 and "No drift" in r.stdout, r)

    # a setting changed behind blkpolicyd's back: verify exits 4 and names it
    with open(scheduler_file()) as f:
        before = f.read()
    check("the daemon set loop0", "[kyber]" in before, before)
    write(scheduler_file(), before.replace("[kyber]", "kyber").replace("bfq", "[bfq]"))
    r = ctl("verify")
    check("verify with drift: exit 4, naming the device and the setting", r.returncode == 4
          and "loop0: scheduler is bfq, blkpolicyd intends kyber" in r.stdout, r)
    r = ctl("--json", "verify")
    check("verify --json with drift: exit 4 too", r.returncode == 4 and json.loads(r.stdout)["result"]["drifted"] == 1, r)
    write(scheduler_file(), before)
    r = ctl("verify")
    check("verify once it is back: exit 0", r.returncode == 0, r)

    # a rejected policy file: status exits 4 until it is fixed
    write(os.path.join(policies, "90-broken.policy"), "[Match]\nname = loop0\n[Queue]\nnr_requests = lots\n")
    reload(d)
    r = ctl("status")
    check("status with a rejected policy file: exit 4, and the file:line shown", r.returncode == 4
          and "90-broken.policy:4" in r.stdout, r)
    check("status --json too: exit 4", ctl("status", "--json").returncode == 4)
    os.unlink(os.path.join(policies, "90-broken.policy"))
    reload(d)
    check("status once fixed: exit 0", ctl("status").returncode == 0)

    # a reload refused for a broken config: status exits 4 and says it
    with open(conf) as f:
        good = f.read()
    write(conf, good + "restore_on_exit = perhaps\n")
    reload(d)
    r = ctl("status")
    check("status after a refused reload: exit 4, 'last reload failed'", r.returncode == 4
          and "last reload failed" in r.stdout, r)
    m = ctl("metrics")
    check("... and metrics say so: blkpolicyd_last_reload_successful 0",
          "\nblkpolicyd_last_reload_successful 0\n" in m.stdout, m.stdout[:2000])
    check("... and blkpolicyd_reload_failures_total counts it",
          "\nblkpolicyd_reload_failures_total 1\n" in m.stdout, m.stdout[:2000])
    write(conf, good)
    reload(d)
    r = ctl("status")
    check("a good reload after it: exit 0", r.returncode == 0 and "last reload failed" not in r.stdout, r)
    check("... blkpolicyd_last_reload_successful 1", "\nblkpolicyd_last_reload_successful 1\n" in ctl("metrics").stdout)
    rc = d.stop()
    check("the daemon stops cleanly", rc == 0, d.text()[-1500:])
finally:
    for x in RUNNING:
        x.cleanup()
    shutil.rmtree(work, ignore_errors=True)
res.finish()
