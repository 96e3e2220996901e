# SPDX-License-Identifier: LGPL-2.1-or-later
"""SIGHUP on loop devices the test creates: a broken policy file is skipped
as at start (it counts as absent: its device gets back what it had, the
other device is not written to); a fixed one applies the new decision to
exactly the device whose decision changed, and writes nothing to the other.

One daemon for the file; the tests run in file order."""

import pytest

from blkptest.loop import scheduler

LOOP_BASE = 850
GLOB = "loop8[5-9][0-9]"


@pytest.fixture(scope="module")
def env(loops, module_daemons):
    a, b = loops.add(), loops.add()
    write_policy = module_daemons.policy
    write_policy("50-a.policy", f"[Match]\nname = {a}\n[Queue]\nscheduler = mq-deadline\n")
    write_policy("50-b.policy", f"[Match]\nname = {b}\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 256\n")
    d = module_daemons.start_on(GLOB)
    return {"daemon": d, "a": a, "b": b, "write_policy": write_policy}


def reload_log(d):
    """SIGHUP, and what the daemon logged for that reload."""
    pos = len(d.text())
    d.reload()
    return d.text()[pos:]


def test_both_devices_set(env):
    assert scheduler(env["a"]) == "mq-deadline" and scheduler(env["b"]) == "mq-deadline"


def test_broken_file(env):
    a, b = env["a"], env["b"]
    env["write_policy"]("50-a.policy", f"[Match]\nname = {a}\n[Queue]\nscheduler = kyber\nnr_requests = banana\n")
    text = reload_log(env["daemon"])
    assert "50-a.policy:5:" in text, "the error is logged as file:line\n" + text
    assert scheduler(a) == "none", "skipped as at start, so its device gets back what it had\n" + text
    assert scheduler(b) == "mq-deadline" and f"{b}: scheduler" not in text and f"{b}: read_ahead_kb" not in text, \
        "the other device keeps its decision and is not written to\n" + text


def test_fixed_file(env):
    a, b = env["a"], env["b"]
    env["write_policy"]("50-a.policy", f"[Match]\nname = {a}\n[Queue]\nscheduler = kyber\n")
    text = reload_log(env["daemon"])
    assert scheduler(a) == "kyber", "the changed device gets the new decision"
    assert text.count(f"{a}: scheduler none -> kyber") == 1, "the change is one log line\n" + text
    assert scheduler(b) == "mq-deadline" and f"{b}: scheduler" not in text and f"{b}: read_ahead_kb" not in text, \
        "the other device is not written to\n" + text


def test_sigterm_restores_both(env):
    assert env["daemon"].stop() == 0
    assert scheduler(env["a"]) == "none" and scheduler(env["b"]) == "none"
