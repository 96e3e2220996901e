#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fault injection at the sysfs seam (BLKPOLICYD_FAULTS, test builds) on two
loop devices the test creates. For every fault: the daemon keeps going, the
faulty device's status says what happened, the other device is unaffected,
and nothing is retried in a hot loop. Also: debugfs absent, the state dir
unusable, a policy dir that cannot be read."""
import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopdev import (require_fault_injection, LoopDevices, Results, control_call, require_root, scheduler, set_attr, sysfs,  # noqa: E402
                     wait_for)

require_root()
blkpolicyd = sys.argv[1]
require_fault_injection(blkpolicyd)
loops = LoopDevices(base=1900)
res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-faults-")
policies = os.path.join(work, "policies")
os.mkdir(policies)
a, b = loops.add(), loops.add()
GLOB = "loop19[0-9][0-9]"
with open(os.path.join(policies, "50-faults.policy"), "w") as f:
    f.write(f"[Match]\nname = {GLOB}\n[Queue]\nscheduler = mq-deadline kyber\nread_ahead_kb = 256\n")


def reset():
    """Each case starts from the kernel's values and no record: with a record
    kept, the values set back by hand here would be the admin's, left alone."""
    for d in (a, b):
        set_attr(d, "scheduler", "none")
        set_attr(d, "read_ahead_kb", "128")
    subprocess.run(["rm", "-rf", os.path.join(work, "state")], check=True)


def once(faults, *extra, state=None, policy_dirs=None):
    env = dict(os.environ, BLKPOLICYD_FAULTS=faults)
    dirs = []
    for d in policy_dirs or [policies]:
        dirs += ["--policy-dir", d]
    r = subprocess.run([blkpolicyd, "--once", "--config", "/dev/null", *dirs, "--device", GLOB,
                        "--state-dir", state or os.path.join(work, "state"), *extra],
                       capture_output=True, text=True, env=env, timeout=60)
    report = json.loads(r.stdout) if r.stdout else {"devices": []}
    return r.returncode, {d["name"]: d for d in report["devices"]}, r.stderr


def qpath(dev, attr):
    return f"*/block/{dev}/queue/{attr}"


try:
    reset()
    rc, devs, err = once(f"write:{qpath(a, 'scheduler')}:EIO")
    s = devs[a]["settings"]
    res.check("EIO on a write: reported, exit 0", rc == 0 and s["scheduler"]["result"] == "failed"
              and "Input/output error" in s["scheduler"]["error"], s)
    res.check("EIO: the device's other settings still applied", s["read_ahead_kb"]["result"] == "applied")
    res.check("EIO: the other device unaffected", scheduler(b) == "mq-deadline" and sysfs(b, "read_ahead_kb") == "256")

    reset()
    rc, devs, err = once(f"write:{qpath(a, 'scheduler')}:EBUSY:2")
    res.check("EBUSY twice: retried with backoff, then applied",
              devs[a]["settings"]["scheduler"]["result"] == "applied" and err.count(f"{a}: scheduler -> mq-deadline") == 2
              and scheduler(a) == "mq-deadline", err)

    reset()
    rc, devs, err = once(f"write:{qpath(a, 'scheduler')}:EBUSY")
    res.check("EBUSY forever: gives up after a bounded number of tries, no hot loop",
              rc == 0 and devs[a]["error"] == "gave up after 7 retries" and err.count("will retry") == 8
              and scheduler(b) == "mq-deadline", (devs[a]["error"], err.count("will retry")))

    reset()
    rc, devs, err = once(f"write:{qpath(a, 'scheduler')}:EINVAL:1")
    res.check("EINVAL: the policy's next scheduler is tried", devs[a]["settings"]["scheduler"]["target"] == "kyber"
              and scheduler(a) == "kyber", devs[a]["settings"])

    reset()
    rc, devs, err = once(f"write:{qpath(a, 'scheduler')}:ENODEV")
    # ENODEV from a disk that is still there is no disappearance: dropping
    # it would drop its record, and the originals with it
    res.check("ENODEV from a disk still there: a failure, the device and its record kept, the other applied",
              rc == 0 and a in devs and devs[a]["settings"]["scheduler"]["result"] == "failed"
              and scheduler(b) == "mq-deadline", devs.get(a, {}).get("settings"))

    reset()
    rc, devs, err = once(f"read:{qpath(a, 'read_ahead_kb')}:ENOENT")
    res.check("ENOENT on an attribute: unsupported", devs[a]["settings"]["read_ahead_kb"]["result"] == "unsupported",
              devs[a]["settings"])

    reset()
    rc, devs, err = once(f"read:{qpath(a, 'scheduler')}:short:1")
    # The truncated list ("[none] mq-d") still shows a queue that takes
    # schedulers, and mq-deadline may be a module not loaded yet: it is
    # written and read back, the kernel has the last word. The truncated
    # name itself is never used.
    res.check("a short read of the scheduler list: the policy's mq-deadline is written and read back",
              rc == 0 and devs[a]["settings"]["scheduler"]["result"] == "applied"
              and devs[a]["settings"]["scheduler"]["target"] == "mq-deadline" and scheduler(a) == "mq-deadline",
              devs[a]["settings"])
    rc, devs, err = once("")
    res.check("... and the next pass without the fault writes nothing",
              devs[a]["settings"]["scheduler"]["result"] == "unchanged" and scheduler(a) == "mq-deadline",
              devs[a]["settings"])

    reset()
    rc, devs, err = once("", state=os.path.join(policies, "50-faults.policy"))
    # nothing is written without its original on disk first
    res.check("state dir unusable (a file): refused, nothing written",
              rc != 0 and "Cannot open the state directory" in err and scheduler(a) == "none", err[-500:])

    # a read-only and a full state dir: tmpfs mounts of the test's own
    for label, opts, fill in (("read-only", "ro,size=64k,mode=0755", False), ("full", "size=8k,mode=0755", True)):
        reset()
        mnt = os.path.join(work, label)
        os.mkdir(mnt)
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", mnt], check=True)
        try:
            if fill:
                subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/filler", "bs=4k", "count=64"], capture_output=True)
            rc, devs, err = once("", state=mnt)
            if fill:
                s = devs.get(a, {}).get("settings", {}).get("scheduler", {})
                res.check("state dir full: the record cannot be saved, nothing written, the device says why",
                          rc == 0 and s.get("result") == "failed" and "cannot save the state record" in s.get("error", "")
                          and scheduler(a) == "none" and sysfs(a, "read_ahead_kb") == "128", (s, err[-500:]))
            else:
                res.check("state dir read-only: refused, nothing written",
                          rc != 0 and "Cannot open the state directory" in err and scheduler(a) == "none", err[-500:])
        finally:
            subprocess.run(["umount", mnt], check=False)

    reset()
    notadir = os.path.join(work, "not-a-dir")
    open(notadir, "w").close()
    rc, devs, err = once("", policy_dirs=[notadir, policies])
    res.check("a policy dir that cannot be read: reported, the other loads",
              rc == 0 and "cannot read directory" in err and scheduler(a) == "mq-deadline", err[-500:])

    # the daemon: EBUSY forever on one device, debugfs absent with a dispatch_busy policy
    reset()
    with open(os.path.join(policies, "60-busy.policy"), "w") as f:
        f.write(f"[Match]\nname = {b}\n[Dynamic]\nenter = dispatch_busy > 5\nleave = dispatch_busy < 1\n[Busy]\nnr_requests = 32\n")
    conf = os.path.join(work, "d.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\ntick_interval_ms = 100\n")
    sock = os.path.join(work, "sock")
    log = open(os.path.join(work, "daemon.log"), "w+")
    d = subprocess.Popen([blkpolicyd, "--config", conf, "--policy-dir", policies, "--device", GLOB, "--state-dir",
                          os.path.join(work, "state2"), "--socket", sock, "--debugfs-root", "/nonexistent"],
                         stderr=log, env=dict(os.environ, BLKPOLICYD_FAULTS=f"write:{qpath(a, 'scheduler')}:EBUSY"))

    def call(cmd, dev=None):
        return control_call(sock, {"command": cmd, **({"device": dev} if dev else {})})["result"]

    try:
        wait_for(lambda: os.path.exists(sock) and call("device", a)["error"] == "gave up after 7 retries", 10,
                 "the daemon to give up on the faulty device")
        res.check("daemon: gives up on a device that never takes a write, and keeps running", d.poll() is None)
        wait_for(lambda: call("status")["tick"]["count"] > 5, 5, "ticks")
        log.flush()
        log.seek(0)
        text = log.read()
        res.check("daemon: the tries were bounded (1 + 7 retries), not a hot loop",
                  text.count(f"{a}: scheduler -> mq-deadline") == 8,
                  text.count("will retry"))
        res.check("daemon: the other device is set", scheduler(b) == "mq-deadline")
        st = call("status")
        res.check("debugfs absent: status says dispatch_busy is unavailable",
                  st["tick"]["dispatch_busy"].startswith("unavailable"), st["tick"])
        sig = call("device", b)["signals"]
        res.check("debugfs absent: the signal is unknown (null), not 0", sig and sig["dispatch_busy"] is None, sig)
    finally:
        d.send_signal(signal.SIGTERM)
        res.check("daemon exits 0", d.wait(timeout=30) == 0)
finally:
    loops.remove_all()
    subprocess.run(["rm", "-rf", work])
res.finish()
