#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The image under podman, run as the DaemonSet runs it: privileged, the
host's network, the state dir a host directory, the policies and a conf.d
drop-in mounted as the ConfigMaps are, on two loop devices of its own.

Builds the image with contrib/container/build-image.sh (about 12 s once
its Debian base is cached) and checks:
  a) the daemon in the container sets the loops as the policy asks
     (read on the host's sysfs), and sees no other disk (--device=);
  b) k8s-probe: ready and live after the first pass; with a broken policy
     file reloaded, ready fails and says why while live passes (status
     exits 4 then: a liveness probe on it would restart-loop the pod); both
     fail when no daemon answers;
  c) the preStop step: `blkpolicyctl handover`, then `podman stop`: the
     loops keep the policy's values and their records; a new container on
     the same state dir takes them over writing nothing;
  d) a stop without a hand-over puts back the values the test read before
     it started anything, and leaves no record;
  e) k8s-node-status --once against a fake API server (127.0.0.1, the
     containers share the host's network) PATCHes the Node with
     blkpolicyd.io/state Applied (enforce), Degraded (a rejected policy),
     Observing (observe) and Down (no daemon), the service account's token,
     and a one-line JSON annotation; Applied, Down and the loop from a
     container of its own with the sidecar's securityContext (no
     capability, read-only root), as the DaemonSet runs it; the loop goes
     on after a failed PATCH and ends at once on SIGTERM;
  f) an enforcing container hands over, and an observing one that takes
     over (the config rolled back to observe) puts back what was found;
  g) the enforce overlay's pod, as rendered from contrib/kubernetes, under
     `podman kube play`: ConfigMaps, mounts, arguments and probes as
     written set the loops; kube down puts them back.
The image is removed at the end (rebuilding it from the cached base is
cheaper than keeping a stale one: the .deb changes with every commit).

  sudo python3 tests/container.py --deb build/blkpolicyd.deb"""
import argparse
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blkptest.kustomize import pod_spec, render  # noqa: E402
from blkptest.require import script_prerequisites  # noqa: E402
from blkptest.results import Results  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_IMAGE = os.path.join(TOP, "contrib", "container", "build-image.sh")
PREFIX = f"bpct-{os.getpid()}"
IMAGE = f"localhost/bpct-test:{os.getpid()}"
NODE = "node-ct-1"
TOKEN = "token-of-the-test"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
PROBE = "/usr/libexec/blkpolicyd/k8s-probe"
NODE_STATUS = "/usr/libexec/blkpolicyd/k8s-node-status"
# Kubernetes' label value syntax
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# Machine facts, in this one place: crun fails on this machine's hybrid
# cgroup v1/v2 mounts, and runc's default rlimits cannot be raised here (no
# CAP_SYS_RESOURCE), so every container runs with runc and rlimits at or
# below the host's.
PODMAN_RUN = ["podman", "run", "--runtime", "runc", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
# the same for `podman kube play`, which takes no such flags: a containers.conf
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
"""

# The node-status sidecar's securityContext in contrib/kubernetes/base/
# daemonset.yaml (no capability, no privilege escalation, a read-only root
# with no tmpfs on it, as readOnlyRootFilesystem gives): it must still
# reach the daemon's socket on the shared state dir and patch its Node.
SIDECAR = ["--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only", "--read-only-tmpfs=false"]

# The DaemonSet's command line (docs/service.md, "Kubernetes").
DAEMON_ARGS = ["--root=/host", "--config=/etc/blkpolicyd/blkpolicyd.conf",
               "--policy-dir=/usr/lib/blkpolicyd/policies.d", "--policy-dir=/etc/blkpolicyd/policies.d",
               "--state-dir=/run/blkpolicyd", "--socket=/run/blkpolicyd/control.sock"]


def run(cmd, timeout=120, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def wait_for(predicate, timeout):
    """Polls an observable condition until it holds or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.2)


def sysfs(dev, attr):
    with open(f"/sys/block/{dev}/queue/{attr}") as f:
        text = f.read().strip()
    return text[text.index("[") + 1:text.index("]")] if attr == "scheduler" else text


def schedulers(dev):
    with open(f"/sys/block/{dev}/queue/scheduler") as f:
        return f.read().replace("[", "").replace("]", "").split()


class FakeAPI:
    """A Kubernetes API server that records the Node PATCHes it gets and
    answers each with the next code of `codes` (then 200)."""

    def __init__(self):
        self.requests = []
        self.codes = []
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PATCH(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                api.requests.append({"path": self.path, "headers": dict(self.headers), "body": body.decode()})
                code = api.codes.pop(0) if api.codes else 200
                reply = json.dumps({"kind": "Node"} if code == 200 else {"kind": "Status", "code": code}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Bed:
    """The loops, the host directories the containers mount, and every
    container and image made, for cleanup() to remove whatever happened."""

    def __init__(self, work):
        self.work = work
        self.loops = []
        self.containers = []
        self.pods = []
        self.image = None
        self.state = os.path.join(work, "state")
        self.policies = os.path.join(work, "policies")
        self.confd = os.path.join(work, "conf.d")
        self.sa = os.path.join(work, "sa")
        for d in (self.state, self.policies, self.confd, self.sa):
            os.mkdir(d, 0o700)
        with open(os.path.join(self.sa, "token"), "w") as f:
            f.write(TOKEN)

    def add_loop(self):
        backing = os.path.join(self.work, f"loop{len(self.loops)}.img")
        with open(backing, "wb") as f:
            f.truncate(32 << 20)
        r = run(["losetup", "-f", "--show", backing])
        if r.returncode != 0:
            raise RuntimeError(f"losetup: {r.stderr}")
        self.loops.append(r.stdout.strip().removeprefix("/dev/"))

    def mode(self, mode):
        with open(os.path.join(self.confd, "50-mode.conf"), "w") as f:
            f.write(f"[Daemon]\nmode = {mode}\n")

    def mounts(self):
        """The DaemonSet's mounts: the state dir (a hostPath), the two
        ConfigMaps, the host's trees doctor and property= read, below
        /host and read-only, and a service account."""
        m = ["-v", f"{self.state}:/run/blkpolicyd", "-v", f"{self.policies}:/etc/blkpolicyd/policies.d:ro",
             "-v", f"{self.confd}:/etc/blkpolicyd/blkpolicyd.conf.d:ro", "-v", f"{self.sa}:{SA_DIR}:ro"]
        for host in ("/etc", "/usr/lib", "/boot", "/run/udev"):
            if os.path.isdir(host):     # no udevd on this machine: no /run/udev
                m += ["-v", f"{host}:/host{host}:ro"]
        return m

    def start(self, name):
        """The daemon as the DaemonSet runs it, on this test's loops only."""
        name = f"{PREFIX}-{name}"
        self.containers.append(name)
        devices = [f"--device={d}" for d in self.loops]
        r = run([*PODMAN_RUN, "-d", "--name", name, "--privileged", "--network", "host", *self.mounts(),
                 self.image, *DAEMON_ARGS, *devices])
        if r.returncode != 0:
            raise RuntimeError(f"podman run {name}: {r.stderr}")
        return name

    def once(self, entrypoint, *args, env=(), sidecar=False):
        """A program of the image in a container of its own, on the state
        dir, as the sidecar runs (with its securityContext if sidecar)."""
        name = f"{PREFIX}-once-{len(self.containers)}"
        self.containers.append(name)
        envs = [x for k, v in env for x in ("-e", f"{k}={v}")]
        return run([*PODMAN_RUN, "--rm", "--name", name, "--network", "host", *(SIDECAR if sidecar else []),
                    *self.mounts(), *envs, "--entrypoint", entrypoint, self.image, *args])

    def cleanup(self):
        for name in self.pods:
            run(["podman", "pod", "rm", "-f", "-t", "0", name])
        for name in self.containers:
            run(["podman", "rm", "-f", "-t", "0", name])
        if self.image:
            run(["podman", "rmi", "-f", self.image])
        for dev in self.loops:
            run(["losetup", "-d", f"/dev/{dev}"])


def execute(name, *cmd, env=()):
    envs = [x for k, v in env for x in ("-e", f"{k}={v}")]
    return run(["podman", "exec", *envs, name, *cmd])


def status(name):
    """status's result, or None when the daemon does not answer (yet)."""
    r = execute(name, "blkpolicyctl", "--json", "status")
    if r.returncode not in (0, 4):
        return None
    return json.loads(r.stdout)["result"]


def first_pass(name, timeout=60):
    return wait_for(lambda: (s := status(name)) and s.get("first_pass_done") and s, timeout)


def stop(name):
    """podman stop (SIGTERM, the image's STOPSIGNAL); the daemon's exit status."""
    run(["podman", "stop", "-t", "30", name], timeout=60)
    r = run(["podman", "inspect", "--format", "{{.State.ExitCode}}", name])
    return r.stdout.strip()


def logs(name):
    r = run(["podman", "logs", name])
    return (r.stdout + r.stderr)[-3000:]


def patch_of(api, i):
    """The i-th request's label and annotation, and the request."""
    if len(api.requests) <= i:
        return None, None, None
    req = api.requests[i]
    try:
        meta = json.loads(req["body"])["metadata"]
        raw = meta["annotations"]["blkpolicyd.io/status"]
        # one line: `kubectl get node -o yaml` shows it as it is
        return meta["labels"]["blkpolicyd.io/state"], None if "\n" in raw else json.loads(raw), req
    except (ValueError, KeyError, TypeError):
        return None, None, req


def node_status_once(api, name=None, bed=None):
    """k8s-node-status --once in the daemon's container (name), or in one of
    its own (bed.once); the label and annotation the fake API got."""
    env = (("NODE_NAME", NODE), ("K8S_API", api.url))
    n = len(api.requests)
    r = execute(name, NODE_STATUS, "--once", env=env) if name else \
        bed.once(NODE_STATUS, "--once", env=env, sidecar=True)
    label, note, req = patch_of(api, n)
    return r, label, note, req


def check_patch(check, what, r, label, note, req, want, extra=lambda note: True):
    ok = (r.returncode == 0 and label == want and note is not None and note.get("state") == want
          and req["path"] == f"/api/v1/nodes/{NODE}"
          and req["headers"].get("Content-Type") == "application/merge-patch+json"
          and req["headers"].get("Authorization") == f"Bearer {TOKEN}"
          and LABEL_VALUE.match(label) and len(label) <= 63 and extra(note))
    check(f"k8s-node-status --once: {what}: blkpolicyd.io/state={want}", ok,
          f"exit {r.returncode} {r.stderr}\nlabel {label!r} annotation {note}\nrequest {req}")


def kube_pod(bed, api, name):
    """contrib/kubernetes/overlays/enforce as `kubectl apply -k` renders it,
    its ConfigMaps and the DaemonSet's pod template as a Pod, changed only
    where this machine or the test needs it: the test's image; the test's
    loops only (--device=); the state dir and, with no udevd here, /run/udev
    in the test's directory; NODE_NAME as a value (podman 4.3 has no
    spec.nodeName) and the fake API server for the sidecar; and one policy
    of the test's in blkpolicyd-policies, as an admin's overlay adds it."""
    objects = render(os.path.join(TOP, "contrib", "kubernetes", "overlays", "enforce"))
    maps = [o for o in objects if o["kind"] == "ConfigMap"]
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    spec = pod_spec(ds)
    for cm in maps:
        if cm["metadata"]["name"].startswith("blkpolicyd-policies"):
            for f in os.listdir(bed.policies):
                with open(os.path.join(bed.policies, f)) as fh:
                    cm["data"][f] = fh.read()
    for c in spec["containers"]:
        c["image"] = bed.image
        for e in c.get("env", []):
            if e["name"] == "NODE_NAME":
                e.pop("valueFrom")
                e["value"] = NODE
        if c["name"] == "blkpolicyd":
            c["args"] += [f"--device={d}" for d in bed.loops]
        else:
            c["env"] += [{"name": "K8S_API", "value": api.url}, {"name": "INTERVAL", "value": "1"}]
    udev = os.path.join(bed.work, "run-udev")
    os.makedirs(udev, exist_ok=True)
    for v in spec["volumes"]:
        path = v.get("hostPath", {}).get("path")
        if path == "/run/blkpolicyd":
            v["hostPath"]["path"] = bed.state
        elif path == "/run/udev" and not os.path.isdir("/run/udev"):
            v["hostPath"]["path"] = udev
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": ds["spec"]["template"]["metadata"]["labels"]},
           "spec": spec}
    return [*maps, pod]


def kube_play(bed, check, api, found, want, live):
    """g) the DaemonSet's own pod spec under `podman kube play`: its mounts,
    ConfigMaps, arguments and probes work as written."""
    name = f"{PREFIX}-kube"
    path = os.path.join(bed.work, "kube.yaml")
    conf = os.path.join(bed.work, "containers.conf")
    with open(path, "w") as f:
        yaml.safe_dump_all(kube_pod(bed, api, name), f)
    with open(conf, "w") as f:
        f.write(CONTAINERS_CONF)
    env = {**os.environ, "CONTAINERS_CONF": conf}
    bed.pods.append(name)
    n = len(api.requests)
    r = run(["podman", "kube", "play", path], env=env)
    c = f"{name}-blkpolicyd"
    s = r.returncode == 0 and first_pass(c)
    check("g) podman kube play of the enforce overlay's pod: the daemon answers, its first pass done",
          bool(s), f"{r.returncode} {r.stdout}{r.stderr}\n{logs(c)}")
    if not s:
        return
    held = wait_for(lambda: all(live[d]() == want[d] for d in bed.loops), 10)
    check("g) mode enforce from the ConfigMap drop-in, the test's policy from the policies ConfigMap (as "
          "podman mounts a ConfigMap), on the loops only",
          held and s["mode"] == "enforce" and s["devices"] == 2 and s["policy_files_rejected"] == 0,
          f"{json.dumps(s)[:1500]}\nlive {[live[d]() for d in bed.loops]}")
    health = run(["podman", "healthcheck", "run", c], env=env)
    check("g) the liveness probe, as podman runs it, passes", health.returncode == 0,
          f"{health.returncode} {health.stdout}{health.stderr}")
    applied = wait_for(lambda: any(patch_of(api, i)[0] == "Applied" for i in range(n, len(api.requests))), 20)
    check("g) the node-status sidecar of the pod labels the node Applied", bool(applied),
          f"{api.requests[n:][-3:]}\n{logs(name + '-node-status')}")
    down = run(["podman", "pod", "stop", "-t", "60", name], env=env, timeout=120)
    check("g) the pod stopped (SIGTERM; podman runs no preStop) puts back the values found",
          down.returncode == 0 and all(live[d]() == found[d] for d in bed.loops)
          and not os.listdir(os.path.join(bed.state, "devices")),
          f"{down.returncode} {down.stderr}; found {found}, live {[live[d]() for d in bed.loops]}\n{logs(c)}")
    run(["podman", "kube", "down", path], env=env, timeout=120)


def tests(bed, res, api):
    check = res.check
    a, b = bed.loops
    # what the kernel had before anything ran: what a stop must put back
    found = {d: {attr: sysfs(d, attr) for attr in ("scheduler", "read_ahead_kb")} for d in bed.loops}
    want = {}
    for d in bed.loops:
        sched = next(s for s in ("mq-deadline", "kyber", "bfq", "none")
                     if s in schedulers(d) and s != found[d]["scheduler"])
        ra = "1024" if found[d]["read_ahead_kb"] != "1024" else "512"
        want[d] = {"scheduler": sched, "read_ahead_kb": ra}
        with open(os.path.join(bed.policies, f"50-{d}.policy"), "w") as f:
            f.write(f"[Match]\nname = {d}\n[Queue]\nscheduler = {sched}\nread_ahead_kb = {ra}\n")
    bed.mode("enforce")
    live = {d: lambda d=d: {attr: sysfs(d, attr) for attr in ("scheduler", "read_ahead_kb")} for d in bed.loops}

    # a) enforce in a container
    c1 = bed.start("a")
    s = first_pass(c1)
    check("a) the daemon answers in the container and its first pass is done", bool(s), logs(c1))
    if not s:
        return
    check("a) it manages the test's two loops and sees no other disk (--device=)",
          s["devices"] == 2 and s["managed"] == 2 and s["mode"] == "enforce", json.dumps(s)[:2000])
    held = wait_for(lambda: all(live[d]() == want[d] for d in bed.loops), 10)
    check("a) the policy's scheduler and read_ahead_kb are on the loops (the host's sysfs)", held,
          f"want {want}, live {[live[d]() for d in bed.loops]}\n{logs(c1)}")

    # b) the probes
    ready = execute(c1, PROBE, "ready")
    alive = execute(c1, PROBE, "live")
    check("b) k8s-probe ready and live pass after the first pass", ready.returncode == 0 and alive.returncode == 0,
          f"ready {ready.returncode} {ready.stdout}{ready.stderr}; live {alive.returncode} {alive.stdout}")
    broken = os.path.join(bed.policies, "60-broken.policy")
    with open(broken, "w") as f:
        f.write(f"[Match]\nname = {a}\n[Queue]\nno_such_setting = 1\n")
    rl = execute(c1, "blkpolicyctl", "reload")
    ready = execute(c1, PROBE, "ready")
    alive = execute(c1, PROBE, "live")
    st = execute(c1, "blkpolicyctl", "status")
    check("b) a broken policy file reloaded: ready fails and names the file, live passes, status exits 4",
          rl.returncode in (0, 4) and ready.returncode != 0 and "60-broken.policy" in ready.stdout
          and alive.returncode == 0 and st.returncode == 4,
          f"reload {rl.returncode} {rl.stdout}{rl.stderr}; ready {ready.returncode} {ready.stdout}; "
          f"live {alive.returncode} {alive.stdout}; status {st.returncode}")
    check("b) the rejected file changed nothing on the loops", all(live[d]() == want[d] for d in bed.loops),
          f"{[live[d]() for d in bed.loops]}")
    r, label, note, req = node_status_once(api, c1)
    check_patch(check, "a rejected policy", r, label, note, req, "Degraded",
                lambda n: n.get("rejected") == 1 and n.get("mode") == "enforce")
    os.unlink(broken)
    rl = execute(c1, "blkpolicyctl", "reload")
    ready = execute(c1, PROBE, "ready")
    check("b) the file removed and reloaded: ready again", rl.returncode == 0 and ready.returncode == 0,
          f"reload {rl.returncode} {rl.stderr}; ready {ready.returncode} {ready.stdout}")

    # c) preStop: hand over, stop; the next container takes over
    ho = execute(c1, "blkpolicyctl", "handover")
    s = status(c1)
    check("c) blkpolicyctl handover (the preStop hook) is taken", ho.returncode == 0 and s and s["handover"],
          f"{ho.returncode} {ho.stdout}{ho.stderr} {s and s.get('handover')}")
    rc = stop(c1)
    records = sorted(os.listdir(os.path.join(bed.state, "devices")))
    check("c) after the hand-over and podman stop the loops keep the policy's values, and their records",
          rc == "0" and all(live[d]() == want[d] for d in bed.loops) and len(records) == 2,
          f"exit {rc}, live {[live[d]() for d in bed.loops]}, records {records}\n{logs(c1)}")
    c2 = bed.start("b")
    s = first_pass(c2)
    check("c) a new container on the same state dir takes over writing nothing",
          bool(s) and s["writes"]["scheduler"] == 0 and s["writes"]["other"] == 0 and s["managed"] == 2,
          f"{s and s['writes']}\n{logs(c2)}")
    check("c) and the loops' values are unchanged", all(live[d]() == want[d] for d in bed.loops),
          f"{[live[d]() for d in bed.loops]}")
    # in a container of its own, as the DaemonSet's sidecar: the socket
    # reached through the shared state dir, with no capability
    r, label, note, req = node_status_once(api, bed=bed)
    check_patch(check, "enforce, verify 0, from the sidecar's own container", r, label, note, req, "Applied",
                lambda n: n.get("mode") == "enforce" and n.get("verify") == 0 and n.get("managed") == 2
                and n.get("rejected") == 0 and n.get("version") and n.get("time"))

    # d) a stop without a hand-over puts back what was found
    rc = stop(c2)
    check("d) a stop without a hand-over puts back exactly the values found before the first write",
          rc == "0" and all(live[d]() == found[d] for d in bed.loops),
          f"exit {rc}, found {found}, live {[live[d]() for d in bed.loops]}\n{logs(c2)}")
    records = os.listdir(os.path.join(bed.state, "devices"))
    check("d) and leaves no record", not records, f"{records}")
    ready = bed.once(PROBE, "ready")
    alive = bed.once(PROBE, "live")
    check("b) with no daemon on the socket, live and ready fail", ready.returncode != 0 and alive.returncode != 0,
          f"ready {ready.returncode} {ready.stdout}; live {alive.returncode} {alive.stdout}")

    # e) observe, then no daemon at all
    bed.mode("observe")
    c3 = bed.start("c")
    s = first_pass(c3)
    check("e) observe: the daemon writes nothing", bool(s) and s["mode"] == "observe"
          and s["writes"]["scheduler"] == 0 and s["writes"]["other"] == 0
          and all(live[d]() == found[d] for d in bed.loops), f"{s and s['writes']}\n{logs(c3)}")
    r, label, note, req = node_status_once(api, c3)
    check_patch(check, "observe, changes pending (verify 4)", r, label, note, req, "Observing",
                lambda n: n.get("mode") == "observe" and n.get("verify") == 4)
    stop(c3)
    r, label, note, req = node_status_once(api, bed=bed)
    check_patch(check, "no daemon", r, label, note, req, "Down")

    # f) taking blkpolicyd off (docs/service.md, "Kubernetes"): the config
    # back to observe rolls out; the enforcing pod hands over at its
    # preStop, and the observing one that takes over puts back what was found
    bed.mode("enforce")
    c4 = bed.start("d")
    s = first_pass(c4)
    held = s and wait_for(lambda: all(live[d]() == want[d] for d in bed.loops), 10)
    ho = execute(c4, "blkpolicyctl", "handover")
    rc = stop(c4)
    check("f) enforce again, hand over, stop: the values stay", bool(held) and ho.returncode == 0 and rc == "0"
          and all(live[d]() == want[d] for d in bed.loops), f"{[live[d]() for d in bed.loops]}\n{logs(c4)}")
    bed.mode("observe")
    c5 = bed.start("e")
    back = first_pass(c5) and wait_for(lambda: all(live[d]() == found[d] for d in bed.loops), 10)
    records = os.listdir(os.path.join(bed.state, "devices"))
    check("f) an observing container that takes over puts back exactly the values found, and keeps no record",
          bool(back) and not records, f"found {found}, live {[live[d]() for d in bed.loops]}, records {records}\n"
          f"{logs(c5)}")
    stop(c5)

    kube_play(bed, check, api, found, want, live)

    # the loop: a failed PATCH is logged and tried again; SIGTERM ends it
    api.codes = [500]
    n = len(api.requests)
    name = f"{PREFIX}-sidecar"
    bed.containers.append(name)
    r = run([*PODMAN_RUN, "-d", "--name", name, "--network", "host", *SIDECAR, *bed.mounts(), "-e", f"NODE_NAME={NODE}",
             "-e", f"K8S_API={api.url}", "-e", "INTERVAL=1", "--entrypoint", NODE_STATUS, bed.image])
    again = wait_for(lambda: len(api.requests) >= n + 2, 20)
    up = run(["podman", "inspect", "--format", "{{.State.Running}}", name]).stdout.strip()
    t0 = time.monotonic()
    rc = stop(name)
    took = time.monotonic() - t0
    check("e) the sidecar loop tries again after a failed PATCH, says so, and ends at once on SIGTERM",
          r.returncode == 0 and again and up == "true" and "failed (500)" in logs(name) and rc == "0" and took < 10,
          f"run {r.returncode} {r.stderr}; {len(api.requests) - n} PATCHes, running {up}, exit {rc} "
          f"after {took:.1f} s\n{logs(name)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deb", required=True)
    args = ap.parse_args()
    script_prerequisites("container", ("podman", "runc", "mmdebstrap", "losetup"))
    res = Results()
    # a SIGTERM (a CI timeout) cleans up as a failure does
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    work = tempfile.mkdtemp(prefix="blkpolicyd-ct-")
    bed = Bed(work)
    api = FakeAPI()
    try:
        t0 = time.monotonic()
        bed.image = IMAGE       # removed at the end, whatever the build did
        r = run([BUILD_IMAGE, "--deb", args.deb, "--tag", IMAGE], timeout=1800)
        res.check(f"build-image.sh --deb {args.deb} builds the image ({time.monotonic() - t0:.0f} s)",
                  r.returncode == 0, (r.stdout + r.stderr)[-3000:])
        if r.returncode == 0:
            bed.add_loop()
            bed.add_loop()
            print(f"# loops: {' '.join(bed.loops)}")
            tests(bed, res, api)
    finally:
        api.stop()
        bed.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    res.finish("container: ")


if __name__ == "__main__":
    main()
