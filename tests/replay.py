#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""--replay over the checked-in recordings gives the checked-in timelines,
byte for byte.

loop-phases is a real recording (loop devices, fio phases: idle, light qd1
at 400 IOPS, heavy qd16, idle, a short heavy burst) and ends in a torn
line, as a recording cut short by a crash would.

mix-phases is written by hand, in the same format: 4 KiB random reads,
4 KiB random writes, 512 KiB sequential writes, idle, and reads with 10%
writes, all busy ones at the same queue depth and utilisation. Its policy
flips on the mix (wpct, wkb); the idle ticks, whose mix is unknown, must
not make it leave."""
import os
import subprocess
import sys

blkpolicyd, here = sys.argv[1:3]
passed = failed = 0


def replay(name):
    global passed, failed
    want = open(os.path.join(here, name + ".timeline"), "rb").read()
    r = subprocess.run([blkpolicyd, "--replay", os.path.join(here, name + ".jsonl"), "--config", "/dev/null",
                        "--policy-dir", os.path.join(here, "policies")], capture_output=True)
    print(r.stderr.decode(), end="")
    if r.returncode == 0 and r.stdout == want:
        passed += 1
    else:
        failed += 1
        print(f"{name}: exit {r.returncode}, timeline differs:\n--- want\n" + want.decode()
              + "--- got\n" + r.stdout.decode())
    return r


r = replay("loop-phases")
if b"loop-phases.jsonl:55: not a recording line, skipping" in r.stderr:
    passed += 1
else:
    failed += 1
    print("the torn last line was not reported")
r = replay("mix-phases")
if r.stderr:
    failed += 1
    print("mix-phases: every line should be a recording line")
else:
    passed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(0 if failed == 0 else 1)
