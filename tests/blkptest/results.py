# SPDX-License-Identifier: LGPL-2.1-or-later
"""The check/results harness of the scripts that run many checks against one
expensive setup and are not pytest tests: the VM suites (one VM boot for
dozens of checks) and the package check. scripts/test.sh parses their
"LABEL: N passed, N failed" line."""
import sys


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, cond, detail=""):
        if cond:
            self.passed += 1
            print(f"ok - {name}")
        else:
            self.failed += 1
            print(f"not ok - {name}\n  {detail}")

    def finish(self, label=""):
        print(f"{label}{self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)
