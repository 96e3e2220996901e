#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What views from one live read cost: `metrics`, `devices`, `verify` and
`device` at N fake disks, each build side by side in one run, alternating.

Since the views read each managed setting from sysfs for the reply
(daemon/loop/device-view.c) instead of showing the last pass's values, a reply
costs one read per setting. This measures the daemon's CPU per reply
(the event loop thread's schedstat around the request, so the client's
time and the other builds' do not count) and its wall time, on the
fake-scale tree (no root, no loop devices; --dry-run, and a policy that
sets the scheduler and read_ahead_kb on every disk), and prints the
ratios against the first build.

With --loops (root), N loop devices it creates instead (removed at the
end, whatever fails), on sysfs itself: kernfs's walks and reads, which a
tmpfs fixture tree does not cost the same.

  python3 bench/views.py [--counts 1000,10000] [--builds /tmp/old/build,build] [--rounds 3] [--loops]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blkptest.daemon import Daemon, control_call  # noqa: E402
from blkptest.loop import LoopDevices, exit_on_signals  # noqa: E402
from benchlib import BASE, GLOB  # noqa: E402
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location("fake_scale", os.path.join(TOP, "bench", "fake-scale.py"))
fake_scale = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_scale)

POLICY = f"[Match]\nname = {GLOB}\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 256\n"
REQUESTS = ({"command": "metrics"}, {"command": "devices"}, {"command": "verify"},
            {"command": "device", "device": f"loop{BASE}"})


def cpu_s(pid):
    """The event loop's (the main thread's) time on a CPU, in ns resolution:
    the views run there; the applier's threads do not count."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


class StatusProbe:
    """Another client's `status`, asked over and over while a reply is made:
    its worst answer time is how long the reply held the loop."""

    def __init__(self, sock):
        self.sock, self.worst, self.stop = sock, 0.0, threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            control_call(self.sock, {"command": "status"}, timeout=120)
            self.worst = max(self.worst, time.monotonic() - t0)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def roots_args(root):
    """The fake tree's roots, or none: sysfs itself."""
    if root is None:
        return []
    return ["--sysfs-root", os.path.join(root, "sys"), "--proc-root", os.path.join(root, "proc"),
            "--debugfs-root", os.path.join(root, "debug")]


def measure(binary, root, n, repeat):
    work = tempfile.mkdtemp(prefix="blkpolicyd-views-", dir="/dev/shm")
    d = None
    try:
        pol = os.path.join(work, "policies")
        os.mkdir(pol)
        with open(os.path.join(pol, "50-views.policy"), "w") as f:
            f.write(POLICY)
        sock = os.path.join(work, "control.sock")
        d = Daemon(binary, work, ["--dry-run", "--config", "/dev/null", "--policy-dir", pol, *roots_args(root),
                                  "--state-dir", os.path.join(work, "state"), "--socket", sock, "--device", GLOB,
                                  "--log-level", "warning"])
        d.wait_for("READY=1", timeout=600)
        out = {}
        for req in REQUESTS:
            cpu, wall, worst = [], [], []
            for _ in range(repeat):
                c0, t0 = cpu_s(d.proc.pid), time.monotonic()
                with StatusProbe(sock) as probe:
                    reply = control_call(sock, req, timeout=120)
                wall.append(time.monotonic() - t0)
                cpu.append(cpu_s(d.proc.pid) - c0)
                worst.append(probe.worst)
                assert reply["ok"], reply
            out[req["command"]] = (statistics.median(cpu), statistics.median(wall), max(worst))
        return out
    finally:
        if d:
            d.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="1000,10000")
    ap.add_argument("--builds", default="build", help="comma-separated build dirs; ratios are against the first")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--loops", action="store_true", help="loop devices it makes (root), not a fake tree")
    a = ap.parse_args()
    if a.loops:
        exit_on_signals()
    builds = [b if os.path.isabs(b) else os.path.join(TOP, b) for b in a.builds.split(",")]
    for n in (int(x) for x in a.counts.split(",")):
        tree = tempfile.mkdtemp(prefix="blkpolicyd-views-tree-", dir="/dev/shm")
        loops = LoopDevices(base=BASE) if a.loops else None
        try:
            if loops:
                root = None
                for _ in range(n):
                    loops.add()
            else:
                root = os.path.join(tree, "root")
                fake_scale.make_tree(root, n)
                fake_scale.write_file(os.path.join(root, "proc", "diskstats"), fake_scale.diskstats(n, 1))
            rows = {b: [] for b in builds}
            for r in range(a.rounds):
                order = builds if r % 2 == 0 else builds[::-1]
                for b in order:
                    rows[b].append(measure(os.path.join(b, "daemon", "blkpolicyd"), root, n, a.repeat))
            print(f"## {n} {'loop devices' if loops else 'fake disks'}, {a.rounds} rounds of {a.repeat} requests "
                  "each: the loop's CPU ms and the wall ms per reply (medians), the worst `status` of another client "
                  "meanwhile (ms)")
            print("| request | " + " | ".join(os.path.relpath(b, TOP) for b in builds) + " | CPU ratio |")
            print("|---|" + "---|" * (len(builds) + 1))
            for req in REQUESTS:
                c = req["command"]
                med = {b: (statistics.median(x[c][0] for x in rows[b]) * 1000,
                           statistics.median(x[c][1] for x in rows[b]) * 1000,
                           max(x[c][2] for x in rows[b]) * 1000) for b in builds}
                first = med[builds[0]][0]
                cells = " | ".join(f"{med[b][0]:.0f} / {med[b][1]:.0f} / {med[b][2]:.0f}" for b in builds)
                ratio = med[builds[-1]][0] / first if first > 0 else float("nan")
                print(f"| {c} | {cells} | {ratio:.2f} |")
        finally:
            if loops:
                loops.remove_all()
            shutil.rmtree(tree, ignore_errors=True)


if __name__ == "__main__":
    main()
