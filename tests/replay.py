#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""--replay over a checked-in recording gives the checked-in timeline, byte
for byte. The recording is a real one (loop devices, fio phases: idle, light
qd1 at 400 IOPS, heavy qd16, idle, a short heavy burst) and ends in a torn
line, as a recording cut short by a crash would."""
import os
import subprocess
import sys

blkpolicyd, here = sys.argv[1:3]
recording = os.path.join(here, "loop-phases.jsonl")
want = open(os.path.join(here, "loop-phases.timeline"), "rb").read()
r = subprocess.run([blkpolicyd, "--replay", recording, "--config", "/dev/null",
                    "--policy-dir", os.path.join(here, "policies")], capture_output=True)
ok = r.returncode == 0 and r.stdout == want
print(r.stderr.decode(), end="")
if r.stdout != want:
    print("timeline differs:\n--- want\n" + want.decode() + "--- got\n" + r.stdout.decode())
torn = b"loop-phases.jsonl:55: not a recording line, skipping" in r.stderr
if not torn:
    print("the torn last line was not reported")
passed = int(ok) + int(torn)
print(f"{passed} passed, {2 - passed} failed")
sys.exit(0 if passed == 2 else 1)
