#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Control socket, as root, on a loop device the test creates:
- authorisation: a non-root member of socket_group reads status but is
  denied reload; a uid outside the group cannot connect;
- drift: the test writes the scheduler itself; the daemon notices, leaves it
  (overridden), verify reports it, resume takes the device back;
- pause, then a load change: no flip."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopdev import (Daemon, LoopDevices, Results, control_call, require_root, scheduler, set_attr,  # noqa: E402
                     wait_for)

require_root()
blkpolicyd, blkpolicyctl = sys.argv[1:3]
GROUP, GID, UID = "nogroup", 65534, 65534        # Debian's nobody:nogroup
OUTSIDER = 54321
loops = LoopDevices(base=800)
res = Results()
work = tempfile.mkdtemp(prefix="blkpolicyd-ctlpriv-")
os.chmod(work, 0o755)   # the unprivileged clients must reach the socket
policies = os.path.join(work, "policies")
os.mkdir(policies)
sock_path = os.path.join(work, "control.sock")
dev = loops.add()
loops.attach(dev, size_mb=128)
with open(os.path.join(policies, "50-test.policy"), "w") as f:
    f.write(f"""[Match]
name = {dev}
[Queue]
scheduler = none
[Dynamic]
enter = iops > 5000
enter_ticks = 2
leave = iops < 1000
leave_ticks = 2
# a window over 1 tick: the daemon allocates the averaging ring
window = 2
min_dwell_ticks = 0
[Busy]
scheduler = mq-deadline
""")
conf = os.path.join(work, "blkpolicyd.conf")
with open(conf, "w") as f:
    f.write(f"[Daemon]\ntick_interval_ms = 100\ndrift_checks_per_tick = 10\nsocket_group = {GROUP}\n")
set_attr(dev, "scheduler", "mq-deadline")
daemon = Daemon(blkpolicyd, work, ["--config", conf, "--policy-dir", policies, "--state-dir",
                                     os.path.join(work, "state"), "--device", dev, "--socket", sock_path])
daemon_log = daemon.text


def call(req):
    return control_call(sock_path, req)


def as_user(uid, gid, req):
    """Runs call(req) in a forked child with the given ids; returns its result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            out = {"reply": call(req)}
        except OSError as e:
            out = {"errno": e.errno}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


try:
    daemon.wait_for("READY=1")
    res.check("the policy is applied by READY", scheduler(dev) == "none")
    st = os.stat(sock_path)
    res.check("socket is 0660 root:nogroup", (st.st_mode & 0o777) == 0o660 and st.st_gid == GID,
              oct(st.st_mode))

    out = as_user(UID, GID, {"command": "status"})
    res.check("a member of socket_group reads status", out.get("reply", {}).get("ok") is True, out)
    out = as_user(UID, GID, {"command": "reload"})
    res.check("... and is denied reload", out.get("reply", {}).get("error", {}).get("code") == "permission-denied",
              out)
    res.check("the denial is logged with uid and pid", f"reload denied to uid {UID} pid" in daemon_log())
    out = as_user(OUTSIDER, OUTSIDER, {"command": "status"})
    res.check("a uid outside the group cannot connect", out.get("errno") == 13, out)

    # drift: change the scheduler behind the daemon's back
    set_attr(dev, "scheduler", "kyber")
    try:
        wait_for(lambda: call({"command": "device", "device": dev})["result"]["overridden"], 2,
                 "the daemon to notice the drift")
        res.check("drift noticed, device marked overridden", True)
    except AssertionError as e:
        res.check("drift noticed, device marked overridden", False, f"{e}\n{daemon_log()}")
    res.check("the admin's value is left alone", scheduler(dev) == "kyber")
    ex = call({"command": "explain", "device": dev})["result"]
    res.check("explain says what was changed", ex.get("overridden") is True
              and ex.get("override") == "scheduler changed to kyber (blkpolicyd wanted none)", ex)
    v = call({"command": "verify"})["result"]
    drift = v["devices"][0]["drift"] if v["devices"] else []
    res.check("verify reports the drift", v["drifted"] == 1 and drift and drift[0]["live"] == "kyber"
              and drift[0]["intended"] == "none", v)
    r = subprocess.run([blkpolicyctl, "--socket", sock_path, "resume", dev], capture_output=True, text=True)
    res.check("blkpolicyctl resume exits 0", r.returncode == 0, r.stderr)
    res.check("resume takes the device back", scheduler(dev) == "none"
              and not call({"command": "device", "device": dev})["result"]["overridden"])
    ex = call({"command": "explain", "device": dev})["result"]
    res.check("... and explain no longer names an override", ex.get("overridden") is False and "override" not in ex, ex)

    # pause, then a load change: no flip
    call({"command": "pause", "device": dev})
    fio = subprocess.run(["fio", "--name=load", f"--filename=/dev/{dev}", "--rw=randread", "--bs=4k",
                          "--iodepth=16", "--direct=1", "--ioengine=io_uring", "--time_based", "--runtime=1",
                          "--output-format=terse"], capture_output=True)
    d = call({"command": "device", "device": dev})["result"]
    res.check("paused: load came and no flip happened",
              fio.returncode == 0 and scheduler(dev) == "none" and d["dynamic"]["flips"] == 0
              and "-> busy" not in daemon_log(), d)
    call({"command": "resume", "device": dev})
    res.check("exits 0", daemon.stop() == 0)
    res.check("restores the original scheduler", scheduler(dev) == "mq-deadline")
finally:
    daemon.cleanup()
    loops.remove_all()
    subprocess.run(["rm", "-rf", work])
res.finish()
