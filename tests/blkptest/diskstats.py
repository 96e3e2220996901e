# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fakes load on disks of a fixture tree through its /proc/diskstats: a
read counter that grows while the load is on (Feeder), or a load whose
busy time follows the scheduler the daemon set (ServiceFeeder). The daemon
reads the file every tick; each version is written whole and renamed into
place, so a tick never sees half of one."""
import os
import threading


class _Paced:
    """A thread that runs _step() at its own pace until the context it is
    used as ends: stopped and joined on the way out, whatever the test did."""

    def __init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self._step()
            # the fake load's pace; the tests wait on observed state, never on this
            self._stop.wait(0.01)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class Feeder(_Paced):
    """Use as a context manager. `on` switches the load."""

    def __init__(self, path, name, major, minor, on=False):
        super().__init__()
        self.path = path
        self.name = name
        self.major, self.minor = major, minor
        self.on = on
        self.reads = 0
        with open(path) as f:
            self.others = [line for line in f if f" {name} " not in line]

    def _write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(self.others)
            f.write(f"{self.major:4d} {self.minor:7d} {self.name} {self.reads} 0 {self.reads * 8} 10 0 0 0 0 0 10 10"
                    " 0 0 0 0 0 0\n")
        os.rename(tmp, self.path)

    def _step(self):
        if self.on:
            self.reads += 1000
        self._write()


class ServiceFeeder(_Paced):
    """Fakes a closed-loop load on disks of a fixture tree whose speed
    depends on the scheduler the daemon set: each step, every disk in
    `disks` completes `ios` requests of 4 KiB, reads or writes as `mode`
    says, and is busy `service[scheduler]` ms for them (io_ticks;
    time_in_queue the same), the scheduler read from the fake sysfs at that
    step. So busy time per byte, the trial's metric, is service[scheduler]
    / (ios * 4 KiB), exactly. `service` and `mode` ("read" or "write": the
    workload's shape) may be changed while it runs. Use as a context
    manager."""

    def __init__(self, path, sched_of, disks, service, ios=1000, mode="read"):
        super().__init__()
        self.path = path
        self.sched_of = sched_of        # name -> the scheduler in force, as the fake sysfs says
        self.service = dict(service)
        self.ios = ios
        self.mode = mode
        self.disks = dict(disks)        # name -> (major, minor)
        self.counters = {name: {"read": 0, "write": 0, "busy": 0} for name in self.disks}
        self.steps = {}                 # scheduler -> steps run under it, for the test's own check
        with open(path) as f:
            self.others = [line for line in f if line.split()[2] not in self.disks]

    def _write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(self.others)
            for name, (major, minor) in self.disks.items():
                c = self.counters[name]
                reads, writes, busy = c["read"], c["write"], c["busy"]
                f.write(f"{major:4d} {minor:7d} {name} {reads} 0 {reads * 8} {busy} {writes} 0 {writes * 8} 0 0 "
                        f"{busy} {busy} 0 0 0 0 0 0\n")
        os.rename(tmp, self.path)

    def _step(self):
        for name in self.disks:
            sched = self.sched_of(name)
            c = self.counters[name]
            c[self.mode] += self.ios
            c["busy"] += self.service[sched]
            self.steps[sched] = self.steps.get(sched, 0) + 1
        self._write()
