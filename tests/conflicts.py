#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Other writers of the same settings, named: a daemon on the `conflicts`
fixture machine (kvm-6.18's disks, plus a root with udev rules in every
rules.d directory, masked and overriding ones among them, an active tuned
profile that extends a shipped one of the same name, the GCE guest agent,
and elevator= on the kernel command line). Checks status, explain, doctor
(text against a golden file, --json, exit codes), metrics, and the writer
named for a drift. No root: the fake kernel takes the writes."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

blkpolicyd, blkpolicyctl, fixture, top = sys.argv[1:5]
golden_dir = os.path.join(top, "tests", "golden")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
from loopdev import Results, control_call, require_fault_injection  # noqa: E402

res = Results()
check = res.check
UPDATE = os.environ.get("BLKPOLICYD_UPDATE_GOLDEN") == "1"

require_fault_injection(blkpolicyd)

work = tempfile.mkdtemp(prefix="blkpolicyd-conflicts-")
machine = os.path.join(work, "machine")
# a copy: the daemon writes to its sysfs, and the test changes a value behind its back
shutil.copytree(fixture, machine, symlinks=True)
daemons = []


def start(name, root):
    sock = os.path.join(work, name + ".sock")
    log = open(os.path.join(work, name + ".log"), "w+")
    p = subprocess.Popen([blkpolicyd, "--config", "/dev/null", "--policy-dir", os.path.join(top, "policies"),
                          "--sysfs-root", f"{machine}/sys", "--debugfs-root", f"{machine}/debug",
                          "--proc-root", f"{machine}/proc", "--root", root,
                          "--state-dir", os.path.join(work, name + "-state"), "--socket", sock],
                         stderr=log, env=dict(os.environ, BLKPOLICYD_FAKE_KERNEL="1"))
    daemons.append(p)
    deadline = time.monotonic() + 10
    # the first pass is done when vda and loop0 hold their scheduler
    while True:
        if p.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            raise SystemExit(f"{name}: the daemon did not come up:\n{log.read()}")
        try:
            devs = control_call(sock, {"command": "devices"})
        except OSError:         # not there yet, or not listening yet
            devs = None
        if devs and devs.get("ok") and len(devs["result"]) == 4 and all(
                d["managed"] and d["settings"]["scheduler"]["result"] in ("applied", "unchanged")
                for d in devs["result"] if d["name"] in ("vda", "loop0")):
            return sock, log
        time.sleep(0.01)


def ctl(sock, *args):
    return subprocess.run([blkpolicyctl, "--socket", sock, *args], capture_output=True, text=True)


def golden(name, text):
    path = os.path.join(golden_dir, name)
    if UPDATE:
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        want = f.read()
    check(f"{name} as expected", text == want, f"got:\n{text}\nwant:\n{want}")


def summary(c):
    """What identifies a writer and what it applies to, for the golden file."""
    return {k: c[k] for k in ("source", "path", "line", "attr", "value", "match", "effective", "affects_managed",
                              "devices", "advice")}


try:
    sock, log = start("main", os.path.join(machine, "root"))

    st = control_call(sock, {"command": "status"})["result"]
    conflicts = st["conflicts"]
    golden("conflicts-status.json", json.dumps([summary(c) for c in conflicts], indent=1, sort_keys=True) + "\n")
    where = {(c["path"], c["line"]) for c in conflicts}
    check("masked and overridden rules files are not read",
          not any(p.startswith("/usr/lib/udev/rules.d/6" + n) for p, _ in where for n in "0123")
          and not any(p.startswith("/run/udev/rules.d/63") for p, _ in where), sorted(where))
    check("the continued udev rule is named by its first line, with its KERNEL match",
          any(c["path"] == "/etc/udev/rules.d/60-ioschedulers.rules" and c["line"] == 18
              and c["match"] == 'KERNEL=="vd[a-z]"' and c["value"] == "mq-deadline"
              and [d["name"] for d in c["devices"]] == ["vda"] and c["affects_managed"] for c in conflicts),
          conflicts)
    by_source = {}
    for c in conflicts:
        by_source.setdefault(c["source"], []).append(c)
    tuned = {c["attr"]: c for c in by_source.get("tuned", [])}
    check("tuned: the admin's profile in /etc overrides the shipped elevator, the parent's readahead stays",
          tuned.get("scheduler", {}).get("value") == "bfq"
          and tuned["scheduler"]["path"] == "/etc/tuned/profiles/virtual-guest-blk/tuned.conf"
          and tuned.get("read_ahead_kb", {}).get("path") == "/usr/lib/tuned/profiles/throughput-performance/tuned.conf"
          and [d["name"] for d in tuned["scheduler"]["devices"]] == ["vda"], tuned)
    gce = by_source.get("gce-guest-agent", [])
    check("GCE guest agent: none on every blk-mq disk, optimize_local_ssd=false honoured",
          len(gce) == 1 and gce[0]["value"] == "none"
          and [d["name"] for d in gce[0]["devices"]] == ["loop0", "vda"], gce)
    cmdline = by_source.get("kernel-cmdline", [])
    check("elevator= on the command line: found, no effect, applies to nothing",
          len(cmdline) == 1 and cmdline[0]["value"] == "deadline" and not cmdline[0]["effective"]
          and cmdline[0]["devices"] == [], cmdline)

    ex = control_call(sock, {"command": "explain", "device": "vda"})["result"]["conflicts"]
    check("explain vda: the writers that apply, which of them fight blkpolicyd",
          sorted((c["source"], c["line"], c["affects"]) for c in ex) ==
          [("gce-guest-agent", None, True), ("tuned", 9, True), ("tuned", 13, False), ("tuned", 16, False),
           ("udev", 5, False), ("udev", 18, True)], ex)
    check("explain vda: blkpolicyd's own target alongside", all(
        c["intended"] == ("none" if c["attr"] == "scheduler" else None) for c in ex), ex)
    ex = control_call(sock, {"command": "explain", "device": "loop0"})["result"]["conflicts"]
    check("explain loop0: tuned's devices=!loop* leaves it out",
          sorted((c["source"], c["attr"]) for c in ex) ==
          [("gce-guest-agent", "scheduler"), ("udev", "nomerges"), ("udev", "read_ahead_kb"),
           ("udev", "wbt_lat_usec")], ex)
    ex = control_call(sock, {"command": "explain", "device": "zram0"})["result"]["conflicts"]
    check("explain zram0 (bio-based): a scheduler writer cannot apply, a readahead one can",
          sorted((c["source"], c["attr"]) for c in ex) == [("tuned", "read_ahead_kb")], ex)

    log.seek(0)
    started = log.read()
    check("start: one log line per writer, with the disks and what to do",
          started.count("Conflict: ") == 14 and
          'Conflict: udev rule /etc/udev/rules.d/60-ioschedulers.rules:18 sets queue/scheduler=mq-deadline '
          '(KERNEL=="vd[a-z]"); applies to vda (managed); to fix: remove the assignment' in started, started)
    r = ctl(sock, "doctor")
    golden("conflicts-doctor.txt", r.stdout)
    check("doctor: exit 4 when a writer fights blkpolicyd on a managed disk", r.returncode == 4, r)
    r = ctl(sock, "status")
    check("blkpolicyctl status counts them and points to doctor",
          "other writers of these settings: 14, 3 setting what blkpolicyd manages (blkpolicyctl doctor)\n"
          in r.stdout, r.stdout)
    r = ctl(sock, "doctor", "--json")
    d = json.loads(r.stdout)["result"] if r.stdout else {}
    check("doctor --json: the same, and the count", r.returncode == 4 and d.get("affecting") == 3
          and len(d.get("conflicts", [])) == len(conflicts), r.stdout)
    check("doctor --json: the unreadable rule named as a warning",
          d.get("warnings") == ["/usr/lib/udev/rules.d/66-run-echo.rules:3: not a valid udev rule, skipped"], d)

    text = control_call(sock, {"command": "metrics"})["result"]["text"]
    for line in ('blkpolicyd_conflicts{source="udev"} 9', 'blkpolicyd_conflicts{source="tuned"} 3',
                 'blkpolicyd_conflicts{source="gce-guest-agent"} 1', 'blkpolicyd_conflicts{source="kernel-cmdline"} 1',
                 'blkpolicyd_device_conflicts{device="vda"} 3', 'blkpolicyd_device_conflicts{device="loop0"} 1'):
        check(f"metrics: {line}", line in text.splitlines(), text)
    check("metrics: unmanaged disks have no per-device series", 'device="zram0"' not in text, text)

    # an admin (or udev) sets vda's scheduler behind blkpolicyd's back
    sched = os.path.join(machine, "sys", "block", "vda", "queue", "scheduler")
    with open(sched) as f:
        check("blkpolicyd applied none to vda", f.read().startswith("[none]"))
    with open(sched, "w") as f:
        f.write("none [mq-deadline] kyber bfq\n")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        v = control_call(sock, {"command": "verify"})["result"]
        if v["drifted"]:
            break
        time.sleep(0.05)
    drift = [x for dev in v["devices"] for x in dev["drift"]]
    check("verify names the udev rule that writes the live value",
          len(drift) == 1 and drift[0]["live"] == "mq-deadline" and drift[0]["writer"] ==
          'udev rule /etc/udev/rules.d/60-ioschedulers.rules:18 sets queue/scheduler=mq-deadline (KERNEL=="vd[a-z]")',
          v)
    r = ctl(sock, "verify")
    check("blkpolicyctl verify says it too", r.returncode == 4 and "likely set by udev rule" in r.stdout, r)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        d = control_call(sock, {"command": "device", "device": "vda"})["result"]
        if d["overridden"]:
            break
        time.sleep(0.05)
    check("the override names the writer", d["overridden"] and d["override"] ==
          "scheduler changed to mq-deadline (blkpolicyd wanted none); likely by udev rule "
          '/etc/udev/rules.d/60-ioschedulers.rules:18 sets queue/scheduler=mq-deadline (KERNEL=="vd[a-z]")', d)
    log.seek(0)
    before = log.read().count("Conflict: ")
    os.kill(daemons[0].pid, signal.SIGHUP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        log.seek(0)
        text = log.read()
        if "Reloaded: " in text and text.count("Conflict: ") == before + 14:
            break
        time.sleep(0.05)
    check("reload: the writers logged again", text.count("Conflict: ") == before + 14, text[-2000:])

    # nothing else writes these settings: doctor says so and exits 0
    daemons[0].kill()
    daemons[0].wait()
    empty = os.path.join(work, "empty-root")
    os.mkdir(empty)
    with open(os.path.join(machine, "proc", "cmdline"), "w") as f:
        f.write("root=/dev/vda1 ro quiet\n")
    sock2, _ = start("clean", empty)
    r = ctl(sock2, "doctor")
    check("doctor on a clean system: exit 0", r.returncode == 0
          and r.stdout == "No other writer of blkpolicyd's settings found.\n", r)
    check("status: no conflicts", control_call(sock2, {"command": "status"})["result"]["conflicts"] == [])
finally:
    for p in daemons:
        p.kill()
        p.wait()
    shutil.rmtree(work, ignore_errors=True)

res.finish()
