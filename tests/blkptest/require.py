# SPDX-License-Identifier: LGPL-2.1-or-later
"""The skip rule: a test that cannot run here skips saying why, except under
CI=true, where every test must run and a missing prerequisite fails."""
import os
import shutil
import subprocess
import sys


def in_ci():
    return os.environ.get("CI") == "true"


def skip_or_fail(why, hint=""):
    # imported here: the scripts that are not pytest tests (the VM suites)
    # use this package too, on a python3 that may have no pytest
    import pytest
    if in_ci():
        pytest.fail(f"{why}, and CI=true requires every test to run", pytrace=False)
    pytest.skip(f"{why}{'; ' + hint if hint else ''}")


def fault_injection_built(blkpolicyd):
    """Test builds (-Dfault_injection=true) have the fake kernel and BLKPOLICYD_FAULTS."""
    return "+fault-injection" in subprocess.run([blkpolicyd, "--version"], capture_output=True, text=True).stdout


def require_fault_injection(blkpolicyd):
    if not fault_injection_built(blkpolicyd):
        skip_or_fail("needs a test build (-Dfault_injection=true): the fake kernel and BLKPOLICYD_FAULTS")


def require_root(what="needs root and /dev/loop-control to create loop devices"):
    if os.geteuid() == 0 and os.path.exists("/dev/loop-control"):
        return
    skip_or_fail(what, "run the test command as root (sudo) to include these tests")


def script_prerequisites(label, tools, also_missing=()):
    """The skip rule for the scripts scripts/test.sh runs as root suites
    (no pytest): root and the tools named, else the suite's summary line
    says why and the script exits, 1 under CI=true, 0 otherwise."""
    missing = [t for t in tools if not shutil.which(t)] + list(also_missing)
    if os.geteuid() != 0:
        why = "needs root (loop devices, privileged containers)"
    elif missing:
        why = f"needs {', '.join(missing)} (scripts/install-deps.sh --test)"
    else:
        return
    if in_ci():
        print(f"{label}: 0 passed, 1 failed ({why}, and CI=true requires every test to run)")
        sys.exit(1)
    print(f"SKIP: {label} {why}\n{label}: 0 passed, 0 failed")
    sys.exit(0)
