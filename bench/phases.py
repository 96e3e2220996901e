#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Phase-changing workload on a loop device, run several ways on the same
device in one run, configurations alternated, medians of N repeats.

  light : 4k random reads, qd1
  heavy : 4k random reads, qd16, 2 jobs
  mixed : a sequential 128k write flood (qd32) beside a 4k qd1 random reader;
          the reader's IOPS and p99 are what count

Configurations: static none, static mq-deadline, blkpolicyd with the shipped
policies, and blkpolicyd with an example dynamic policy (busy = mq-deadline
while writes flood). Needs root, fio, and the built daemon.

  sudo python3 bench/phases.py [--repeats 3] [--seconds 5] [--backing /dev/shm]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests"))      # the tests' helpers: blkptest
import blkptest.daemon  # noqa: E402
from blkptest.loop import LoopDevices, exit_on_signals, scheduler, set_attr  # noqa: E402

DYNAMIC_EXAMPLE = """[Match]
name = {dev}
[Queue]
scheduler = none
[Dynamic]
# a write flood: sort and prioritise reads behind it
enter = wmbps > 200
enter_ticks = 2
leave = wmbps < 50
leave_ticks = 2
min_dwell_ticks = 2
[Busy]
scheduler = mq-deadline
"""


def cpu_busy_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def fio(dev, seconds, jobs):
    args = ["fio", "--output-format=json", f"--filename=/dev/{dev}", "--direct=1", "--ioengine=io_uring",
            "--time_based", f"--runtime={seconds}", "--group_reporting=0"]
    for j in jobs:
        args += [f"--name={j['name']}"] + [f"--{k}={v}" for k, v in j.items() if k != "name"]
    c0 = cpu_busy_jiffies()
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    cpu_s = (cpu_busy_jiffies() - c0) / os.sysconf("SC_CLK_TCK")
    return json.loads(out[out.index("{"):]), cpu_s


PHASES = {
    "light": [{"name": "reader", "rw": "randread", "bs": "4k", "iodepth": 1}],
    "heavy": [{"name": "reader", "rw": "randread", "bs": "4k", "iodepth": 16, "numjobs": 2}],
    "mixed": [{"name": "flood", "rw": "write", "bs": "128k", "iodepth": 32},
              {"name": "reader", "rw": "randread", "bs": "4k", "iodepth": 1}],
}


def measure(dev, phase, seconds):
    data, cpu_s = fio(dev, seconds, PHASES[phase])
    readers = [j for j in data["jobs"] if j["jobname"] == "reader"]
    iops = sum(j["read"]["iops"] for j in readers)
    p99 = max(j["read"]["clat_ns"]["percentile"].get("99.000000", 0) for j in readers) / 1000
    ios = sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in data["jobs"])
    return {"iops": iops, "p99_us": p99, "cpu_us_per_io": cpu_s * 1e6 / max(ios, 1)}


class Daemon(blkptest.daemon.Daemon):
    def __init__(self, blkpolicyd, dev, policy_dirs, work):
        conf = os.path.join(work, "bench.conf")
        with open(conf, "w") as f:
            f.write("[Daemon]\ntick_interval_ms = 250\n")
        args = ["--config", conf, "--state-dir", os.path.join(work, "state"), "--device", dev]
        for d in policy_dirs:
            args += ["--policy-dir", d]
        super().__init__(blkpolicyd, work, args)
        self.wait_for("READY=1")

    def stop(self):
        super().stop()
        text = self.text()
        return text.count("base -> busy") + text.count("busy -> base")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--backing", default="/dev/shm")
    ap.add_argument("--blkpolicyd", default=os.path.join(TOP, "build", "daemon", "blkpolicyd"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (loop devices)")

    loops = LoopDevices(base=700)
    exit_on_signals()
    loops.tmp = tempfile.mkdtemp(dir=args.backing, prefix="blkpolicyd-bench-")
    dev = loops.add()
    loops.attach(dev, size_mb=1024)
    work = tempfile.mkdtemp(prefix="blkpolicyd-bench-")
    dyn_dir = os.path.join(work, "dynamic")
    os.mkdir(dyn_dir)
    with open(os.path.join(dyn_dir, "90-bench-dynamic.policy"), "w") as f:
        f.write(DYNAMIC_EXAMPLE.format(dev=dev))
    shipped = os.path.join(TOP, "policies")
    configs = ["none", "mq-deadline", "blkpolicyd", "blkpolicyd+dynamic"]
    results = {c: {p: [] for p in PHASES} for c in configs}
    flips = {c: [] for c in configs}
    # fill the device once so reads hit written blocks
    subprocess.run(["fio", "--name=fill", f"--filename=/dev/{dev}", "--rw=write", "--bs=1M", "--direct=1",
                    "--output-format=terse"], capture_output=True, check=True)
    try:
        for r in range(args.repeats):
            order = configs[r % len(configs):] + configs[:r % len(configs)]  # rotate: alternate positions
            for c in order:
                daemon = None
                if c in ("none", "mq-deadline"):
                    set_attr(dev, "scheduler", c)
                else:
                    set_attr(dev, "scheduler", "mq-deadline")   # start from the kernel's SQ default
                    dirs = [shipped] + ([dyn_dir] if c.endswith("dynamic") else [])
                    daemon = Daemon(args.blkpolicyd, dev, dirs, work)
                for p in PHASES:
                    results[c][p].append(measure(dev, p, args.seconds))
                if daemon:
                    flips[c].append(daemon.stop())
                print(f"repeat {r + 1}/{args.repeats} {c:20} done (scheduler now {scheduler(dev)})", file=sys.stderr)
    finally:
        loops.remove_all()
        subprocess.run(["rm", "-rf", work])
    report(results, flips, args)


def med(results, c, p, key):
    return statistics.median(x[key] for x in results[c][p])


def report(results, flips, args):
    configs = list(results)
    print(f"kernel {platform.release()}, {os.cpu_count()} CPUs, loop device on {args.backing}, "
          f"{args.repeats} repeats x {args.seconds} s per phase, medians\n")
    print("| phase | config | read IOPS | read p99 (us) | CPU us/IO | IOPS vs best static |")
    print("|---|---|---:|---:|---:|---:|")
    for p in PHASES:
        best = max(med(results, c, p, "iops") for c in ("none", "mq-deadline"))
        for c in configs:
            print(f"| {p} | {c} | {med(results, c, p, 'iops'):,.0f} | {med(results, c, p, 'p99_us'):,.0f} | "
                  f"{med(results, c, p, 'cpu_us_per_io'):.2f} | {med(results, c, p, 'iops') / best:.3f} |")
    print("\nwhole run (geometric mean over phases of IOPS relative to the best static config of each phase):")
    for c in configs:
        rel = []
        for p in PHASES:
            best = max(med(results, x, p, "iops") for x in ("none", "mq-deadline"))
            rel.append(med(results, c, p, "iops") / best)
        gm = statistics.geometric_mean(rel)
        fl = f", flips per run {statistics.median(flips[c]):.0f}" if flips[c] else ""
        print(f"  {c:20} {gm:.3f}{fl}")


if __name__ == "__main__":
    main()
