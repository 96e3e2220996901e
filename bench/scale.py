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

With --drift N (no root, no loop device: bench/fake-scale.py's tree of N
fake disks, the daemon enforcing on the fake kernel of a test build, 1 s
ticks, the default drift_sweep_seconds = 50, a policy that sets the
scheduler and read_ahead_kb on every disk), the drift sweep instead:
  - the daemon's CPU (every thread's schedstat) per second of steady
    sweeping, and the same daemon with drift_sweep_seconds = 0 measured in
    the same run: the sweep's own share, against 1% of one core;
  - read_ahead_kb changed on every disk at once: the time until status
    counts them all overridden (the last is the disk furthest from the
    sweep's cursor), against the 60 s goal; the longest status answer
    meanwhile (what the sweep's slices hold the loop for);
  - one device's read-back (bench/readback: the daemon's attr_read_current()
    of both settings) on the fake tree and, reading only, on this machine's
    /sys/block/loop*: the fake tree is tmpfs, not kernfs, so the sweep's
    cost on real sysfs is projected from the real read-back.

  sudo python3 bench/scale.py [--counts 10,100,1000] [--callgrind] [--storm 1000,10000]
  python3 bench/scale.py --drift 10000 [--build build-h] [--window 60]
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


DRIFT_POLICY = f"""[Match]
name = {GLOB}
[Queue]
scheduler = mq-deadline
read_ahead_kb = 256
"""
DRIFT_SWEEP_S = 50     # the default
DRIFT_GOAL_S = 60       # issue #29: every device's change seen within a minute


def cpu_ns_all_threads(pid):
    """The daemon's time on a CPU so far, every thread's (schedstat, ns)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass        # a worker thread that ended meanwhile
    return total


def readback(build, sysfs, prefix, rounds):
    """bench/readback's CPU per device for the policy's two settings, or None (no such disk)."""
    r = subprocess.run([os.path.join(build, "bench", "readback"), sysfs, prefix, str(rounds), "scheduler",
                        "read_ahead_kb"], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


class DriftHost:
    """N fake disks (bench/fake-scale.py's tree), blkpolicyd enforcing on them on the fake kernel."""

    def __init__(self, build, work, n):
        import importlib.util
        spec = importlib.util.spec_from_file_location("fake_scale", os.path.join(TOP, "bench", "fake-scale.py"))
        fake_scale = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(fake_scale)
        self.build, self.work, self.n = build, work, n
        self.root = os.path.join(work, "root")
        fake_scale.make_tree(self.root, n)
        self.pol = os.path.join(work, "policies")
        os.mkdir(self.pol)
        with open(os.path.join(self.pol, "90-bench-drift.policy"), "w") as f:
            f.write(DRIFT_POLICY)
        self.sock = os.path.join(work, "control.sock")
        self.d = None

    def start(self, sweep_s, build=None, fixed=None):
        """fixed: drift_checks_per_tick instead of the sweep (a build of before it)."""
        conf = os.path.join(self.work, "bench.conf")
        with open(conf, "w") as f:
            f.write("[Daemon]\ntick_interval_ms = 1000\n" + (f"drift_checks_per_tick = {fixed}\n" if fixed is not None
                                                           else f"drift_sweep_seconds = {sweep_s}\n"))
        self.d = blkptest.daemon.Daemon(
            os.path.join(build or self.build, "daemon", "blkpolicyd"), self.work,
            ["--config", conf, "--policy-dir", self.pol, *blkptest.daemon.fixture_roots(self.root),
             "--state-dir", os.path.join(self.work, "state"), "--socket", self.sock, "--device", GLOB,
             "--log-level", "notice"], env={"BLKPOLICYD_FAKE_KERNEL": "1"})
        RUNNING.append(self.d.proc)
        self.d.wait_for("READY=1", timeout=600)
        # every disk set (two writes each), then ticks of nothing but the
        # tick: the appliers' threads and the state records are done
        while self.status()["writes"]["other"] < self.n:
            time.sleep(0.5)
        self.ticks(10)

    def status(self):
        return blkptest.daemon.control_call(self.sock, {"command": "status"}, timeout=60)["result"]

    def ticks(self, count):
        t0 = self.status()["tick"]["count"]
        while self.status()["tick"]["count"] < t0 + count:
            time.sleep(0.2)

    def steady_cpu(self, window):
        """CPU per second over window s, nobody asking the daemon anything meanwhile."""
        st0, c0, w0 = self.status(), cpu_ns_all_threads(self.d.proc.pid), time.monotonic()
        time.sleep(window)      # the measurement's length, not a synchronisation
        c1, w1, st1 = cpu_ns_all_threads(self.d.proc.pid), time.monotonic(), self.status()
        ticks = st1["tick"]["count"] - st0["tick"]["count"]
        tick_cpu = [st["tick"]["cpu_us_avg"] * st["tick"]["count"] for st in (st0, st1)]
        drift = [st["tick"].get("drift", {"checked": None, "per_tick": None}) for st in (st0, st1)]    # None: an old build
        return {"cpu_share": (c1 - c0) / 1e9 / (w1 - w0), "ticks": ticks,
                "checked": drift[1]["checked"] - drift[0]["checked"] if drift[0]["checked"] is not None else None,
                "per_tick": drift[1]["per_tick"], "tick_cpu_us": (tick_cpu[1] - tick_cpu[0]) / max(ticks, 1)}

    def change_all_and_wait(self):
        """read_ahead_kb changed on every disk (as the kernel shows a file:
        whole), then status polled until all are overridden."""
        names = [f"loop{i}" for i in range(BASE, BASE + self.n)]
        t_first = time.monotonic()
        for name in names:
            path = os.path.join(self.root, "sys", "block", name, "queue", "read_ahead_kb")
            with open(path + ".tmp", "w") as f:
                f.write("512\n")
            os.replace(path + ".tmp", path)
        t_last = time.monotonic()
        worst, seen = 0.0, 0
        while seen < self.n:
            t = time.monotonic()
            st = self.status()
            worst = max(worst, time.monotonic() - t)
            seen = st["overridden"]
            if time.monotonic() - t_last > 10 * DRIFT_SWEEP_S:
                break
            time.sleep(0.1)
        t_all = time.monotonic()
        return {"writes_s": t_last - t_first, "all_seen_s": t_all - t_last, "all_seen_from_first_s": t_all - t_first,
                "seen": seen, "status_worst_ms": worst * 1000}

    def stop(self):
        self.d.stop(timeout=600)
        self.d.cleanup()


def drift_sweep(args):
    n = args.drift
    build = os.path.join(TOP, args.build)
    work = tempfile.mkdtemp(prefix="blkpolicyd-drift-", dir="/dev/shm")
    per = -(-n * 1000 // (DRIFT_SWEEP_S * 1000))      # the sweep's share a tick, for the old build's fixed count
    configs = {"off": {"sweep_s": 0}, "on": {"sweep_s": DRIFT_SWEEP_S}}
    if args.compare:
        # the build before the sweep, its fixed count set to the sweep's
        # share: device_view()'s read of every item against device_first_drift()
        configs["old"] = {"sweep_s": None, "build": os.path.abspath(args.compare), "fixed": per}
    exit_on_signals()
    try:
        h = DriftHost(build, work, n)
        res = {"n": n, "window_s": args.window, "rounds": {name: [] for name in configs}, "old_per_tick": per}
        names = list(configs)
        for i in range(args.rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:     # the order rotates every round
                h.start(**configs[name])
                res["rounds"][name].append(h.steady_cpu(args.window))
                h.stop()        # puts every original back: the next start writes them all again
        h.start(DRIFT_SWEEP_S)
        res["change"] = h.change_all_and_wait()
        h.stop()
        res["fake_readback"] = readback(build, os.path.join(h.root, "sys"), "loop1", 5)
    finally:
        for p in RUNNING:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(["rm", "-rf", work])
    # reading only: the kernel's queue attributes of whatever loop devices this machine has
    res["sysfs_readback"] = readback(build, "/sys", "loop", 50)
    for name, runs in res["rounds"].items():
        res[name] = dict(runs[0], cpu_share=statistics.median(r["cpu_share"] for r in runs),
                         tick_cpu_us=statistics.median(r["tick_cpu_us"] for r in runs))
    print(json.dumps(res), file=sys.stderr, flush=True)
    drift_report(res)


def drift_report(res):
    n, on, off, ch = res["n"], res["on"], res["off"], res["change"]
    sweep_share = on["cpu_share"] - off["cpu_share"]
    cpu = ""
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    print(f"kernel {platform.release()}, {os.cpu_count()} CPUs ({cpu}); {n} fake disks (bench/fake-scale.py's tree "
          f"on /dev/shm, the fake kernel of a test build), blkpolicyd enforcing scheduler and read_ahead_kb on each, "
          f"1 s ticks, drift_sweep_seconds = {DRIFT_SWEEP_S}; CPU over {res['window_s']} s of steady state, "
          f"median of {len(res['rounds']['on'])} rounds, the order rotating\n")
    print("| drift_sweep_seconds | devices read back a tick | read back in the window | tick CPU (us) "
          "| daemon CPU (% of a core) | against 1% |")
    print("|---:|---:|---:|---:|---:|---:|")
    rows = [(0, "off"), (DRIFT_SWEEP_S, "on")]
    if "old" in res:
        rows.append((f"the build before (device_view(), drift_checks_per_tick = {res['old_per_tick']})", "old"))
    for label, name in rows:
        r = res[name]
        checked = f"{r['checked']} in {r['ticks']} ticks" if r["checked"] is not None else f"{r['ticks']} ticks"
        print(f"| {label} | {r['per_tick'] if r['per_tick'] is not None else res['old_per_tick']} | {checked} "
              f"| {r['tick_cpu_us']:.0f} | {r['cpu_share'] * 100:.3f} | {r['cpu_share'] / 0.01:.2f} |")
    runs = {name: [f"{x['cpu_share'] * 100:.3f}% {x['tick_cpu_us']:.0f} us" for x in res["rounds"][name]]
            for name in res["rounds"]}
    print(f"<!-- runs (daemon CPU, tick CPU), in round order: {runs} -->")
    print(f"\nthe sweep's own share (the difference): {sweep_share * 100:.3f}% of a core, "
          f"{sweep_share / 0.01:.2f} of the 1% goal")
    print(f"read_ahead_kb changed on all {n} disks (in {ch['writes_s']:.1f} s): all {ch['seen']} seen overridden "
          f"{ch['all_seen_s']:.1f} s after the last change ({ch['all_seen_from_first_s']:.1f} s after the first), "
          f"{ch['all_seen_from_first_s'] / DRIFT_GOAL_S:.2f} of the {DRIFT_GOAL_S} s goal; the longest status answer "
          f"meanwhile {ch['status_worst_ms']:.1f} ms")
    fake, real = res["fake_readback"], res["sysfs_readback"]
    if fake:
        print(f"\none device's read-back of both settings (bench/readback), fake tree (tmpfs): "
              f"{fake['cpu_ns_per_device'] / 1000:.1f} us CPU")
    if real:
        proj = real["cpu_ns_per_device"] * n / DRIFT_SWEEP_S / 1e9
        print(f"the same on this machine's sysfs, read only ({real['disks']} /sys/block/loop* with the kernel's "
              f"defaults, {real['rounds']} rounds): {real['cpu_ns_per_device'] / 1000:.1f} us CPU; "
              f"{n} of them every {DRIFT_SWEEP_S} s on real sysfs: {proj * 100:.3f}% of a core in the reads "
              f"({proj / 0.01:.2f} of the 1% goal)")
    else:
        print("no /sys/block/loop* here: the read-back on real sysfs is not measured")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="10,100,1000")
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--skip-reaction", action="store_true")
    ap.add_argument("--skip-growth", action="store_true",
                    help="no 20,000 ticks at 1 ms (about 30 min at 10,000 devices): tick and memory only")
    ap.add_argument("--storm", default="",
                    help="device counts for bench/storm.py after the rest, e.g. 1000,10000")
    ap.add_argument("--drift", type=int, default=0,
                    help="the drift sweep at this many fake disks instead (no root)")
    ap.add_argument("--build", default="build", help="--drift: a build with -Dfault_injection=true")
    ap.add_argument("--window", type=int, default=DRIFT_GOAL_S, help="--drift: seconds of steady state measured")
    ap.add_argument("--rounds", type=int, default=3, help="--drift: rounds of each configuration, medians")
    ap.add_argument("--compare", default="",
                    help="--drift: also a build of before the sweep (its fixed count at the sweep's share)")
    args = ap.parse_args()
    if args.drift:
        return drift_sweep(args)
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
