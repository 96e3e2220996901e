# SPDX-License-Identifier: LGPL-2.1-or-later
"""A hostile admin against canaries ([Policy] mode = observe) on the fake
kernel (no root): canaries and enforcing files on the same settings in every
name order, files flipped between observe and enforce over many reloads in a
random order while the admin writes values by hand, and the views (device,
verify, metrics) held against each other. Every test asserts the "nothing
lost" rule: nothing a canary wants is ever written, and after a stop every
value is the one found before blkpolicyd's first write (or the admin's own).

The random tests take their seed from CANARY_ATTACK_SEED (default: a few
fixed ones), printed on failure."""
import glob
import os
import random
import signal
import threading
import time

import pytest

from blkptest import faketree
from blkptest.faketree import write
from blkptest.daemon import Daemon, control_call, wait_for

QUEUE_ATTRS = ("scheduler", "read_ahead_kb", "nr_requests", "rq_affinity", "nomerges", "wbt_lat_usec",
               "max_sectors_kb", "iostats", "add_random")
SEEDS = [int(s) for s in os.environ.get("CANARY_ATTACK_SEED", "1,2,3").split(",")]



def policy_text(match, queue, mode=None, extra=""):
    text = ""
    if mode:
        text += f"[Policy]\nmode = {mode}\n"
    text += f"[Match]\nname = {match}\n[Queue]\n"
    text += "".join(f"{k} = {v}\n" for k, v in queue.items())
    return text + extra


class Host(faketree.Workspace):
    """n loop disks on the fake kernel, as canary.py's Host: scheduler none,
    the fixture's queue values."""

    def __init__(self, blkpolicyd, fixture, work, n=3, conf="", fake="1", fixture_dir=None):
        fixture = fixture_dir or fixture
        super().__init__(blkpolicyd, fixture, work)
        self.disks = faketree.disks(n)
        self.conf = os.path.join(work, "blkpolicyd.conf")
        self.fake = fake
        faketree.make(fixture, self.root, n)
        for dev in self.disks:
            write(self.qfile(dev, "scheduler"), "[none] mq-deadline kyber bfq")
            try:
                os.rmdir(self.qfile(dev, "iosched"))
            except OSError:
                pass
        os.mkdir(self.state, 0o700)
        os.mkdir(self.policies)
        write(self.conf, "[Daemon]\ntick_interval_ms = 50\ndrift_sweep_seconds = 1\n" + conf)
        self.found = self.values()

    def policy(self, name, text):
        write(os.path.join(self.policies, name), text)

    def unpolicy(self, name):
        os.unlink(os.path.join(self.policies, name))

    def start(self, *extra, env=None):
        d = Daemon(self.blkpolicyd, self.work, self.daemon_args(self.conf, *extra),
                   env=dict({"BLKPOLICYD_FAKE_KERNEL": self.fake}, **(env or {})))
        self.running.append(d)
        d.wait_for("READY=1", timeout=60)
        return d

    def call(self, command, **kw):
        reply = control_call(self.sock_path, dict(command=command, **kw), timeout=30)
        assert reply["ok"], reply
        return reply["result"]

    def values(self, attrs=QUEUE_ATTRS):
        return {dev: {a: self.live(dev, a) for a in attrs} for dev in self.disks}


@pytest.fixture
def host(blkpolicyd, kvm_fixture, work, fault_injection):
    hosts = []

    def make(**kw):
        h = Host(blkpolicyd, kvm_fixture, work, **kw)
        hosts.append(h)
        return h
    yield make
    for h in hosts:
        h.cleanup()


class Poller(threading.Thread):
    """Reads the tree's values over and over while the test runs; any value
    forbidden(dev, attr, value) says no one but a canary would have written
    is kept."""

    def __init__(self, h, forbidden):
        super().__init__(daemon=True)
        self.h, self.forbidden = h, forbidden
        self.seen = []
        self.stop = threading.Event()
        self.reads = 0

    def run(self):
        while not self.stop.is_set():
            for dev in self.h.disks:
                for a in QUEUE_ATTRS:
                    try:
                        v = self.h.live(dev, a)
                    except (OSError, ValueError):
                        continue
                    if v is not None and self.forbidden(dev, a, v):
                        self.seen.append((dev, a, v))
                self.reads += 1

    def finish(self):
        self.stop.set()
        self.join(10)
        return self.seen


def drain(d):
    """Reads every sd_notify message queued: a double SIGHUP says READY=1
    twice, and a full notify socket would block the daemon's sd_notify()."""
    d.notify.setblocking(False)
    try:
        while True:
            d.notify.recv(4096)
    except BlockingIOError:
        pass
    finally:
        d.notify.setblocking(True)


def settle(h, d, timeout=30, strict=True):
    """Until two device listings in a row agree and no pass is in flight."""
    def quiet():
        a = [h.call("device", device=x) for x in h.disks]
        time.sleep(0.2)
        b = [h.call("device", device=x) for x in h.disks]
        return a == b and not (strict and any(s["result"] in ("planned", "retry") for x in b
                                              for s in x["settings"].values() if x["policy"]))
    wait_for(quiet, timeout, "two listings alike, nothing planned")


def canary_planned(dev):
    c = dev.get("canary")
    if not c:
        return {}
    return {k: v for k, v in c["settings"].items() if v["result"] == "planned"}


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in the metrics text:\n{text}")


# ---------------------------------------------------------------------------
# 1. A canary and an enforcing file on the same setting, in both name orders

@pytest.mark.parametrize("canary_first", [True, False], ids=["canary-first", "canary-last"])
def test_same_setting_either_order(host, canary_first):
    h = host()
    cname, ename = ("10-canary.policy", "50-enforce.policy") if canary_first else \
        ("90-canary.policy", "50-enforce.policy")
    h.policy(ename, policy_text("loop*", {"read_ahead_kb": "256", "nomerges": "1"}))
    h.policy(cname, policy_text("loop*", {"read_ahead_kb": "4096", "nomerges": "1", "add_random": "1"},
                                mode="observe"))
    poll = Poller(h, lambda dev, a, v: (a, v) in {("read_ahead_kb", "4096"), ("add_random", "1")})
    poll.start()
    d = h.start()
    wait_for(lambda: all(h.live(x, "read_ahead_kb") == "256" and h.live(x, "nomerges") == "1" for x in h.disks),
             30, "the enforcing file applied")
    settle(h, d)
    dev = h.call("device", device="loop0")
    c = dev["canary"]
    assert c and c["policy"] == cname, dev
    want = {"add_random"} if canary_first else {"add_random", "read_ahead_kb"}
    assert set(c["settings"]) == want, \
        f"a canary earlier in name order is overridden by the enforcing file on read_ahead_kb: {c}"
    assert dev["settings"]["read_ahead_kb"]["source"] == ename, dev["settings"]
    assert d.stop() == 0
    assert poll.finish() == [], "a canary's value was written"
    assert h.values() == h.found, "the stop puts back every value found"


# ---------------------------------------------------------------------------
# 2. Canary switching the scheduler under an enforcing file's iosched tunables

def test_canary_scheduler_under_enforced_iosched(host):
    """50 enforces mq-deadline with read_expire; the canary (90) would run
    kyber. Nothing of kyber's is written, mq-deadline's read_expire holds, and
    the canary view names the scheduler switch."""
    h = host()
    h.policy("50-dl.policy", policy_text("loop*", {"scheduler": "mq-deadline"},
                                         extra="[mq-deadline]\nread_expire = 100\nfifo_batch = 8\n"))
    h.policy("90-kyber.policy", policy_text("loop*", {"scheduler": "kyber"}, mode="observe",
                                            extra="[kyber]\nread_lat_nsec = 1234567\n"))
    poll = Poller(h, lambda dev, a, v: a == "scheduler" and v == "kyber")
    poll.start()
    d = h.start()
    wait_for(lambda: all(h.live(x, "scheduler") == "mq-deadline" and h.live(x, "iosched/fifo_batch") == "8"
                         for x in h.disks), 30, "mq-deadline and its tunables applied")
    settle(h, d)
    dev = h.call("device", device="loop1")
    c = dev["canary"]["settings"]
    assert c["scheduler"]["target"] == "kyber" and c["scheduler"]["result"] == "planned", c
    assert "iosched/read_lat_nsec" in c, f"the canary's own kyber tunable is what it would set: {c}"
    assert dev["settings"]["iosched/read_expire"]["result"] in ("applied", "unchanged"), dev["settings"]
    # verify and metrics say the same as the device views
    planned = sum(len(canary_planned(h.call("device", device=x))) for x in h.disks)
    assert h.call("verify")["canary"] == len(h.disks)
    assert metric(h.call("metrics")["text"], 'blkpolicyd_settings{result="canary"}') == planned
    assert d.stop() == 0
    assert poll.finish() == []
    assert h.values() == h.found
    for x in h.disks:
        assert not os.path.exists(h.qfile(x, "iosched")), "none again: no iosched/"


# ---------------------------------------------------------------------------
# 3. mq-deadline+dispatch_direct: what a canary's promotion would change

def test_canary_dropping_dispatch_direct_is_a_change(host, fixtures_dir, blkpolicyd, work, fault_injection):
    """An enforcing 50 sets scheduler = mq-deadline+dispatch_direct (so
    dispatch_direct = 1 is written); a canary 90 sets scheduler = mq-deadline.
    Promoting the canary takes dispatch_direct out of what is wanted (it goes
    back to what was found), so the canary would change it; the preview
    must say so, or verify shows 'no change' for a file whose promotion
    writes."""
    h = host(fake="dispatch_direct")
    h.policy("50-dd.policy", policy_text("loop*", {"scheduler": "mq-deadline+dispatch_direct mq-deadline"}))
    h.policy("90-plain.policy", policy_text("loop*", {"scheduler": "mq-deadline"}, mode="observe"))
    d = h.start()
    wait_for(lambda: h.call("status")["kernel"]["dispatch_direct"] == "yes", 30, "dispatch_direct learned")
    wait_for(lambda: h.call("device", device="loop0")["settings"].get("iosched/dispatch_direct", {})
             .get("result") in ("applied", "unchanged"), 30, "dispatch_direct written")
    settle(h, d)
    preview = h.call("device", device="loop0")["canary"]
    # promote it, and see what the promotion changes
    before = h.values(("scheduler", "iosched/dispatch_direct"))
    h.policy("90-plain.policy", policy_text("loop*", {"scheduler": "mq-deadline"}))
    d.reload()
    settle(h, d)
    after = h.values(("scheduler", "iosched/dispatch_direct"))
    changed = {a for a in ("scheduler", "iosched/dispatch_direct") if before["loop0"][a] != after["loop0"][a]}
    shown = set(preview["settings"]) if preview else set()
    assert changed <= shown, \
        f"the promotion changed {changed} ({before['loop0']} -> {after['loop0']}), the canary showed {preview}"


# ---------------------------------------------------------------------------
# 4. Excluded and bio-based devices: no canary

def test_canary_on_excluded_device(host):
    h = host(conf="exclude = loop2\n")
    h.policy("50-base.policy", policy_text("loop*", {"read_ahead_kb": "256"}))
    h.policy("90-canary.policy", policy_text("loop*", {"read_ahead_kb": "2048"}, mode="observe"))
    d = h.start()
    wait_for(lambda: h.live("loop0", "read_ahead_kb") == "256", 30, "applied")
    settle(h, d)
    ex = h.call("device", device="loop2")
    assert ex["managed"] is False and ex["canary"] is None, ex
    v = h.call("verify")
    assert v["canary"] == 2, v
    assert metric(h.call("metrics")["text"], 'blkpolicyd_settings{result="canary"}') == 2
    assert h.live("loop2", "read_ahead_kb") == h.found["loop2"]["read_ahead_kb"]


# ---------------------------------------------------------------------------
# 5. Canary on a [Dynamic] device

DYN = ("[Dynamic]\nenter = iops > 100000000\nenter_ticks = 1\nleave = iops < 1\nleave_ticks = 1\n"
       "[Busy]\nnr_requests = 32\n")


def test_canary_with_dynamic(host):
    """The enforcing file has [Dynamic]; a canary has its own [Dynamic] too,
    which is never run. The canary shows its base settings, nothing is
    written of its, and a stop restores everything."""
    h = host()
    h.policy("50-dyn.policy", policy_text("loop*", {"scheduler": "mq-deadline", "read_ahead_kb": "256"},
                                          extra=DYN))
    h.policy("90-canary.policy", policy_text("loop*", {"read_ahead_kb": "8192", "wbt_lat_usec": "1111"},
                                             mode="observe",
                                             extra=DYN.replace("iops > 100000000", "iops >= 0")
                                             .replace("nr_requests = 32", "nr_requests = 40")))
    poll = Poller(h, lambda dev, a, v: (a, v) in {("read_ahead_kb", "8192"), ("wbt_lat_usec", "1111"),
                                                   ("nr_requests", "40")})
    poll.start()
    d = h.start()
    wait_for(lambda: all(h.live(x, "read_ahead_kb") == "256" for x in h.disks), 30, "applied")
    time.sleep(1.5)         # ticks: a canary's [Dynamic] that would enter at once must not
    settle(h, d)
    dev = h.call("device", device="loop0")
    assert dev["dynamic"] is None or dev["dynamic"]["state"] == "base", dev["dynamic"]
    c = dev["canary"]["settings"]
    assert set(c) == {"read_ahead_kb", "wbt_lat_usec"}, c
    assert d.stop() == 0
    assert poll.finish() == []
    assert h.values() == h.found


# ---------------------------------------------------------------------------
# 6. Random flips between observe and enforce, hand writes, then a stop

FLIPPED = {
    # name: (match, queue, extra)
    "20-a.policy": ("loop[01]", {"read_ahead_kb": "512", "nomerges": "1"}, ""),
    "40-b.policy": ("loop[12]", {"scheduler": "kyber", "wbt_lat_usec": "75000"}, ""),
    "60-c.policy": ("loop*", {"read_ahead_kb": "768", "nr_requests": "64"}, ""),
    "70-d.policy": ("loop[02]", {"scheduler": "mq-deadline"}, "[mq-deadline]\nfifo_batch = 4\n"),
}
# always canaries, with values nothing else ever sets
CANARIES = {
    "10-early.policy": ("loop*", {"read_ahead_kb": "4000", "rq_affinity": "2"}, ""),
    "95-late.policy": ("loop*", {"scheduler": "bfq", "read_ahead_kb": "3000", "add_random": "1",
                                 "max_sectors_kb": "77"}, "[bfq]\nslice_idle = 3\n"),
}
BASE = ("loop*", {"scheduler": "mq-deadline", "read_ahead_kb": "256"}, "")
# what only a canary would write (the admin never writes these)
MARKERS = {("read_ahead_kb", "4000"), ("read_ahead_kb", "3000"), ("rq_affinity", "2"), ("scheduler", "bfq"),
           ("add_random", "1"), ("iosched/slice_idle", "3")}
ADMIN = {"max_sectors_kb": ("77", "99", "1280"), "iostats": ("0", "1")}


def expected_enforced(h, modes):
    """dev -> attr -> value the enforcing files give (later wins)."""
    import fnmatch
    files = [("05-base.policy", BASE)] + sorted(
        [(n, FLIPPED[n]) for n in FLIPPED if modes[n] == "enforce"])
    files.sort()
    out = {}
    for dev in h.disks:
        want = {}
        for _, (match, queue, _extra) in files:
            if fnmatch.fnmatch(dev, match):
                want.update(queue)
        out[dev] = want
    return out


ADMIN_HOSTILE = dict(ADMIN, nomerges=("2",), wbt_lat_usec=("5555",), read_ahead_kb=("1111",))


@pytest.mark.parametrize("hostile", [False, True], ids=["admin-on-canary-settings", "admin-on-enforced-settings"])
@pytest.mark.parametrize("seed", SEEDS)
def test_random_flips_lose_nothing(host, seed, hostile):
    """hostile: the admin also writes by hand what enforcing files set; what
    the admin wrote last is theirs after the stop."""
    rnd = random.Random(seed)
    admin = ADMIN_HOSTILE if hostile else ADMIN
    h = host()
    modes = {n: rnd.choice(("observe", "enforce")) for n in FLIPPED}

    def write_all():
        for n, (m, q, e) in FLIPPED.items():
            h.policy(n, policy_text(m, q, mode=modes[n] if rnd.random() < 0.8 or modes[n] == "observe" else None,
                                    extra=e))
    h.policy("05-base.policy", policy_text(*BASE[:2], extra=BASE[2]))
    for n, (m, q, e) in CANARIES.items():
        h.policy(n, policy_text(m, q, mode="observe", extra=e))
    write_all()
    poll = Poller(h, lambda dev, a, v: (a, v) in MARKERS)
    poll.start()
    d = h.start()
    admin_last = {}
    history = []
    try:
        for rnd_i in range(12):
            for n in FLIPPED:
                if rnd.random() < 0.5:
                    modes[n] = "observe" if modes[n] == "enforce" else "enforce"
            write_all()
            # the admin, by hand, on what only canaries want
            for _ in range(rnd.randrange(3)):
                dev, a = rnd.choice(h.disks), rnd.choice(list(admin))
                v = rnd.choice(admin[a])
                write(h.qfile(dev, a), v)
                admin_last[(dev, a)] = v
                history.append((rnd_i, dev, a, v, dict(modes)))
            # what an earlier double SIGHUP said last is read first: a
            # reload() waits for the READY=1 of its own
            drain(d)
            if rnd.random() < 0.5:
                d.reload()
            else:
                d.signal(signal.SIGHUP)     # the next one may land while its passes run
                time.sleep(rnd.random() * 0.2)      # a random interleaving, not a wait
                d.reload()
            if os.environ.get("CANARY_ATTACK_DEBUG"):
                print(f"round {rnd_i} modes {modes} admin {[x for x in history if x[0] == rnd_i]}")
                for f in sorted(glob.glob(os.path.join(h.state, "**"), recursive=True)):
                    if os.path.isfile(f):
                        print(f"  {f}: {open(f, errors='replace').read()!r}")
            want = expected_enforced(h, modes)

            def holds():
                for dev in h.disks:
                    for a, v in want[dev].items():
                        if a == "nr_requests" or any(x == dev and b not in ADMIN for x, b in admin_last):
                            continue    # a scheduler switch resets it: the kernel's doing; a device the
                                        # admin overrode is left alone as a whole (until resume)
                        if h.live(dev, a) != v:
                            return False
                return True
            wait_for(holds, 30, f"round {rnd_i} (seed {seed}) modes {modes}: {want} vs {h.values()}")
            settle(h, d, strict=not hostile)
            # the views against each other
            devs = {x: h.call("device", device=x) for x in h.disks}
            n_planned = sum(len(canary_planned(devs[x])) for x in h.disks)
            n_devs = sum(1 for x in h.disks if canary_planned(devs[x]))
            v = h.call("verify")
            text = h.call("metrics")["text"]
            assert v["canary"] == n_devs, f"seed {seed} round {rnd_i}: verify {v} vs devices {devs}"
            assert metric(text, 'blkpolicyd_settings{result="canary"}') == n_planned, \
                f"seed {seed} round {rnd_i}: metrics vs devices"
            for x in h.disks:
                for a, s in (devs[x].get("canary") or {}).get("settings", {}).items():
                    # an enforcing file's setting only as what a canary's
                    # scheduler brings along or leaves (taken or not)
                    brought = a.startswith("iosched/") and s["source"] not in CANARIES
                    assert s["source"] in CANARIES or modes.get(s["source"]) == "observe" or brought, \
                        f"an enforcing file's setting shown as a canary's: {x} {a} {s} modes {modes}"
    finally:
        code = d.stop(timeout=30)
        seen = poll.finish()
    assert code == 0
    assert seen == [], f"seed {seed}: a canary's value was written: {sorted(set(seen))}"
    want = {dev: dict(h.found[dev]) for dev in h.disks}
    for (dev, a), v in admin_last.items():
        want[dev][a] = v
    got = h.values()
    diff = {(x, a): (got[x][a], want[x][a]) for x in h.disks for a in QUEUE_ATTRS if got[x][a] != want[x][a]}
    log = [line for line in d.text().splitlines()
           if any(line.startswith(x + ":") and a.split("/")[-1] in line for x, a in diff) or "Reloaded" in line]
    assert diff == {}, f"seed {seed}: after the stop (got, want): {diff}; admin wrote {history}; log: {log}"
    assert not any(os.path.exists(h.qfile(x, "iosched")) for x in h.disks)


# ---------------------------------------------------------------------------
# 7. A host in observe, canaries, then reloaded to enforce

def test_observe_host_then_enforce(host):
    h = host(conf="mode = observe\n")
    h.policy("50-base.policy", policy_text("loop*", {"scheduler": "mq-deadline", "read_ahead_kb": "256"}))
    h.policy("90-canary.policy", policy_text("loop*", {"read_ahead_kb": "4000", "add_random": "1"},
                                             mode="observe"))
    poll = Poller(h, lambda dev, a, v: (a, v) in {("read_ahead_kb", "4000"), ("add_random", "1")})
    poll.start()
    d = h.start()
    wait_for(lambda: h.call("verify")["pending"] == len(h.disks), 30, "every disk pending")
    assert h.values() == h.found, "observe writes nothing"
    v = h.call("verify")
    assert v["canary"] == len(h.disks), v
    # the canary's changes are over the enforcing plan: read_ahead_kb 4000, add_random 1
    c = h.call("device", device="loop0")["canary"]["settings"]
    assert set(c) == {"read_ahead_kb", "add_random"}, c
    write(h.conf, "[Daemon]\ntick_interval_ms = 50\ndrift_sweep_seconds = 1\n")
    d.reload()
    wait_for(lambda: all(h.live(x, "read_ahead_kb") == "256" for x in h.disks), 30, "enforced")
    settle(h, d)
    assert d.stop() == 0
    assert poll.finish() == []
    assert h.values() == h.found


# ---------------------------------------------------------------------------
# 8. --once and --dry-run

def test_once_dry_run_reports_canary(host, blkpolicyd):
    import json
    import subprocess
    h = host()
    h.policy("50-base.policy", policy_text("loop*", {"read_ahead_kb": "256"}))
    h.policy("90-canary.policy", policy_text("loop*", {"read_ahead_kb": "4000", "add_random": "1"},
                                             mode="observe"))
    args = [a for a in h.daemon_args(h.conf) if a]
    r = subprocess.run([blkpolicyd, *args, "--once", "--dry-run"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, BLKPOLICYD_FAKE_KERNEL="1"))
    assert r.returncode == 0, r.stderr
    assert h.values() == h.found, "--dry-run writes nothing"
    out = json.loads(r.stdout)
    devs = out["devices"] if isinstance(out, dict) and "devices" in out else out
    loop0 = [x for x in devs if x.get("name") == "loop0"][0]
    assert loop0["canary"] and set(loop0["canary"]["settings"]) == {"read_ahead_kb", "add_random"}, loop0
    r = subprocess.run([blkpolicyd, *args, "--once"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, BLKPOLICYD_FAKE_KERNEL="1"))
    assert r.returncode == 0, r.stderr
    assert all(h.live(x, "read_ahead_kb") == "256" and h.live(x, "add_random") == "0" for x in h.disks), \
        h.values()


# ---------------------------------------------------------------------------
# 9. The rollout the docs give: preview one file with verify --policy

def test_documented_verify_policy_preview(host, blkpolicyctl):
    """docs/service.md and docs/policy-language.md (commit 96c2fb7): step 1
    of the rollout is `blkpolicyctl verify --policy 90-new.policy`, exit 0
    on nothing, 4 on the changes it lists. blkpolicyctl has no such
    option."""
    import subprocess
    h = host()
    h.policy("50-base.policy", policy_text("loop*", {"read_ahead_kb": "256"}))
    d = h.start()
    wait_for(lambda: h.live("loop0", "read_ahead_kb") == "256", 30, "applied")
    new = os.path.join(h.work, "90-new.policy")
    write(new, policy_text("loop*", {"read_ahead_kb": "4000"}))
    r = subprocess.run([blkpolicyctl, "--socket", h.sock_path, "verify", "--policy", new], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode in (0, 4) and "4000" in r.stdout, \
        f"the documented preview: exit {r.returncode}, {r.stdout!r} {r.stderr!r}"
    assert h.values() == {x: dict(h.found[x], read_ahead_kb="256") for x in h.disks}, "a preview writes nothing"
    assert d.proc.poll() is None


# ---------------------------------------------------------------------------
# 10. Reloads that swap canaries (new names, the old freed) while views run

def test_reload_swaps_canaries_under_views(host):
    """Every reload removes the canary file and adds one of another name
    (the old set's names freed once nothing holds it), with passes in
    flight, while a client asks for device, explain, verify and metrics
    without pause. Run it with the sanitizer build for use-after-free of a
    plan's canary name."""
    h = host(n=6)
    h.policy("50-base.policy", policy_text("loop*", {"scheduler": "mq-deadline", "read_ahead_kb": "256"}))
    h.policy("90-canary-0.policy", policy_text("loop*", {"read_ahead_kb": "4000"}, mode="observe"))
    poll = Poller(h, lambda dev, a, v: a == "read_ahead_kb" and v in ("4000", "4001", "4002"))
    poll.start()
    d = h.start()
    stop = threading.Event()
    errors = []

    def client():
        rnd = random.Random(7)
        while not stop.is_set():
            cmd = rnd.choice(("device", "explain", "verify", "metrics", "devices", "status"))
            kw = {"device": rnd.choice(h.disks)} if cmd in ("device", "explain") else {}
            try:
                r = control_call(h.sock_path, dict(command=cmd, **kw), timeout=30)
            except (OSError, ValueError) as e:
                if d.proc.poll() is not None:
                    errors.append(f"{cmd}: daemon gone: {e}")
                    return
                continue
            if not r.get("ok"):
                errors.append(f"{cmd}: {r}")
                continue
            res = r["result"]
            if cmd == "device" and res.get("canary"):
                name = res["canary"]["policy"]
                if not name.startswith("9") or not name.endswith(".policy"):
                    errors.append(f"garbage canary name {name!r}")
    t = threading.Thread(target=client, daemon=True)
    t.start()
    rnd = random.Random(11)
    for i in range(1, 31):
        os.unlink(os.path.join(h.policies, f"9{(i - 1) % 10}-canary-{i - 1}.policy"))
        h.policy(f"9{i % 10}-canary-{i}.policy",
                 policy_text(rnd.choice(("loop*", "loop[0-2]", "loop5")), {"read_ahead_kb": f"400{i % 3}",
                             "scheduler": rnd.choice(("kyber", "mq-deadline", "none"))}, mode="observe"))
        if i % 3 == 0:
            h.policy("50-base.policy", policy_text("loop*", {"scheduler": rnd.choice(("mq-deadline", "kyber")),
                                                             "read_ahead_kb": "256"}))
        d.signal(signal.SIGHUP)
        time.sleep(rnd.random() * 0.15)
        drain(d)
    time.sleep(1)
    drain(d)
    stop.set()
    t.join(30)
    assert errors == [], errors[:5]
    assert d.proc.poll() is None, d.text()[-3000:]
    assert d.stop(timeout=30) == 0, d.text()[-3000:]
    assert poll.finish() == []
    assert h.values() == h.found


# ---------------------------------------------------------------------------
# 11. What a canary shows against what its promotion changes

def in_force(dev):
    """attr -> target of the settings the device's plan holds in force."""
    return {a: s["target"] for a, s in dev["settings"].items() if s["result"] in ("applied", "unchanged")}


PROMOTIONS = {
    # an enforcing file's tunable of the scheduler the canary would run:
    # unsupported now, written once the canary is promoted
    "iosched-of-canary-scheduler": (
        policy_text("loop*", {"scheduler": "kyber"}, extra="[mq-deadline]\nfifo_batch = 8\n"),
        policy_text("loop*", {"scheduler": "mq-deadline"}, mode="{mode}"), "1"),
    # the enforcing file's mq-deadline+dispatch_direct gives dispatch_direct
    # = 1; the canary's plain mq-deadline takes it out of what is wanted
    "dispatch-direct-dropped": (
        policy_text("loop*", {"scheduler": "mq-deadline+dispatch_direct mq-deadline"}),
        policy_text("loop*", {"scheduler": "mq-deadline"}, mode="{mode}"), "dispatch_direct"),
    # the plain case, as a control: the canary's own settings
    "own-settings": (
        policy_text("loop*", {"scheduler": "mq-deadline", "read_ahead_kb": "256"}),
        policy_text("loop*", {"read_ahead_kb": "1024", "add_random": "1"}, mode="{mode}"), "1"),
}


@pytest.mark.parametrize("case", list(PROMOTIONS))
def test_canary_shows_what_its_promotion_changes(host, case):
    """Docs: device shows "each setting it would change". Promote the
    canary and compare the plan in force before and after: every setting
    that comes into force, changes target, or leaves the plan must have been
    in the canary's listing."""
    enforcing, canary, fake = PROMOTIONS[case]
    h = host(fake=fake)
    if case == "dispatch-direct-dropped":
        # the admin's mq-deadline with dispatch_direct = 0, found before blkpolicyd
        for x in h.disks:
            write(h.qfile(x, "scheduler"), "none [mq-deadline] kyber bfq")
            write(h.qfile(x, "iosched/dispatch_direct"), "0")
            write(h.qfile(x, "nr_requests"), "256")
        h.found = h.values()
    h.policy("50-enforce.policy", enforcing)
    h.policy("90-canary.policy", canary.format(mode="observe"))
    d = h.start()
    if case == "dispatch-direct-dropped":
        wait_for(lambda: h.call("status")["kernel"]["dispatch_direct"] == "yes", 30, "dispatch_direct learned")
        wait_for(lambda: "iosched/dispatch_direct" in in_force(h.call("device", device="loop0")), 30,
                 "dispatch_direct in force")
    settle(h, d)
    dev = h.call("device", device="loop0")
    before, shown = in_force(dev), set(canary_planned(dev))
    h.policy("90-canary.policy", canary.format(mode="enforce"))
    d.reload()
    settle(h, d)
    after = in_force(h.call("device", device="loop0"))
    changed = {a for a in set(before) | set(after) if before.get(a) != after.get(a)}
    if case == "dispatch-direct-dropped":
        assert h.live("loop0", "iosched/dispatch_direct") == "0", "given back: the value found"
        assert "iosched/dispatch_direct" in shown, \
            f"the promotion writes dispatch_direct 1 -> 0 (the value found); the canary showed {sorted(shown)}"
    assert changed <= shown, \
        f"{case}: the promotion changed {sorted(changed)} ({before} -> {after}); the canary showed {sorted(shown)}"
    assert d.stop() == 0
    assert h.values() == h.found, "a stop puts back every value found"


# ---------------------------------------------------------------------------
# 12. A file turned canary gives back as a removed file does, admin or not

@pytest.mark.parametrize("how", ["removed", "observe"])
def test_turned_canary_is_as_removed_after_admin_write(host, how):
    """50 enforces read_ahead_kb = 256; the admin writes 999 by hand
    (overridden); then 50 is removed, or made a canary. The docs: a file
    turned canary is no longer wanted 'as for a removed file'; both must
    leave the disk the same."""
    h = host()
    text = policy_text("loop*", {"read_ahead_kb": "256", "nomerges": "1"})
    h.policy("50-base.policy", text)
    d = h.start()
    wait_for(lambda: all(h.live(x, "read_ahead_kb") == "256" for x in h.disks), 30, "applied")
    write(h.qfile("loop0", "read_ahead_kb"), "999")
    wait_for(lambda: h.call("device", device="loop0")["settings"]["read_ahead_kb"]["result"] == "overridden",
             30, "the admin's write seen")
    if how == "removed":
        h.unpolicy("50-base.policy")
    else:
        h.policy("50-base.policy", "[Policy]\nmode = observe\n" + text)
    d.reload()
    wait_for(lambda: all(h.live(x, "nomerges") == "0" for x in h.disks), 30, "nomerges put back")
    time.sleep(0.5)
    got = h.values()
    assert got["loop0"]["read_ahead_kb"] == "999", f"{how}: the admin's own value is left to the admin: {got}"
    assert all(got[x]["read_ahead_kb"] == "128" for x in ("loop1", "loop2")), got
    assert d.stop() == 0
    assert h.values()["loop0"]["read_ahead_kb"] == "999"


def test_explain_shows_canary(host):
    h = host()
    h.policy("50-base.policy", policy_text("loop*", {"read_ahead_kb": "256"}))
    h.policy("90-canary.policy", policy_text("loop*", {"read_ahead_kb": "4000"}, mode="observe"))
    h.start()
    wait_for(lambda: h.live("loop0", "read_ahead_kb") == "256", 30, "applied")
    e = h.call("explain", device="loop0")
    modes = {p["name"]: p["mode"] for p in e["policies"]}
    assert modes == {"50-base.policy": "enforce", "90-canary.policy": "observe"}, e["policies"]
    assert e["canary"]["settings"]["read_ahead_kb"]["target"] == "4000", e.get("canary")


# ---------------------------------------------------------------------------
# 13. Two canaries on a disk: the one named is the one that changes something

def test_two_canaries_named(host):
    """10-a (canary) would set add_random = 1; 95-b (canary) sets
    read_ahead_kb to what 50 enforces already, so changes nothing. The
    device's canary names only one file (plan->canary: the last matching
    canary), 95-b, while every setting listed is 10-a's."""
    h = host()
    h.policy("10-a.policy", policy_text("loop*", {"add_random": "1"}, mode="observe"))
    h.policy("50-base.policy", policy_text("loop*", {"read_ahead_kb": "256"}))
    h.policy("95-b.policy", policy_text("loop*", {"read_ahead_kb": "256"}, mode="observe"))
    h.start()
    wait_for(lambda: h.live("loop0", "read_ahead_kb") == "256", 30, "applied")
    c = h.call("device", device="loop0")["canary"]
    sources = {s["source"] for s in c["settings"].values()}
    assert sources == {"10-a.policy"}, c
    assert c["policy"] in sources, f"the canary named is not the one whose changes are listed: {c}"


# ---------------------------------------------------------------------------
# 14. A busy [Dynamic] device with a canary on what [Busy] sets

BUSY_DYN = ("[Dynamic]\nenter = iops >= 0\nenter_ticks = 1\nleave = iops < 0\nleave_ticks = 1\nmin_dwell_ticks = 1\n"
            "[Busy]\nnr_requests = 32\nread_ahead_kb = 64\n")


def test_canary_on_busy_dynamic_device(host):
    h = host()
    h.policy("50-dyn.policy", policy_text("loop*", {"read_ahead_kb": "256"}, extra=BUSY_DYN))
    h.policy("90-canary.policy", policy_text("loop*", {"read_ahead_kb": "8192", "nr_requests": "40",
                                                        "wbt_lat_usec": "1111"}, mode="observe"))
    poll = Poller(h, lambda dev, a, v: (a, v) in {("read_ahead_kb", "8192"), ("nr_requests", "40"),
                                                   ("wbt_lat_usec", "1111")})
    poll.start()
    d = h.start()
    try:
        wait_for(lambda: (h.call("device", device="loop0")["dynamic"] or {}).get("state") == "busy", 20,
                 "loop0 busy")
    except AssertionError:
        pytest.skip("no flip to busy on this fake tree (no diskstats movement)")
    wait_for(lambda: h.live("loop0", "read_ahead_kb") == "64", 20, "busy settings applied")
    c = h.call("device", device="loop0")["canary"]["settings"]
    # busy is a layer above every file's base: the canary changes only wbt_lat_usec now
    assert set(c) == {"wbt_lat_usec"}, c
    assert d.stop() == 0
    assert poll.finish() == []
    assert h.values() == h.found


# ---------------------------------------------------------------------------
# 15. A pass in flight: the canary vanishes from device, verify and metrics

def test_canary_while_pass_in_flight(host):
    """loop0's pass is held (a slow queue: fault DELAY on its read_ahead_kb
    write after a reload). The canary would still set add_random = 1 on it;
    device_view() returns before view_canaries() for a pass in flight, so
    the canary shows "would change: nothing", verify counts 2 devices and
    metrics 2 settings: a gauge that drops at every pass."""
    h = host()
    h.policy("50-base.policy", policy_text("loop*", {"read_ahead_kb": "256"}))
    h.policy("90-canary.policy", policy_text("loop*", {"add_random": "1"}, mode="observe"))
    d = h.start(env={"BLKPOLICYD_FAULTS": f"write:{h.root}/*loop0/queue/read_ahead_kb:DELAY=4000:1:1"})
    wait_for(lambda: all(h.live(x, "read_ahead_kb") == "256" for x in h.disks), 30, "applied")
    assert h.call("verify")["canary"] == 3
    h.policy("50-base.policy", policy_text("loop*", {"read_ahead_kb": "300"}))
    d.signal(signal.SIGHUP)
    wait_for(lambda: "held for" in d.text(), 10, "loop0's write held")
    dev = h.call("device", device="loop0")
    v = h.call("verify")
    n = metric(h.call("metrics")["text"], 'blkpolicyd_settings{result="canary"}')
    assert "add_random" in dev["canary"]["settings"], f"in flight: {dev['canary']}"
    assert v["canary"] == 3 and n == 3, (v, n)
    d.wait_for("READY=1", 30)


# ---------------------------------------------------------------------------
# 16. A canary matching bio-based disks (dm-0, zram0 of the fixture)

def test_canary_on_bio_based(host):
    h = host()
    h.policy("50-base.policy", policy_text("*", {"read_ahead_kb": "256"}))
    h.policy("90-canary.policy", policy_text("*", {"read_ahead_kb": "4000", "scheduler": "kyber"}, mode="observe"))
    args = h.daemon_args(h.conf)
    args[args.index("--device") + 1] = "*"
    d = Daemon(h.blkpolicyd, h.work, args, env={"BLKPOLICYD_FAKE_KERNEL": "1"})
    h.running.append(d)
    d.wait_for("READY=1", timeout=60)
    wait_for(lambda: h.live("loop0", "read_ahead_kb") == "256", 30, "applied")
    names = [x["name"] for x in h.call("devices")["devices"]] if isinstance(h.call("devices"), dict) else []
    for bio in ("dm-0", "zram0"):
        if names and bio not in names:
            continue
        dev = h.call("device", device=bio)
        assert dev["managed"] is False and dev["canary"] is None, dev
    v = h.call("verify")
    assert all(x["name"] not in ("dm-0", "zram0") for x in v["devices"]), v
    n = metric(h.call("metrics")["text"], 'blkpolicyd_settings{result="canary"}')
    planned = sum(len(canary_planned(h.call("device", device=x["name"]))) for x in v["devices"])
    assert n == planned, (n, planned)
    assert d.stop() == 0


# ---------------------------------------------------------------------------
# 17. mq-deadline+dispatch_direct in a canary

def test_canary_dispatch_direct_never_written(host):
    """Found: mq-deadline, dispatch_direct = 0. 50 enforces mq-deadline; the
    canary 90 wants mq-deadline+dispatch_direct. dispatch_direct = 1 is
    shown as the canary's change and never written."""
    h = host(fake="dispatch_direct")
    for x in h.disks:
        write(h.qfile(x, "scheduler"), "none [mq-deadline] kyber bfq")
        write(h.qfile(x, "iosched/dispatch_direct"), "0")
        write(h.qfile(x, "nr_requests"), "256")
    h.found = h.values()
    h.policy("50-dl.policy", policy_text("loop*", {"scheduler": "mq-deadline", "read_ahead_kb": "256"}))
    h.policy("90-dd.policy", policy_text("loop*", {"scheduler": "mq-deadline+dispatch_direct mq-deadline"},
                                         mode="observe"))
    seen = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            for x in h.disks:
                try:
                    with open(h.qfile(x, "iosched/dispatch_direct")) as f:
                        if f.read().strip() == "1":
                            seen.append(x)
                except OSError:
                    pass
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    d = h.start()
    wait_for(lambda: all(h.live(x, "read_ahead_kb") == "256" for x in h.disks), 30, "applied")
    wait_for(lambda: h.call("status")["kernel"]["dispatch_direct"] == "yes", 30, "dispatch_direct learned")
    wait_for(lambda: "iosched/dispatch_direct" in (h.call("device", device="loop0")["canary"] or {})
             .get("settings", {}), 10, f"the canary's dispatch_direct shown: {h.call('device', device='loop0')}")
    c = h.call("device", device="loop0")["canary"]["settings"]
    assert (c["iosched/dispatch_direct"]["target"], c["iosched/dispatch_direct"]["result"]) == ("1", "planned"), c
    assert "scheduler" not in c, f"mq-deadline is what 50 sets already: {c}"
    assert d.stop() == 0
    stop.set()
    t.join(5)
    assert seen == [], "a canary's dispatch_direct was written"
    assert h.values() == h.found


# ---------------------------------------------------------------------------
# 18. Seed 3's loss, one step at a time

@pytest.mark.parametrize("last", ["unwanted", "wanted"], ids=["stop-unwanted", "stop-wanted"])
@pytest.mark.parametrize("how", ["observe", "removed"])
def test_admin_value_after_file_turned_canary_on_overridden_disk(host, how, last):
    """20 sets nomerges = 1, 40 wbt_lat_usec = 75000, both written. The
    admin writes nomerges = 2 (the disk is overridden: left alone); 40 is
    made a canary (or removed) and reloaded; then the admin writes
    wbt_lat_usec = 5555, a setting nothing wants any more. At the stop the
    admin's 5555 is theirs and must stay."""
    h = host(n=1)
    h.policy("20-a.policy", policy_text("loop*", {"nomerges": "1"}))
    b = policy_text("loop*", {"wbt_lat_usec": "75000"})
    h.policy("40-b.policy", b)
    d = h.start()
    wait_for(lambda: h.live("loop0", "nomerges") == "1" and h.live("loop0", "wbt_lat_usec") == "75000", 30,
             "applied")
    write(h.qfile("loop0", "nomerges"), "2")
    wait_for(lambda: h.call("device", device="loop0")["settings"]["nomerges"]["result"] == "overridden", 30,
             "overridden")
    def unwant():
        if how == "removed":
            h.unpolicy("40-b.policy")
        else:
            h.policy("40-b.policy", "[Policy]\nmode = observe\n" + b)
        d.reload()
        time.sleep(1)
    unwant()
    mid = h.live("loop0", "wbt_lat_usec")
    # wanted again (the disk is still overridden: left alone), the admin
    # writes, and it is no longer wanted once more
    h.policy("40-b.policy", b)
    d.reload()
    time.sleep(1)
    write(h.qfile("loop0", "wbt_lat_usec"), "5555")
    time.sleep(1.5)
    if last == "unwanted":
        unwant()
    assert d.stop() == 0
    got = h.values()["loop0"]
    assert (got["wbt_lat_usec"], got["nomerges"]) == ("5555", "2"), \
        f"{how}: after the reload wbt_lat_usec was {mid}; the stop left {got}; log {d.text()[-1500:]}"
