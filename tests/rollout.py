#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""contrib/ansible's rollout in waves, run by ansible-playbook against five
podman containers of the project's image, each a "host": its own daemon,
its own loop device (--device=), its own state dir, its own policies dir
(as a ConfigMap would be). Ansible reaches them with the
containers.podman.podman connection (Debian's `ansible` package).

With 5 hosts, serial [1, "5%", "25%", "100%"] makes the waves h1 | h2 |
h3 | h4 h5 (Ansible takes a percentage's floor, at least 1). Checks:
  a) a good rollout: observe everywhere (verify 4: changes pending, no
     write), then every wave enforces and passes its gate; every loop has
     its policy's values; backout.yml then puts back exactly the values the
     test read before anything ran, with no record left;
  b) a bad second wave: h2's policy asks mq-deadline's read_expire = 1 ms,
     which the kernel keeps as 4 at HZ=250 (a value not kept: verify exits
     4). The rollout fails, h3..h5 are never enforced and see no write, and
     h1 and h2 (scope rollout) are back to exactly their found values with
     no record left;
  c) the same with blkpolicyd_backout_scope=wave: h1 stays enforced with
     its policy's values, h2 is back to its found values.

  sudo python3 tests/rollout.py --deb build/blkpolicyd.deb"""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blkptest.require import script_prerequisites  # noqa: E402
from blkptest.results import Results  # noqa: E402
# the machine's podman flags live in one place, container.py's PODMAN_RUN
from container import DAEMON_ARGS, PODMAN_RUN, run, schedulers, wait_for  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_IMAGE = os.path.join(TOP, "contrib", "container", "build-image.sh")
ANSIBLE_DIR = os.path.join(TOP, "contrib", "ansible")
PREFIX = f"bpans-{os.getpid()}"
IMAGE = f"localhost/bpans-test:{os.getpid()}"
HOSTS = [f"h{i}" for i in range(1, 6)]
WAVES = [["h1"], ["h2"], ["h3"], ["h4", "h5"]]
BAD = "h2"


def queue(dev, attr):
    try:
        with open(f"/sys/block/{dev}/queue/{attr}") as f:
            text = f.read().strip()
    except FileNotFoundError:
        return None
    return text[text.index("[") + 1:text.index("]")] if attr == "scheduler" else text


def snapshot(dev):
    """What the test compares: the scheduler, read_ahead_kb and, under
    mq-deadline, its read_expire (absent under another scheduler)."""
    return {a: queue(dev, a) for a in ("scheduler", "read_ahead_kb", "iosched/read_expire")}


class Host:
    def __init__(self, work, name):
        self.name = name
        self.container = f"{PREFIX}-{name}"
        self.dir = os.path.join(work, name)
        self.state = os.path.join(self.dir, "state")
        self.policies = os.path.join(self.dir, "policies")
        for d in (self.dir, self.state, self.policies):
            os.mkdir(d, 0o700)
        self.loop = None

    def add_loop(self):
        backing = os.path.join(self.dir, "loop.img")
        with open(backing, "wb") as f:
            f.truncate(32 << 20)
        r = run(["losetup", "-f", "--show", backing])
        if r.returncode != 0:
            raise RuntimeError(f"losetup: {r.stderr}")
        self.loop = r.stdout.strip().removeprefix("/dev/")

    def policy(self, text):
        with open(os.path.join(self.policies, "50-rollout-test.policy"), "w") as f:
            f.write(f"[Match]\nname = {self.loop}\n{text}")

    def start(self, image):
        m = ["-v", f"{self.state}:/run/blkpolicyd", "-v", f"{self.policies}:/etc/blkpolicyd/policies.d:ro"]
        for host in ("/etc", "/usr/lib", "/boot", "/run/udev"):
            if os.path.isdir(host):
                m += ["-v", f"{host}:/host{host}:ro"]
        r = run([*PODMAN_RUN, "-d", "--name", self.container, "--privileged", "--network", "host", *m,
                 image, *DAEMON_ARGS, f"--device={self.loop}"])
        if r.returncode != 0:
            raise RuntimeError(f"podman run {self.container}: {r.stderr}")

    def status(self):
        r = run(["podman", "exec", self.container, "blkpolicyctl", "--json", "status"])
        return json.loads(r.stdout)["result"] if r.returncode in (0, 4) else None

    def writes(self):
        s = self.status()
        return s and s["writes"]["scheduler"] + s["writes"]["other"]

    def records(self):
        d = os.path.join(self.state, "devices")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def logs(self):
        r = run(["podman", "logs", self.container])
        return (r.stdout + r.stderr)[-1500:]


class Bed:
    def __init__(self, work):
        self.work = work
        self.hosts = [Host(work, n) for n in HOSTS]
        self.image = None
        self.inventory = os.path.join(work, "inventory.yml")

    def write_inventory(self):
        # the connection per host, not under all: the implicit localhost
        # (the summary's delegate_to) takes all's vars
        with open(self.inventory, "w") as f:
            f.write("all:\n  hosts:\n")
            for h in self.hosts:
                f.write(f"    {h.name}:\n      ansible_connection: containers.podman.podman\n"
                        f"      ansible_host: {h.container}\n      ansible_python_interpreter: /usr/bin/python3\n"
                        f"      blkpolicyd_reload_command: blkpolicyctl reload\n")

    def playbook(self, name, *extra):
        summary = os.path.join(self.work, f"summary-{time.monotonic_ns()}.json")
        env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0",
                   ANSIBLE_LOCAL_TEMP=os.path.join(self.work, "ansible-tmp"), ANSIBLE_HOST_KEY_CHECKING="0")
        t0 = time.monotonic()
        r = run(["ansible-playbook", "-i", self.inventory, os.path.join(ANSIBLE_DIR, name),
                 "-e", f"blkpolicyd_summary_file={summary}", *extra], timeout=600, env=env)
        took = time.monotonic() - t0
        try:
            with open(summary) as f:
                s = json.load(f)["hosts"]
        except (OSError, ValueError, KeyError):
            s = None
        return r, s, took

    def cleanup(self):
        for h in self.hosts:
            run(["podman", "rm", "-f", "-t", "10", h.container], timeout=60)
        if self.image:
            run(["podman", "rmi", "-f", self.image])
        for h in self.hosts:
            if h.loop:
                run(["losetup", "-d", f"/dev/{h.loop}"])


def tail(r):
    return (r.stdout + r.stderr)[-4000:]


def tests(bed, res):
    check = res.check
    hosts = {h.name: h for h in bed.hosts}
    # what the kernel had before anything ran: what every back-out must put back
    found = {h.name: snapshot(h.loop) for h in bed.hosts}
    want = {}
    for h in bed.hosts:
        f = found[h.name]
        sched = next(s for s in ("mq-deadline", "kyber", "bfq", "none")
                     if s in schedulers(h.loop) and s != f["scheduler"])
        ra = "1024" if f["read_ahead_kb"] != "1024" else "512"
        want[h.name] = {"scheduler": sched, "read_ahead_kb": ra}
        h.policy(f"[Queue]\nscheduler = {sched}\nread_ahead_kb = {ra}\n")
    for h in bed.hosts:
        h.start(bed.image)
    up = wait_for(lambda: all((s := h.status()) and s["first_pass_done"] for h in bed.hosts), 60)
    check("the five hosts' daemons answer, each managing its own loop only, observing, no write",
          up and all((s := h.status())["managed"] == 1 and s["devices"] == 1 and s["mode"] == "observe"
                     and h.writes() == 0 for h in bed.hosts),
          "\n".join(f"{h.name}: {h.status()}\n{h.logs()}" for h in bed.hosts))
    if not up:
        return
    bed.write_inventory()

    def live(name):
        return {k: v for k, v in snapshot(hosts[name].loop).items() if k in want[name]}

    # a) the good rollout
    r, s, took = bed.playbook("rollout.yml")
    check(f"a) rollout.yml over 5 hosts succeeds ({took:.0f} s)", r.returncode == 0 and s is not None, tail(r))
    if s is None:
        return
    check("a) observe first: verify exited 4 (changes pending) on every host",
          all(s[n]["observed_verify"] == 4 for n in HOSTS), json.dumps(s))
    check("a) the waves are 1, 1 (5%), 1 (25%), then the last 2", all(s[n]["wave"] in WAVES and n in s[n]["wave"]
                                                                    for n in HOSTS)
          and sorted(map(tuple, {tuple(s[n]["wave"]) for n in HOSTS})) == sorted(map(tuple, WAVES)), json.dumps(s))
    check("a) every host enforced and passed its gate (verify 0)",
          all(s[n]["state"] == "enforced" and s[n]["enforced_verify"] == 0 and not s[n]["failed_gate"]
              for n in HOSTS), json.dumps(s))
    check("a) every loop has its policy's values, and every daemon enforces",
          all(live(n) == want[n] for n in HOSTS) and all(h.status()["mode"] == "enforce" for h in bed.hosts),
          f"want {want}\nlive { {n: live(n) for n in HOSTS} }")
    r, _, took = bed.playbook("backout.yml")
    check(f"a) backout.yml succeeds ({took:.0f} s)", r.returncode == 0, tail(r))
    back = {n: snapshot(hosts[n].loop) for n in HOSTS}
    check("a) backout.yml puts back exactly the values found before anything ran, and leaves no record",
          back == found and all(h.records() == [] and h.status()["mode"] == "observe" for h in bed.hosts),
          f"found {found}\nnow {back}\nrecords { {h.name: h.records() for h in bed.hosts} }")

    # b) a bad second wave: a value the kernel does not keep
    bad = hosts[BAD]
    if "mq-deadline" not in schedulers(bad.loop):
        check("b) the loop offers mq-deadline (for read_expire)", False, schedulers(bad.loop))
        return
    bad.policy(f"[Queue]\nscheduler = mq-deadline\nread_ahead_kb = {want[BAD]['read_ahead_kb']}\n"
               "[mq-deadline]\nread_expire = 1\n")

    def bad_rollout(label, scope):
        before = {h.name: h.writes() for h in bed.hosts}
        r, s, took = bed.playbook("rollout.yml", "-e", f"blkpolicyd_backout_scope={scope}")
        check(f"{label}) scope={scope}: the rollout fails ({took:.0f} s)", r.returncode != 0 and s is not None, tail(r))
        if s is None:
            return None
        check(f"{label}) {BAD} failed its gate on verify 4 (a value not kept) and backed itself out",
              s[BAD]["failed_gate"] and s[BAD]["gate_verify"] == 4 and s[BAD]["backed_out"]
              and int(s[BAD]["gate_settings"]["not_kept"]) == 1 and int(s[BAD]["gate_settings"]["failed"]) == 0,
              json.dumps(s[BAD]))
        later = [n for w in WAVES[2:] for n in w]
        check(f"{label}) the later waves never started: {', '.join(later)} never enforced, no write, values as found",
              all(not s[n]["touched"] and s[n]["state"] == "untouched" and hosts[n].writes() == before[n]
                  and hosts[n].status()["mode"] == "observe" and snapshot(hosts[n].loop) == found[n]
                  for n in later),
              f"{json.dumps({n: s[n] for n in later})}\nwrites before {before}, now "
              f"{ {n: hosts[n].writes() for n in later} }")
        check(f"{label}) {BAD} is back to exactly its found values, observing, no record left",
              snapshot(bad.loop) == found[BAD] and bad.records() == [] and bad.status()["mode"] == "observe",
              f"found {found[BAD]} now {snapshot(bad.loop)} records {bad.records()}\n{bad.logs()}")
        return s

    s = bad_rollout("b", "rollout")
    if s:
        check("b) scope=rollout: wave 1's h1 is backed out too, to exactly its found values, no record left",
              s["h1"]["enforced_verify"] == 0 and s["h1"]["backed_out"] and snapshot(hosts["h1"].loop) == found["h1"]
              and hosts["h1"].records() == [] and hosts["h1"].status()["mode"] == "observe", json.dumps(s["h1"]))

    # c) scope=wave: only the failed wave backs out
    s = bad_rollout("c", "wave")
    if s:
        check("c) scope=wave: wave 1's h1 stays enforced with its policy's values",
              s["h1"]["state"] == "enforced" and live("h1") == want["h1"]
              and hosts["h1"].status()["mode"] == "enforce", f"{json.dumps(s['h1'])} live {live('h1')}")
    r, _, took = bed.playbook("backout.yml", "--limit", "h1")
    check(f"c) backout.yml --limit h1 puts h1 back as found, no record ({took:.0f} s)",
          r.returncode == 0 and snapshot(hosts["h1"].loop) == found["h1"] and hosts["h1"].records() == [], tail(r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deb", required=True)
    args = ap.parse_args()
    podman_plugin = shutil.which("ansible-doc") and \
        run(["ansible-doc", "-t", "connection", "containers.podman.podman"]).returncode == 0
    script_prerequisites("rollout", ("podman", "runc", "mmdebstrap", "losetup", "ansible-playbook"),
                         () if podman_plugin else ["the containers.podman collection (Debian's ansible package)"])
    res = Results()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    work = tempfile.mkdtemp(prefix="bpans-rollout-")
    bed = Bed(work)
    try:
        t0 = time.monotonic()
        bed.image = IMAGE
        r = run([BUILD_IMAGE, "--deb", args.deb, "--tag", IMAGE, "--include", "python3"], timeout=1800)
        res.check(f"build-image.sh --include python3 builds the targets' image ({time.monotonic() - t0:.0f} s)",
                  r.returncode == 0, (r.stdout + r.stderr)[-3000:])
        if r.returncode == 0:
            for h in bed.hosts:
                h.add_loop()
            print(f"# loops: {' '.join(h.loop for h in bed.hosts)}")
            tests(bed, res)
    finally:
        bed.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    res.finish("rollout: ")


if __name__ == "__main__":
    main()
