#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A storm of new disks against the parallel floor, measured in one run.

For N loop devices (default 1000) that appear while the daemon runs, each
needing one scheduler write (none -> mq-deadline):
  - floor: the same write to the same N devices by 64 threads, timed here
    (concurrent writers share RCU grace periods: the physical limit);
  - storm floor: the whole storm with the bench's own 64 writers, each
    disk handed to them as soon as LOOP_CTL_ADD returns (no uevent, no
    daemon): what this kernel allows for the adds and writes together,
    which slow each other down;
  - serial: the same by one thread (what a daemon writing on its loop gets);
  - blkpolicyd, for each apply_parallelism given: time from the first
    LOOP_CTL_ADD to every device set; the worst answer time of `status`
    on the control socket during the storm (a client asking all along);
    the daemon's CPU time (all threads) during the storm;
    the longest gap between watchdog pings (WATCHDOG_USEC=1 s, as the unit
    sets 30 s) against its interval; devices lost.
Devices are removed with 16 threads (LOOP_CTL_REMOVE is ~35 ms each).

The state dir is on tmpfs (/dev/shm), as /run is under systemd: every pass
saves its record with fsync before and after the write, and on a disk
file system those fsyncs, not the kernel's switch, become the limit.
--state-on-disk puts it under /tmp instead (this VM's /run is on ext4).

  sudo python3 bench/storm.py [--devices 1000] [--parallelism 1,4,16,64] [--build build]
                              [--profile-loop]

--profile-loop (perf, bench/loopprof.py) lists the longest dispatches of
the daemon's event loop during the storm and what ran in them: what held
the socket's worst answer.
"""
import argparse
import concurrent.futures
import contextlib
import fcntl
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests"))      # the tests' helpers: blkptest
from blkptest.daemon import control_call  # noqa: E402
from blkptest.loop import set_attr, unset_after  # noqa: E402
from loopprof import LoopProfile  # noqa: E402

BASE = 10000
GLOB = "loop[1-9][0-9][0-9][0-9][0-9]"
WATCHDOG_USEC = 1000000


def loop_ctl(op, index):
    fd = os.open("/dev/loop-control", os.O_RDWR)
    try:
        return fcntl.ioctl(fd, op, index)
    finally:
        os.close(fd)


# every device this bench made and has not removed: whatever fails, the
# last cleanup removes these and only these
MADE = set()


def add_devices(n, made=None):
    out = []
    for i in range(BASE, BASE + 20 * n):
        if len(out) == n:
            break
        if os.path.exists(f"/sys/block/loop{i}"):
            continue
        try:
            loop_ctl(0x4C80, i)
            MADE.add(f"loop{i}")
            out.append(f"loop{i}")
            if made:
                made(out[-1])
        except OSError:
            pass
    return out


def remove_devices(devs):
    def remove(dev):
        for _ in range(100):
            try:
                loop_ctl(0x4C81, int(dev[4:]))
                MADE.discard(dev)
                return
            except OSError:
                time.sleep(0.02)
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(remove, devs))


def storm_floor(n, threads):
    """The same storm with the bench's own writers told of each disk as
    soon as it is made: no uevent, no daemon, what this kernel allows."""
    q = queue.Queue()

    def writer():
        while (dev := q.get()) is not None:
            set_attr(dev, "scheduler", "mq-deadline")
    writers = [threading.Thread(target=writer) for _ in range(threads)]
    for w in writers:
        w.start()
    t0 = time.perf_counter()
    devs = []
    try:
        devs = add_devices(n, q.put)
    finally:
        for _ in writers:
            q.put(None)
        for w in writers:
            w.join()
    return devs, time.perf_counter() - t0


def cpu_seconds(pid):
    """utime + stime of every thread of pid, so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_all(devs, value, threads):
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        list(ex.map(lambda d: set_attr(d, "scheduler", value), devs))
    return time.perf_counter() - t0


class Notify(threading.Thread):
    def __init__(self, path):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.got = []
        self.stop = False
        self.start()

    def run(self):
        while not self.stop:
            try:
                self.got.append((time.monotonic(), self.sock.recv(4096).decode()))
            except socket.timeout:
                pass

    def wait(self, word, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(word in m.split("\n") for _, m in self.got):
                return True
            time.sleep(0.01)
        return False


class Asker(threading.Thread):
    """Asks `status` again and again; keeps the worst answer time."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.worst = 0.0
        self.count = 0
        self.stop = False
        self.start()

    def run(self):
        while not self.stop:
            t0 = time.perf_counter()
            control_call(self.path, {"command": "status"}, timeout=120)
            self.worst = max(self.worst, time.perf_counter() - t0)
            self.count += 1
            time.sleep(0.005)


def daemon_storm(blkpolicyd, work, state_parent, n, parallelism, profile=False):
    policies = os.path.join(work, "policies")
    os.makedirs(policies, exist_ok=True)
    with open(os.path.join(policies, "90-storm.policy"), "w") as f:
        f.write(f"[Match]\nname = {GLOB}\n[Queue]\nscheduler = mq-deadline\n")
    conf = os.path.join(work, "storm.conf")
    with open(conf, "w") as f:
        f.write(f"[Daemon]\napply_parallelism = {parallelism}\ndrift_checks_per_tick = 0\n")
    notify_path = os.path.join(work, f"notify-{parallelism}")
    sock = os.path.join(work, f"control-{parallelism}.sock")
    notify = Notify(notify_path)
    log = open(os.path.join(work, "daemon.log"), "a")
    proc = subprocess.Popen([blkpolicyd, "--config", conf, "--policy-dir", policies, "--state-dir",
                             os.path.join(state_parent, f"state-{parallelism}"), "--device", GLOB, "--socket", sock,
                             "--log-level", "notice"], stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, NOTIFY_SOCKET=notify_path, WATCHDOG_USEC=str(WATCHDOG_USEC)))
    try:
        notify.wait("READY=1", 60)
        prof = LoopProfile(proc.pid) if profile else contextlib.nullcontext()
        with prof:
            asker = Asker(sock)
            cpu0 = cpu_seconds(proc.pid)
            t0 = time.perf_counter()
            start_mono = time.monotonic()
            devs = add_devices(n)
            added = time.perf_counter() - t0
            pending = unset_after(devs, "mq-deadline", 300, poll=0.005)
            settled = time.perf_counter() - t0
            end_mono = time.monotonic()
            cpu = cpu_seconds(proc.pid) - cpu0
            asker.stop = True
            asker.join()
        pings = [t for t, m in notify.got if "WATCHDOG=1" in m.split("\n") and start_mono <= t <= end_mono]
        gaps = [b - a for a, b in zip([start_mono] + pings, pings + [end_mono])]
        status = json.loads(subprocess.run([os.path.join(os.path.dirname(os.path.dirname(blkpolicyd)), "ctl",
                                                         "blkpolicyctl"), "--socket", sock, "--json", "status"],
                                           capture_output=True, text=True).stdout)
        return devs, {"parallelism": parallelism, "added_s": added, "settled_s": settled,
                      "after_last_add_s": settled - added, "lost": len(pending), "daemon_cpu_s": cpu,
                      "socket_worst_ms": asker.worst * 1000, "socket_answers": asker.count,
                      "watchdog_longest_gap_ms": max(gaps) * 1000,
                      "scheduler_writes": status["result"]["writes"]["scheduler"],
                      "loop_longest": prof.longest(5) if profile else None}
    finally:
        proc.terminate()
        proc.wait(timeout=600)
        notify.stop = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=1000)
    ap.add_argument("--parallelism", default="1,4,16,64")
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--skip-serial", action="store_true", help="no one-thread floor (250 s at 10,000)")
    ap.add_argument("--state-on-disk", action="store_true", help="state dir under /tmp, not on tmpfs")
    ap.add_argument("--profile-loop", action="store_true",
                    help="perf: the longest dispatches of the event loop during the storm, and what ran in them")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (loop devices)")
    blkpolicyd = os.path.join(args.build, "daemon", "blkpolicyd")
    work = tempfile.mkdtemp(prefix="blkpolicyd-storm-")
    state_parent = work if args.state_on_disk else tempfile.mkdtemp(prefix="blkpolicyd-storm-", dir="/dev/shm")
    rows, floors = [], {}
    devs = []
    try:
        devs = add_devices(args.devices)
        floors["64"] = write_all(devs, "mq-deadline", 64)
        write_all(devs, "none", 64)
        floors["1"] = None if args.skip_serial else write_all(devs, "mq-deadline", 1)
        remove_devices(devs)
        devs, floors["storm"] = storm_floor(args.devices, 64)
        remove_devices(devs)
        devs = []
        for p in map(int, args.parallelism.split(",")):
            devs, row = daemon_storm(blkpolicyd, work, state_parent, args.devices, p, args.profile_loop)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            remove_devices(devs)
            devs = []
    finally:
        remove_devices(sorted(set(devs) | MADE))
        subprocess.run(["rm", "-rf", work, state_parent])
    print(f"{args.devices} loop devices, kernel {os.uname().release}, {os.cpu_count()} CPUs, state dir on "
          f"{'disk (ext4)' if args.state_on_disk else 'tmpfs'}\n")
    serial = "not measured" if floors["1"] is None else f"{floors['1']:.2f} s"
    print(f"floor: 64 threads set all in {floors['64']:.2f} s; one thread: {serial}; the storm with the bench's "
          f"own 64 writers told of each disk as it is made: {floors['storm']:.2f} s\n")
    print("| apply_parallelism | all set after (s) | / floor | / storm floor | adds took (s) | after the last add (s) "
          "| daemon CPU (s) | socket worst (ms) | answers | watchdog longest gap (ms, of 1000) | scheduler writes "
          "| lost |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['parallelism']} | {r['settled_s']:.2f} | {r['settled_s'] / floors['64']:.2f} | "
              f"{r['settled_s'] / floors['storm']:.2f} | {r['added_s']:.2f} | {r['after_last_add_s']:.2f} | "
              f"{r['daemon_cpu_s']:.2f} | {r['socket_worst_ms']:.1f} | {r['socket_answers']} | "
              f"{r['watchdog_longest_gap_ms']:.0f} | {r['scheduler_writes']} | {r['lost']} |")
    for r in rows:
        for d in r["loop_longest"] or []:
            print(f"apply_parallelism {r['parallelism']}: a dispatch of {d['ms']} ms ({d['cpu_ms']} ms on CPU): "
                  f"{', '.join(d['top'])}")


if __name__ == "__main__":
    main()
