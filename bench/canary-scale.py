#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""metrics/devices/verify with and without a canary on N fake disks, side by side (two trees,
two daemons on the fake kernel, calls interleaved, medians of 5).
python3 bench/canary-scale.py N [BUILD_DIR]   (a -Dfault_injection=true build: the fake kernel)"""
import os, sys, time, shutil, statistics, json
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests"))
from blkptest import faketree
from blkptest.daemon import Daemon, control_call, fixture_roots
N = int(sys.argv[1])
B = os.path.join(sys.argv[2] if len(sys.argv) > 2 else os.path.join(TOP, "build"), "daemon", "blkpolicyd")
FIX = os.path.join(TOP, "tests", "fixtures", "kvm-6.18")
base = "/dev/shm/cscale"
shutil.rmtree(base, ignore_errors=True); os.makedirs(base)
t0 = time.time()
faketree.make(FIX, base + "/a/root", N)
shutil.copytree(base + "/a/root", base + "/b/root", symlinks=True)
print("trees", time.time() - t0, flush=True)
ds = {}
for k in "ab":
    w = f"{base}/{k}"
    os.makedirs(w + "/policies"); os.mkdir(w + "/state", 0o700)
    open(w + "/policies/50-base.policy", "w").write("[Match]\nname = loop*\n[Queue]\nscheduler = mq-deadline\nread_ahead_kb = 256\n")
    if k == "b":
        open(w + "/policies/90-canary.policy", "w").write("[Policy]\nmode = observe\n[Match]\nname = loop*\n[Queue]\nread_ahead_kb = 1024\nnr_requests = 64\nadd_random = 1\n")
    open(w + "/conf", "w").write("[Daemon]\ntick_interval_ms = 1000\n")
    args = ["--config", w + "/conf", "--policy-dir", w + "/policies", *fixture_roots(w + "/root"), "--state-dir", w + "/state", "--socket", w + "/sock", "--device", "loop*"]
    t0 = time.time()
    ds[k] = Daemon(B, w, args, env={"BLKPOLICYD_FAKE_KERNEL": "1"})
    ds[k].wait_for("READY=1", timeout=900)
    print(k, "ready", time.time() - t0, flush=True)
def call(k, cmd):
    t = time.perf_counter(); r = control_call(f"{base}/{k}/sock", {"command": cmd}, timeout=600); dt = time.perf_counter() - t
    assert r["ok"], r; return dt, r["result"]
time.sleep(3)
res = {}
for cmd in ("metrics", "devices", "verify"):
    t = {"a": [], "b": []}
    for i in range(5):
        for k in ("ab" if i % 2 == 0 else "ba"):
            dt, r = call(k, cmd); t[k].append(dt)
    ma, mb = statistics.median(t["a"]), statistics.median(t["b"])
    res[cmd] = (ma, mb, mb / ma)
    print(f"{cmd}: without {ma*1000:.1f} ms, with canary {mb*1000:.1f} ms, ratio {mb/ma:.2f}", t, flush=True)
_, m = call("b", "metrics"); print([l for l in m["text"].splitlines() if "result=\"canary\"" in l or "result=\"pending\"" in l])
_, v = call("b", "verify"); print({k: v[k] for k in ("canary", "pending", "drifted")} if "canary" in v else list(v)[:10])
for k in "ab":
    ds[k].stop(timeout=300); ds[k].cleanup()
shutil.rmtree(base, ignore_errors=True)
