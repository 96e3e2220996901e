# SPDX-License-Identifier: LGPL-2.1-or-later
"""What blkpolicyd's Python tests share: one way to start the daemon and talk
to it, one loop-device helper, one diskstats feeder, one skip rule for tests
that need root or a test build, and one check/results harness for the
scripts that are not pytest tests (the VM suites, the package check).

The pytest fixtures built on these live in tests/conftest.py."""
