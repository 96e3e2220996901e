# SPDX-License-Identifier: LGPL-2.1-or-later
"""Real-kernel races on loop devices the test creates, asserted from sysfs:
- the daemon stopped (SIGSTOP) for 4 s during a burst of 1000 LOOP_CTL_ADD
  and 300 removals, with a small uevent buffer so that events are lost:
  after SIGCONT every surviving device is set and every removed one
  forgotten (ENOBUFS -> rescan);
- 200 devices added and half removed in a burst while it runs;
- devices removed while the daemon is still writing to them;
- crash safety: SIGKILL after it changed settings, a torn state file, a new
  daemon that still restores the recorded originals on SIGTERM.

One daemon for the file (until the crash test kills it and starts another);
the tests run in file order."""
import os
import signal
import time

import pytest

from blkptest.daemon import control_call, wait_for
from blkptest.loop import record_path, scheduler

LOOP_BASE = 1000
GLOB = "loop1[0-9][0-9][0-9]"


@pytest.fixture(scope="module")
def env(loops, module_daemons):
    module_daemons.policy("50-races.policy", f"[Match]\nname = {GLOB}\n[Queue]\nscheduler = mq-deadline\n")
    conf = module_daemons.config("[Daemon]\nuevent_buffer_bytes = 65536\ndrift_checks_per_tick = 0\n")
    state = module_daemons.state
    sock_path = module_daemons.sock

    def start():
        # one log for both daemons of the file: the second continues the first's
        return module_daemons.start_on(GLOB, conf, append_log=True, timeout=120)

    e = {"start": start, "state": state, "sock": sock_path}
    e["daemon"] = start()
    return e


def alive(loops):
    return {f"loop{i}" for i in loops.indexes}


def consistent(env, loops, timeout, what):
    """Every surviving device set, the daemon knows exactly the survivors."""
    def known_devices():
        return {d["name"] for d in control_call(env["sock"], {"command": "devices"}, timeout=30)["result"]}
    try:
        wait_for(lambda: all(scheduler(d) == "mq-deadline" for d in alive(loops)) and known_devices() == alive(loops),
                 timeout, what)
        return True, ""
    except AssertionError as e:
        missing = [d for d in alive(loops) if scheduler(d) != "mq-deadline"][:5]
        known = known_devices()
        return False, (f"{e}; unset: {missing}; unknown: {sorted(alive(loops) - known)[:5]}; "
                       f"stale: {sorted(known - alive(loops))[:5]}")


def test_sigstop_through_a_burst_that_loses_events(env, loops):
    # stopped for 4 s through a burst that overflows a 64 KiB buffer
    daemon = env["daemon"]
    daemon.signal(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        burst = [loops.add() for _ in range(1000)]
        for name in burst[::3][:300]:
            loops.remove(name)
        time.sleep(max(0.0, 4 - (time.monotonic() - t0)))     # the stall itself is what is tested
    finally:
        daemon.signal(signal.SIGCONT)
    ok, why = consistent(env, loops, 120, "every survivor set after the stall")
    assert ok, f"SIGSTOP through 1000 adds and 300 removals: {len(alive(loops))} survivors set, " \
        f"removed ones forgotten: {why}"
    assert "were lost" in daemon.text(), \
        f"the lost events were noticed and answered with a rescan: {daemon.text()[-2000:]}"
    assert daemon.proc.poll() is None, "still running"


def test_add_and_remove_in_a_burst(env, loops):
    # add 200 and remove half of them in a burst, while it runs
    quick = [loops.add() for _ in range(200)]
    for name in quick[::2]:
        loops.remove(name)
    ok, why = consistent(env, loops, 60, "the add/remove burst to settle")
    assert ok, f"200 added, 100 removed in a burst: consistent: {why}"


def test_removed_while_being_applied(env, loops):
    # remove devices while the daemon is still writing their schedulers
    batch = [loops.add() for _ in range(60)]
    for name in batch[-30:]:
        loops.remove(name)
    ok, why = consistent(env, loops, 60, "removals during apply to settle")
    assert ok and env["daemon"].proc.poll() is None, f"devices removed while being applied: no crash, consistent: {why}"


def test_crash_safety(env, loops):
    state = env["state"]
    victims = sorted(alive(loops))[:3]
    assert all(os.path.exists(record_path(state, v)) for v in victims), "originals recorded for the survivors"
    env["daemon"].cleanup()     # SIGKILL: a crash
    with open(record_path(state, victims[0]), "a") as f:
        f.write("scheduler mq-dead")   # a torn last line, as a crash mid-write could leave
    with open(record_path(state, victims[1]), "w") as f:
        f.write("\x00\x01garbage\n")   # a corrupt file
    daemon = env["daemon"] = env["start"]()
    text = daemon.text()
    assert "unreadable line" in text and daemon.proc.poll() is None, \
        f"a torn or corrupt state file is reported, not fatal: {text[-2000:]}"
    assert daemon.stop(timeout=120) == 0, "exits 0"
    assert scheduler(victims[0]) == "none" and scheduler(victims[2]) == "none", \
        f"after SIGKILL and restart, SIGTERM restores what the first daemon recorded: {[scheduler(v) for v in victims]}"
