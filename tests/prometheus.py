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
killed at the end, whatever happened.

One daemon, node_exporter and Prometheus serve the file's tests, which run
in file order: the flip, the reloads, and last the stop."""
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from blkptest import require
from blkptest.daemon import fixture_roots
from blkptest.diskstats import Feeder

PROMETHEUS = shutil.which("prometheus")
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")
DEADLINE = 30       # seconds for any one thing to be seen


@pytest.fixture(scope="module", autouse=True)
def tools():
    if not (PROMETHEUS and NODE_EXPORTER and PROMTOOL):
        require.skip_or_fail("needs prometheus, prometheus-node-exporter and promtool "
                             "(scripts/install-deps.sh --test)")


@pytest.fixture(scope="module")
def contrib(top):
    return {"rules": os.path.join(top, "contrib", "prometheus", "blkpolicyd.rules.yml"),
            "rules_test": os.path.join(top, "contrib", "prometheus", "blkpolicyd.rules.test.yml"),
            "dashboard": os.path.join(top, "contrib", "grafana", "blkpolicyd.json")}


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


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


class Prometheus:
    def __init__(self, url):
        self.url = url

    def query(self, q):
        """The instant vector of q, as [(labels, value)]; None if the query failed."""
        try:
            j = http_get(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        except OSError:
            return None
        if j.get("status") != "success":
            return None
        return [(r["metric"], float(r["value"][1])) for r in j["data"]["result"]]

    def wait_query(self, q, pred=lambda v: bool(v), what=None):
        """Polls q until pred(result) holds; the last result either way."""
        deadline = time.monotonic() + DEADLINE
        while True:
            v = self.query(q)
            if v is not None and pred(v):
                return v
            if time.monotonic() > deadline:
                print(f"  (gave up waiting for {what or q}: {v})")
                return v
            time.sleep(0.1)

    def get(self, path):
        return http_get(self.url + path)


def test_promtool_check_rules(contrib):
    r = subprocess.run([PROMTOOL, "check", "rules", contrib["rules"]], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, \
        f"promtool check rules contrib/prometheus/blkpolicyd.rules.yml: {r.stdout + r.stderr}"


def test_promtool_test_rules(contrib):
    r = subprocess.run([PROMTOOL, "test", "rules", os.path.basename(contrib["rules_test"])], capture_output=True,
                       text=True, timeout=60, cwd=os.path.dirname(contrib["rules_test"]))
    assert r.returncode == 0, \
        f"promtool test rules: each alert fires on its series, not on a quiet host: {r.stdout + r.stderr}"


@pytest.fixture(scope="module")
def stack(module_daemons, blkpolicyd, kvm_fixture, contrib, fault_injection):
    """The daemon on loop0 (none, dynamic to kyber under load), node_exporter
    serving its textfile, Prometheus scraping that with the shipped rules."""
    work = module_daemons.work
    root = os.path.join(work, "root")
    textdir = os.path.join(work, "textfile")
    policies = os.path.join(work, "policies")
    conf = os.path.join(work, "blkpolicyd.conf")
    # the kvm-6.18 fixture, loop0 running none, and the /sys/dev/block link the fake kernel needs
    shutil.copytree(kvm_fixture, root, symlinks=True)
    os.makedirs(os.path.join(root, "sys", "dev", "block"), exist_ok=True)
    link = os.path.join(root, "sys", "dev", "block", "7:0")
    if not os.path.lexists(link):
        os.symlink("../../devices/virtual/block/loop0", link)
    write(os.path.join(root, "sys", "block", "loop0", "queue", "scheduler"), "[none] mq-deadline kyber bfq\n")
    os.mkdir(textdir)
    write(conf, f"[Daemon]\ntick_interval_ms = 100\nmetrics_textfile_dir = {textdir}\nmetrics_every_ticks = 1\n")
    write(os.path.join(policies, "50-dyn.policy"),
          "[Match]\nname = loop0\n[Dynamic]\nenter = iops > 100\nenter_ticks = 1\nleave = iops < 1\n"
          "leave_ticks = 1\nmin_dwell_ticks = 0\n[Busy]\nscheduler = kyber\n")
    procs = []
    # loop0's read counter grows while load is on
    with Feeder(os.path.join(root, "proc", "diskstats"), "loop0", 7, 0) as feeder:
        try:
            daemon = module_daemons.start(["--config", conf, "--policy-dir", policies, *fixture_roots(root),
                                           "--state-dir", os.path.join(work, "state"),
                                           "--socket", module_daemons.sock, "--device", "loop*"],
                                          env={"BLKPOLICYD_FAKE_KERNEL": "1"}, timeout=DEADLINE)
            ne_port, prom_port = free_port(), free_port()
            with open(os.path.join(work, "node_exporter.log"), "w") as log:
                procs.append(subprocess.Popen([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{ne_port}",
                                               "--collector.disable-defaults", "--collector.textfile",
                                               f"--collector.textfile.directory={textdir}"],
                                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            write(os.path.join(work, "prometheus.yml"),
                  "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                  f"rule_files:\n  - {contrib['rules']}\n"
                  "scrape_configs:\n  - job_name: node\n    static_configs:\n"
                  f"      - targets: ['127.0.0.1:{ne_port}']\n")
            with open(os.path.join(work, "prometheus.log"), "w") as log:
                procs.append(subprocess.Popen([PROMETHEUS, f"--config.file={os.path.join(work, 'prometheus.yml')}",
                                               f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
                                               f"--web.listen-address=127.0.0.1:{prom_port}",
                                               "--storage.tsdb.retention.time=1h"],
                                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            yield {"daemon": daemon, "feeder": feeder, "prom": Prometheus(f"http://127.0.0.1:{prom_port}"),
                   "conf": conf, "textdir": textdir}
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
            for name in ("node_exporter.log", "prometheus.log"):
                path = os.path.join(work, name)
                if os.path.exists(path):
                    with open(path) as f:
                        print(f"--- {name}\n" + f.read()[-2000:])


@pytest.fixture(scope="module")
def meta(stack):
    """Prometheus's metadata of every series, once the first scrape is in."""
    stack["prom"].wait_query('blkpolicyd_build_info{job="node"}')
    return stack["prom"].get("/api/v1/metadata")["data"]


def test_the_series_and_their_labels(stack, blkpolicyd, meta):
    prom = stack["prom"]
    version = subprocess.run([blkpolicyd, "--version"], capture_output=True, text=True).stdout.split()
    v = prom.wait_query('blkpolicyd_build_info{job="node"}')
    assert v and v[0][1] == 1 and v[0][0].get("version") == version[1], \
        f"blkpolicyd_build_info{{version=...}} 1, scraped through node_exporter's textfile collector: {v}"
    v = prom.wait_query('blkpolicyd_device_scheduler{device="loop0"}')
    assert v and v[0][0].get("scheduler") == "none" and v[0][1] == 1, \
        f'blkpolicyd_device_scheduler{{device="loop0",scheduler="none"}} 1: {v}'
    v = prom.query('blkpolicyd_sysfs_writes_total')
    assert v is not None and sorted(m.get("kind") for m, _ in v) == ["other", "scheduler"], \
        f"blkpolicyd_sysfs_writes_total by kind: scheduler and other: {v}"
    for name in ("blkpolicyd_sysfs_write_errors_total", "blkpolicyd_policy_files_rejected",
                 "blkpolicyd_ticks_total", "blkpolicyd_tick_seconds_total", "blkpolicyd_devices"):
        v = prom.query(name)
        assert v is not None and len(v) == 1, \
            f"{name} is there: {v}"
    v = prom.query('node_textfile_mtime_seconds{file=~"(.*/)?blkpolicyd\\\\.prom"}')
    assert v and len(v) == 1, \
        f"node_textfile_mtime_seconds names the file as BlkpolicydMetricsStale expects: {v}"
    v = prom.query('blkpolicyd_last_reload_successful')
    assert v == [(v[0][0], 1.0)] if v else False, \
        f"blkpolicyd_last_reload_successful 1: {v}"
    v = prom.query('{__name__=~"blkpolicyd_.*", device!=""}')
    assert (v and all(set(m) - {"__name__", "device", "scheduler", "instance", "job"} == set() for m, _ in v)
            and {m["device"] for m, _ in v} == {"loop0"}), \
        f"the per-device series are labelled device= (scheduler= too), to join node_exporter's: {v}"
    v = prom.query('{__name__=~"blkpolicyd_device_(iops|bytes_per_second|utilisation_ratio|queue_depth|latency_seconds)"}')
    assert v == [], \
        f"no one-tick load gauges (node_exporter's diskstats counters have them, joined on device): {v}"
    v = prom.query('{__name__=~"blkpolicyd_.*_total"}')
    assert (v and all(meta.get(m["__name__"], [{}])[0].get("type") == "counter" for m, _ in v)
            and all(t[0]["type"] != "counter" or n.endswith("_total") for n, t in meta.items() if n.startswith("blkpolicyd_"))), \
        f'every _total is a counter, and only they are: {({n: t[0]["type"] for n, t in meta.items() if n.startswith("blkpolicyd_")})}'


def test_a_flip_counts_and_the_scheduler_series_follows(stack):
    prom, feeder = stack["prom"], stack["feeder"]
    v = prom.wait_query('blkpolicyd_device_flips_total{device="loop0"}')
    assert v and v[0][1] == 0, \
        f'blkpolicyd_device_flips_total{{device="loop0"}} is 0 before any load: {v}'
    writes0 = prom.query('blkpolicyd_sysfs_writes_total{kind="scheduler"}')
    feeder.on = True
    try:
        v = prom.wait_query('blkpolicyd_device_flips_total{device="loop0"} >= 1', what="a flip")
        assert v and v[0][1] >= 1, \
            f"load flips loop0, and Prometheus sees its flip counter increment: {v}"
        v = prom.wait_query('blkpolicyd_device_scheduler{device="loop0",scheduler="kyber"}', what="kyber")
        assert v and v[0][1] == 1, \
            f"... the scheduler series names the busy scheduler: {v}"
        writes1 = prom.query('blkpolicyd_sysfs_writes_total{kind="scheduler"}')
        assert writes0 and writes1 and writes1[0][1] > writes0[0][1], \
            f"... and the scheduler writes counter grew: {(writes0, writes1)}"
    finally:
        feeder.on = False
    v = prom.wait_query('blkpolicyd_device_flips_total{device="loop0"} >= 2', what="the flip back")
    assert v and v[0][1] >= 2, \
        f"the flip back counts too: {v}"


def test_a_refused_reload_shows(stack):
    prom, daemon, conf = stack["prom"], stack["daemon"], stack["conf"]
    with open(conf) as f:
        good = f.read()
    write(conf, good + "restore_on_exit = perhaps\n")
    try:
        daemon.reload()
        v = prom.wait_query('blkpolicyd_last_reload_successful == 0', what="the refused reload")
        assert v and v[0][1] == 0, \
            f"a refused reload: blkpolicyd_last_reload_successful 0: {v}"
    finally:
        write(conf, good)
    daemon.reload()
    v = prom.wait_query('blkpolicyd_last_reload_successful == 1', what="the good reload")
    assert v and v[0][1] == 1, \
        f"... and 1 after a good one: {v}"


def test_every_shipped_rule_loads_and_evaluates(stack):
    # the rules, loaded and evaluated by Prometheus over the real series
    def rules_ok(j):
        rules = [r for g in j["data"]["groups"] for r in g["rules"]]
        return len(rules) >= 7 and all(r.get("health") == "ok" for r in rules), rules
    deadline = time.monotonic() + DEADLINE
    while True:
        ok, rules = rules_ok(stack["prom"].get("/api/v1/rules"))
        if ok or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert ok, \
        f'Prometheus loads every shipped rule and evaluates it without error: {[(r["name"], r.get("health"), r.get("lastError")) for r in rules]}'


def test_the_dashboard_queries_run(stack, contrib, meta):
    # the dashboard's queries are valid PromQL, over series that exist
    with open(contrib["dashboard"]) as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    bad = []
    for e in exprs:
        q = e.replace("$__rate_interval", "1m").replace('instance=~"$instance"', 'instance=~".*"')
        if stack["prom"].query(q) is None:
            bad.append(e)
    names = set(re.findall(r"\b(blkpolicyd_[a-z_]+)", " ".join(exprs)))
    known = set(meta)
    assert exprs and not bad, \
        f"the Grafana dashboard's {len(exprs)} queries parse and run: {bad}"
    assert names and names <= known, \
        f"... and name only metrics blkpolicyd exports: {names - known}"


def test_the_series_go_when_the_daemon_stops(stack):
    # the daemon stops: its file goes, and so do its series
    daemon, textdir = stack["daemon"], stack["textdir"]
    rc = daemon.stop()
    assert rc == 0, \
        f"the daemon stops with 0: {daemon.text()[-1000:]}"
    assert os.listdir(textdir) == [], \
        f"... and removes its textfile: {os.listdir(textdir)}"
    v = stack["prom"].wait_query("blkpolicyd_build_info", pred=lambda v: v == [], what="the series to go stale")
    assert v == [], \
        f"... so Prometheus no longer has its series (absent() can alert): {v}"
