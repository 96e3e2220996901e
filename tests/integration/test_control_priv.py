# SPDX-License-Identifier: LGPL-2.1-or-later
"""Control socket, as root, on a loop device the test creates:
- authorisation: a non-root member of socket_group reads status but is
  denied reload; a uid outside the group cannot connect;
- drift: the test writes the scheduler itself; the daemon notices, leaves it
  (overridden), verify reports it, resume takes the device back;
- pause, then a load change: no flip.

One daemon for the file; the tests run in file order."""
import json
import os
import subprocess

import pytest

from blkptest.daemon import control_call, wait_for
from blkptest.loop import scheduler, set_attr
from blkptest.policy import busy_flip

LOOP_BASE = 800
GROUP, GID, UID = "nogroup", 65534, 65534        # Debian's nobody:nogroup
OUTSIDER = 54321


@pytest.fixture(scope="module")
def env(loops, module_daemons):
    os.chmod(module_daemons.work, 0o755)   # the unprivileged clients must reach the socket
    dev = loops.add()
    loops.attach(dev, size_mb=128)
    # a window over 1 tick: the daemon allocates the averaging ring
    module_daemons.policy("50-test.policy", busy_flip(dev, dynamic="window = 2\n"))
    conf = module_daemons.config(f"[Daemon]\ntick_interval_ms = 100\ndrift_checks_per_tick = 10\n"
                                 f"socket_group = {GROUP}\n")
    set_attr(dev, "scheduler", "mq-deadline")
    d = module_daemons.start_on(dev, conf)
    return {"daemon": d, "dev": dev, "sock": module_daemons.sock, "call": module_daemons.call}


def as_user(sock_path, uid, gid, req):
    """Runs control_call(req) in a forked child with the given ids; returns its result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            out = {"reply": control_call(sock_path, req)}
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


def test_socket_and_ready(env):
    assert scheduler(env["dev"]) == "none", "the policy is applied by READY"
    st = os.stat(env["sock"])
    assert (st.st_mode & 0o777) == 0o660 and st.st_gid == GID, f"socket is 0660 root:nogroup: {oct(st.st_mode)}"


def test_group_member_reads_but_cannot_reload(env):
    out = as_user(env["sock"], UID, GID, {"command": "status"})
    assert out.get("reply", {}).get("ok") is True, out
    out = as_user(env["sock"], UID, GID, {"command": "reload"})
    assert out.get("reply", {}).get("error", {}).get("code") == "permission-denied", out
    assert f"reload denied to uid {UID} pid" in env["daemon"].text(), "the denial is logged with uid and pid"


def test_outsider_cannot_connect(env):
    out = as_user(env["sock"], OUTSIDER, OUTSIDER, {"command": "status"})
    assert out.get("errno") == 13, out


def test_drift_then_resume(env, run_ctl):
    dev, call = env["dev"], env["call"]
    # drift: change the scheduler behind the daemon's back
    set_attr(dev, "scheduler", "kyber")
    wait_for(lambda: call({"command": "device", "device": dev})["result"]["overridden"], 2,
             "the daemon to notice the drift")
    assert scheduler(dev) == "kyber", "the admin's value is left alone"
    ex = call({"command": "explain", "device": dev})["result"]
    assert ex.get("overridden") is True \
        and ex.get("override") == "scheduler changed to kyber (blkpolicyd wanted none)", ex
    v = call({"command": "verify"})["result"]
    drift = v["devices"][0]["drift"] if v["devices"] else []
    assert v["drifted"] == 1 and drift and drift[0]["live"] == "kyber" and drift[0]["intended"] == "none", v
    r = run_ctl(env["sock"], "resume", dev)
    assert r.returncode == 0, r.stderr
    assert scheduler(dev) == "none" and not call({"command": "device", "device": dev})["result"]["overridden"], \
        "resume takes the device back"
    ex = call({"command": "explain", "device": dev})["result"]
    assert ex.get("overridden") is False and "override" not in ex, f"explain no longer names an override: {ex}"


def test_paused_device_does_not_flip(env):
    dev, call = env["dev"], env["call"]
    call({"command": "pause", "device": dev})
    fio = subprocess.run(["fio", "--name=load", f"--filename=/dev/{dev}", "--rw=randread", "--bs=4k",
                          "--iodepth=16", "--direct=1", "--ioengine=io_uring", "--time_based", "--runtime=1",
                          "--output-format=terse"], capture_output=True)
    d = call({"command": "device", "device": dev})["result"]
    assert fio.returncode == 0 and scheduler(dev) == "none" and d["dynamic"]["flips"] == 0 \
        and "-> busy" not in env["daemon"].text(), f"paused: load came and no flip happened: {d}"
    call({"command": "resume", "device": dev})


def test_exit_restores(env):
    assert env["daemon"].stop() == 0
    assert scheduler(env["dev"]) == "mq-deadline", "restores the original scheduler"
