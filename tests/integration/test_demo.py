# SPDX-License-Identifier: LGPL-2.1-or-later
"""The README's run command (scripts/run.sh runs tools/demo.py): on this
machine, in dry-run, it must show the decisions for a scratch device
coming, changing, under load and going, write nothing to any other
device, and leave no scratch device behind."""
import os
import subprocess

from blkptest.loop import sysfs

# the demo makes its scratch devices from loop900 on (tools/demo.py)


def schedulers():
    """Every block device's queue/scheduler but the demo's scratch range."""
    out = {}
    for dev in sorted(os.listdir("/sys/block")):
        if dev.startswith("loop9") and len(dev) == 7:
            continue
        try:
            out[dev] = sysfs(dev, "scheduler")
        except OSError:
            pass
    return out


def test_demo_shows_hotplug_and_load_and_writes_nothing(root, blkpolicyd, top):
    before = schedulers()
    r = subprocess.run(["python3", os.path.join(top, "tools", "demo.py"), blkpolicyd, os.path.join(top, "policies")],
                       capture_output=True, text=True, timeout=120)
    out = r.stdout
    assert r.returncode == 0, f"the demo exits 0: {r.returncode}\n{out[-2000:]}\n{r.stderr[-2000:]}"
    scratch = next((w.rstrip(":") for line in out.splitlines() if "policy 99-demo-scratch-dynamic.policy" in line
                    for w in line.split() if w.startswith("loop9")), None)
    assert scratch, f"the scratch device was decided by the demo policy:\n{out[-3000:]}"
    for want in (f"{scratch}: scheduler would change mq-deadline -> none",     # attached
                 f"{scratch}: base -> busy: iops > 1000",                      # the load
                 f"{scratch}: scheduler would change none -> mq-deadline",
                 f"{scratch}: busy -> base: iops < 100",                       # after it
                 f"{scratch}: removed",
                 "Nothing was written"):
        assert want in out, f"the demo shows '{want}':\n{out[-3000:]}"
    assert "(no log line with" not in out, f"every step's log line came:\n{out[-3000:]}"
    assert not os.path.exists(f"/sys/block/{scratch}"), "the scratch device is removed"
    after = schedulers()
    changed = {dev: (before[dev], after[dev]) for dev in before.keys() & after.keys() if before[dev] != after[dev]}
    assert not changed, f"dry run: no other device's scheduler changed: {changed}"
