#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""blkpolicyd's metrics through a real Prometheus (issue 16, item 4).

A daemon on a copy of a fixture tree (the fake kernel: it writes, without
root) writes its textfile; Debian's node_exporter serves it with only the
textfile collector; Debian's Prometheus scrapes that every second, with
the shipped alert rules loaded. PromQL over the HTTP API (loopback only)
then checks: the series and their labels, no per-device load gauges, a
flip made by faking load in the fixture's diskstats incrementing its
counter and the scheduler series following it, a refused reload showing as
blkpolicyd_last_reload_successful 0, every rule and every dashboard query
valid against the real series, and the series gone once the daemon stops
and removes its file. `promtool check rules` and `promtool test rules`
check contrib/prometheus/. Every process listens on 127.0.0.1 only and is
killed at the end, whatever happened."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

blkpolicyd, fixture, top = sys.argv[1:4]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
from loopdev import SKIP, Daemon, Results, require_fault_injection  # noqa: E402
from blkptest.diskstats import Feeder  # noqa: E402  (loopdev put tests/ on the path)

PROMETHEUS = shutil.which("prometheus")
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")
RULES = os.path.join(top, "contrib", "prometheus", "blkpolicyd.rules.yml")
RULES_TEST = os.path.join(top, "contrib", "prometheus", "blkpolicyd.rules.test.yml")
DASHBOARD = os.path.join(top, "contrib", "grafana", "blkpolicyd.json")

if not (PROMETHEUS and NODE_EXPORTER and PROMTOOL):
    why = "needs prometheus, prometheus-node-exporter and promtool (scripts/install-deps.sh --test)"
    if os.environ.get("CI") == "true":
        print(f"FAIL: {why}")
        sys.exit(1)
    print(f"SKIP: {why}")
    sys.exit(SKIP)
require_fault_injection(blkpolicyd)
version = subprocess.run([blkpolicyd, "--version"], capture_output=True, text=True).stdout.split()

res = Results()
check = res.check
work = tempfile.mkdtemp(prefix="blkpolicyd-prometheus-")
root = os.path.join(work, "root")
textdir = os.path.join(work, "textfile")
policies = os.path.join(work, "policies")
conf = os.path.join(work, "blkpolicyd.conf")
PROCS = []          # every process started, killed at the end
DEADLINE = 30       # seconds for any one thing to be seen


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(args, log):
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    PROCS.append(p)
    return p


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def query(q):
    """The instant vector of q, as [(labels, value)]; None if the query failed."""
    try:
        j = http_get(f"{prom_url}/api/v1/query?" + urllib.parse.urlencode({"query": q}))
    except OSError:
        return None
    if j.get("status") != "success":
        return None
    return [(r["metric"], float(r["value"][1])) for r in j["data"]["result"]]


def wait_query(q, pred=lambda v: bool(v), what=None):
    """Polls q until pred(result) holds; the last result either way."""
    deadline = time.monotonic() + DEADLINE
    while True:
        v = query(q)
        if v is not None and pred(v):
            return v
        if time.monotonic() > deadline:
            print(f"  (gave up waiting for {what or q}: {v})")
            return v
        time.sleep(0.1)


def make_tree():
    """The kvm-6.18 fixture, loop0 running none, and the /sys/dev/block link the fake kernel needs."""
    shutil.copytree(fixture, root, symlinks=True)
    os.makedirs(os.path.join(root, "sys", "dev", "block"), exist_ok=True)
    link = os.path.join(root, "sys", "dev", "block", "7:0")
    if not os.path.lexists(link):
        os.symlink("../../devices/virtual/block/loop0", link)
    write(os.path.join(root, "sys", "block", "loop0", "queue", "scheduler"), "[none] mq-deadline kyber bfq\n")


feeder = None
prom_url = None
try:
    # the shipped rules: promtool's checks
    r = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True, text=True, timeout=60)
    check("promtool check rules contrib/prometheus/blkpolicyd.rules.yml", r.returncode == 0, r.stdout + r.stderr)
    r = subprocess.run([PROMTOOL, "test", "rules", os.path.basename(RULES_TEST)], capture_output=True, text=True,
                       timeout=60, cwd=os.path.dirname(RULES_TEST))
    check("promtool test rules: each alert fires on its series, not on a quiet host", r.returncode == 0,
          r.stdout + r.stderr)
    with open(DASHBOARD) as f:
        dashboard = json.load(f)

    make_tree()
    # loop0's read counter grows while load is on
    feeder = Feeder(os.path.join(root, "proc", "diskstats"), "loop0", 7, 0).__enter__()
    os.mkdir(textdir)
    write(conf, f"[Daemon]\ntick_interval_ms = 100\nmetrics_textfile_dir = {textdir}\nmetrics_every_ticks = 1\n")
    write(os.path.join(policies, "50-dyn.policy"),
          "[Match]\nname = loop0\n[Dynamic]\nenter = iops > 100\nenter_ticks = 1\nleave = iops < 1\n"
          "leave_ticks = 1\nmin_dwell_ticks = 0\n[Busy]\nscheduler = kyber\n")
    daemon = Daemon(blkpolicyd, work, ["--config", conf, "--policy-dir", policies,
                                       "--sysfs-root", os.path.join(root, "sys"),
                                       "--proc-root", os.path.join(root, "proc"),
                                       "--debugfs-root", os.path.join(root, "debug"),
                                       "--state-dir", os.path.join(work, "state"),
                                       "--socket", os.path.join(work, "control.sock"), "--device", "loop*"],
                    env={"BLKPOLICYD_FAKE_KERNEL": "1"})
    PROCS.append(daemon.proc)
    daemon.wait_for("READY=1", timeout=DEADLINE)

    ne_port, prom_port = free_port(), free_port()
    ne_log = open(os.path.join(work, "node_exporter.log"), "w")
    start([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{ne_port}", "--collector.disable-defaults",
           "--collector.textfile", f"--collector.textfile.directory={textdir}"], ne_log)
    write(os.path.join(work, "prometheus.yml"),
          "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
          f"rule_files:\n  - {RULES}\n"
          "scrape_configs:\n  - job_name: node\n    static_configs:\n"
          f"      - targets: ['127.0.0.1:{ne_port}']\n")
    prom_log = open(os.path.join(work, "prometheus.log"), "w")
    start([PROMETHEUS, f"--config.file={os.path.join(work, 'prometheus.yml')}",
           f"--storage.tsdb.path={os.path.join(work, 'tsdb')}", f"--web.listen-address=127.0.0.1:{prom_port}",
           "--storage.tsdb.retention.time=1h"], prom_log)
    prom_url = f"http://127.0.0.1:{prom_port}"

    # the series, with their labels, as Prometheus stored them
    v = wait_query('blkpolicyd_build_info{job="node"}')
    check("blkpolicyd_build_info{version=...} 1, scraped through node_exporter's textfile collector",
          v and v[0][1] == 1 and v[0][0].get("version") == version[1], v)
    v = wait_query('blkpolicyd_device_scheduler{device="loop0"}')
    check("blkpolicyd_device_scheduler{device=\"loop0\",scheduler=\"none\"} 1",
          v and v[0][0].get("scheduler") == "none" and v[0][1] == 1, v)
    v = query('blkpolicyd_sysfs_writes_total')
    check("blkpolicyd_sysfs_writes_total by kind: scheduler and other",
          v is not None and sorted(m.get("kind") for m, _ in v) == ["other", "scheduler"], v)
    for name in ("blkpolicyd_sysfs_write_errors_total", "blkpolicyd_policy_files_rejected",
                 "blkpolicyd_ticks_total", "blkpolicyd_tick_seconds_total", "blkpolicyd_devices"):
        v = query(name)
        check(f"{name} is there", v is not None and len(v) == 1, v)
    v = query('node_textfile_mtime_seconds{file=~"(.*/)?blkpolicyd\\\\.prom"}')
    check("node_textfile_mtime_seconds names the file as BlkpolicydMetricsStale expects", v and len(v) == 1, v)
    v = query('blkpolicyd_last_reload_successful')
    check("blkpolicyd_last_reload_successful 1", v == [(v[0][0], 1.0)] if v else False, v)
    v = query('{__name__=~"blkpolicyd_.*", device!=""}')
    check("the per-device series are labelled device= (scheduler= too), to join node_exporter's",
          v and all(set(m) - {"__name__", "device", "scheduler", "instance", "job"} == set() for m, _ in v)
          and {m["device"] for m, _ in v} == {"loop0"}, v)
    v = query('{__name__=~"blkpolicyd_device_(iops|bytes_per_second|utilisation_ratio|queue_depth|latency_seconds)"}')
    check("no one-tick load gauges (node_exporter's diskstats counters have them, joined on device)", v == [], v)
    v = query('{__name__=~"blkpolicyd_.*_total"}')
    meta = http_get(f"{prom_url}/api/v1/metadata")["data"]
    check("every _total is a counter, and only they are",
          v and all(meta.get(m["__name__"], [{}])[0].get("type") == "counter" for m, _ in v)
          and all(t[0]["type"] != "counter" or n.endswith("_total") for n, t in meta.items() if n.startswith("blkpolicyd_")),
          {n: t[0]["type"] for n, t in meta.items() if n.startswith("blkpolicyd_")})

    # a flip increments its counter, and the scheduler series follows
    v = wait_query('blkpolicyd_device_flips_total{device="loop0"}')
    check("blkpolicyd_device_flips_total{device=\"loop0\"} is 0 before any load", v and v[0][1] == 0, v)
    writes0 = query('blkpolicyd_sysfs_writes_total{kind="scheduler"}')
    feeder.on = True
    v = wait_query('blkpolicyd_device_flips_total{device="loop0"} >= 1', what="a flip")
    check("load flips loop0, and Prometheus sees its flip counter increment", v and v[0][1] >= 1, v)
    v = wait_query('blkpolicyd_device_scheduler{device="loop0",scheduler="kyber"}', what="kyber")
    check("... the scheduler series names the busy scheduler", v and v[0][1] == 1, v)
    v = query('increase(blkpolicyd_sysfs_writes_total{kind="scheduler"}[1m])')
    writes1 = query('blkpolicyd_sysfs_writes_total{kind="scheduler"}')
    check("... and the scheduler writes counter grew", writes0 and writes1 and writes1[0][1] > writes0[0][1],
          (writes0, writes1))
    feeder.on = False
    v = wait_query('blkpolicyd_device_flips_total{device="loop0"} >= 2', what="the flip back")
    check("the flip back counts too", v and v[0][1] >= 2, v)

    # a refused reload
    with open(conf) as f:
        good = f.read()
    write(conf, good + "restore_on_exit = perhaps\n")
    daemon.proc.send_signal(signal.SIGHUP)
    daemon.wait_for("READY=1")
    v = wait_query('blkpolicyd_last_reload_successful == 0', what="the refused reload")
    check("a refused reload: blkpolicyd_last_reload_successful 0", v and v[0][1] == 0, v)
    write(conf, good)
    daemon.proc.send_signal(signal.SIGHUP)
    daemon.wait_for("READY=1")
    v = wait_query('blkpolicyd_last_reload_successful == 1', what="the good reload")
    check("... and 1 after a good one", v and v[0][1] == 1, v)

    # the rules, loaded and evaluated by Prometheus over the real series
    def rules_ok(j):
        rules = [r for g in j["data"]["groups"] for r in g["rules"]]
        return len(rules) >= 7 and all(r.get("health") == "ok" for r in rules), rules
    deadline = time.monotonic() + DEADLINE
    while True:
        ok, rules = rules_ok(http_get(f"{prom_url}/api/v1/rules"))
        if ok or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    check("Prometheus loads every shipped rule and evaluates it without error", ok,
          [(r["name"], r.get("health"), r.get("lastError")) for r in rules])

    # the dashboard's queries are valid PromQL, over series that exist
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    bad = []
    for e in exprs:
        q = e.replace("$__rate_interval", "1m").replace('instance=~"$instance"', 'instance=~".*"')
        if query(q) is None:
            bad.append(e)
    names = set(re.findall(r"\b(blkpolicyd_[a-z_]+)", " ".join(exprs)))
    known = set(meta)
    check(f"the Grafana dashboard's {len(exprs)} queries parse and run", exprs and not bad, bad)
    check("... and name only metrics blkpolicyd exports", names and names <= known, names - known)

    # the daemon stops: its file goes, and so do its series
    rc = daemon.stop()
    check("the daemon stops with 0", rc == 0, daemon.text()[-1000:])
    check("... and removes its textfile", os.listdir(textdir) == [], os.listdir(textdir))
    v = wait_query("blkpolicyd_build_info", pred=lambda v: v == [], what="the series to go stale")
    check("... so Prometheus no longer has its series (absent() can alert)", v == [], v)
finally:
    if feeder:
        feeder.__exit__(None, None, None)
    for p in PROCS:
        if p.poll() is None:
            p.kill()
        p.wait()
    if res.failed:
        for name in ("daemon.log", "node_exporter.log", "prometheus.log"):
            path = os.path.join(work, name)
            if os.path.exists(path):
                print(f"--- {name}\n" + open(path).read()[-2000:])
    shutil.rmtree(work, ignore_errors=True)
res.finish()
