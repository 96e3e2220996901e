# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyctl verify --policy FILE on the fake kernel (no root): what one
policy file would change on every disk of a host that enforces, added to
the set in force or in place of the file of its name, with nothing
written. The daemon runs three loop disks under 50-loop.policy
(mq-deadline, read_ahead_kb 256, found at none and 128); every preview is
asked of the same daemon, which must come out of them as it went in.
And a daemon of its own whose reads of one disk take 1.5 s (the fault
seam): while a pass of that disk is in flight, the preview does not read
it."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from blkptest import faketree
from blkptest.daemon import Daemon, control_call, ctl, fixture_roots, wait_for

IN_FORCE = "[Match]\nname = loop*\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 256\n"
DISKS = faketree.disks(3)


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(value)
    os.replace(path + ".tmp", path)


class Host(faketree.Workspace):
    def __init__(self, blkpolicyd, fixture, work):
        super().__init__(blkpolicyd, fixture, work)
        self.conf = os.path.join(work, "blkpolicyd.conf")
        self.files = os.path.join(work, "files")        # the admin's new files, not read by the daemon
        faketree.make(fixture, self.root, len(DISKS))
        for dev in DISKS:
            shutil.rmtree(self.qfile(dev, "iosched"), ignore_errors=True)
            write(self.qfile(dev, "scheduler"), "[none] mq-deadline kyber bfq\n")
            write(self.qfile(dev, "read_ahead_kb"), "128\n")
        os.mkdir(self.state, 0o700)
        write(os.path.join(self.policies, "50-loop.policy"), IN_FORCE)
        write(self.conf, "[Daemon]\nmode = enforce\n")

    def start(self, faults=None):
        # udev's database: loop1 has a property no policy in force names
        udev = os.path.join(self.work, "udev-root")
        write(os.path.join(udev, "run/udev/data/b7:1"), "I:1234\nE:ID_BLKPOLICY_TEST=slow\n")
        env = {"BLKPOLICYD_FAKE_KERNEL": "1", **({"BLKPOLICYD_FAULTS": faults} if faults else {})}
        d = Daemon(self.blkpolicyd, self.work, self.daemon_args(self.conf, "--root", udev), env=env)
        self.running.append(d)
        d.wait_for("READY=1", timeout=60)
        wait_for(lambda: all(self.live(dev, "read_ahead_kb") == "256" for dev in DISKS), 30, "the policy applied")
        return d

    def file(self, name, text):
        path = os.path.join(self.files, name)
        write(path, text)
        return path

    def snapshot(self):
        """Every file of the tree and the state dir, with its contents, and
        what the daemon says of itself: all a preview must leave as it was."""
        files = {}
        for top in (os.path.join(self.root, "sys"), self.state):
            for d, _, names in os.walk(top):
                for n in names:
                    p = os.path.join(d, n)
                    if os.path.islink(p):
                        continue
                    st = os.stat(p)
                    with open(p, "rb") as f:
                        files[p] = (f.read(), st.st_mtime_ns)
        status = control_call(self.sock_path, {"command": "status"})["result"]
        for key in ("uptime_s", "tick"):
            status.pop(key)
        policies = control_call(self.sock_path, {"command": "policies"})["result"]
        devices = control_call(self.sock_path, {"command": "devices"})["result"]
        for d in devices:
            d.pop("signals", None)
        return files, status, policies, devices


@pytest.fixture(scope="module")
def host(blkpolicyd, kvm_fixture, module_work, fault_injection):
    h = Host(blkpolicyd, kvm_fixture, module_work)
    h.start()
    yield h
    h.cleanup()


@pytest.fixture
def preview(host, blkpolicyctl):
    def run(name, text, *extra):
        return ctl(blkpolicyctl, host.sock_path, "verify", "--policy", host.file(name, text), *extra)
    return run


def test_a_file_that_changes_two_disks(preview):
    r = preview("90-new.policy", "[Match]\nname = loop0 loop1\n[Queue]\nread_ahead_kb = 1024\n")
    assert r.returncode == 4, r
    lines = r.stdout.splitlines()
    assert lines[:2] == ["loop0: read_ahead_kb 256 -> 1024 (90-new.policy)",
                         "loop1: read_ahead_kb 256 -> 1024 (90-new.policy)"], r.stdout
    assert lines[2:] == ["90-new.policy: 2 settings would change on 2 devices."], r.stdout
    assert "loop2" not in r.stdout


def test_a_canary_file_is_previewed_as_promoted(preview):
    """The file a host runs as a canary (mode = observe), previewed: what
    its promotion would write, not the nothing a canary writes."""
    r = preview("90-new.policy", "[Policy]\nmode = observe\n[Match]\nname = loop0\n[Queue]\nread_ahead_kb = 1024\n")
    assert r.returncode == 4 and "loop0: read_ahead_kb 256 -> 1024 (90-new.policy)" in r.stdout, r


def test_json_names_each_change(preview):
    r = preview("90-new.policy", "[Match]\nname = loop2\n[Queue]\nscheduler = kyber\n", "--json")
    assert r.returncode == 4, r
    res = json.loads(r.stdout)["result"]
    assert [d["name"] for d in res["devices"]] == ["loop2"]
    assert res["devices"][0]["changes"] == [{"attr": "scheduler", "live": "mq-deadline", "would_be": "kyber",
                                             "source": "90-new.policy", "put_back": False}]
    assert (res["changes"], res["changed"], res["managed"], res["unmanaged"]) == (1, 1, 0, 0)
    assert res["mode"] == "enforce"


def test_a_property_the_set_in_force_does_not_name(preview):
    """The disks keep only the udev properties the set in force names:
    the file's are read from udev's database for the preview."""
    r = preview("90-slow.policy", "[Match]\nproperty = ID_BLKPOLICY_TEST=slow\n[Queue]\nread_ahead_kb = 64\n")
    assert r.returncode == 4, r
    assert r.stdout.splitlines() == ["loop1: read_ahead_kb 256 -> 64 (90-slow.policy)",
                                     "90-slow.policy: 1 setting would change on 1 device."], r.stdout


def test_a_file_identical_in_effect_changes_nothing(preview):
    # another file, the same values: a source changes, no setting does
    r = preview("60-same.policy", "[Match]\nname = loop*\n[Queue]\nread_ahead_kb = 256  # as in force\n")
    assert (r.returncode, r.stdout) == (0, "60-same.policy: nothing would change.\n"), r
    # and the file in force itself, sent as the new version of itself
    r = preview("50-loop.policy", IN_FORCE)
    assert (r.returncode, r.stdout) == (0, "50-loop.policy: nothing would change.\n"), r


def test_a_file_with_errors_is_refused_at_file_line(host, preview, blkpolicyd, work):
    text = "[Match]\nname = loop*\n[Queue]\nread_ahead_kb = lots\nnot a key\n"
    r = preview("90-bad.policy", text)
    assert r.returncode == 6, r
    assert r.stdout == ""
    # each error as --check-config prints it, the file's name for its path
    d = os.path.join(work, "check")
    write(os.path.join(d, "90-bad.policy"), text)
    check = subprocess.run([blkpolicyd, "--check-config", "--config", "/dev/null", "--policy-dir", d,
                            *fixture_roots(host.root)], capture_output=True, text=True)
    expected = [line[line.index(d + "/") + len(d) + 1:] for line in check.stderr.splitlines() if d + "/90-bad" in line]
    assert expected and expected[0].startswith("90-bad.policy:4: "), check.stderr
    got = [line.strip() for line in r.stderr.splitlines()[1:]]
    assert got == expected, r.stderr
    assert r.stderr.startswith("policy-invalid: ")


def test_a_replacement_that_drops_a_setting_names_the_put_back(preview):
    r = preview("50-loop.policy", "[Match]\nname = loop*\n[Queue]\nscheduler = mq-deadline\n")
    assert r.returncode == 4, r
    put_back = "(put back: the value found before blkpolicyd's first write)"
    assert r.stdout.splitlines() == [f"{dev}: read_ahead_kb 256 -> 128 {put_back}" for dev in DISKS] + \
        ["50-loop.policy: 3 settings would change on 3 devices."], r.stdout


def test_an_empty_file_masks_the_file_of_its_name(preview):
    r = preview("50-loop.policy", "", "--json")
    assert r.returncode == 4, r
    res = json.loads(r.stdout)["result"]
    assert (res["unmanaged"], res["changes"]) == (3, 9), res
    for d in res["devices"]:
        assert (d["managed"], d["would_be_managed"]) == (True, False)
        # what the switch to mq-deadline reset goes back with the scheduler
        assert [(c["attr"], c["live"], c["would_be"], c["put_back"]) for c in d["changes"]] == \
            [("scheduler", "mq-deadline", "none", True), ("nr_requests", "256", "128", True),
             ("read_ahead_kb", "256", "128", True)], d


def test_a_file_too_large_is_a_usage_error(preview):
    r = preview("90-huge.policy", "[Match]\nname = loop0\n" + "# padding\n" * 4000)
    assert r.returncode == 2, r
    assert "too large" in r.stderr and r.stdout == ""


def test_an_unreadable_file_is_a_usage_error(host, blkpolicyctl):
    r = ctl(blkpolicyctl, host.sock_path, "verify", "--policy", os.path.join(host.work, "none.policy"))
    assert r.returncode == 2 and "Cannot read" in r.stderr, r
    fifo = os.path.join(host.work, "fifo.policy")
    os.mkfifo(fifo)
    r = ctl(blkpolicyctl, host.sock_path, "verify", "--policy", fifo)
    assert r.returncode == 2 and "not a regular file" in r.stderr, r
    r = ctl(blkpolicyctl, host.sock_path, "status", "--policy", host.file("a.policy", ""))
    assert r.returncode == 2 and "--policy is for verify" in r.stderr, r


def test_plain_verify_is_as_it_was(host, blkpolicyctl):
    r = ctl(blkpolicyctl, host.sock_path, "verify")
    assert r.returncode == 0, r
    assert r.stdout == "No drift: every managed setting is as blkpolicyd intends.\n"


def test_nothing_is_written(host, preview):
    before = host.snapshot()
    for name, text in (("90-new.policy", "[Match]\nname = loop*\n[Queue]\nscheduler = bfq\nread_ahead_kb = 8\n"),
                       ("50-loop.policy", ""), ("50-loop.policy", "[Match]\nname = nothing\n"),
                       ("90-bad.policy", "[Queue\n")):
        assert preview(name, text).returncode in (4, 6)
    after = host.snapshot()
    assert after[0] == before[0], "no file of the tree or the state dir written"
    assert after[1:] == before[1:], "status, policies and devices as they were"
    assert all(host.live(dev, "read_ahead_kb") == "256" and host.live(dev, "scheduler") == "mq-deadline"
               for dev in DISKS)


def test_a_disk_with_a_pass_in_flight_is_not_read(blkpolicyd, blkpolicyctl, kvm_fixture, work, fault_injection):
    """Every read of loop0's read_ahead_kb takes 1.5 s and its second write
    3 s (the fault seam): a preview that read it on the loop would take
    1.5 s. Idle, it does (the control); while a reload's pass of loop0 is
    in flight, loop0 is shown as that pass's last round left it, unread,
    and the preview answers at once."""
    h = Host(blkpolicyd, kvm_fixture, work)
    write(h.conf, "[Daemon]\nmode = enforce\ndrift_sweep_seconds = 0\n")
    reads = "read:*/loop0/queue/read_ahead_kb:DELAY=1500:-1:0"
    try:
        d = h.start(faults=f"{reads};write:*/loop0/queue/read_ahead_kb:DELAY=3000:1:1")
        new = h.file("90-new.policy", "[Match]\nname = loop*\n[Queue]\nread_ahead_kb = 1024\n")

        def timed():
            t0 = time.monotonic()
            r = ctl(blkpolicyctl, h.sock_path, "verify", "--policy", new, "--json")
            return time.monotonic() - t0, r
        took, r = timed()
        assert r.returncode == 4 and took >= 1.5, (took, r)
        assert not any(dev["in_flight"] for dev in json.loads(r.stdout)["result"]["devices"]), r.stdout

        write(os.path.join(h.policies, "50-loop.policy"), IN_FORCE.replace("256", "512"))
        d.proc.send_signal(signal.SIGHUP)      # the reload's pass of loop0: 1.5 s read, 3 s write
        d.wait_for("RELOADING=1")              # decided and submitted in the same dispatch
        wait_for(lambda: h.live("loop1", "read_ahead_kb") == h.live("loop2", "read_ahead_kb") == "512", 10,
                 "the other disks' passes")
        time.sleep(0.2)                         # and back on the loop
        took, r = timed()
        res = json.loads(r.stdout)["result"]
        devs = {dev["name"]: dev for dev in res["devices"]}
        assert r.returncode == 4 and took < 1.0, (took, r)
        assert devs["loop0"]["in_flight"] and res["in_flight"] == 1, res
        # as the pass's last round left it: the plan before the reload's, 256
        assert devs["loop0"]["changes"][0]["live"] == "256", res
        assert not devs["loop1"]["in_flight"], res
        r = ctl(blkpolicyctl, h.sock_path, "verify", "--policy", new)
        assert "loop0: a pass was in flight, not read" in r.stdout, r
        wait_for(lambda: h.live("loop0", "read_ahead_kb") == "512", 30, "the held write landed")
    finally:
        h.cleanup()
