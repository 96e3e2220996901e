# SPDX-License-Identifier: LGPL-2.1-or-later
"""pytest fixtures shared by every Python test of blkpolicyd.

meson runs one pytest per test file and passes the programs under test:
    pytest-3 tests/control.py --blkpolicyd build/daemon/blkpolicyd --blkpolicyctl build/ctl/blkpolicyctl
A file whose every test skipped exits 77, so that meson shows it as SKIP
and not as a pass."""
import os
import shutil
import signal
import tempfile

import pytest

from blkptest import require
from blkptest.daemon import Daemon, control_call, ctl
from blkptest.loop import LoopDevices

SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MESON_SKIP = 77


def pytest_addoption(parser):
    group = parser.getgroup("blkpolicyd")
    group.addoption("--blkpolicyd", help="the daemon under test")
    group.addoption("--blkpolicyctl", help="the control client under test")
    group.addoption("--build-root", help="the meson build directory")
    group.addoption("--source-root", default=SOURCE_ROOT, help="the source tree (default: this checkout)")


def _option(request, name):
    value = request.config.getoption(name)
    if not value:
        pytest.fail(f"--{name.replace('_', '-')} is required: meson passes it (see tests/meson.build)",
                    pytrace=False)
    # meson passes paths relative to the build directory; tests may run
    # programs from another working directory
    return os.path.abspath(value)


@pytest.fixture(scope="session")
def blkpolicyd(request):
    return _option(request, "blkpolicyd")


@pytest.fixture(scope="session")
def blkpolicyctl(request):
    return _option(request, "blkpolicyctl")


@pytest.fixture(scope="session")
def build_root(request):
    return _option(request, "build_root")


@pytest.fixture(scope="session")
def top(request):
    """The source tree: policies/, conf/, man/, docs/."""
    return request.config.getoption("source_root")


@pytest.fixture(scope="session")
def fixtures_dir(top):
    return os.path.join(top, "tests", "fixtures")


@pytest.fixture(scope="session")
def kvm_fixture(fixtures_dir):
    """The fixture machine most tests run on: a KVM guest on 6.18."""
    return os.path.join(fixtures_dir, "kvm-6.18")


@pytest.fixture(scope="session")
def fault_injection(blkpolicyd):
    """The test needs the fake kernel or BLKPOLICYD_FAULTS: skips (fails in CI) without them."""
    require.require_fault_injection(blkpolicyd)


@pytest.fixture(scope="session")
def root():
    """The test needs root and /dev/loop-control: skips (fails in CI) without them."""
    require.require_root()


def _workdir(prefix):
    # short paths under /tmp: a unix socket path must fit in 108 bytes
    return tempfile.mkdtemp(prefix=f"blkpolicyd-{prefix}-")


@pytest.fixture(scope="module")
def module_work(request):
    """A scratch directory for a whole file's tests (one daemon shared by them)."""
    path = _workdir(request.module.__name__)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def work(request):
    """A scratch directory for one test, removed after it."""
    path = _workdir(request.node.name[:40].replace("/", "_"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Daemons:
    """Starts daemons in one work directory and kills whatever is still
    running at teardown, pass or fail; each one's log is printed then, which
    pytest shows only for a test that failed."""

    def __init__(self, blkpolicyd, work):
        self.blkpolicyd = blkpolicyd
        self.work = work
        self.sock = os.path.join(work, "control.sock")
        self.policies = os.path.join(work, "policies")
        self.state = os.path.join(work, "state")
        self.running = []

    def policy(self, name, text):
        """Writes (or rewrites) a policy file in the work directory's policies/."""
        os.makedirs(self.policies, exist_ok=True)
        with open(os.path.join(self.policies, name), "w") as f:
            f.write(text)

    def config(self, text):
        """Writes the work directory's blkpolicyd.conf; returns its path."""
        path = os.path.join(self.work, "blkpolicyd.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def start_on(self, device, conf="/dev/null", extra=(), **kw):
        """start() on the devices device names, with the work directory's
        policies/, state/ and control socket."""
        return self.start(["--config", conf, "--policy-dir", self.policies, "--state-dir", self.state,
                           "--device", device, "--socket", self.sock, *extra], **kw)

    def start(self, args, env=None, ready=True, timeout=30, append_log=False):
        """Starts blkpolicyd with args; waits for READY=1 unless ready=False."""
        d = Daemon(self.blkpolicyd, self.work, args, env=env, append_log=append_log)
        self.running.append(d)
        if ready:
            d.wait_for("READY=1", timeout=timeout)
        return d

    def call(self, req, timeout=5):
        return control_call(self.sock, req, timeout)

    def cleanup(self):
        for d in self.running:
            d.cleanup()
            print(f"--- daemon log ({d.log_path})\n{d.text()[-4000:]}")


@pytest.fixture
def daemons(blkpolicyd, work):
    ds = Daemons(blkpolicyd, work)
    yield ds
    ds.cleanup()


@pytest.fixture(scope="module")
def module_daemons(blkpolicyd, module_work):
    ds = Daemons(blkpolicyd, module_work)
    yield ds
    ds.cleanup()


@pytest.fixture
def run_ctl(blkpolicyctl):
    """blkpolicyctl against a socket: run_ctl(sock, "status")."""
    return lambda sock, *args, **kw: ctl(blkpolicyctl, sock, *args, **kw)


@pytest.fixture(scope="module")
def loops(request, root):
    """Loop devices from the file's own LOOP_BASE on, all removed at the end
    of the file's tests, whether they passed or not."""
    devices = LoopDevices(base=getattr(request.module, "LOOP_BASE"))
    yield devices
    devices.remove_all()


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config):
    # meson stops a test that timed out with SIGTERM: as an interrupt, pytest
    # still runs the teardowns that kill daemons and remove loop devices
    signal.signal(signal.SIGTERM, _interrupt)


# meson counts a file as SKIP only when it exits 77; pytest exits 0 when
# everything skipped, which would show as a pass.
@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session, exitstatus):
    yield
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = tr.stats if tr else {}
    passed = len(stats.get("passed", []))
    skipped = len(stats.get("skipped", []))
    if session.exitstatus == 0 and passed == 0 and skipped > 0:
        session.exitstatus = MESON_SKIP
