#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyd's own cost at 10, 100 and 1000 devices, against the physical
limit measured in the same run (one read of /proc/diskstats per tick).

Per device count N (loop devices made with LOOP_CTL_ADD, removed after):
  - tick CPU: blkpolicyd's CPU per tick (CLOCK_PROCESS_CPUTIME_ID around
    each tick, over thousands of 10 ms ticks) against bench/diskstats-read's
    CPU per bare read; with --callgrind also user-space instructions per tick
    against per bare read (valgrind --toggle-collect, repeatable);
  - RSS and its anonymous part after start-up, and after 10,000 and 20,000
    1 ms ticks,
    next to the RSS of bench/library-floor: a program that initialises the
    same libraries the same way and keeps nothing (what blkpolicyd cannot
    go below);
  - time to READY=1 (one pass over all devices).
Then, with a policy that makes every bench device need mq-deadline:
  - reaction: LOOP_CTL_ADD to scheduler set, p50/p99 over 200 devices, and
    the kernel's own scheduler write timed directly;
  - storm: 1000 devices added at once, time until all are set, devices lost;
    then the memory with all 1200 devices changed (an original kept each);
  - scheduler writes counted by the daemon against devices that needed one,
    then again after a reload (SIGHUP) that must write nothing.

Then, with --storm 1000,10000: bench/storm.py for each count (64 writers,
no serial floor): the storm against the parallel floors measured in the
same run, the socket's worst answer during it, the longest watchdog gap,
devices lost; its own devices, made and removed by it.

  sudo python3 bench/scale.py [--counts 10,100,1000] [--callgrind] [--storm 1000,10000]
"""
import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests"))      # the tests' helpers: blkptest
import blkptest.daemon  # noqa: E402
from blkptest.loop import LoopDevices, exit_on_signals, scheduler, set_attr, unset_after  # noqa: E402
from benchlib import BASE, DYNAMIC_POLICY, GLOB, memory_of  # noqa: E402

BUILD = os.path.join(TOP, "build")
BLKPOLICYD = os.path.join(BUILD, "daemon", "blkpolicyd")
BARE = os.path.join(BUILD, "bench", "diskstats-read")
FLOOR = os.path.join(BUILD, "bench", "library-floor")
REACTION_POLICY = f"""[Match]
name = {GLOB}
[Queue]
scheduler = mq-deadline
"""


RUNNING = []


class Daemon(blkptest.daemon.Daemon):
    """blkpolicyd on the bench devices; wrapper: e.g. valgrind and its options."""

    def __init__(self, work, policy_dirs, tick_ms, wrapper=()):
        self.sock_path = os.path.join(work, "control.sock")
        conf = os.path.join(work, "bench.conf")
        with open(conf, "w") as f:
            f.write(f"[Daemon]\ntick_interval_ms = {tick_ms}\n")
        args = [BLKPOLICYD, "--config", conf, "--state-dir", os.path.join(work, "state"),
                "--device", GLOB, "--socket", self.sock_path, "--log-level", "notice"]
        for d in policy_dirs:
            args += ["--policy-dir", d]
        cmd = [*wrapper, *args]
        t0 = time.monotonic()
        super().__init__(cmd[0], work, cmd[1:])
        RUNNING.append(self.proc)
        self.wait_for("READY=1", timeout=600)
        self.ready_s = time.monotonic() - t0

    def call(self, command):
        return blkptest.daemon.control_call(self.sock_path, {"command": command}, timeout=60)["result"]

    def memory(self):
        return memory_of(self.proc.pid)

    def stop(self):
        super().stop(timeout=600)
        return self.text()



def library_floor(work):
    """RSS of bench/library-floor, started like the daemon, once READY=1."""
    floor = blkptest.daemon.Daemon(FLOOR, work, ["10"])
    RUNNING.append(floor.proc)
    floor.wait_for("READY=1", timeout=60)
    time.sleep(1)       # 100 ticks of its loop, as the daemon had before it was measured
    mem = memory_of(floor.proc.pid)
    floor.stop()
    return mem


def callgrind(cmd, toggle, out, stop_after=None):
    args = ["valgrind", "--tool=callgrind", f"--toggle-collect={toggle}", f"--callgrind-out-file={out}", *cmd]
    return args


def callgrind_ir(path):
    with open(path) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1])
    return 0


def bare_read_us(reads, interval_ms=10):
    """At the daemon's cadence (10 ms apart): both pay the same cold caches."""
    r = subprocess.run([BARE, str(reads), "/proc/diskstats", str(interval_ms)], capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout)["cpu_us_per_read"]


def measure_n(n, loops, work, policy_dir, args):
    res = {"n": n}
    devs = [loops.add() for _ in range(n)]
    res["bare_us"] = bare_read_us(300)
    d = Daemon(work, [os.path.join(TOP, "policies"), policy_dir], tick_ms=10)
    res["ready_s"] = d.ready_s
    time.sleep(max(3.0, n / 300))   # a few hundred ticks
    st = d.call("status")
    res["tick_us"] = st["tick"]["cpu_us_avg"]
    res["ticks"] = st["tick"]["count"]
    res["mem_start"] = d.memory()
    d.stop()
    res["floor"] = library_floor(work)
    if args.skip_growth:
        loops.remove_many(devs)
        return res
    # 2 x 10,000 ticks at 1 ms: does memory grow? A page touched once (the
    # heap's top, the stack) is not growth; a second 10,000 tells them apart.
    d = Daemon(work, [os.path.join(TOP, "policies"), policy_dir], tick_ms=1)
    while d.call("status")["tick"]["count"] < 100:     # warm-up: the tick's pages are touched once
        time.sleep(0.05)
    res["mem_before_10k"] = d.memory()
    t0 = d.call("status")["tick"]["count"]
    for key, ticks in (("mem_after_10k", 10000), ("mem_after_20k", 20000)):
        while d.call("status")["tick"]["count"] < t0 + ticks:
            time.sleep(0.5)
        res[key] = d.memory()
    d.stop()
    if args.callgrind:
        out = os.path.join(work, "cg.daemon")
        conf_dir = [os.path.join(TOP, "policies"), policy_dir]
        d = Daemon(work, conf_dir, tick_ms=10,
                   wrapper=callgrind([], "sampler_tick", out))
        t0 = d.call("status")["tick"]["count"]
        time.sleep(5)
        ticks = d.call("status")["tick"]["count"] - t0
        d.stop()
        total_ticks = ticks + t0
        res["tick_ir"] = callgrind_ir(out) / max(total_ticks, 1)
        out2 = os.path.join(work, "cg.bare")
        subprocess.run(callgrind([BARE, "300"], "read_diskstats", out2), capture_output=True, check=True)
        res["bare_ir"] = callgrind_ir(out2) / 300
    loops.remove_many(devs)
    return res


def reaction_and_storm(loops, work, policy_dir):
    res = {}
    # the kernel's own scheduler write, timed directly on fresh devices
    kernel = []
    for _ in range(20):
        dev = loops.add()
        t0 = time.perf_counter()
        set_attr(dev, "scheduler", "mq-deadline")
        kernel.append((time.perf_counter() - t0) * 1000)
        loops.remove(dev)
    res["kernel_write_ms"] = statistics.median(kernel)

    d = Daemon(work, [os.path.join(TOP, "policies"), policy_dir], tick_ms=1000)
    lat = []
    for _ in range(200):
        t0 = time.perf_counter()
        dev = loops.add()
        while scheduler(dev) != "mq-deadline":
            pass
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    res["reaction_p50_ms"] = lat[len(lat) // 2]
    res["reaction_p99_ms"] = lat[int(len(lat) * 0.99) - 1]

    t0 = time.perf_counter()
    storm = [loops.add() for _ in range(1000)]
    res["storm_add_s"] = time.perf_counter() - t0
    pending = unset_after(storm, "mq-deadline", 120, poll=0.05)
    res["storm_all_set_s"] = time.perf_counter() - t0
    res["storm_lost"] = len(pending)
    res["mem_after_storm"] = d.memory()     # 1200 devices, each changed: one original kept each
    st = d.call("status")
    res["devices_needing_a_write"] = 200 + 1000
    res["scheduler_writes"] = st["writes"]["scheduler"]
    d.proc.send_signal(signal.SIGHUP)
    time.sleep(2)
    res["scheduler_writes_after_reload"] = d.call("status")["writes"]["scheduler"]
    log = d.stop()
    res["overflows"] = log.count("were lost")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="10,100,1000")
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--skip-reaction", action="store_true")
    ap.add_argument("--skip-growth", action="store_true",
                    help="no 20,000 ticks at 1 ms (about 30 min at 10,000 devices): tick and memory only")
    ap.add_argument("--storm", default="",
                    help="device counts for bench/storm.py after the rest, e.g. 1000,10000")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (loop devices)")
    # on tmpfs, as /run (the default state dir) is under systemd: the
    # records' fsyncs on this VM's ext4 would be measured, not the daemon
    work = tempfile.mkdtemp(prefix="blkpolicyd-scale-", dir="/dev/shm")
    dyn_dir = os.path.join(work, "dynamic")
    react_dir = os.path.join(work, "reaction")
    os.mkdir(dyn_dir)
    os.mkdir(react_dir)
    with open(os.path.join(dyn_dir, "90-bench-dynamic.policy"), "w") as f:
        f.write(DYNAMIC_POLICY)
    with open(os.path.join(react_dir, "90-bench-reaction.policy"), "w") as f:
        f.write(REACTION_POLICY)
    loops = LoopDevices(base=BASE)
    exit_on_signals()
    results = []
    try:
        for n in map(int, args.counts.split(",")):
            results.append(measure_n(n, loops, work, dyn_dir, args))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
        storm = None if args.skip_reaction else reaction_and_storm(loops, work, react_dir)
        if storm:
            print(json.dumps(storm), file=sys.stderr, flush=True)
    finally:
        for p in RUNNING:       # a daemon left behind would set devices of the next run
            if p.poll() is None:
                p.kill()
                p.wait()
        loops.remove_all()
        subprocess.run(["rm", "-rf", work])
    report(results, storm, args)
    for n in filter(None, args.storm.split(",")):
        # after the cleanup above: storm.py makes its devices from the same base
        print(f"\nstorm of {n} devices (bench/storm.py --devices {n} --parallelism 64 --skip-serial):", flush=True)
        subprocess.run([sys.executable, os.path.join(TOP, "bench", "storm.py"), "--devices", n,
                        "--parallelism", "64", "--skip-serial"], check=True)


def report(results, storm, args):
    print(f"kernel {platform.release()}, {os.cpu_count()} CPUs; devices are unattached loop devices; "
          f"shipped policies plus a dynamic policy on every bench device\n")
    print("| devices | bare diskstats read CPU (us) | blkpolicyd tick CPU (us) | ratio | "
          + ("tick instructions / bare read | " if args.callgrind else "")
          + "RSS (KiB) | anon (KiB) | PSS (KiB) | anon after 10,000 and 20,000 more ticks | READY (s) |")
    print("|---:|---:|---:|---:|" + ("---:|" if args.callgrind else "") + "---:|---:|---:|---:|---:|")
    for r in results:
        m = r["mem_start"]
        growth = "not measured" if args.skip_growth else \
            f"{r['mem_before_10k']['RssAnon']} -> {r['mem_after_10k']['RssAnon']} -> {r['mem_after_20k']['RssAnon']}"
        cg = f"{r['tick_ir']:,.0f} / {r['bare_ir']:,.0f} = {r['tick_ir'] / r['bare_ir']:.2f} | " if args.callgrind else ""
        print(f"| {r['n']} | {r['bare_us']:.1f} | {r['tick_us']:.1f} | {r['tick_us'] / r['bare_us']:.2f} | {cg}"
              f"{m['VmRSS']} | {m['RssAnon']} | {m['Pss']} | {growth} | {r['ready_s']:.2f} |")
    print("\nmemory against the library floor (bench/library-floor: the same libraries initialised the same way, "
          "nothing kept), measured with the same devices present:\n")
    print("| devices | floor RSS (KiB) | floor anon (KiB) | blkpolicyd RSS (KiB) | above the floor (KiB) "
          f"| per device more than at {results[0]['n']}, anonymous (bytes) |")
    print("|---:|---:|---:|---:|---:|---:|")
    # per device from the anonymous parts: which file pages fault-around maps
    # moves VmRSS by +-200 KiB from one start to the next
    first = results[0]["mem_start"]["RssAnon"] - results[0]["floor"]["RssAnon"]
    for r in results:
        m, fl = r["mem_start"], r["floor"]
        above = m["VmRSS"] - fl["VmRSS"]
        extra = r["n"] - results[0]["n"]
        per = f"{(m['RssAnon'] - fl['RssAnon'] - first) * 1024 // extra}" if extra else "-"
        print(f"| {r['n']} | {fl['VmRSS']} | {fl['RssAnon']} | {m['VmRSS']} | {above} | {per} |")
    if storm:
        print(f"\nreaction (LOOP_CTL_ADD to mq-deadline set, 200 devices): p50 {storm['reaction_p50_ms']:.2f} ms, "
              f"p99 {storm['reaction_p99_ms']:.2f} ms; the kernel's own scheduler write: "
              f"{storm['kernel_write_ms']:.2f} ms (median of 20)")
        print(f"storm: 1000 devices added in {storm['storm_add_s']:.2f} s, all set after {storm['storm_all_set_s']:.2f} s, "
              f"lost {storm['storm_lost']}, receive-buffer overflows {storm['overflows']}")
        m = storm["mem_after_storm"]
        print(f"memory after the storm, {storm['devices_needing_a_write']} devices each changed (no [Dynamic]): "
              f"VmRSS {m['VmRSS']} KiB, anonymous {m['RssAnon']} KiB, PSS {m['Pss']} KiB")
        print(f"scheduler writes: {storm['scheduler_writes']} for {storm['devices_needing_a_write']} devices that needed one "
              f"(redundant: {storm['scheduler_writes'] - storm['devices_needing_a_write']}); after a reload: "
              f"{storm['scheduler_writes_after_reload'] - storm['scheduler_writes']} more")


if __name__ == "__main__":
    main()
