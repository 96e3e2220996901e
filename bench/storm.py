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
  - uevent floor: the storm with the bench's own 64 writers told of each
    disk by the kernel's uevent (a netlink listener, as udev and the daemon
    hear of it; a write that meets a queue not registered yet is tried
    again): what the least a uevent-driven writer could do costs here;
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

  sudo python3 bench/storm.py [--devices 1000] [--parallelism 1,4,16,64] [--build build[,build2...]]
                              [--rounds N] [--profile-loop]

--rounds N repeats the whole measurement, floors included, and prints the
median ratio: on a guest whose floors move by a third from one minute to
the next, one round's ratio is as noisy as its floor. With several builds
each round runs them all, in the other order on the next round, so two
builds are compared in one sitting.

--profile-loop (perf, bench/loopprof.py) lists the longest dispatches of
the daemon's event loop during the storm and what ran in them: what held
the socket's worst answer.
"""
import argparse
import concurrent.futures
import contextlib
import fcntl
import itertools
import json
import os
import queue
import statistics
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


NETLINK_KOBJECT_UEVENT = 15
SO_RCVBUFFORCE = 33


def uevent_socket():
    """The kernel's uevents, with the daemon's 8 MiB buffer: none lost."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_KOBJECT_UEVENT)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    sock.bind((0, 1))
    sock.settimeout(0.2)
    return sock


def new_disk(msg):
    """The name of the disk an 'add' uevent is of, or None."""
    head, *props = msg.split(b"\0")
    if not head.startswith(b"add@"):
        return None
    kv = dict(p.split(b"=", 1) for p in props if b"=" in p)
    if kv.get(b"SUBSYSTEM") != b"block" or kv.get(b"DEVTYPE") != b"disk":
        return None
    return kv.get(b"DEVNAME", b"").decode()


def uevent_floor(n, threads):
    """The storm with the bench's own writers told of each disk by its
    uevent: no daemon, the least a uevent-driven writer can do."""
    q = queue.Queue()
    done = threading.Semaphore(0)
    stop = threading.Event()
    sock = uevent_socket()

    def listener():
        while not stop.is_set():
            try:
                name = new_disk(sock.recv(1 << 16))
            except socket.timeout:
                continue
            if name and name.startswith("loop") and name[4:].isdigit() and int(name[4:]) >= BASE:
                q.put(name)

    def writer():
        while (dev := q.get()) is not None:
            try:
                set_attr(dev, "scheduler", "mq-deadline")
                done.release()
            except FileNotFoundError:
                q.put(dev)      # its queue is not registered yet (add_disk() not done)
    workers = [threading.Thread(target=writer) for _ in range(threads)] + [threading.Thread(target=listener)]
    for w in workers:
        w.start()
    devs = []
    try:
        t0 = time.perf_counter()
        devs = add_devices(n)
        for _ in devs:
            if not done.acquire(timeout=300):
                raise RuntimeError("uevent floor: a disk was never written")
        return devs, time.perf_counter() - t0
    finally:
        stop.set()
        for _ in workers[:-1]:
            q.put(None)
        for w in workers:
            w.join()
        sock.close()


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


RUNS = itertools.count()


def daemon_storm(blkpolicyd, work, state_parent, n, parallelism, profile=False):
    policies = os.path.join(work, "policies")
    os.makedirs(policies, exist_ok=True)
    with open(os.path.join(policies, "90-storm.policy"), "w") as f:
        f.write(f"[Match]\nname = {GLOB}\n[Queue]\nscheduler = mq-deadline\n")
    conf = os.path.join(work, "storm.conf")
    with open(conf, "w") as f:
        f.write(f"[Daemon]\napply_parallelism = {parallelism}\ndrift_checks_per_tick = 0\n")
    run = next(RUNS)     # each daemon its own socket and state dir
    notify_path = os.path.join(work, f"notify-{run}")
    sock = os.path.join(work, f"control-{run}.sock")
    notify = Notify(notify_path)
    log = open(os.path.join(work, "daemon.log"), "a")
    proc = subprocess.Popen([blkpolicyd, "--config", conf, "--policy-dir", policies, "--state-dir",
                             os.path.join(state_parent, f"state-{run}"), "--device", GLOB, "--socket", sock,
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


def measure_floors(n, skip_serial):
    """The write floor (64 threads, and one unless skipped) on n disks that
    are there, then the storm floor and the uevent floor; every disk removed
    after."""
    floors = {}
    devs = add_devices(n)
    try:
        floors["64"] = write_all(devs, "mq-deadline", 64)
        write_all(devs, "none", 64)
        floors["1"] = None if skip_serial else write_all(devs, "mq-deadline", 1)
    finally:
        remove_devices(devs)
    for name, floor in (("storm", storm_floor), ("uevent", uevent_floor)):
        devs = []
        try:
            devs, floors[name] = floor(n, 64)
        finally:
            remove_devices(devs)
    return floors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=1000)
    ap.add_argument("--parallelism", default="1,4,16,64")
    ap.add_argument("--build", default=os.path.join(TOP, "build"),
                    help="build directory; several, comma-separated, are run in turn in each round")
    ap.add_argument("--rounds", type=int, default=1,
                    help="each round measures its own floors, then the daemon(s); the builds' order alternates")
    ap.add_argument("--skip-serial", action="store_true", help="no one-thread floor (250 s at 10,000)")
    ap.add_argument("--state-on-disk", action="store_true", help="state dir under /tmp, not on tmpfs")
    ap.add_argument("--profile-loop", action="store_true",
                    help="perf: the longest dispatches of the event loop during the storm, and what ran in them")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (loop devices)")
    builds = args.build.split(",")
    work = tempfile.mkdtemp(prefix="blkpolicyd-storm-")
    state_parent = work if args.state_on_disk else tempfile.mkdtemp(prefix="blkpolicyd-storm-", dir="/dev/shm")
    rows = []
    devs = []
    try:
        for rnd in range(1, args.rounds + 1):
            floors = measure_floors(args.devices, args.skip_serial)
            print(json.dumps({"round": rnd, "floors": floors}), file=sys.stderr, flush=True)
            for build in builds if rnd % 2 else builds[::-1]:
                blkpolicyd = os.path.join(build, "daemon", "blkpolicyd")
                for p in map(int, args.parallelism.split(",")):
                    devs, row = daemon_storm(blkpolicyd, work, state_parent, args.devices, p, args.profile_loop)
                    row.update(round=rnd, build=build, floors=floors)
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    remove_devices(devs)
                    devs = []
    finally:
        remove_devices(sorted(set(devs) | MADE))
        subprocess.run(["rm", "-rf", work, state_parent])
    report(args, rows)


def report(args, rows):
    print(f"{args.devices} loop devices, kernel {os.uname().release}, {os.cpu_count()} CPUs, state dir on "
          f"{'disk (ext4)' if args.state_on_disk else 'tmpfs'}; floor: 64 threads set all (the devices there); "
          "storm floor: the storm with the bench's own 64 writers told of each disk as it is made; "
          "uevent floor: the same writers told of each disk by its uevent\n")
    print("| round | build | apply_parallelism | floor (s) | one thread (s) | storm floor (s) | uevent floor (s) "
          "| all set after (s) | / floor | / storm floor | / uevent floor | adds took (s) | after the last add (s) | daemon CPU (s) | socket worst (ms) "
          "| answers | watchdog longest gap (ms, of 1000) | scheduler writes | lost |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        f = r["floors"]
        serial = "-" if f["1"] is None else f"{f['1']:.2f}"
        print(f"| {r['round']} | {r['build']} | {r['parallelism']} | {f['64']:.2f} | {serial} | {f['storm']:.2f} | {f['uevent']:.2f} | "
              f"{r['settled_s']:.2f} | {r['settled_s'] / f['64']:.2f} | {r['settled_s'] / f['storm']:.2f} | "
              f"{r['settled_s'] / f['uevent']:.2f} | "
              f"{r['added_s']:.2f} | {r['after_last_add_s']:.2f} | {r['daemon_cpu_s']:.2f} | "
              f"{r['socket_worst_ms']:.1f} | {r['socket_answers']} | {r['watchdog_longest_gap_ms']:.0f} | "
              f"{r['scheduler_writes']} | {r['lost']} |")
    if args.rounds > 1:
        print()
        for key in sorted({(r["build"], r["parallelism"]) for r in rows}):
            mine = [r for r in rows if (r["build"], r["parallelism"]) == key]
            ratios = [r["settled_s"] / r["floors"]["64"] for r in mine]
            storm = [r["settled_s"] / r["floors"]["storm"] for r in mine]
            uevent = [r["settled_s"] / r["floors"]["uevent"] for r in mine]
            settled = statistics.median([r["settled_s"] for r in mine])
            print(f"{key[0]}, apply_parallelism {key[1]}: all set after {settled:.2f} s "
                  f"(median of {len(mine)}), / floor median {statistics.median(ratios):.2f} "
                  f"({min(ratios):.2f}-{max(ratios):.2f}), "
                  f"/ storm floor median {statistics.median(storm):.2f} ({min(storm):.2f}-{max(storm):.2f}), "
                  f"/ uevent floor median {statistics.median(uevent):.2f} ({min(uevent):.2f}-{max(uevent):.2f}), "
                  f"socket worst {max(r['socket_worst_ms'] for r in mine):.1f} ms, "
                  f"lost {sum(r['lost'] for r in mine)}")
    for r in rows:
        for d in r["loop_longest"] or []:
            print(f"apply_parallelism {r['parallelism']}: a dispatch of {d['ms']} ms ({d['cpu_ms']} ms on CPU): "
                  f"{', '.join(d['top'])}")


if __name__ == "__main__":
    main()
