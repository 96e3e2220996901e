# SPDX-License-Identifier: LGPL-2.1-or-later
"""Other writers of the same settings, named: a daemon on the `conflicts`
fixture machine (kvm-6.18's disks, plus a root with udev rules in every
rules.d directory, masked and overriding ones among them, blockdev --setra
rules, an active tuned profile that extends a shipped one of the same name,
the GCE guest agent, sysfsutils' sysfs.conf and sysfs.d, tmpfiles.d w lines
with masking, LVM's readahead = "none", and elevator= on the kernel command
line). Checks status, explain, doctor (text against a golden file, --json,
exit codes), metrics, the writer named for a drift, the resume that
blkpolicyd-settle.service runs, and that a tuned which does not run is not
named as the writer. No root: the fake kernel takes the writes.

One daemon serves the file's tests, which run in file order (the drift
test changes vda's scheduler; the last one stops it for a clean system)."""
import json
import os
import shutil
import signal
import time

import pytest

from blkptest.daemon import control_call, fixture_roots

UPDATE = os.environ.get("BLKPOLICYD_UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def machine(module_work, fixtures_dir):
    # a copy: the daemon writes to its sysfs, and the test changes a value behind its back
    path = os.path.join(module_work, "machine")
    shutil.copytree(os.path.join(fixtures_dir, "conflicts"), path, symlinks=True)
    return path


@pytest.fixture(scope="module")
def start(module_daemons, machine, top, fault_injection):
    """Starts a daemon on the machine with root as its --root; its socket,
    once the first pass is done (vda and loop0 hold their scheduler)."""
    def start(name, root, append_log=False, config="/dev/null"):
        work = module_daemons.work
        sock = os.path.join(work, name + ".sock")
        d = module_daemons.start(["--config", config, "--policy-dir", os.path.join(top, "policies"),
                                  *fixture_roots(machine), "--root", root,
                                  "--state-dir", os.path.join(work, name + "-state"), "--socket", sock],
                                 env={"BLKPOLICYD_FAKE_KERNEL": "1"}, ready=False, append_log=append_log)
        deadline = time.monotonic() + 10
        while True:
            if d.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{name}: the daemon did not come up:\n{d.text()}")
            try:
                devs = control_call(sock, {"command": "devices"})
            except OSError:         # not there yet, or not listening yet
                devs = None
            if devs and devs.get("ok") and len(devs["result"]) == 4 and all(
                    x["managed"] and x["settings"]["scheduler"]["result"] in ("applied", "unchanged")
                    for x in devs["result"] if x["name"] in ("vda", "loop0")):
                return d, sock
            time.sleep(0.01)
    return start


@pytest.fixture(scope="module")
def main(start, machine, module_daemons):
    # the per-device series too: doctor's per-device counts are checked in them
    config = os.path.join(module_daemons.work, "main.conf")
    with open(config, "w") as f:
        f.write("[Daemon]\nmetrics_per_device = yes\n")
    d, sock = start("main", os.path.join(machine, "root"), config=config)
    return {"daemon": d, "sock": sock, "conflicts": control_call(sock, {"command": "status"})["result"]["conflicts"]}


@pytest.fixture
def ctl(run_ctl):
    return run_ctl


def call(sock, req):
    return control_call(sock, req)["result"]


def golden(top, name, text):
    path = os.path.join(top, "tests", "golden", name)
    if UPDATE:
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        want = f.read()
    assert text == want, f"{name} not as expected; got:\n{text}\nwant:\n{want}"


def summary(c):
    """What identifies a writer and what it applies to, for the golden file."""
    return {k: c[k] for k in ("source", "path", "line", "attr", "value", "match", "effective", "affects_managed",
                              "devices", "advice")}


def poll(get, done, timeout=10):
    """get() until done(value) or the deadline; the last value either way, for the assert to show."""
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_status_names_every_writer(main, top):
    conflicts = main["conflicts"]
    golden(top, "conflicts-status.json", json.dumps([summary(c) for c in conflicts], indent=1, sort_keys=True) + "\n")
    where = {(c["path"], c["line"]) for c in conflicts}
    assert not any(p.startswith("/usr/lib/udev/rules.d/6" + n) for p, _ in where for n in "0123") \
        and not any(p.startswith("/run/udev/rules.d/63") for p, _ in where), \
        f"masked and overridden rules files are not read: {sorted(where)}"
    assert any(c["path"] == "/etc/udev/rules.d/60-ioschedulers.rules" and c["line"] == 18
               and c["match"] == 'KERNEL=="vd[a-z]"' and c["value"] == "mq-deadline"
               and [d["name"] for d in c["devices"]] == ["vda"] and c["affects_managed"] for c in conflicts), \
        f"the continued udev rule is named by its first line, with its KERNEL match: {conflicts}"
    by_source = {}
    for c in conflicts:
        by_source.setdefault(c["source"], []).append(c)
    tuned = {c["attr"]: c for c in by_source.get("tuned", [])}
    assert tuned.get("scheduler", {}).get("value") == "bfq" \
        and tuned["scheduler"]["path"] == "/etc/tuned/profiles/virtual-guest-blk/tuned.conf" \
        and tuned.get("read_ahead_kb", {}).get("path") == "/usr/lib/tuned/profiles/throughput-performance/tuned.conf" \
        and [d["name"] for d in tuned["scheduler"]["devices"]] == ["vda"], \
        f"tuned: the admin's profile in /etc overrides the shipped elevator, the parent's readahead stays: {tuned}"
    sysfsd = by_source.get("sysfsutils", [])
    assert [(c["path"], c["line"], c["attr"], c["value"], [d["name"] for d in c["devices"]]) for c in sysfsd] == [
        ("/etc/sysfs.conf", 11, "scheduler", "kyber", ["vda"]),
        ("/etc/sysfs.d/60-loop.conf", 2, "nr_requests", "64", ["loop0"])], \
        f"sysfsutils: sysfs.conf then sysfs.d, mode/owner lines are no writes, its glob matched: {sysfsd}"
    tmpfiles = by_source.get("tmpfiles", [])
    assert [(c["path"], c["attr"], [d["name"] for d in c["devices"]]) for c in tmpfiles] == [
        ("/usr/lib/tmpfiles.d/blk-latency.conf", "wbt_lat_usec", ["vda"]),
        ("/run/tmpfiles.d/blk-runtime.conf", "rq_affinity", ["loop0"]),
        ("/etc/tmpfiles.d/zz-local.conf", "add_random", ["vda"])], \
        f"tmpfiles.d: /etc masks (a link to /dev/null), /run overrides /usr/lib: {tmpfiles}"
    lvm = by_source.get("lvm", [])
    assert len(lvm) == 1 and lvm[0]["value"] == "0" and lvm[0]["line"] == 13 \
        and [(d["name"], d["match"]) for d in lvm[0]["devices"]] == [("dm-0", "yes")] \
        and "which doctor does not read" in lvm[0]["advice"], \
        f"LVM: readahead = none on the logical volume (DM_UUID LVM-...), per-LV settings said to be unread: {lvm}"
    blockdev = [c for c in by_source["udev"] if c["path"] == "/etc/udev/rules.d/68-blockdev.rules"]
    assert [(c["line"], c["value"], [d["name"] for d in c["devices"]]) for c in blockdev] == \
        [(2, "512", ["vda"]), (3, "128", ["loop0"])], f"udev RUN+= blockdev --setra/--setfra, in KiB: {blockdev}"
    gce = by_source.get("gce-guest-agent", [])
    assert len(gce) == 1 and gce[0]["value"] == "none" \
        and [d["name"] for d in gce[0]["devices"]] == ["loop0", "vda"], \
        f"GCE guest agent: none on every blk-mq disk, optimize_local_ssd=false honoured: {gce}"
    cmdline = by_source.get("kernel-cmdline", [])
    assert len(cmdline) == 1 and cmdline[0]["value"] == "deadline" and not cmdline[0]["effective"] \
        and cmdline[0]["devices"] == [], f"elevator= on the command line: found, no effect, applies to nothing: {cmdline}"


def test_explain_names_the_writers_that_apply(main):
    sock = main["sock"]
    ex = call(sock, {"command": "explain", "device": "vda"})["conflicts"]
    assert sorted((c["source"], c["line"], c["affects"]) for c in ex) == \
        [("gce-guest-agent", None, True), ("sysfsutils", 11, True), ("tmpfiles", 2, False), ("tmpfiles", 2, False),
         ("tuned", 9, True), ("tuned", 13, False), ("tuned", 16, True), ("udev", 2, True), ("udev", 5, True),
         ("udev", 18, True)], f"explain vda: the writers that apply, which of them fight blkpolicyd: {ex}"
    # 6.18: set 2's 22-virtio-read-ahead.policy wants 128 on vda, so the read-ahead writers fight it too
    intended = {"scheduler": "none", "read_ahead_kb": "128"}
    assert all(c["intended"] == intended.get(c["attr"]) for c in ex), \
        f"explain vda: blkpolicyd's own target alongside: {ex}"
    ex = call(sock, {"command": "explain", "device": "loop0"})["conflicts"]
    assert sorted((c["source"], c["attr"]) for c in ex) == \
        [("gce-guest-agent", "scheduler"), ("sysfsutils", "nr_requests"), ("tmpfiles", "rq_affinity"),
         ("udev", "nomerges"), ("udev", "read_ahead_kb"), ("udev", "read_ahead_kb"), ("udev", "wbt_lat_usec")], \
        f"explain loop0: tuned's devices=!loop* leaves it out: {ex}"
    ex = call(sock, {"command": "explain", "device": "zram0"})["conflicts"]
    assert sorted((c["source"], c["attr"]) for c in ex) == [("tuned", "read_ahead_kb")], \
        f"explain zram0 (bio-based): a scheduler writer cannot apply, a readahead one can: {ex}"


def test_start_log_and_doctor(main, ctl, top):
    started = main["daemon"].text()
    assert started.count("Conflict: ") == 22 and \
        'Conflict: udev rule /etc/udev/rules.d/60-ioschedulers.rules:18 sets queue/scheduler=mq-deadline ' \
        '(KERNEL=="vd[a-z]"); applies to vda (managed); to fix: remove the assignment' in started, \
        f"start: one log line per writer, with the disks and what to do:\n{started}"
    r = ctl(main["sock"], "doctor")
    golden(top, "conflicts-doctor.txt", r.stdout)
    assert r.returncode == 4, f"doctor: exit 4 when a writer fights blkpolicyd on a managed disk: {r}"
    r = ctl(main["sock"], "status")
    # vda: 4 scheduler writers, and 3 read-ahead ones since set 2 wants 128 there on 6.18
    assert "other writers of these settings: 22, 7 setting what blkpolicyd manages (blkpolicyctl doctor)\n" \
        in r.stdout, f"blkpolicyctl status counts them and points to doctor:\n{r.stdout}"
    r = ctl(main["sock"], "doctor", "--json")
    d = json.loads(r.stdout)["result"] if r.stdout else {}
    assert r.returncode == 4 and d.get("affecting") == 7 and len(d.get("conflicts", [])) == len(main["conflicts"]), \
        f"doctor --json: the same, and the count:\n{r.stdout}"
    assert d.get("warnings") == ["/usr/lib/udev/rules.d/66-run-echo.rules:3: not a valid udev rule, skipped",
                                 "/etc/sysfs.d/60-loop.conf:3: syntax error, sysfsutils reads no further lines of it"], \
        f"doctor --json: the unreadable rule and sysfs.conf line named as warnings: {d}"
    gce = [c for c in d.get("conflicts", []) if c["source"] == "gce-guest-agent"]
    assert len(gce) == 1 and "enable blkpolicyd-settle.service" in gce[0]["advice"] \
        and "After=google-guest-agent.service" not in gce[0]["advice"], \
        f"doctor: the advice for the agent is the settle unit, not an ordering cycle: {gce}"


@pytest.mark.parametrize("line", [
    'blkpolicyd_conflicts{source="udev"} 11', 'blkpolicyd_conflicts{source="tuned"} 3',
    'blkpolicyd_conflicts{source="gce-guest-agent"} 1', 'blkpolicyd_conflicts{source="kernel-cmdline"} 1',
    'blkpolicyd_conflicts{source="sysfsutils"} 2', 'blkpolicyd_conflicts{source="tmpfiles"} 3',
    'blkpolicyd_conflicts{source="lvm"} 1',
    'blkpolicyd_device_conflicts{device="vda"} 7', 'blkpolicyd_device_conflicts{device="loop0"} 1',
    'blkpolicyd_conflicting_devices 2'])
def test_metrics(main, line):
    text = call(main["sock"], {"command": "metrics"})["text"]
    assert line in text.splitlines(), text


def test_metrics_no_series_for_unmanaged_disks(main):
    text = call(main["sock"], {"command": "metrics"})["text"]
    assert 'device="zram0"' not in text, text


def test_drift_names_the_writer(main, machine, ctl):
    # an admin (or udev) sets vda's scheduler behind blkpolicyd's back
    sock = main["sock"]
    sched = os.path.join(machine, "sys", "block", "vda", "queue", "scheduler")
    with open(sched) as f:
        assert f.read().startswith("[none]"), "blkpolicyd applied none to vda"
    with open(sched, "w") as f:
        f.write("none [mq-deadline] kyber bfq\n")
    v = poll(lambda: call(sock, {"command": "verify"}), lambda v: v["drifted"])
    drift = [x for dev in v["devices"] for x in dev["drift"]]
    assert len(drift) == 1 and drift[0]["live"] == "mq-deadline" and drift[0]["writer"] == \
        'udev rule /etc/udev/rules.d/60-ioschedulers.rules:18 sets queue/scheduler=mq-deadline (KERNEL=="vd[a-z]")', \
        f"verify names the udev rule that writes the live value: {v}"
    r = ctl(sock, "verify")
    assert r.returncode == 4 and "likely set by udev rule" in r.stdout, f"blkpolicyctl verify says it too: {r}"
    d = poll(lambda: call(sock, {"command": "device", "device": "vda"}), lambda d: d["overridden"])
    assert d["overridden"] and d["override"] == \
        "scheduler changed to mq-deadline (blkpolicyd wanted none); likely by udev rule " \
        '/etc/udev/rules.d/60-ioschedulers.rules:18 sets queue/scheduler=mq-deadline (KERNEL=="vd[a-z]")', \
        f"the override names the writer: {d}"


def test_reload_logs_the_writers_again(main):
    d = main["daemon"]
    before = d.text().count("Conflict: ")
    d.signal(signal.SIGHUP)
    text = poll(d.text, lambda t: "Reloaded: " in t and t.count("Conflict: ") == before + 22)
    assert text.count("Conflict: ") == before + 22, f"reload: the writers logged again\n{text[-2000:]}"


def test_settle_resume_writes_over_the_late_writer(main, machine, ctl):
    # what blkpolicyd-settle.service runs after tuned and the agent: vda,
    # overridden since the drift test, is set again and managed again
    sock = main["sock"]
    sched = os.path.join(machine, "sys", "block", "vda", "queue", "scheduler")
    assert call(sock, {"command": "device", "device": "vda"})["overridden"], "vda is overridden (the drift test)"
    r = ctl(sock, "resume")
    assert r.returncode == 0, f"blkpolicyctl resume: {r}"
    with open(sched) as f:
        live = f.read()
    d = call(sock, {"command": "device", "device": "vda"})
    assert live.startswith("[none]") and not d["overridden"], \
        f"resume wrote blkpolicyd's none over the late writer's mq-deadline: {live!r} {d}"


def test_doctor_on_a_clean_system(main, start, machine, module_work, ctl):
    # nothing else writes these settings: doctor says so and exits 0
    main["daemon"].cleanup()        # SIGKILL, as before: nothing of its stop is checked
    empty = os.path.join(module_work, "empty-root")
    os.mkdir(empty)
    with open(os.path.join(machine, "proc", "cmdline"), "w") as f:
        f.write("root=/dev/vda1 ro quiet\n")
    _, sock = start("clean", empty, append_log=True)
    r = ctl(sock, "doctor")
    assert r.returncode == 0 and r.stdout == "No other writer of blkpolicyd's settings found.\n", \
        f"doctor on a clean system: exit 0: {r}"
    assert call(sock, {"command": "status"})["conflicts"] == [], "status: no conflicts"


def test_a_writer_that_does_not_run_is_not_named(start, machine, module_work, ctl):
    # tuned installed, its profile active, but tuned.service neither enabled
    # nor running: a bfq on vda came from someone else
    root = os.path.join(module_work, "dormant-root")
    for path, text in {"etc/tuned/active_profile": "blkpd\n",
                       "etc/tuned/profiles/blkpd/tuned.conf": "[disk]\nelevator=bfq\n",
                       "usr/lib/systemd/system/tuned.service": "[Service]\nExecStart=/usr/sbin/tuned\n"}.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    d, sock = start("dormant", root, append_log=True)
    doctor = json.loads(ctl(sock, "doctor", "--json").stdout)["result"]["conflicts"]
    assert len(doctor) == 1 and doctor[0]["dormant"] and doctor[0]["advice"].startswith(
        "tuned.service is installed but neither enabled nor running: it writes nothing until tuned is started"), \
        f"doctor reports the profile and says that tuned does not run: {doctor}"
    with open(os.path.join(machine, "sys", "block", "vda", "queue", "scheduler"), "w") as f:
        f.write("none mq-deadline kyber [bfq]\n")
    v = poll(lambda: call(sock, {"command": "verify"}), lambda v: v["drifted"])
    drift = [x for dev in v["devices"] for x in dev["drift"]]
    assert len(drift) == 1 and drift[0]["live"] == "bfq" and drift[0]["writer"] == \
        "an unknown writer (not tuned profile /etc/tuned/profiles/blkpd/tuned.conf:2 sets queue/scheduler=bfq " \
        "([disk] devices=*), whose unit is neither enabled nor running)", \
        f"verify: not tuned, which does not run: {v}"
    d.cleanup()


@pytest.mark.parametrize("conf, reasserted", [
    ("reassert_over = udev:scheduler\n", True),             # over on_drift = leave
    ("on_drift = reapply\nyield_to = udev\n", False),      # a yield over on_drift = reapply
    ("reassert_over = udev:read_ahead_kb\n", False),        # another setting of the writer's: on_drift = leave
], ids=["reassert", "yield", "other-setting"])
def test_a_named_writer_is_yielded_to_or_reasserted_over(start, machine, module_work, conf, reasserted):
    # the udev rule's mq-deadline on vda, written behind blkpolicyd's back
    name = "arbiter-" + str(abs(hash(conf)))
    path = os.path.join(module_work, name + ".conf")
    with open(path, "w") as f:
        f.write("[Daemon]\ntick_interval_ms = 50\ndrift_checks_per_tick = 8\nmetrics_per_device = yes\n" + conf)
    d, sock = start(name, os.path.join(machine, "root"), append_log=True, config=path)
    sched = os.path.join(machine, "sys", "block", "vda", "queue", "scheduler")

    def live():
        with open(sched) as f:
            return f.read()
    try:
        with open(sched, "w") as f:
            f.write("none [mq-deadline] kyber bfq\n")
        if reasserted:
            now = poll(live, lambda v: v.startswith("[none]"))
            assert now.startswith("[none]") and "likely by udev rule /etc/udev/rules.d/60-ioschedulers.rules:18" \
                in d.text() and not call(sock, {"command": "device", "device": "vda"})["overridden"], \
                f"{conf.strip()}: the udev rule's value is written over: {now!r}"
        else:
            dev = poll(lambda: call(sock, {"command": "device", "device": "vda"}), lambda x: x["overridden"])
            assert dev["overridden"] and "[mq-deadline]" in live(), \
                f"{conf.strip()}: the udev rule's value stays: {live()!r}"
    finally:
        d.cleanup()
