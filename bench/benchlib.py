#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the benchmarks share beyond the tests' blkptest package."""

# scale.py's devices and the dynamic policy it measures them under, which
# fake-scale.py copies without loop devices
BASE = 10000
GLOB = "loop[1-9][0-9][0-9][0-9][0-9]"
DYNAMIC_POLICY = f"""[Match]
name = {GLOB}
[Dynamic]
enter = iops > 100000000
leave = iops < 1
[Busy]
scheduler = mq-deadline
"""

def memory_of(pid):
    """VmRSS, RssAnon and RssFile of /proc/PID/status, and Pss, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0])
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                out["Pss"] = int(line.split()[1])
    return out
