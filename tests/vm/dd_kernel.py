# SPDX-License-Identifier: LGPL-2.1-or-later
"""Kernels from Debian's trixie-backports for the VM test bed (issue 15).

- stock_73(): Debian's own linux-image-7.3.* (a third stock kernel), fetched
  with `apt-get download` like 6.1 and 6.12.
- patched_73(): Debian's linux-source-7.3 with the seed-002 patch
  (tests/vm/dispatch-direct.patch, mq-deadline's dispatch_direct) and a
  tinyconfig + tests/vm/dispatch-direct.config kernel, built here when the
  cache misses. No modules: everything the test bed needs is built in.

Both come from a private apt configuration (its own sources list and lists
directory under the cache), so the machine's apt sources are not touched.
The build runs under `nice -n 10` with `make -j2`; only bzImage and .config
are kept, in $BLKPOLICYD_VM_CACHE/<key>/, where the key is the source
package's version, the patch's and the fragment's sha256 and gcc's version.
The 1.9 GB source tree is deleted whatever happens.

  sudo python3 tests/vm/dd_kernel.py        # build (or find) the patched kernel, print its directory
"""
import fcntl
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("BLKPOLICYD_VM_CACHE", "/var/cache/blkpolicyd-vm")
PATCH = os.path.join(HERE, "dispatch-direct.patch")
FRAGMENT = os.path.join(HERE, "dispatch-direct.config")
SUITE = "trixie-backports"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
SOURCE_PKG = "linux-source-7.3"


def _sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def apt_opts():
    """A private apt configuration for trixie-backports; its lists are
    refreshed when older than a day."""
    base = os.path.join(CACHE, "apt-" + SUITE)
    lists = os.path.join(base, "lists")
    os.makedirs(os.path.join(lists, "partial"), exist_ok=True)
    sources = os.path.join(base, "sources.list")
    with open(sources, "w") as f:
        f.write(f"deb [signed-by={KEYRING}] http://deb.debian.org/debian {SUITE} main\n")
    opts = ["-o", f"Dir::Etc::sourcelist={sources}", "-o", "Dir::Etc::sourceparts=-",
            "-o", f"Dir::State::Lists={lists}"]
    stamp = os.path.join(base, "updated")
    if not os.path.exists(stamp) or time.time() - os.path.getmtime(stamp) > 86400:
        r = subprocess.run(["apt-get", *opts, "update", "-qq"], capture_output=True, text=True)
        if r.returncode != 0 and not os.path.exists(stamp):
            raise RuntimeError(f"apt-get update for {SUITE} failed: {r.stderr.strip()}")
        if r.returncode == 0:           # else: keep the lists of the last update, a day old or more
            open(stamp, "w").close()
    return opts


def candidate(opts, pkg):
    m = re.search(r"Candidate: (\S+)", _sh("apt-cache", *opts, "policy", pkg))
    return m.group(1) if m and m.group(1) != "(none)" else None


def download(opts, pkg, dest):
    """The .deb of pkg's candidate version in dest (downloaded once)."""
    version = candidate(opts, pkg)
    # the file name has the version with its epoch's ':' as %3a
    pattern = os.path.join(dest, f"{pkg}_{glob.escape(version.replace(':', '%3a'))}_*.deb")
    debs = glob.glob(pattern)
    if not debs:
        subprocess.run(["apt-get", *opts, "download", "-qq", pkg], cwd=dest, check=True, capture_output=True)
        debs = glob.glob(pattern)
    return debs[0]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def gcc_version():
    return _sh("gcc", "-dumpfullversion").strip()


def cache_key(version):
    key = f"dd-{version}-patch{sha256(PATCH)[:12]}-config{sha256(FRAGMENT)[:12]}-gcc{gcc_version()}"
    return re.sub(r"[^A-Za-z0-9.+-]", "_", key)


def fragment_options():
    opts = {}
    for line in open(FRAGMENT):
        m = re.match(r"(CONFIG_\w+)=(.*)", line) or re.match(r"# (CONFIG_\w+) is not set", line)
        if m:
            opts[m.group(1)] = m.group(2) if m.lastindex == 2 else "n"
    return opts


def check_config(config):
    """Every option of the fragment as asked in the final .config."""
    have = {}
    for line in open(config):
        m = re.match(r"(CONFIG_\w+)=(.*)", line) or re.match(r"# (CONFIG_\w+) is not set", line)
        if m:
            have[m.group(1)] = m.group(2) if m.lastindex == 2 else "n"
    return [f"{k}={v} (got {have.get(k, 'n')})" for k, v in fragment_options().items() if have.get(k, "n") != v]


def build(version, out, log):
    """Downloads, unpacks, patches, configures and builds; bzImage and .config into out."""
    opts = apt_opts()
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix="blkpolicyd-kbuild-", dir="/var/tmp")
    try:
        deb = download(opts, SOURCE_PKG, CACHE)
        log(f"unpacking {os.path.basename(deb)}")
        subprocess.run(f"dpkg-deb --fsys-tarfile '{deb}' | tar -xf - -C '{work}' --wildcards './usr/src/*.tar.xz'",
                       shell=True, check=True)
        tarball = glob.glob(os.path.join(work, "usr/src/linux-source-*.tar.xz"))[0]
        subprocess.run(["tar", "-xJf", tarball, "-C", work], check=True)
        os.unlink(tarball)
        tree = [d for d in glob.glob(os.path.join(work, "linux-source-*")) if os.path.isdir(d)][0]
        log(f"patching {os.path.basename(tree)} with {os.path.basename(PATCH)}")
        p = subprocess.run(["patch", "-p1", "--fuzz=0", "--no-backup-if-mismatch", "-i", PATCH], cwd=tree,
                           capture_output=True, text=True)
        log(p.stdout.strip())
        if p.returncode != 0:
            raise RuntimeError("the seed-002 patch does not apply:\n" + p.stdout + p.stderr)
        nice = ["nice", "-n", "10"]
        make = [*nice, "make", "-s", "ARCH=x86_64", "-j2"]
        subprocess.run([*make, "tinyconfig"], cwd=tree, check=True, capture_output=True)
        subprocess.run([*nice, "scripts/kconfig/merge_config.sh", "-m", ".config", FRAGMENT], cwd=tree, check=True,
                       capture_output=True)
        subprocess.run([*make, "olddefconfig"], cwd=tree, check=True, capture_output=True)
        missing = check_config(os.path.join(tree, ".config"))
        if missing:
            raise RuntimeError("options of the fragment that did not stick: " + ", ".join(missing))
        log("building bzImage (make -j2 under nice -n 10)")
        t1 = time.monotonic()
        b = subprocess.run([*make, "bzImage"], cwd=tree, capture_output=True, text=True)
        if b.returncode != 0:
            raise RuntimeError("kernel build failed:\n" + (b.stdout + b.stderr)[-4000:])
        kver = _sh("make", "-s", "ARCH=x86_64", "kernelrelease", cwd=tree).strip()
        tmp = out + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(os.path.join(tmp, "boot"))
        shutil.copy2(os.path.join(tree, "arch/x86/boot/bzImage"), os.path.join(tmp, "boot", f"vmlinuz-{kver}"))
        shutil.copy2(os.path.join(tree, ".config"), os.path.join(tmp, ".config"))
        with open(os.path.join(tmp, "kernelrelease"), "w") as f:
            f.write(kver + "\n")
        with open(os.path.join(tmp, "build-time"), "w") as f:
            f.write(f"total {time.monotonic() - t0:.0f} s, make bzImage {time.monotonic() - t1:.0f} s\n")
        os.rename(tmp, out)
        log(f"built {kver} in {time.monotonic() - t0:.0f} s (make {time.monotonic() - t1:.0f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def patched_73(log=lambda s: None):
    """(kdir, kver) of 7.3 + seed 002: from the cache, or built (10-14 min)."""
    os.makedirs(CACHE, exist_ok=True)
    opts = apt_opts()
    version = candidate(opts, SOURCE_PKG)
    if not version:
        raise RuntimeError(f"{SOURCE_PKG} is not in {SUITE}")
    out = os.path.join(CACHE, cache_key(version))
    with open(out + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)     # one build at a time; a second caller waits and finds it
        if not os.path.isdir(out):
            log(f"cache miss: {out}")
            build(version, out, log)
    with open(os.path.join(out, "kernelrelease")) as f:
        return out, f.read().strip()


def stock_73():
    """(kdir, kver) of Debian's own 7.3 kernel image and modules, or None when
    the archive has none. The image package carries vmlinuz only; the modules
    come in linux-modules-<abi>."""
    os.makedirs(CACHE, exist_ok=True)
    opts = apt_opts()
    names = [line.split()[0] for line in
             _sh("apt-cache", *opts, "search", "--names-only", r"^linux-image-7\.3\.[0-9]+\+deb13-amd64$").splitlines()]
    if not names:
        return None
    pkg = sorted(names, key=lambda n: [int(x) for x in re.findall(r"\d+", n)[:3]])[-1]
    kver = pkg[len("linux-image-"):]
    kdir = os.path.join(CACHE, kver)
    if not os.path.isdir(kdir):
        shutil.rmtree(kdir + ".tmp", ignore_errors=True)     # a half-made one from an interrupted run
        deps = _sh("apt-cache", *opts, "depends", pkg)
        parts = [pkg] + sorted(set(re.findall(r"Depends: (linux-(?:binary|modules|image)-" + re.escape(kver) +
                                              r"[^\s]*)", deps)) - {pkg})
        for p in parts:
            _sh("dpkg-deb", "-x", download(opts, p, CACHE), kdir + ".tmp")
        tmp = kdir + ".tmp"
        # 7.x packages put the kernel in /usr/lib/modules/<kver>/vmlinuz and
        # the modules under /usr/lib: lay them out as 6.1 and 6.12 are
        moved = os.path.join(tmp, "usr", "lib", "modules", kver, "vmlinuz")
        if os.path.exists(moved):
            os.makedirs(os.path.join(tmp, "boot"), exist_ok=True)
            os.rename(moved, os.path.join(tmp, "boot", f"vmlinuz-{kver}"))
        if not os.path.exists(os.path.join(tmp, "lib")) and os.path.isdir(os.path.join(tmp, "usr", "lib", "modules")):
            os.symlink("usr/lib", os.path.join(tmp, "lib"))
        if not os.path.exists(os.path.join(tmp, "boot", f"vmlinuz-{kver}")):
            raise RuntimeError(f"no vmlinuz-{kver} in {parts}")
        _sh("/sbin/depmod", "-b", kdir + ".tmp", kver)
        os.rename(kdir + ".tmp", kdir)
    return kdir, kver


if __name__ == "__main__":
    kdir, kver = patched_73(log=lambda s: print(s, flush=True))
    print(kdir, kver)
    print(open(os.path.join(kdir, "build-time")).read().strip() if os.path.exists(os.path.join(kdir, "build-time"))
          else "")
