#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The service as a packager sees it: meson install --destdir puts every
file where pkg-config says; systemd-analyze verifies the unit and scores its
exposure (printed, and at most 2.0); the man pages render without a
warning."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

build_root, source_root = sys.argv[1:3]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))
from loopdev import Results  # noqa: E402

res = Results()
check = res.check


def pkgvar(pkg, var, default):
    r = subprocess.run(["pkg-config", f"--variable={var}", pkg], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else default


def meson_option(name):
    r = subprocess.run(["meson", "introspect", "--buildoptions", build_root], capture_output=True, text=True)
    import json
    for o in json.loads(r.stdout):
        if o["name"] == name:
            return o["value"]
    return None


prefix = meson_option("prefix")
udevdir = meson_option("udevdir") or pkgvar("udev", "udevdir", "/lib/udev")
unitdir = meson_option("systemdsystemunitdir") or pkgvar("systemd", "systemdsystemunitdir", "/lib/systemd/system")
compdir = meson_option("bashcompletiondir") or pkgvar("bash-completion", "completionsdir",
                                                        os.path.join(prefix, "share/bash-completion/completions"))
sysconfdir = meson_option("sysconfdir")
sysconfdir = sysconfdir if sysconfdir.startswith("/") else os.path.join(prefix, sysconfdir)

with tempfile.TemporaryDirectory(prefix="blkpolicyd-install-") as dest:
    r = subprocess.run(["meson", "install", "-C", build_root, "--destdir", dest, "--no-rebuild", "--quiet"],
                       capture_output=True, text=True)
    check("meson install --destdir", r.returncode == 0, r.stdout + r.stderr)
    expected = [
        os.path.join(prefix, "sbin/blkpolicyd"),
        os.path.join(prefix, "bin/blkpolicyctl"),
        os.path.join(unitdir, "blkpolicyd.service"),
        os.path.join(udevdir, "rules.d/90-blkpolicyd.rules"),
        os.path.join(sysconfdir, "blkpolicyd/blkpolicyd.conf"),
        os.path.join(prefix, "lib/blkpolicyd/policies.d/20-fast-virtual.policy"),
        os.path.join(prefix, "share/man/man8/blkpolicyd.8"),
        os.path.join(prefix, "share/man/man8/blkpolicyctl.8"),
        os.path.join(prefix, "share/man/man5/blkpolicyd.conf.5"),
        os.path.join(prefix, "share/man/man5/blkpolicyd.policy.5"),
        os.path.join(compdir, "blkpolicyctl"),
    ]
    for path in expected:
        check(f"installed {path}", os.path.exists(dest + path))

    unit = dest + os.path.join(unitdir, "blkpolicyd.service")
    text = open(unit).read() if os.path.exists(unit) else ""
    check("the unit runs the installed binary", f"ExecStart={prefix}/sbin/blkpolicyd" in text)
    # ExecReload= runs the system's kill: give the root image one to find
    os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
    shutil.copy("/bin/kill", os.path.join(dest, "bin/kill"))
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", f"--root={dest}", unit], capture_output=True, text=True)
    check("systemd-analyze verify", r.returncode == 0 and not r.stderr.strip(), r.stderr)
    r = subprocess.run(["systemd-analyze", "security", "--offline=true", unit], capture_output=True, text=True)
    m = re.search(r"Overall exposure level for blkpolicyd.service: ([0-9.]+)", r.stdout)
    score = float(m.group(1)) if m else 99
    print(f"systemd-analyze security: exposure {score}")
    check("exposure at most 2.0", score <= 2.0, r.stdout[-2000:])

for page in ["blkpolicyd.8", "blkpolicyctl.8", "blkpolicyd.conf.5", "blkpolicyd.policy.5"]:
    path = os.path.join(source_root, "man", page)
    r = subprocess.run(["groff", "-ww", "-man", "-z", path], capture_output=True, text=True)
    r2 = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", path], capture_output=True, text=True,
                        env=dict(os.environ, MANWIDTH="80"))
    check(f"man page {page} renders without warnings", r.returncode == 0 and not r.stderr and not r2.stderr,
          r.stderr + r2.stderr)

res.finish()
