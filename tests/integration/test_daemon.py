# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon in the foreground on loop devices the test creates: devices
added (LOOP_CTL_ADD: 'add') and attached (losetup: 'change') while it runs
are set within 1 s; a removed device is forgotten; SIGTERM puts back every
original setting. Readiness comes from sd_notify on a socket the test binds.

One daemon for the file; the tests run in file order and end with SIGTERM."""
import os
import time

import pytest

from blkptest.daemon import wait_for
from blkptest.loop import record_path, scheduler, set_attr, sysfs

LOOP_BASE = 400
GLOB = "loop4[0-9][0-9]"


@pytest.fixture(scope="module")
def env(loops, module_daemons):
    module_daemons.policy("50-test.policy",
                          f"[Match]\nname = {GLOB}\n\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 256\n")
    # one device present before the daemon starts
    first = loops.add()
    loops.attach(first)
    defaults = {"scheduler": scheduler(first), "read_ahead_kb": sysfs(first, "read_ahead_kb")}
    state = module_daemons.state
    d = module_daemons.start_on(GLOB, extra=["--log-level", "debug"], ready=False)
    return {"daemon": d, "state": state, "first": first, "defaults": defaults, "names": [first]}


def test_ready_after_first_pass(env):
    ready = env["daemon"].wait_for("READY=1")
    assert "STATUS=Managing 1 block devices" in ready, ready
    first = env["first"]
    assert scheduler(first) == "mq-deadline" and sysfs(first, "read_ahead_kb") == "256", \
        "the device present at start is set"


def test_added_and_attached_devices_are_set_within_1s(env, loops):
    # add event: LOOP_CTL_ADD
    t0 = time.monotonic()
    added = loops.add()
    env["names"].append(added)
    t1 = wait_for(lambda: scheduler(added) == "mq-deadline", 1.0, f"{added} to get mq-deadline")
    print(f"added device set in {(t1 - t0) * 1000:.0f} ms")

    # change event: losetup attach re-classifies and re-applies
    set_attr(added, "scheduler", "none")
    t0 = time.monotonic()
    loops.attach(added)
    t1 = wait_for(lambda: scheduler(added) == "mq-deadline" and sysfs(added, "read_ahead_kb") == "256",
                  1.0, f"{added} to be set again after attach")
    print(f"attached device set in {(t1 - t0) * 1000:.0f} ms")


def test_removed_device_is_forgotten(env, loops):
    gone = loops.add()
    gone_record = record_path(env["state"], gone)
    wait_for(lambda: os.path.exists(gone_record), 1.0, f"originals of {gone}")
    loops.remove(gone)
    wait_for(lambda: not os.path.exists(gone_record), 1.0, f"originals of {gone} to be dropped")
    assert env["daemon"].proc.poll() is None, "the daemon is still running"


def test_sigterm_restores_everything(env):
    d = env["daemon"]
    assert d.stop() == 0, "exits 0 on SIGTERM"
    for name in env["names"]:
        assert scheduler(name) == env["defaults"]["scheduler"], f"{name}: scheduler restored"
        assert sysfs(name, "read_ahead_kb") == env["defaults"]["read_ahead_kb"], f"{name}: read_ahead_kb restored"
    devices = os.path.join(env["state"], "devices")
    left = os.listdir(devices) if os.path.isdir(devices) else []
    assert left == [], "no originals left after restoring"
    assert d.text().count(f"{env['first']}: scheduler none -> mq-deadline") == 1, "every change is one log line"
