# SPDX-License-Identifier: LGPL-2.1-or-later
"""The service as a packager sees it: meson install --destdir puts every
file where pkg-config says; systemd-analyze verifies the unit and scores its
exposure (printed, and at most 2.0); the man pages render without a
warning."""
import json
import os
import re
import shutil
import subprocess

import pytest

MAN_PAGES = ["blkpolicyd.8", "blkpolicyctl.8", "blkpolicyd.conf.5", "blkpolicyd.policy.5"]


def pkgvar(pkg, var, default):
    r = subprocess.run(["pkg-config", f"--variable={var}", pkg], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else default


@pytest.fixture(scope="module")
def dirs(build_root):
    """Where things install: the build's options, else what pkg-config says."""
    r = subprocess.run(["meson", "introspect", "--buildoptions", build_root], capture_output=True, text=True)
    options = {o["name"]: o["value"] for o in json.loads(r.stdout)}
    prefix = options["prefix"]
    sysconfdir = options["sysconfdir"]
    return {
        "prefix": prefix,
        "udevdir": options.get("udevdir") or pkgvar("udev", "udevdir", "/lib/udev"),
        "unitdir": options.get("systemdsystemunitdir") or pkgvar("systemd", "systemdsystemunitdir",
                                                                  "/lib/systemd/system"),
        "compdir": options.get("bashcompletiondir") or pkgvar("bash-completion", "completionsdir",
                                                               os.path.join(prefix, "share/bash-completion/completions")),
        "sysconfdir": sysconfdir if sysconfdir.startswith("/") else os.path.join(prefix, sysconfdir),
    }


@pytest.fixture(scope="module")
def dest(build_root, module_work):
    r = subprocess.run(["meson", "install", "-C", build_root, "--destdir", module_work, "--no-rebuild", "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 0, "meson install --destdir\n" + r.stdout + r.stderr
    return module_work


def test_installed_files(dest, dirs):
    prefix = dirs["prefix"]
    expected = [
        os.path.join(prefix, "sbin/blkpolicyd"),
        os.path.join(prefix, "bin/blkpolicyctl"),
        os.path.join(dirs["unitdir"], "blkpolicyd.service"),
        os.path.join(dirs["udevdir"], "rules.d/90-blkpolicyd.rules"),
        os.path.join(dirs["sysconfdir"], "blkpolicyd/blkpolicyd.conf"),
        os.path.join(prefix, "lib/blkpolicyd/policies.d/20-fast-virtual.policy"),
        os.path.join(prefix, "share/man/man8/blkpolicyd.8"),
        os.path.join(prefix, "share/man/man8/blkpolicyctl.8"),
        os.path.join(prefix, "share/man/man5/blkpolicyd.conf.5"),
        os.path.join(prefix, "share/man/man5/blkpolicyd.policy.5"),
        os.path.join(dirs["compdir"], "blkpolicyctl"),
    ]
    missing = [path for path in expected if not os.path.exists(dest + path)]
    assert not missing, f"not installed: {missing}"


def test_unit(dest, dirs):
    unit = dest + os.path.join(dirs["unitdir"], "blkpolicyd.service")
    text = open(unit).read() if os.path.exists(unit) else ""
    assert f"ExecStart={dirs['prefix']}/sbin/blkpolicyd" in text, "the unit runs the installed binary"
    # ExecReload= runs the system's kill: give the root image one to find
    os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
    shutil.copy("/bin/kill", os.path.join(dest, "bin/kill"))
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", f"--root={dest}", unit], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip(), "systemd-analyze verify\n" + r.stderr
    r = subprocess.run(["systemd-analyze", "security", "--offline=true", unit], capture_output=True, text=True)
    m = re.search(r"Overall exposure level for blkpolicyd.service: ([0-9.]+)", r.stdout)
    score = float(m.group(1)) if m else 99
    print(f"systemd-analyze security: exposure {score}")
    assert score <= 2.0, "exposure at most 2.0\n" + r.stdout[-2000:]


@pytest.mark.parametrize("page", MAN_PAGES)
def test_man_page_renders_without_warnings(top, page):
    path = os.path.join(top, "man", page)
    r = subprocess.run(["groff", "-ww", "-man", "-z", path], capture_output=True, text=True)
    r2 = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", path], capture_output=True, text=True,
                        env=dict(os.environ, MANWIDTH="80"))
    assert r.returncode == 0 and not r.stderr and not r2.stderr, r.stderr + r2.stderr
