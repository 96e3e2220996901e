# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fakes load on one disk of a fixture tree: its /proc/diskstats line's read
counter grows while the load is on. The daemon reads the file every tick;
each version is written whole and renamed into place, so a tick never sees
half of one."""
import os
import threading


class Feeder:
    """Use as a context manager: the thread stops and is joined on the way
    out, whatever the test did. `on` switches the load."""

    def __init__(self, path, name, major, minor, on=False):
        self.path = path
        self.name = name
        self.major, self.minor = major, minor
        self.on = on
        self.reads = 0
        with open(path) as f:
            self.others = [line for line in f if f" {name} " not in line]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(self.others)
            f.write(f"{self.major:4d} {self.minor:7d} {self.name} {self.reads} 0 {self.reads * 8} 10 0 0 0 0 0 10 10"
                    " 0 0 0 0 0 0\n")
        os.rename(tmp, self.path)

    def _run(self):
        while not self._stop.is_set():
            if self.on:
                self.reads += 1000
            self._write()
            # the feeder's pace, the rate of the fake load; the tests wait on
            # observed state, never on this
            self._stop.wait(0.01)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class ServiceFeeder:
    """Fakes a closed-loop load on disks of a fixture tree whose speed
    depends on the scheduler the daemon set: each step, every disk in
    `disks` completes `ios` reads of 4 KiB and is busy `service[scheduler]`
    ms for them (io_ticks; time_in_queue the same), the scheduler read
    from the fake sysfs at that step. So busy time per byte, the trial's
    metric, is service[scheduler] / (ios * 4 KiB), exactly. `service` may
    be changed while it runs. Use as a context manager, as Feeder."""

    def __init__(self, path, sched_of, disks, service, ios=1000):
        self.path = path
        self.sched_of = sched_of        # name -> the scheduler in force, as the fake sysfs says
        self.service = dict(service)
        self.ios = ios
        self.disks = dict(disks)        # name -> (major, minor)
        self.counters = {name: [0, 0] for name in self.disks}   # reads, busy ms
        self.steps = {}                 # scheduler -> steps run under it, for the test's own check
        with open(path) as f:
            self.others = [line for line in f if line.split()[2] not in self.disks]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(self.others)
            for name, (major, minor) in self.disks.items():
                reads, busy = self.counters[name]
                f.write(f"{major:4d} {minor:7d} {name} {reads} 0 {reads * 8} {busy} 0 0 0 0 0 {busy} {busy}"
                        " 0 0 0 0 0 0\n")
        os.rename(tmp, self.path)

    def _run(self):
        while not self._stop.is_set():
            for name in self.disks:
                sched = self.sched_of(name)
                c = self.counters[name]
                c[0] += self.ios
                c[1] += self.service[sched]
                self.steps[sched] = self.steps.get(sched, 0) + 1
            self._write()
            # the load's pace; the tests wait on observed state, never on this
            self._stop.wait(0.01)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
