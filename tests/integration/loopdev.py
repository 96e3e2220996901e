# SPDX-License-Identifier: LGPL-2.1-or-later
"""For the scripts not yet converted to pytest: the shared pieces now live in
tests/blkptest; this keeps the old names and the script-style skip rule
(exit 77 outside CI, exit 1 under CI=true). Goes once nothing imports it."""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blkptest.daemon import Daemon, control_call, wait_for  # noqa: E402,F401
from blkptest.loop import LoopDevices as _LoopDevices, record_path, scheduler, set_attr, sysfs  # noqa: E402,F401
from blkptest.require import fault_injection_built  # noqa: E402,F401
from blkptest.results import Results  # noqa: E402,F401

SKIP = 77


class LoopDevices(_LoopDevices):
    """As a script: a SIGTERM (meson's timeout) or ^C exits through atexit,
    which removes the devices."""

    def __init__(self, base):
        super().__init__(base)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: sys.exit(1))


def _skip_or_fail(why, hint=""):
    if os.environ.get("CI") == "true":
        print(f"FAIL: {why}, and CI=true requires every test to run")
        sys.exit(1)
    print(f"SKIP: {why}{'; ' + hint if hint else ''}")
    sys.exit(SKIP)


def require_fault_injection(blkpolicyd):
    if not fault_injection_built(blkpolicyd):
        _skip_or_fail("needs a test build (-Dfault_injection=true): the fake kernel and BLKPOLICYD_FAULTS")


def require_root():
    if os.geteuid() == 0 and os.path.exists("/dev/loop-control"):
        return
    _skip_or_fail("needs root and /dev/loop-control to create loop devices",
                  "run the test command as root (sudo) to include these tests")
