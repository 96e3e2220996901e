# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fault injection at the sysfs seam (BLKPOLICYD_FAULTS, test builds) on two
loop devices the test creates. For every fault: the daemon keeps going, the
faulty device's status says what happened, the other device is unaffected,
and nothing is retried in a hot loop. Also: debugfs absent, the state dir
unusable, a policy dir that cannot be read.

Each --once test starts from the kernel's values and no record (reset());
the daemon test runs last, as it adds a policy."""
import json
import os
import shutil
import subprocess

import pytest

from blkptest.daemon import control_call, wait_for
from blkptest.loop import scheduler, set_attr, sysfs

LOOP_BASE = 1900
GLOB = "loop19[0-9][0-9]"


@pytest.fixture(scope="module")
def env(loops, module_work, fault_injection):
    policies = os.path.join(module_work, "policies")
    os.mkdir(policies)
    a, b = loops.add(), loops.add()
    with open(os.path.join(policies, "50-faults.policy"), "w") as f:
        f.write(f"[Match]\nname = {GLOB}\n[Queue]\nscheduler = mq-deadline kyber\nread_ahead_kb = 256\n")
    return {"work": module_work, "policies": policies, "a": a, "b": b}


@pytest.fixture
def ab(env):
    """The two devices, from the kernel's values and no record: with a record
    kept, the values set back by hand here would be the admin's, left alone."""
    for d in (env["a"], env["b"]):
        set_attr(d, "scheduler", "none")
        set_attr(d, "read_ahead_kb", "128")
    shutil.rmtree(os.path.join(env["work"], "state"), ignore_errors=True)
    return env["a"], env["b"]


@pytest.fixture
def once(env, blkpolicyd):
    def once(faults, *extra, state=None, policy_dirs=None):
        run_env = dict(os.environ, BLKPOLICYD_FAULTS=faults)
        dirs = []
        for d in policy_dirs or [env["policies"]]:
            dirs += ["--policy-dir", d]
        r = subprocess.run([blkpolicyd, "--once", "--config", "/dev/null", *dirs, "--device", GLOB,
                            "--state-dir", state or os.path.join(env["work"], "state"), *extra],
                           capture_output=True, text=True, env=run_env, timeout=60)
        report = json.loads(r.stdout) if r.stdout else {"devices": []}
        return r.returncode, {d["name"]: d for d in report["devices"]}, r.stderr
    return once


def qpath(dev, attr):
    return f"*/block/{dev}/queue/{attr}"


def test_eio(ab, once):
    a, b = ab
    rc, devs, err = once(f"write:{qpath(a, 'scheduler')}:EIO")
    s = devs[a]["settings"]
    assert rc == 0 and s["scheduler"]["result"] == "failed" and "Input/output error" in s["scheduler"]["error"], \
        f"EIO on a write: reported, exit 0: {s}"
    assert s["read_ahead_kb"]["result"] == "applied", "EIO: the device's other settings still applied"
    assert scheduler(b) == "mq-deadline" and sysfs(b, "read_ahead_kb") == "256", "EIO: the other device unaffected"


def test_ebusy_twice(ab, once):
    a, b = ab
    rc, devs, err = once(f"write:{qpath(a, 'scheduler')}:EBUSY:2")
    assert devs[a]["settings"]["scheduler"]["result"] == "applied" \
        and err.count(f"{a}: scheduler -> mq-deadline") == 2 and scheduler(a) == "mq-deadline", \
        f"EBUSY twice: retried with backoff, then applied: {err}"


def test_ebusy_forever(ab, once):
    a, b = ab
    rc, devs, err = once(f"write:{qpath(a, 'scheduler')}:EBUSY")
    assert rc == 0 and devs[a]["error"] == "gave up after 7 retries" and err.count("will retry") == 8 \
        and scheduler(b) == "mq-deadline", \
        f"EBUSY forever: gives up after a bounded number of tries, no hot loop: {(devs[a]['error'], err.count('will retry'))}"


def test_einval(ab, once):
    a, b = ab
    rc, devs, err = once(f"write:{qpath(a, 'scheduler')}:EINVAL:1")
    assert devs[a]["settings"]["scheduler"]["target"] == "kyber" and scheduler(a) == "kyber", \
        f"EINVAL: the policy's next scheduler is tried: {devs[a]['settings']}"


def test_enodev_from_a_disk_still_there(ab, once):
    a, b = ab
    rc, devs, err = once(f"write:{qpath(a, 'scheduler')}:ENODEV")
    # ENODEV from a disk that is still there is no disappearance: dropping
    # it would drop its record, and the originals with it
    assert rc == 0 and a in devs and devs[a]["settings"]["scheduler"]["result"] == "failed" \
        and scheduler(b) == "mq-deadline", \
        "ENODEV from a disk still there: a failure, the device and its record kept, the other applied: " \
        f"{devs.get(a, {}).get('settings')}"


def test_enoent(ab, once):
    a, b = ab
    rc, devs, err = once(f"read:{qpath(a, 'read_ahead_kb')}:ENOENT")
    assert devs[a]["settings"]["read_ahead_kb"]["result"] == "unsupported", \
        f"ENOENT on an attribute: unsupported: {devs[a]['settings']}"


def test_short_read_of_the_scheduler_list(ab, once):
    a, b = ab
    rc, devs, err = once(f"read:{qpath(a, 'scheduler')}:short:1")
    # The truncated list ("[none] mq-d") still shows a queue that takes
    # schedulers, and mq-deadline may be a module not loaded yet: it is
    # written and read back, the kernel has the last word. The truncated
    # name itself is never used.
    assert rc == 0 and devs[a]["settings"]["scheduler"]["result"] == "applied" \
        and devs[a]["settings"]["scheduler"]["target"] == "mq-deadline" and scheduler(a) == "mq-deadline", \
        f"a short read of the scheduler list: the policy's mq-deadline is written and read back: {devs[a]['settings']}"
    rc, devs, err = once("")
    assert devs[a]["settings"]["scheduler"]["result"] == "unchanged" and scheduler(a) == "mq-deadline", \
        f"... and the next pass without the fault writes nothing: {devs[a]['settings']}"


def test_state_dir_a_file(ab, once, env):
    a, b = ab
    rc, devs, err = once("", state=os.path.join(env["policies"], "50-faults.policy"))
    # nothing is written without its original on disk first
    assert rc != 0 and "Cannot open the state directory" in err and scheduler(a) == "none", \
        f"state dir unusable (a file): refused, nothing written: {err[-500:]}"


# a read-only and a full state dir: tmpfs mounts of the test's own
@pytest.mark.parametrize("label, opts, fill", [("read-only", "ro,size=64k,mode=0755", False),
                                               ("full", "size=8k,mode=0755", True)], ids=["read-only", "full"])
def test_state_dir_on_tmpfs(ab, once, work, label, opts, fill):
    a, b = ab
    mnt = os.path.join(work, label)
    os.mkdir(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", mnt], check=True)
    try:
        if fill:
            subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/filler", "bs=4k", "count=64"], capture_output=True)
        rc, devs, err = once("", state=mnt)
        if fill:
            s = devs.get(a, {}).get("settings", {}).get("scheduler", {})
            assert rc == 0 and s.get("result") == "failed" and "cannot save the state record" in s.get("error", "") \
                and scheduler(a) == "none" and sysfs(a, "read_ahead_kb") == "128", \
                f"state dir full: the record cannot be saved, nothing written, the device says why: {(s, err[-500:])}"
        else:
            assert rc != 0 and "Cannot open the state directory" in err and scheduler(a) == "none", \
                f"state dir read-only: refused, nothing written: {err[-500:]}"
    finally:
        subprocess.run(["umount", mnt], check=False)


def test_unreadable_policy_dir(ab, once, env, work):
    a, b = ab
    notadir = os.path.join(work, "not-a-dir")
    open(notadir, "w").close()
    rc, devs, err = once("", policy_dirs=[notadir, env["policies"]])
    assert rc == 0 and "cannot read directory" in err and scheduler(a) == "mq-deadline", \
        f"a policy dir that cannot be read: reported, the other loads: {err[-500:]}"


def test_daemon_gives_up_and_debugfs_absent(ab, env, daemons):
    """The daemon: EBUSY forever on one device, debugfs absent with a dispatch_busy policy."""
    a, b = ab
    with open(os.path.join(env["policies"], "60-busy.policy"), "w") as f:
        f.write(f"[Match]\nname = {b}\n[Dynamic]\nenter = dispatch_busy > 5\nleave = dispatch_busy < 1\n"
                "[Busy]\nnr_requests = 32\n")
    conf = os.path.join(daemons.work, "d.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\ntick_interval_ms = 100\n")
    sock = daemons.sock
    d = daemons.start(["--config", conf, "--policy-dir", env["policies"], "--device", GLOB, "--state-dir",
                       os.path.join(env["work"], "state2"), "--socket", sock, "--debugfs-root", "/nonexistent"],
                      env={"BLKPOLICYD_FAULTS": f"write:{qpath(a, 'scheduler')}:EBUSY"}, ready=False)

    def call(cmd, dev=None):
        return control_call(sock, {"command": cmd, **({"device": dev} if dev else {})})["result"]

    wait_for(lambda: os.path.exists(sock) and call("device", a)["error"] == "gave up after 7 retries", 10,
             "the daemon to give up on the faulty device")
    assert d.proc.poll() is None, "daemon: gives up on a device that never takes a write, and keeps running"
    wait_for(lambda: call("status")["tick"]["count"] > 5, 5, "ticks")
    text = d.text()
    assert text.count(f"{a}: scheduler -> mq-deadline") == 8, \
        f"daemon: the tries were bounded (1 + 7 retries), not a hot loop: {text.count('will retry')}"
    assert scheduler(b) == "mq-deadline", "daemon: the other device is set"
    st = call("status")
    assert st["tick"]["dispatch_busy"].startswith("unavailable"), \
        f"debugfs absent: status says dispatch_busy is unavailable: {st['tick']}"
    sig = call("device", b)["signals"]
    assert sig and sig["dispatch_busy"] is None, f"debugfs absent: the signal is unknown (null), not 0: {sig}"
    assert d.stop(timeout=30) == 0, "daemon exits 0"
