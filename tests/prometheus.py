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
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from blkptest import require
from blkptest.daemon import Daemon, fixture_roots
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
    write(conf, f"[Daemon]\ntick_interval_ms = 100\nmetrics_textfile_dir = {textdir}\nmetrics_every_ticks = 1\n"
          "metrics_per_device = yes\n")
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
        return len(rules) >= 13 and all(r.get("health") == "ok" for r in rules), rules
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            ok, rules = rules_ok(stack["prom"].get("/api/v1/rules"))
        except OSError:         # not listening yet
            ok, rules = False, []
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
    known = set(meta) | STOPPED_SERIES      # those only once a daemon stopped: test_a_stop_leaves_the_stopped_file
    assert exprs and not bad, \
        f"the Grafana dashboard's {len(exprs)} queries parse and run: {bad}"
    assert names and names <= known, \
        f"... and name only metrics blkpolicyd exports: {names - known}"


# the series of the file a stopped daemon leaves, beside build_info and up
STOPPED_SERIES = {"blkpolicyd_exit_info", "blkpolicyd_exit_timestamp_seconds"}


def test_a_stop_leaves_the_stopped_file(stack):
    # the daemon stops: its file says so, and only that
    daemon, textdir = stack["daemon"], stack["textdir"]
    rc = daemon.stop()
    assert rc == 0, \
        f"the daemon stops with 0: {daemon.text()[-1000:]}"
    assert os.listdir(textdir) == ["blkpolicyd.prom"], \
        f"... and leaves its textfile, no temporary: {os.listdir(textdir)}"
    with open(os.path.join(textdir, "blkpolicyd.prom")) as f:
        text = f.read()
    assert "\nblkpolicyd_up 0\n" in text and 'blkpolicyd_exit_info{result="success"} 1' in text, \
        f"... which says it is down, stopped on purpose: {text}"
    v = stack["prom"].wait_query("blkpolicyd_up == 0", what="blkpolicyd_up 0")
    assert v and v[0][1] == 0, \
        f"... Prometheus sees blkpolicyd_up 0: {v}"
    v = stack["prom"].wait_query('{__name__=~"blkpolicyd_exit_.*"}', pred=lambda v: len(v) == 2, what="exit series")
    assert {m["__name__"] for m, _ in v} == STOPPED_SERIES, \
        f"... with the exit series the dashboard and the rules name: {v}"
    v = stack["prom"].wait_query('{__name__=~"blkpolicyd_device_.*"}', pred=lambda v: v == [],
                                 what="the per-device series to go stale")
    assert v == [], \
        f"... and no gauge of the run before is served as if it still held: {v}"


# ---------------------------------------------------------------------------
# A fleet: one host per alert, each a daemon on its own copy of the fixture
# with its own node_exporter, all scraped by one Prometheus with the shipped
# rules (their for: cut to FLEET_FOR, the expressions as shipped). Every
# alert fires once, on its own host, and nothing fires on the others.

FLEET_FOR = "2s"
FLEET_EVERY_TICKS = 10          # 1 s between files at 100 ms ticks: stale after 10 s
READ_AHEAD_POLICY = "[Match]\nname = vda loop0\n[Queue]\nread_ahead_kb = 256\n"
# a canary on the quiet host: what it would change is counted apart, and
# pends no alert (PendingWhileEnforcing is for writes due, not canaries)
CANARY_POLICY = "[Policy]\nmode = observe\n[Match]\nname = vda loop0\n[Queue]\nread_ahead_kb = 2048\n"
UDEV_RULE = 'ACTION=="add|change", KERNEL=="vda|loop0", ATTR{queue/scheduler}="bfq"\n'

# host: (its alert, or None, and what sets it up)
FLEET = {
    "quiet": (None, {"policy": CANARY_POLICY}),
    "conflict": ("BlkpolicydOtherWriters", {"udev_rule": UDEV_RULE}),
    "pending": ("BlkpolicydPendingWhileEnforcing", {"faults": "write:*/vda/queue/scheduler:EBUSY"}),
    "failed": ("BlkpolicydSettingsFailed", {"policy": READ_AHEAD_POLICY,
                                            "faults": "write:*/queue/read_ahead_kb:EINVAL"}),
    "stopped": ("BlkpolicydStopped", {}),
    "killed": ("BlkpolicydDown", {}),
    "stale": ("BlkpolicydMetricsStale", {}),
}


class Host:
    """A blkpolicyd enforcing on its copy of the kvm-6.18 fixture (the fake
    kernel writes), its textfile served by a node_exporter of its own."""

    def __init__(self, name, work, blkpolicyd, fixture, top, spec):
        self.name, self.work, self.blkpolicyd = name, os.path.join(work, name), blkpolicyd
        self.root = os.path.join(self.work, "root")
        self.textdir = os.path.join(self.work, "textfile")
        self.state = os.path.join(self.work, "state")
        shutil.copytree(fixture, self.root, symlinks=True)
        os.makedirs(self.textdir)
        policies = os.path.join(self.work, "policies")
        shutil.copytree(os.path.join(top, "policies"), policies, ignore=shutil.ignore_patterns("meson.build"))
        if "policy" in spec:
            write(os.path.join(policies, "99-fleet.policy"), spec["policy"])
        if "udev_rule" in spec:
            write(os.path.join(self.root, "etc", "udev", "rules.d", "60-io.rules"), spec["udev_rule"])
        self.conf = write_conf(os.path.join(self.work, "blkpolicyd.conf"),
                               "[Daemon]\ntick_interval_ms = 100\n"
                               f"metrics_textfile_dir = {self.textdir}\nmetrics_every_ticks = {FLEET_EVERY_TICKS}\n")
        env = {"BLKPOLICYD_FAKE_KERNEL": "1", "BLKPOLICYD_FAULTS": spec.get("faults")}
        self.args = ["--config", self.conf, "--policy-dir", policies, *fixture_roots(self.root), "--root", self.root,
                     "--state-dir", self.state, "--socket", os.path.join(self.work, "sock")]
        self.daemon = Daemon(blkpolicyd, self.work, self.args, env=env)
        self.daemon.wait_for("READY=1", timeout=DEADLINE)
        self.port = free_port()
        self.log = open(os.path.join(self.work, "node_exporter.log"), "w")
        self.exporter = subprocess.Popen([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{self.port}",
                                          "--collector.disable-defaults", "--collector.textfile",
                                          f"--collector.textfile.directory={self.textdir}"],
                                         stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def kill_as_systemd_would(self):
        """SIGKILL, then the unit's ExecStopPost= with what systemd sets."""
        self.daemon.proc.kill()
        self.daemon.proc.wait()
        r = subprocess.run([self.blkpolicyd, "--metrics-stopped", *self.args], capture_output=True, text=True,
                           env=dict(os.environ, SERVICE_RESULT="signal", EXIT_CODE="killed", EXIT_STATUS="KILL"),
                           timeout=30)
        assert r.returncode == 0, f"blkpolicyd --metrics-stopped: {r.stdout}{r.stderr}"

    def cleanup(self):
        if self.daemon.proc.poll() is None:
            self.daemon.proc.send_signal(signal.SIGCONT)    # the stale one
        self.daemon.cleanup()
        if self.exporter.poll() is None:
            self.exporter.kill()
        self.exporter.wait()
        self.log.close()


def write_conf(path, text):
    write(path, text)
    return path


def fleet_rules(rules, path):
    """The shipped rules with every for: cut to FLEET_FOR: a test cannot
    wait an hour; the expressions are the shipped ones."""
    with open(rules) as f:
        text = f.read()
    write(path, re.sub(r"(?m)^(\s+for:) \S+$", rf"\1 {FLEET_FOR}", text))
    return path


@pytest.fixture(scope="module")
def fleet(module_work, blkpolicyd, kvm_fixture, top, contrib, fault_injection):
    work = os.path.join(module_work, "fleet")
    hosts, procs = {}, []
    try:
        for name, (_, spec) in FLEET.items():
            hosts[name] = Host(name, work, blkpolicyd, kvm_fixture, top, spec)
        prom_port = free_port()
        targets = "".join(f"      - targets: ['127.0.0.1:{h.port}']\n        labels: {{host: {name}}}\n"
                          for name, h in hosts.items())
        write(os.path.join(work, "prometheus.yml"),
              "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
              f"rule_files:\n  - {fleet_rules(contrib['rules'], os.path.join(work, 'rules.yml'))}\n"
              "scrape_configs:\n  - job_name: node\n    static_configs:\n" + targets)
        log = open(os.path.join(work, "prometheus.log"), "w")
        procs.append(subprocess.Popen([PROMETHEUS, f"--config.file={os.path.join(work, 'prometheus.yml')}",
                                       f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
                                       f"--web.listen-address=127.0.0.1:{prom_port}"],
                                      stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        prom = Prometheus(f"http://127.0.0.1:{prom_port}")
        v = prom.wait_query('count(blkpolicyd_up == 1)', pred=lambda v: v and v[0][1] == len(hosts),
                            what="every host scraped")
        assert v and v[0][1] == len(hosts), f"Prometheus scrapes every host's blkpolicyd: {v}"
        # what makes each of the last three its alert's host
        hosts["stopped"].daemon.stop()
        hosts["killed"].kill_as_systemd_would()
        hosts["stale"].daemon.signal(signal.SIGSTOP)
        yield {"prom": prom, "hosts": hosts}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for h in hosts.values():
            h.cleanup()
        path = os.path.join(work, "prometheus.log")
        if os.path.exists(path):
            with open(path) as f:
                print("--- prometheus.log\n" + f.read()[-2000:])


def firing(prom):
    """[(alertname, host, labels, annotations)] of the alerts firing now."""
    alerts = prom.get("/api/v1/alerts")["data"]["alerts"]
    return [(a["labels"]["alertname"], a["labels"].get("host"), a["labels"], a["annotations"])
            for a in alerts if a["state"] == "firing"]


def evaluations(prom):
    """How many times the rule group has been evaluated, as far as its last
    evaluation's time tells (Prometheus evaluates it every second)."""
    groups = prom.get("/api/v1/rules")["data"]["groups"]
    return groups[0]["lastEvaluation"] if groups else None


def test_each_alert_fires_once_on_its_host_and_nowhere_else(fleet):
    prom = fleet["prom"]
    expected = {(alert, host) for host, (alert, _) in FLEET.items() if alert}
    deadline = time.monotonic() + 90
    while True:
        now = firing(prom)
        if {(a, h) for a, h, _, _ in now} >= expected or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    missing = expected - {(a, h) for a, h, _, _ in now}
    assert not missing, f"every alert fires on the host of its scenario; missing: {sorted(missing)}; firing: {now}"
    # ten more evaluations of the rules: nothing else comes, on any host,
    # and each alert stays one per host (not one per disk)
    seen, most, evaluated = set(), {}, set()
    deadline = time.monotonic() + 60
    while len(evaluated) < 10 and time.monotonic() < deadline:
        now = firing(prom)
        seen |= {(a, h) for a, h, _, _ in now}
        for key in {(a, h) for a, h, _, _ in now}:
            most[key] = max(most.get(key, 0), sum(1 for a, h, _, _ in now if (a, h) == key))
        evaluated.add(evaluations(prom))
        time.sleep(0.2)
    assert len(evaluated) >= 10, f"the rules are evaluated every second: {evaluated}"
    assert seen == expected, \
        f"... and no other alert fires, on any host (quiet has none): {sorted(seen - expected)}"
    assert all(n == 1 for n in most.values()), \
        f"... each once per host, not per disk: {most}"


def test_the_alerts_say_the_count_and_what_to_run(fleet):
    by = {(a, h): (labels, ann) for a, h, labels, ann in firing(fleet["prom"])}
    labels, ann = by[("BlkpolicydSettingsFailed", "failed")]
    assert ann["summary"].startswith("127.0.0.1:") and ": 2 blkpolicyd setting(s) the kernel refused" in ann["summary"], \
        f"the failed host's alert counts its two refused read_ahead_kb writes: {ann}"
    labels, ann = by[("BlkpolicydDown", "killed")]
    assert labels.get("result") == "signal" and labels.get("status") == "KILL" and "signal killed KILL" in ann["summary"], \
        f"the killed host's alert says how it ended, from the stopped file ExecStopPost= wrote: {labels} {ann}"
    labels, ann = by[("BlkpolicydOtherWriters", "conflict")]
    assert ": 2 disk(s) whose settings another writer sets too" in ann["summary"], \
        f"the udev rule's two disks: {ann}"
    for (a, h), (labels, ann) in by.items():
        assert ann.get("runbook") and ann.get("summary") and labels.get("severity"), \
            f"{a} on {h} has a severity, a summary and a runbook line: {labels} {ann}"


def test_defaults_serve_no_per_device_series(fleet):
    v = fleet["prom"].query('{__name__=~"blkpolicyd_device_.*", host="quiet"}')
    assert v == [], f"per-device series are opt-in (metrics_per_device): {v}"
    v = fleet["prom"].query('blkpolicyd_devices_by_state{host="quiet"}')
    assert v and sum(x for _, x in v) == 4, f"... the host's disks by state, one state each: {v}"


def test_a_canary_is_counted_and_alerts_nothing(fleet):
    v = fleet["prom"].query('blkpolicyd_settings{host="quiet",result="canary"}')
    assert [x for _, x in v] == [2], f"the quiet host's canary would change read_ahead_kb on vda and loop0: {v}"
    v = fleet["prom"].query('blkpolicyd_settings{host="quiet",result="pending"}')
    assert [x for _, x in v] == [0], f"... and none of it is pending: {v}"


def test_metrics_stopped_leaves_a_running_daemons_file_alone(fleet):
    # ExecStopPost= runs after the daemon ended; by hand while one runs,
    # the state dir's lock says so and its file stays its own
    host = fleet["hosts"]["quiet"]
    r = subprocess.run([host.blkpolicyd, "--metrics-stopped", *host.args], capture_output=True, text=True,
                       env=dict(os.environ, SERVICE_RESULT="signal"), timeout=30)
    with open(os.path.join(host.textdir, "blkpolicyd.prom")) as f:
        text = f.read()
    assert r.returncode == 0 and "its metrics file is its own" in r.stdout + r.stderr, \
        f"--metrics-stopped while a daemon holds the state dir: nothing written, and it says why: {r}"
    assert "\nblkpolicyd_up 1\n" in text and "blkpolicyd_exit_info" not in text, \
        f"... the running daemon's file is untouched: {text[:400]}"


# ---------------------------------------------------------------------------
# The scrape of a 10,000-disk host with the defaults

SCALE_DEVICES = 10000
SCRAPE_MAX = 100 * 1024


def scale_tree(fixture, root, n):
    """The kvm-6.18 fixture and n more loop disks, each its own dev and
    uevent and loop0's queue/ by symlink (read only: --dry-run)."""
    shutil.copytree(fixture, root, symlinks=True)
    virt = os.path.join(root, "sys", "devices", "virtual", "block")
    lines = []
    for i in range(1000, 1000 + n):
        d = os.path.join(virt, f"loop{i}")
        os.mkdir(d)
        write(os.path.join(d, "dev"), f"7:{i}\n")
        write(os.path.join(d, "uevent"), f"MAJOR=7\nMINOR={i}\nDEVNAME=loop{i}\nDEVTYPE=disk\nDISKSEQ={i}\n")
        write(os.path.join(d, "diskseq"), f"{i}\n")
        for entry in ("queue", "mq", "size"):
            os.symlink(f"../loop0/{entry}", os.path.join(d, entry))
        os.symlink("../../../../class/block", os.path.join(d, "subsystem"))
        os.symlink(f"../devices/virtual/block/loop{i}", os.path.join(root, "sys", "block", f"loop{i}"))
        lines.append(f"   7 {i:7d} loop{i} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
    with open(os.path.join(root, "proc", "diskstats"), "a") as f:
        f.writelines(lines)


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return r.read()


def test_a_10000_disk_host_scrapes_small(module_work, blkpolicyd, kvm_fixture, top, fault_injection):
    work = os.path.join(module_work, "scale")
    root, textdir = os.path.join(work, "root"), os.path.join(work, "textfile")
    scale_tree(kvm_fixture, root, SCALE_DEVICES)
    os.makedirs(textdir)
    sizes = {}
    for per_device in ("no", "yes"):
        conf = write_conf(os.path.join(work, f"{per_device}.conf"),
                          f"[Daemon]\ntick_interval_ms = 200\nmetrics_textfile_dir = {textdir}\n"
                          f"metrics_every_ticks = 1\nmetrics_per_device = {per_device}\n")
        d = Daemon(blkpolicyd, work, ["--dry-run", "--config", conf, "--policy-dir", os.path.join(top, "policies"),
                                      *fixture_roots(root), "--state-dir", os.path.join(work, "state"),
                                      "--socket", os.path.join(work, "sock")], env={"BLKPOLICYD_FAKE_KERNEL": "1"})
        port, exporter = free_port(), None
        try:
            d.wait_for("READY=1", timeout=120)
            prom = os.path.join(textdir, "blkpolicyd.prom")
            deadline = time.monotonic() + 120
            while not (os.path.exists(prom) and "\nblkpolicyd_up 1\n" in open(prom).read()):
                assert time.monotonic() < deadline and d.proc.poll() is None, \
                    f"the daemon writes its textfile at 10,000 disks: {d.text()[-2000:]}"
                time.sleep(0.2)
            exporter = subprocess.Popen([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}",
                                         "--collector.disable-defaults", "--collector.textfile",
                                         f"--collector.textfile.directory={textdir}"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            body = None
            deadline = time.monotonic() + 30
            while body is None or b"blkpolicyd_devices " not in body:
                assert time.monotonic() < deadline, "node_exporter serves the textfile"
                try:
                    body = scrape(port)
                except OSError:
                    time.sleep(0.1)
            sizes[per_device] = len(body)
            assert f"blkpolicyd_devices {SCALE_DEVICES + 4}".encode() in body, \
                "the scrape counts every disk"
        finally:
            if exporter:
                exporter.kill()
                exporter.wait()
            d.stop(timeout=60)
            d.cleanup()
    print(f"node_exporter scrape at {SCALE_DEVICES} disks: {sizes['no']} bytes by default, "
          f"{sizes['yes']} with metrics_per_device = yes ({sizes['yes'] / sizes['no']:.0f}x)")
    assert sizes["no"] <= SCRAPE_MAX, \
        f"a 10,000-disk host's scrape with the defaults is at most 100 KB: {sizes}"
    assert sizes["yes"] > 10 * sizes["no"], \
        f"... and the per-device series, opt-in, are where the size was: {sizes}"
