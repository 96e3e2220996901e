# SPDX-License-Identifier: LGPL-2.1-or-later
"""Shipped policy sets (docs/service.md, "Upgrades"), no root, the fake
kernel: a fixture root laid out as the package installs it, with set 1
frozen in policy-sets/1 and set 2, which changes loop0's scheduler and adds
a file, as the newest in policies.d. policy_set = 1 keeps set 1's choices
and says set 2 is there (status, the log, once a start or a reload);
policy_set = 2 and a reload applies set 2; back to 1 puts set 1's back; a
set that is not shipped is refused at its file:line, at start and at a
reload, which keeps the running set. And the tree's own sets: a released
file is never edited (policies/sets/SHA256SUMS, scripts/policy-sets.py)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from blkptest import faketree
from blkptest.daemon import Daemon, control_call, ctl, fixture_roots

SAME = "[Match]\nname = vda\n[Queue]\nread_ahead_kb = 256\n"
SET1 = {"10-same.policy": SAME, "20-loop.policy": "[Match]\nname = loop*\n[Queue]\nscheduler = bfq\n"}
SET2 = {"10-same.policy": SAME, "20-loop.policy": "[Match]\nname = loop*\n[Queue]\nscheduler = kyber\n",
        "30-added.policy": "[Match]\nname = loop0\n[Queue]\nread_ahead_kb = 4321\n"}
# longer than the daemon's block of comparison (4 KiB): alike, and alike
# but for their last line
LONG = "".join(f"# line {i} of a long comment\n" for i in range(300)) + "[Match]\nname = nothing\n"
SET1.update({"40-long.policy": LONG, "50-tail.policy": LONG + "[Queue]\nread_ahead_kb = 1\n"})
SET2.update({"40-long.policy": LONG, "50-tail.policy": LONG + "[Queue]\nread_ahead_kb = 2\n"})
NOTICE = "Shipped policy set 1 in use, set 2 is installed and newer"


def vendor_dir(blkpolicyd):
    """Where this build reads the shipped policies: its --help's default."""
    out = subprocess.run([blkpolicyd, "--help"], capture_output=True, text=True).stdout
    return re.search(r"\(default (\S+/policies\.d) ", out).group(1)


def write_set(d, number, files):
    os.makedirs(d)
    with open(os.path.join(d, "policy-set"), "w") as f:
        f.write(f"# this set's number\n{number}\n")
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)


@pytest.fixture
def env(blkpolicyd, kvm_fixture, work):
    """The fixture machine (a copy: the fake kernel writes to it), and a
    root with the two sets where the package puts them."""
    tree = os.path.join(work, "tree")
    faketree.make(kvm_fixture, tree)
    root = os.path.join(work, "root")
    vendor = root + vendor_dir(blkpolicyd)
    write_set(vendor, 2, SET2)
    write_set(os.path.join(os.path.dirname(vendor), "policy-sets", "1"), 1, SET1)
    conf = os.path.join(work, "blkpolicyd.conf")
    daemons = []

    def start(conf_text, ready=True, extra=None):
        with open(conf, "w") as f:
            f.write(conf_text)
        args = ["--config", conf, *(extra if extra is not None else ["--root", root]), *fixture_roots(tree),
                "--state-dir", os.path.join(work, "state"), "--socket", os.path.join(work, "sock"),
                "--device", "loop0"]
        d = Daemon(blkpolicyd, work, args, env={"BLKPOLICYD_FAKE_KERNEL": "1"}, append_log=bool(daemons))
        daemons.append(d)
        if ready:
            d.wait_for("READY=1", timeout=30)
        return d

    def config(text):
        with open(conf, "w") as f:
            f.write(text)

    def status():
        return control_call(os.path.join(work, "sock"), {"command": "status"})["result"]

    e = type("Env", (), {})()
    e.__dict__.update(tree=tree, root=root, conf=conf, start=start, config=config, status=status, work=work,
                      live=lambda attr: faketree.live(tree, "loop0", attr))
    e.original = {a: e.live(a) for a in ("scheduler", "read_ahead_kb")}
    yield e
    for d in daemons:
        d.cleanup()
        print(f"--- daemon log\n{d.text()[-4000:]}")


def sets_metrics(env):
    text = control_call(os.path.join(env.work, "sock"), {"command": "metrics"})["result"]["text"]
    found = dict(line.split() for line in text.splitlines() if line.startswith("blkpolicyd_policy_set_"))
    return tuple(int(found[f"blkpolicyd_policy_set_{k}"]) for k in ("in_use", "newest", "files_differ"))


def test_upgraded_host_keeps_its_set_until_it_opts_in(env, blkpolicyd, blkpolicyctl):
    assert env.original == {"scheduler": "none", "read_ahead_kb": "128"}, env.original
    d = env.start("[Daemon]\n# as the package's postinst writes it at the first install\npolicy_set = 1\n")
    assert (env.live("scheduler"), env.live("read_ahead_kb")) == ("bfq", "128"), \
        "policy_set = 1: set 1's choice, and nothing of the file only set 2 has"
    st = env.status()["policy_set"]
    assert len(LONG) > 8192 and st == {"in_use": 1, "newest": 2,
                                       "differs": ["20-loop.policy", "30-added.policy", "50-tail.policy"]}, \
        f"status names the set in use, the newest and the files that differ (not the alike ones): {st}"
    assert d.text().count(NOTICE) == 1 and "20-loop.policy 30-added.policy 50-tail.policy" in d.text() \
        and "policy_set = 2" in d.text(), f"the log says so once at start, with how to opt in:\n{d.text()}"
    text = ctl(blkpolicyctl, os.path.join(env.work, "sock"), "status")
    assert text.returncode == 0 and "set 2 is installed and newer" in text.stdout \
        and "20-loop.policy 30-added.policy 50-tail.policy" in text.stdout, \
        f"blkpolicyctl status says it too, and a choice is no failure (exit 0): {text}"
    assert sets_metrics(env) == (1, 2, 3), "the metrics say it for a fleet: in use, newest, files that differ"

    env.config("[Daemon]\npolicy_set = 2\n")
    d.reload()
    assert (env.live("scheduler"), env.live("read_ahead_kb")) == ("kyber", "4321"), "policy_set = 2: set 2 applied"
    assert env.status()["policy_set"] == {"in_use": 2, "newest": 2, "differs": []}
    assert sets_metrics(env) == (2, 2, 0)
    assert d.text().count(NOTICE) == 1, "running the newest, the reload says nothing of sets"

    env.config("[Daemon]\npolicy_set = 1\n")
    d.reload()
    assert (env.live("scheduler"), env.live("read_ahead_kb")) == ("bfq", "128"), \
        "back to set 1: its choice, and set 2's read_ahead_kb put back as it was"
    assert d.text().count(NOTICE) == 2, "and said again, once, at that reload"
    assert d.stop() == 0
    assert {a: env.live(a) for a in env.original} == env.original, "the stop puts back the kernel's values"
    r = subprocess.run([blkpolicyd, "--metrics-stopped", "--config", env.conf, "--root", env.root,
                        *fixture_roots(env.tree)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and NOTICE not in r.stderr, \
        f"the unit's ExecStopPost= decides nothing: no notice at each stop ({r.stderr})"


def test_the_trees_own_set_file_is_read(blkpolicyd, kvm_fixture, top, work):
    """The shipped policies/ as the package installs it, with its real
    policy-set (comment lines longer than any read buffer): a first
    install's pin to that number starts, and status names it."""
    tree, root = os.path.join(work, "tree"), os.path.join(work, "root")
    faketree.make(kvm_fixture, tree)
    vendor = root + vendor_dir(blkpolicyd)
    shutil.copytree(os.path.join(top, "policies"), vendor, ignore=shutil.ignore_patterns("meson.build", "sets"))
    with open(os.path.join(top, "policies", "policy-set")) as f:
        number = int([line for line in f if line.strip() and not line.startswith("#")][0])
    conf = os.path.join(work, "blkpolicyd.conf")
    with open(conf, "w") as f:
        f.write(f"[Daemon]\n# as the package's postinst pins it\npolicy_set = {number}\n")
    d = Daemon(blkpolicyd, work, ["--config", conf, "--root", root, *fixture_roots(tree), "--dry-run",
                                  "--state-dir", os.path.join(work, "state"), "--socket", os.path.join(work, "sock"),
                                  "--device", "loop0"], env={"BLKPOLICYD_FAKE_KERNEL": "1"})
    try:
        d.wait_for("READY=1", timeout=30)
        st = control_call(os.path.join(work, "sock"), {"command": "status"})["result"]["policy_set"]
        assert st == {"in_use": number, "newest": number, "differs": []}, \
            f"policies/policy-set as shipped is read: set {number} is the newest, and the pin starts: {st}"
    finally:
        d.cleanup()
        print(f"--- daemon log\n{d.text()[-2000:]}")


def test_no_key_runs_the_newest_and_a_drop_in_pins(env):
    d = env.start("[Daemon]\n")
    assert env.live("scheduler") == "kyber" and env.status()["policy_set"]["in_use"] == 2, \
        "no policy_set=: the newest (a new host, a source install)"
    assert NOTICE not in d.text()
    os.makedirs(env.conf + ".d")
    with open(os.path.join(env.conf + ".d", "00-policy-set.conf"), "w") as f:
        f.write("[Daemon]\npolicy_set = 1\n")
    d.reload()
    assert env.live("scheduler") == "bfq" and env.status()["policy_set"]["in_use"] == 1, \
        "the drop-in the package writes pins the set"


def test_unknown_set_refused_at_its_line(env, blkpolicyd):
    conf_text = "[Daemon]\n# no such set\npolicy_set = 7\n"
    d = env.start(conf_text, ready=False)
    rc = d.proc.wait(timeout=30)
    where = f"{env.conf}:3: [Daemon] policy_set = 7: no such shipped policy set (shipped: 1, 2 (newest))"
    assert rc != 0 and where in d.text(), f"at start: exit non-zero, file:line and the sets there are:\n{d.text()}"
    r = subprocess.run([blkpolicyd, "--check-config", "--config", env.conf, "--root", env.root,
                        *fixture_roots(env.tree)], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and where in r.stderr, f"--check-config refuses it too: {r.stderr}"
    # the unit's ExecStopPost= after that failed start: the death is said,
    # whatever the policies (it reads only the config)
    textdir = os.path.join(env.work, "textfile")
    os.makedirs(textdir)
    with open(env.conf, "a") as f:
        f.write(f"metrics_textfile_dir = {textdir}\n")
    r = subprocess.run([blkpolicyd, "--metrics-stopped", "--config", env.conf, "--root", env.root,
                        *fixture_roots(env.tree), "--state-dir", os.path.join(env.work, "state")],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, SERVICE_RESULT="exit-code", EXIT_CODE="exited", EXIT_STATUS="1"))
    with open(os.path.join(textdir, "blkpolicyd.prom")) as f:
        text = f.read()
    assert r.returncode == 0 and "\nblkpolicyd_up 0\n" in text and 'result="exit-code"' in text, \
        f"--metrics-stopped writes the stopped file though the set named is not shipped: {r.stderr} {text}"

    d = env.start("[Daemon]\npolicy_set = 1\n")
    env.config(conf_text)
    d.reload()
    st = env.status()
    assert st["reload_errors"] == [{"path": env.conf, "line": 3, "message":
                                    "[Daemon] policy_set = 7: no such shipped policy set (see the log)"}], \
        f"a reload to it is refused at file:line: {st['reload_errors']}"
    assert st["policy_set"]["in_use"] == 1 and env.live("scheduler") == "bfq", "the running set stays"
    assert where in d.text()

    env.config("[Daemon]\npolicy_set = two\n")
    d.reload()
    assert env.status()["reload_errors"] and "expected latest or a set's number" in d.text(), \
        "a value that is no number is the config's own error"


def test_policy_dir_means_no_shipped_sets(env):
    policies = os.path.join(env.work, "p")
    os.makedirs(policies)
    env.start("[Daemon]\npolicy_set = 7\n", extra=["--policy-dir", policies])
    assert env.status()["policy_set"] is None, "--policy-dir reads no shipped set, and none is looked up"
    assert sets_metrics(env) == (0, 0, 0), "... and the metrics say none"


# --- the tree's own sets: released means frozen

def policy_sets(top, *args):
    return subprocess.run([sys.executable, os.path.join(top, "scripts", "policy-sets.py"), *args],
                          capture_output=True, text=True, timeout=30)


def test_tree_sets_are_as_released(top):
    r = policy_sets(top, "check", os.path.join(top, "policies"))
    assert r.returncode == 0, f"policies/sets/SHA256SUMS holds for the tree: {r.stderr}"
    with open(os.path.join(top, "policies", "sets", "SHA256SUMS")) as f:
        listed = {line.split()[1] for line in f if line.strip() and not line.startswith("#")}
    assert "1/20-fast-virtual.policy" in listed, f"set 1 is released, every file listed: {listed}"


def shipped_number(path):
    """The number in a policy-set file: its first line that is no comment."""
    with open(path) as f:
        return int(next(line for line in f if line.strip() and not line.startswith("#")))


def test_released_files_cannot_change(top, work):
    tree = os.path.join(work, "policies")
    shutil.copytree(os.path.join(top, "policies"), tree)
    n = shipped_number(os.path.join(tree, "policy-set"))
    # the tree's newest set as its release lists it (set 2 is unreleased
    # until the package that ships it is released)
    r = policy_sets(top, "release", tree)
    assert r.returncode == 0, f"the newest set {n} released: {r.stderr}"
    released = {}
    for name in ("20-fast-virtual.policy", "60-rotational.policy", "policy-set"):
        with open(os.path.join(tree, name), "rb") as f:
            released[name] = f.read()

    def edit(path, text="# changed\n"):
        with open(path, "a") as f:
            f.write(text)

    def put_back(name, where=tree):
        with open(os.path.join(where, name), "wb") as f:
            f.write(released[name])

    edit(os.path.join(tree, "20-fast-virtual.policy"))
    r = policy_sets(top, "check", tree)
    assert r.returncode != 0 and f"{n}/20-fast-virtual.policy: released, and changed" in r.stderr, \
        f"the released newest set edited in place: refused ({r.stderr})"
    put_back("20-fast-virtual.policy")
    edit(os.path.join(tree, "25-new.policy"), "[Match]\nname = x\n")
    r = policy_sets(top, "check", tree)
    assert r.returncode != 0 and f"{n}/25-new.policy: added to released set {n}" in r.stderr, r.stderr

    r = policy_sets(top, "freeze", tree)
    assert r.returncode != 0 and "25-new.policy" in r.stderr, "freeze copies the set as it is: with the addition"
    shutil.rmtree(os.path.join(tree, "sets", str(n)))
    os.unlink(os.path.join(tree, "25-new.policy"))
    put_back("policy-set")
    r = policy_sets(top, "freeze", tree)
    assert r.returncode == 0 and os.path.isfile(os.path.join(tree, "sets", str(n), "20-fast-virtual.policy")), \
        r.stderr
    edit(os.path.join(tree, "20-fast-virtual.policy"))
    assert policy_sets(top, "check", tree).returncode == 0, f"frozen first: set {n + 1} (unreleased) may change"
    edit(os.path.join(tree, "sets", str(n), "60-rotational.policy"))
    r = policy_sets(top, "check", tree)
    assert r.returncode != 0 and f"{n}/60-rotational.policy: released, and changed in sets/{n}/" in r.stderr, \
        r.stderr

    put_back("60-rotational.policy", os.path.join(tree, "sets", str(n)))
    put_back("policy-set")
    r = policy_sets(top, "check", tree)
    assert r.returncode != 0 and f"sets/{n}: frozen, yet not older than the newest set {n}" in r.stderr, r.stderr


def test_status_json_is_what_blkpolicyctl_shows(env, blkpolicyctl):
    env.start("[Daemon]\npolicy_set = 2\n")
    r = ctl(blkpolicyctl, os.path.join(env.work, "sock"), "--json", "status")
    assert json.loads(r.stdout)["result"]["policy_set"] == {"in_use": 2, "newest": 2, "differs": []}, r.stdout
    text = ctl(blkpolicyctl, os.path.join(env.work, "sock"), "status").stdout
    assert "shipped policy set 2, the newest installed" in text, text


# --- the package's pin: written at the first install only, gone at purge

def maintainer_script(top, work, name, *args):
    """debian/NAME under DPKG_ROOT=work/root, with udevadm, systemctl and
    blkpolicyctl stubs first on PATH: nothing of this machine is asked."""
    stubs = os.path.join(work, "stubs")
    os.makedirs(stubs, exist_ok=True)
    for tool in ("udevadm", "systemctl", "blkpolicyctl"):
        with open(os.path.join(stubs, tool), "w") as f:
            f.write(f"#!/bin/sh\necho {tool} \"$@\" >> {work}/calls\nexit 1\n")
        os.chmod(os.path.join(stubs, tool), 0o755)
    env = dict(os.environ, DPKG_ROOT=os.path.join(work, "root"), PATH=stubs + ":" + os.environ["PATH"])
    return subprocess.run(["sh", os.path.join(top, "debian", name), *args], env=env, capture_output=True,
                          text=True, timeout=30)


def test_first_install_pins_the_set_upgrades_leave_it(top, work, blkpolicyd):
    root = os.path.join(work, "root")
    shipped = os.path.join(root, "usr/lib/blkpolicyd/policies.d")
    os.makedirs(shipped)
    shutil.copy2(os.path.join(top, "policies", "policy-set"), shipped)
    pin = os.path.join(root, "etc/blkpolicyd/blkpolicyd.conf.d/00-policy-set.conf")

    r = maintainer_script(top, work, "blkpolicyd.postinst", "configure", "")
    with open(pin) as f:
        text = f.read()
    n = shipped_number(os.path.join(shipped, "policy-set"))
    assert r.returncode == 0 and re.search(rf"^policy_set = {n}$", text, re.M) and text.startswith("# Written by"), \
        f"the first install pins the set it ships, and says what the file is: {r.stderr}\n{text}"
    with open(os.path.join(work, "blkpolicyd.conf"), "w") as f:
        f.write("[Daemon]\n")
    os.symlink(os.path.dirname(pin), os.path.join(work, "blkpolicyd.conf.d"))
    c = subprocess.run([blkpolicyd, "--check-config", "--config", os.path.join(work, "blkpolicyd.conf"),
                        "--policy-dir", os.path.join(top, "policies")], capture_output=True, text=True, timeout=30)
    assert c.returncode == 0, f"the daemon reads the pin as any drop-in: {c.stderr}"

    with open(os.path.join(shipped, "policy-set"), "w") as f:
        f.write(f"{n + 1}\n")      # the upgrade brings the next set
    r = maintainer_script(top, work, "blkpolicyd.postinst", "configure", "0.1.0")
    with open(pin) as f:
        assert r.returncode == 0 and f.read() == text, "an upgrade leaves the pin as it was"
    os.unlink(pin)
    r = maintainer_script(top, work, "blkpolicyd.postinst", "configure", "0.1.0")
    assert r.returncode == 0 and not os.path.exists(pin), "... and writes none where the admin removed it"

    r = maintainer_script(top, work, "blkpolicyd.postinst", "configure", "")
    assert os.path.exists(pin)
    r = maintainer_script(top, work, "blkpolicyd.postrm", "remove")
    assert r.returncode == 0 and os.path.exists(pin), "remove keeps the configuration, as dpkg keeps conffiles"
    r = maintainer_script(top, work, "blkpolicyd.postrm", "purge")
    assert r.returncode == 0 and not os.path.exists(pin) and not os.path.exists(os.path.dirname(pin)), \
        f"purge removes the pin and its dir, which only it was in: {r.stderr}"


def test_upgrade_from_before_the_sets_pins_set_1(top, work):
    """A host that installed a package older than the sets has no pin: its
    upgrade pins set 1, the policies it ran, found by the old package's
    policies.d lacking policy-set (preinst, before the new files come)."""
    root = os.path.join(work, "root")
    shipped = os.path.join(root, "usr/lib/blkpolicyd/policies.d")
    os.makedirs(shipped)
    shutil.copy2(os.path.join(top, "policies", "20-fast-virtual.policy"), shipped)
    pin = os.path.join(root, "etc/blkpolicyd/blkpolicyd.conf.d/00-policy-set.conf")

    r = maintainer_script(top, work, "blkpolicyd.preinst", "install")
    assert r.returncode == 0 and not os.path.exists(pin), "a first install: the postinst's to write"
    r = maintainer_script(top, work, "blkpolicyd.preinst", "upgrade", "0.0.9")
    with open(pin) as f:
        text = f.read()
    assert r.returncode == 0 and re.search(r"^policy_set = 1$", text, re.M), \
        f"the upgrade from before the sets pins set 1: {r.stderr}\n{text}"
    with open(pin, "w") as f:
        f.write("[Daemon]\npolicy_set = latest\n")
    r = maintainer_script(top, work, "blkpolicyd.preinst", "upgrade", "0.0.9")
    with open(pin) as f:
        assert r.returncode == 0 and f.read() == "[Daemon]\npolicy_set = latest\n", "an admin's pin is left"
    os.unlink(pin)
    shutil.copy2(os.path.join(top, "policies", "policy-set"), shipped)
    r = maintainer_script(top, work, "blkpolicyd.preinst", "upgrade", "0.1.0")
    assert r.returncode == 0 and not os.path.exists(pin), \
        "from a package with sets, an absent pin is the admin's choice (latest): none written"
