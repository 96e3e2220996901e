# SPDX-License-Identifier: LGPL-2.1-or-later
"""Ownership on real loop devices the test creates (root): the proof behind
tests/ownership.py's fake kernel, on the kernel's own elevator switch and
its own rounding of mq-deadline's times to jiffies.

  1. enforce -> observe by reload: every value back, nothing overridden
     after ticks of drift checks; an overridden disk gives back what
     blkpolicyd left and keeps the admin's scheduler; observe -> enforce
     applies again without resume;
  2. an admin's scheduler shows in device, devices and the metrics;
  3. read_expire = 1 is not kept (HZ rounds it): verify exits 4."""
import os
import re
import shutil

import pytest

from blkptest.daemon import control_call, ctl, wait_for
from blkptest.loop import scheduler, set_attr, sysfs

LOOP_BASE = 3700
GLOB = "loop37[0-9][0-9]"
ENFORCE = "[Daemon]\ntick_interval_ms = 50\ndrift_checks_per_tick = 8\nmetrics_per_device = yes\n"


@pytest.fixture(scope="module")
def dev(loops):
    d = loops.add()
    loops.attach(d)
    return d


class Host:
    def __init__(self, daemons, dev):
        self.daemons, self.dev = daemons, dev
        self.conf = os.path.join(daemons.work, "blkpolicyd.conf")
        set_attr(dev, "scheduler", "none")
        set_attr(dev, "read_ahead_kb", "128")
        shutil.rmtree(daemons.state, ignore_errors=True)
        self.original = self.snapshot()

    def configure(self, text):
        with open(self.conf, "w") as f:
            f.write(text)

    def start(self, policy):
        self.daemons.policy("50.policy", f"[Match]\nname = {self.dev}\n[Queue]\n{policy}")
        self.configure(ENFORCE)
        return self.daemons.start_on(GLOB, conf=self.conf)

    def call(self, command, **kw):
        reply = control_call(self.daemons.sock, dict(command=command, **kw))
        assert reply["ok"], reply
        return reply["result"]

    def metric(self, name):
        for line in self.call("metrics")["text"].splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return None

    def snapshot(self):
        return {"scheduler": scheduler(self.dev), "read_ahead_kb": sysfs(self.dev, "read_ahead_kb")}


@pytest.fixture
def host(daemons, dev, fault_injection):
    return Host(daemons, dev)


def test_back_out_and_enforce_again(host):
    d = host.start("scheduler = mq-deadline\nread_ahead_kb = 256\n")
    assert host.snapshot() == {"scheduler": "mq-deadline", "read_ahead_kb": "256"}, host.snapshot()
    host.configure(ENFORCE + "mode = observe\n")
    d.reload()
    ticks = host.metric("blkpolicyd_ticks_total")
    wait_for(lambda: host.metric("blkpolicyd_ticks_total") >= ticks + 20, 20, "20 ticks of drift checks")
    assert (host.snapshot() == host.original and host.call("status")["overridden"] == 0
            and host.metric(f'blkpolicyd_device_overridden{{device="{host.dev}"}}') == 0
            and "leaving it alone" not in d.text()), \
        f"observe: every value back, and the put-back is no override: {host.snapshot()}"
    host.configure(ENFORCE)
    d.reload()
    assert host.snapshot() == {"scheduler": "mq-deadline", "read_ahead_kb": "256"}, \
        f"enforce again by reload, no resume: {host.snapshot()}"
    assert d.stop() == 0 and host.snapshot() == host.original, host.snapshot()


def test_overridden_disk_backs_out_and_views_follow(host):
    d = host.start("scheduler = mq-deadline\nread_ahead_kb = 256\n")
    set_attr(host.dev, "scheduler", "kyber")        # the admin
    wait_for(lambda: host.call("status")["overridden"] == 1, 10, "the admin's change to be noticed")
    dev = host.call("device", device=host.dev)
    listed = {x["name"]: x for x in host.call("devices")}[host.dev]
    assert (dev["settings"]["scheduler"]["current"] == "kyber" and dev["facts"]["scheduler"] == "kyber"
            and dev["settings"]["scheduler"]["result"] == "overridden"
            and listed["settings"]["scheduler"]["current"] == "kyber"
            and host.metric(f'blkpolicyd_device_scheduler{{device="{host.dev}",scheduler="kyber"}}') == 1
            and host.metric(f'blkpolicyd_device_pending_changes{{device="{host.dev}"}}') == 1), \
        f"the views say what sysfs holds: {dev['settings']}"
    host.configure(ENFORCE + "mode = observe\n")
    d.reload()
    assert host.snapshot() == {"scheduler": "kyber", "read_ahead_kb": "128"} and \
        host.call("status")["overridden"] == 0, \
        f"back-out: the admin's kyber stays, blkpolicyd's read_ahead_kb goes back: {host.snapshot()}"
    d.stop()


def test_read_expire_not_kept(host, blkpolicyctl):
    d = host.start("scheduler = mq-deadline\n[mq-deadline]\nread_expire = 1\n")
    kept = sysfs(host.dev, "iosched/read_expire")
    assert kept != "1", f"this kernel keeps 1 ms (HZ=1000?): the case needs a coarser HZ, it read {kept}"
    r = ctl(blkpolicyctl, host.daemons.sock, "verify")
    assert r.returncode == 4 and re.search(rf"{host.dev}: iosched/read_expire is {kept}: .*not kept", r.stdout), \
        f"verify names the value the kernel did not keep and exits 4: {(r.returncode, r.stdout)}"
    assert host.metric('blkpolicyd_settings{result="not_kept"}') == 1, "the metrics count it"
    assert d.stop() == 0 and host.snapshot() == host.original, host.snapshot()
