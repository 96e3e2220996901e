#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a flip costs on this host, on a loop device: a scheduler switch
(mq-deadline <-> none) against a write of mq-deadline's dispatch_direct
(1 <-> 0) where the kernel has it. A fio reader (4k randread, io_uring)
runs beside a writer (bench/flip-writer.c) that flips every INTERVAL ms;
the writer reports how long each write took, the reader's completion
latency (p99, p99.9, max) shows the stall. A run without flips is the
baseline. Modes alternate, medians of the repeats.

  sudo python3 bench/flip-cost-loop.py [--repeats 5] [--seconds 4] [--iodepth 1]

The loop device is made at a fresh index and removed, even on failure.
Its backing file is in /dev/shm.
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
from blkptest.loop import LoopDevices, exit_on_signals, set_attr  # noqa: E402


def build_writer(work):
    out = os.path.join(work, "flip-writer")
    subprocess.run(["gcc", "-O2", "-static", "-o", out, os.path.join(TOP, "bench", "flip-writer.c")], check=True)
    return out


def parse_writer(line):
    f = line.split()
    return {f[i]: float(f[i + 1]) for i in range(0, len(f) - 1, 2)}


def reader_stats(fio_json):
    j = json.loads(fio_json[fio_json.index("{"):])["jobs"][0]["read"]
    pct = j["clat_ns"].get("percentile", {})
    return {"iops": j["iops"], "p99_us": pct.get("99.000000", 0) / 1e3, "p999_us": pct.get("99.900000", 0) / 1e3,
            "max_us": j["clat_ns"]["max"] / 1e3}


def run(dev, mode, seconds, iodepth, writer, interval_ms):
    fio = subprocess.Popen(["fio", "--name=reader", f"--filename=/dev/{dev}", "--rw=randread", "--bs=4k",
                            f"--iodepth={iodepth}", "--ioengine=io_uring", "--direct=1", "--time_based",
                            f"--runtime={seconds}", "--output-format=json", "--percentile_list=99:99.9"],
                           stdout=subprocess.PIPE, text=True)
    w = None
    if mode != "baseline":
        path, a, b = ((f"/sys/block/{dev}/queue/scheduler", "none", "mq-deadline") if mode == "scheduler" else
                      (f"/sys/block/{dev}/queue/iosched/dispatch_direct", "0", "1"))
        count = max(2, int((seconds - 1) * 1000 / interval_ms))
        w = subprocess.run(["sh", "-c", f"sleep 0.5; exec {writer} {path} {a} {b} {count} {interval_ms}"],
                           capture_output=True, text=True)
    out, _ = fio.communicate()
    stats = reader_stats(out)
    if w is not None:
        if w.returncode != 0:
            raise RuntimeError(f"{mode} writes failed: {w.stdout} {w.stderr}")
        stats["writer"] = parse_writer(w.stdout)
    return stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--iodepth", type=int, default=1)
    ap.add_argument("--interval-ms", type=int, default=100)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (loop devices)")
    work = tempfile.mkdtemp(prefix="blkpolicyd-flipcost-", dir="/var/tmp")
    loops = LoopDevices(base=4700)
    exit_on_signals()
    try:
        writer = build_writer(work)
        dev = loops.add()
        loops.attach(dev, size_mb=256)
        subprocess.run(["fio", "--name=fill", f"--filename=/dev/{dev}", "--rw=write", "--bs=1M", "--direct=1",
                        "--output-format=terse"], capture_output=True, check=True)
        set_attr(dev, "scheduler", "mq-deadline")
        has_dd = os.path.exists(f"/sys/block/{dev}/queue/iosched/dispatch_direct")
        modes = ["baseline", "scheduler"] + (["dispatch_direct"] if has_dd else [])
        runs = {m: [] for m in modes}
        for r in range(args.repeats):
            for m in modes[r % len(modes):] + modes[:r % len(modes)]:
                set_attr(dev, "scheduler", "mq-deadline")
                runs[m].append(run(dev, m, args.seconds, args.iodepth, writer, args.interval_ms))
                print(f"repeat {r + 1}/{args.repeats} {m} done", file=sys.stderr)
    finally:
        loops.remove_all()
        subprocess.run(["rm", "-rf", work])
    print(f"kernel {platform.release()}, {os.cpu_count()} CPUs, loop on /dev/shm, reader 4k randread "
          f"qd{args.iodepth} io_uring, a flip every {args.interval_ms} ms, {args.repeats} repeats x "
          f"{args.seconds} s, medians\n")
    print("| flip | write median (us) | write max (us) | reader IOPS | reader p99 (us) | reader p99.9 (us) | "
          "reader max (us) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for m in modes:
        med = {k: statistics.median(x[k] for x in runs[m]) for k in ("iops", "p99_us", "p999_us", "max_us")}
        wmed = statistics.median(x["writer"]["median_us"] for x in runs[m]) if m != "baseline" else None
        wmax = statistics.median(x["writer"]["max_us"] for x in runs[m]) if m != "baseline" else None
        print(f"| {m if m != 'baseline' else 'none (baseline)'} | {wmed or 0:,.1f} | {wmax or 0:,.1f} | "
              f"{med['iops']:,.0f} | {med['p99_us']:,.0f} | {med['p999_us']:,.0f} | {med['max_us']:,.0f} |")
    if not has_dd:
        print(f"\nThis kernel ({platform.release()}) has no dispatch_direct: only the scheduler switch is measured "
              "here; bench/dd-vm.py measures both on the patched kernel.")
    print(f"<!-- runs: {json.dumps(runs)} -->")


if __name__ == "__main__":
    main()
