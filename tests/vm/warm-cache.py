#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fills /var/cache/blkpolicyd-vm with what the VM suites fetch and build:
Debian's 6.1, 6.12 and 7.3 kernels, the systemd test's debootstrap root
and, last, the patched 7.3 kernel (10-14 minutes of make on 2 cores).

scripts/test.sh starts it in the background under nice -n 19 before the
meson suites and waits for it before the VM suites, so on a cold cache the
downloads and the kernel build take the CPU the meson tests leave idle,
instead of adding their whole time to the run. On a warm cache it returns
in a second. It checks nothing: a failure here is only printed, and the
VM suite then fetches or builds again itself and fails with the reason.

  python3 tests/vm/warm-cache.py"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dd_kernel  # noqa: E402
import systemdtest  # noqa: E402
import vmtest  # noqa: E402

STEPS = [
    ("6.1", lambda: vmtest.fetch_kernel("6.1")),
    ("6.12", lambda: vmtest.fetch_kernel("6.12")),
    ("7.3", dd_kernel.stock_73),
    ("the systemd test's root", systemdtest.rootfs),
    ("7.3+dd", lambda: dd_kernel.patched_73(log=lambda line: print(f"# warm 7.3+dd: {line}", flush=True))),
]


def main():
    failed = 0
    for name, step in STEPS:
        t0 = time.monotonic()
        try:
            step()
            print(f"# warm {name}: {time.monotonic() - t0:.0f} s", flush=True)
        except Exception as e:     # noqa: BLE001 - the suite that needs it says why it failed
            failed += 1
            print(f"# warm {name}: failed after {time.monotonic() - t0:.0f} s: {e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
