#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyd's memory at N devices without making any: N copies of the
kvm-6.18 fixture's loop0 in a tree on /dev/shm, the daemon in --dry-run on
it (the same dynamic policy and 10 ms tick as bench/scale.py), its
VmRSS/RssAnon/Pss once it has ticked a few hundred times. No root, no
loop device; a quick stand-in for scale.py's memory columns while the
Device changes, not a replacement (no udev, no real diskstats).

Each device's counters move every tick (a rewritten diskstats, as
tests/sampling.py does), so the signals are computed and not only the idle
path is taken; --idle keeps them still.

--metrics also has the textfile written (every 20 ticks) and `metrics`
asked three times, and gives the peak resident memory over those
(VmHWM, reset first) and VmRSS after.

  python3 bench/fake-scale.py [--counts 1000,10000] [--build build] [--idle] [--metrics]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests"))      # the tests' helpers: blkptest
from blkptest.daemon import Daemon, control_call  # noqa: E402
from benchlib import BASE, DYNAMIC_POLICY, GLOB, memory_of  # noqa: E402

FIXTURE = os.path.join(TOP, "tests", "fixtures", "kvm-6.18")


def make_tree(root, n):
    shutil.copytree(FIXTURE, root, symlinks=True)
    virt = os.path.join(root, "sys", "devices", "virtual", "block")
    debug = os.path.join(root, "debug", "block")
    for i in range(BASE, BASE + n):
        name = f"loop{i}"
        shutil.copytree(os.path.join(virt, "loop0"), os.path.join(virt, name), symlinks=True)
        with open(os.path.join(virt, name, "dev"), "w") as f:
            f.write(f"7:{i}\n")
        os.symlink(f"../devices/virtual/block/{name}", os.path.join(root, "sys", "block", name))
        shutil.copytree(os.path.join(debug, "loop0"), os.path.join(debug, name), symlinks=True)


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)


def diskstats(n, k):
    lines = [" 254       0 vda 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"]
    for i in range(BASE, BASE + n):
        lines.append(f"   7 {i:7d} loop{i} {k} 0 {k * 8} {k} {k} 0 {k * 8} {k} 0 {k} {2 * k} 0 0 0 0 0 0\n")
    return "".join(lines)



def metrics_peak(pid, sock, textdir, ticks_for):
    """The peak resident memory (VmHWM, reset first) and VmRSS after three
    `metrics` calls and the textfile written some times, in KiB."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")        # resets VmHWM to VmRSS
    size = 0
    for _ in range(3):
        size = len(control_call(sock, {"command": "metrics"}, timeout=120)["result"]["text"])
    written = 0
    while written < 3:
        ticks_for(1)
        written += os.path.exists(os.path.join(textdir, "blkpolicyd.prom"))
    with open(f"/proc/{pid}/status") as f:
        st = dict(line.split(":", 1) for line in f)
    return {"metrics_bytes": size, "VmHWM_metrics": int(st["VmHWM"].split()[0]),
            "VmRSS_after_metrics": int(st["VmRSS"].split()[0])}


def measure(build, n, idle, ticks, malloc_stats=False, smaps=False, metrics=False):
    work = tempfile.mkdtemp(prefix="blkpolicyd-fake-scale-", dir="/dev/shm")
    d = None
    try:
        root = os.path.join(work, "root")
        make_tree(root, n)
        proc = os.path.join(root, "proc")
        write_file(os.path.join(proc, "diskstats"), diskstats(n, 1))
        pol = os.path.join(work, "policies")
        os.mkdir(pol)
        write_file(os.path.join(pol, "90-bench-dynamic.policy"), DYNAMIC_POLICY)
        conf = os.path.join(work, "bench.conf")
        textdir = os.path.join(work, "textfile")
        os.mkdir(textdir)
        write_file(conf, "[Daemon]\ntick_interval_ms = 10\n" +
                   (f"metrics_textfile_dir = {textdir}\nmetrics_every_ticks = 20\n" if metrics else ""))
        sock = os.path.join(work, "control.sock")
        d = Daemon(os.path.join(TOP, build, "daemon", "blkpolicyd"), work,
                   ["--dry-run", "--config", conf, "--policy-dir", os.path.join(TOP, "policies"),
                    "--policy-dir", pol, "--sysfs-root", os.path.join(root, "sys"), "--proc-root", proc,
                    "--debugfs-root", os.path.join(root, "debug"), "--state-dir", os.path.join(work, "state"),
                    "--socket", sock, "--device", GLOB, "--log-level", "notice"])
        d.wait_for("READY=1", timeout=600)
        k = 1

        def ticks_for(count):
            nonlocal k
            t0 = control_call(sock, {"command": "status"})["result"]["tick"]["count"]
            while control_call(sock, {"command": "status"}, timeout=60)["result"]["tick"]["count"] < t0 + count:
                if not idle:
                    k += 1
                    write_file(os.path.join(proc, "diskstats.tmp"), diskstats(n, k))
                    os.replace(os.path.join(proc, "diskstats.tmp"), os.path.join(proc, "diskstats"))
                time.sleep(0.05)
        ticks_for(ticks)
        st = control_call(sock, {"command": "status"}, timeout=60)["result"]
        mem = memory_of(d.proc.pid)
        mem["n"] = n
        mem["devices"] = st.get("devices", {}).get("total") if isinstance(st.get("devices"), dict) else st.get("devices")
        mem["tick_cpu_us"] = st["tick"]["cpu_us_avg"]
        dev = control_call(sock, {"command": "device", "device": f"loop{BASE}"})["result"]
        mem["signals_valid"] = dev.get("signals") is not None
        if metrics:
            mem.update(metrics_peak(d.proc.pid, sock, textdir, ticks_for))
        if smaps:
            # resident anonymous and file memory by mapping, largest first
            maps, cur = [], None
            with open(f"/proc/{d.proc.pid}/smaps") as f:
                for line in f:
                    parts = line.split()
                    if "-" in parts[0] and not parts[0].endswith(":"):
                        cur = {"map": parts[5] if len(parts) > 5 else "[anon]", "perm": parts[1]}
                        maps.append(cur)
                    elif parts[0] in ("Rss:", "Anonymous:"):
                        cur[parts[0][:-1]] = int(parts[1])
            maps.sort(key=lambda m: -m.get("Rss", 0))
            mem["smaps"] = [f"{m['map']} {m['perm']} rss={m['Rss']} anon={m['Anonymous']}" for m in maps[:25]]
        if malloc_stats:
            # glibc's own count of what is in use, into the daemon's log
            subprocess.run(["gdb", "-p", str(d.proc.pid), "-batch", "-ex", "call (void) malloc_stats()"],
                           capture_output=True, check=False)
            time.sleep(0.2)
            mem["malloc_stats"] = [x for x in d.text().splitlines()
                                   if x.startswith(("system bytes", "in use bytes", "Total", "max mmap"))]
        return mem
    finally:
        if d and d.proc.poll() is None:
            d.proc.terminate()
            d.proc.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="1000,10000")
    ap.add_argument("--build", default="build")
    ap.add_argument("--idle", action="store_true")
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--smaps", action="store_true", help="the largest mappings' resident memory")
    ap.add_argument("--metrics", action="store_true",
                    help="the textfile written every 20 ticks; the peak (VmHWM) over three `metrics` calls and "
                         "some textfile writes, and VmRSS after")
    ap.add_argument("--malloc-stats", action="store_true", help="glibc malloc_stats() through gdb (needs ptrace)")
    args = ap.parse_args()
    res = [measure(args.build, int(n), args.idle, args.ticks, args.malloc_stats, args.smaps, args.metrics) for n in args.counts.split(",")]
    for r in res:
        print(json.dumps(r))
    if len(res) > 1:
        a, b = res[0], res[-1]
        print(f"anonymous per device between {a['n']} and {b['n']}: "
              f"{(b['RssAnon'] - a['RssAnon']) * 1024 / (b['n'] - a['n']):.0f} B")


if __name__ == "__main__":
    main()
