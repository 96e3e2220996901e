# SPDX-License-Identifier: LGPL-2.1-or-later
"""contrib/kubernetes without a cluster: every object of the base and of
the enforce overlay, as `kubectl apply -k` would send them, validated
against Kubernetes' own schemas (tests/k8s/schemas.json, made by
tools/k8s-schema-subset.py from the API server's OpenAPI document) with
unknown fields rejected, as the API server's strict field validation
rejects them; a misspelt field, a missing required one and a wrong type
are shown to fail. Then what the schemas cannot know: the daemon's
arguments are flags it has, the mounts are where those flags point, the
probes and the preStop are the image's programs and mean what they say,
the ConfigMaps laid out as the kubelet lays them out pass the daemon's
--check-config, the base observes and the overlay enforces.

No kustomize binary in Debian 12: blkptest/kustomize.py's render() does
the part of kustomize these files use. Where kubectl is installed, its own
`kubectl kustomize` output is compared with render()'s."""
import configparser
import copy
import json
import os
import re
import shutil
import subprocess

import jsonschema
import pytest
import yaml

from blkptest.kustomize import pod_spec, render

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K8S = os.path.join(TOP, "contrib", "kubernetes")
ROOTFS = os.path.join(TOP, "contrib", "container", "rootfs")
SCHEMAS = os.path.join(TOP, "tests", "k8s", "schemas.json")
TREES = {"base": os.path.join(K8S, "base"), "enforce": os.path.join(K8S, "overlays", "enforce")}


@pytest.fixture(scope="module")
def schemas():
    with open(SCHEMAS) as f:
        return json.load(f)


def schema_errors(schemas, obj):
    """Every error of obj against its kind's schema, as the API server's
    strict validation would report them ("unknown kind" for a kind the
    subset does not have)."""
    key = f"{obj.get('apiVersion')} {obj.get('kind')}"
    if key not in schemas["kinds"]:
        return [f"unknown kind {key}"]
    schema = {"definitions": schemas["definitions"], "$ref": "#/definitions/" + schemas["kinds"][key]}
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]


@pytest.fixture(scope="module", params=sorted(TREES))
def tree(request):
    return request.param, render(TREES[request.param])


def by_kind(objects, kind):
    found = [o for o in objects if o["kind"] == kind]
    assert found, f"no {kind}"
    return found


def daemonset(objects):
    (ds,) = by_kind(objects, "DaemonSet")
    return ds


def container(objects, name):
    return next(c for c in pod_spec(daemonset(objects))["containers"] if c["name"] == name)


def test_every_object_validates(tree, schemas):
    name, objects = tree
    assert {o["kind"] for o in objects} >= {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                            "DaemonSet", "ConfigMap"}
    for o in objects:
        assert schema_errors(schemas, o) == [], f"{name}: {o['kind']} {o['metadata']['name']}"


@pytest.mark.parametrize("what,mutate,expect", [
    ("a misspelt field", lambda ds: pod_spec(ds).update(hostNetwrok=pod_spec(ds).pop("hostNetwork")),
     "'hostNetwrok' was unexpected"),
    ("a container without its required name", lambda ds: pod_spec(ds)["containers"][0].pop("name"),
     "'name' is a required property"),
    ("a wrong type", lambda ds: pod_spec(ds).update(hostNetwork="yes"), "'yes' is not of type 'boolean'"),
    ("a field at the wrong level",
     lambda ds: pod_spec(ds)["containers"][0].update(privileged=True), "'privileged' was unexpected"),
    ("a probe without a handler's fields typed",
     lambda ds: pod_spec(ds)["containers"][0]["readinessProbe"].update(periodSeconds="10"),
     "'10' is not of type 'integer'"),
])
def test_schema_check_rejects(schemas, what, mutate, expect):
    objects = render(TREES["base"])
    ds = copy.deepcopy(daemonset(objects))
    assert schema_errors(schemas, ds) == []
    mutate(ds)
    errors = schema_errors(schemas, ds)
    assert any(expect in e for e in errors), f"{what}: {errors}"


def daemon_flags(blkpolicyd):
    out = subprocess.run([blkpolicyd, "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"^\s+(?:-\w )?\s*(--[a-z-]+)", out, re.M))


def unknown_flags(args, flags):
    return [a for a in args if a.split("=", 1)[0] not in flags]


def test_args_are_the_daemons_flags(tree, blkpolicyd):
    flags = daemon_flags(blkpolicyd)
    assert {"--root", "--policy-dir", "--state-dir"} <= flags, f"--help not understood: {flags}"
    args = container(tree[1], "blkpolicyd")["args"]
    assert unknown_flags(args, flags) == []
    assert unknown_flags(["--polcy-dir=/x"], flags) == ["--polcy-dir=/x"], "the check cannot fail"
    assert "--dry-run" not in args and not any(a.startswith("--device") for a in args)


def arg(args, flag):
    return [a.split("=", 1)[1] for a in args if a.startswith(flag + "=")]


def mounts(c):
    return {m["mountPath"]: m for m in c.get("volumeMounts", [])}


def test_mounts_are_where_the_flags_point(tree):
    objects = tree[1]
    spec = pod_spec(daemonset(objects))
    c = container(objects, "blkpolicyd")
    args, m = c["args"], mounts(c)
    volumes = {v["name"]: v for v in spec["volumes"]}
    (root,) = arg(args, "--root")
    (state,) = arg(args, "--state-dir")
    (socket,) = arg(args, "--socket")
    (config,) = arg(args, "--config")
    assert os.path.dirname(socket) == state, "the socket is in the state dir, which the sidecar mounts"
    assert volumes[m[state]["name"]]["hostPath"]["path"] == "/run/blkpolicyd", "the records outlive the pod"
    assert mounts(container(objects, "node-status"))[state]["name"] == m[state]["name"]
    assert volumes[m[config + ".d"]["name"]]["configMap"]["name"].startswith("blkpolicyd-config")
    assert m["/etc/blkpolicyd/policies.d"]["mountPath"] in arg(args, "--policy-dir")
    assert volumes[m["/etc/blkpolicyd/policies.d"]["name"]]["configMap"]["name"].startswith("blkpolicyd-policies")
    for host in ("/etc", "/usr/lib", "/boot", "/run/udev"):
        mount = m[root + host]
        assert mount.get("readOnly") is True, f"{host} of the host is read-only in the pod"
        assert volumes[mount["name"]]["hostPath"]["path"] == host
    assert volumes[m["/sys/kernel/debug"]["name"]]["hostPath"]["path"] == "/sys/kernel/debug"
    for mount in c["volumeMounts"] + container(objects, "node-status")["volumeMounts"]:
        assert mount["name"] in volumes


def test_the_pod_reaches_the_host(tree):
    ds = daemonset(tree[1])
    spec = pod_spec(ds)
    assert spec["hostNetwork"] is True, "uevents reach only the initial network namespace"
    assert container(tree[1], "blkpolicyd")["securityContext"]["privileged"] is True
    assert {"operator": "Exists"} in spec["tolerations"]
    assert spec["priorityClassName"] == "system-node-critical"
    # two daemons on one node's state dir: the second exits on its lock
    assert ds["spec"]["updateStrategy"]["rollingUpdate"].get("maxSurge", 0) in (0, "0", "0%")
    sidecar = container(tree[1], "node-status")
    assert sidecar["securityContext"].get("privileged") is not True
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in sidecar["env"]


def image_program(path):
    full = os.path.join(ROOTFS, path.lstrip("/"))
    return os.path.isfile(full) and os.access(full, os.X_OK)


def test_probes_and_prestop_mean_what_they_say(tree):
    c = container(tree[1], "blkpolicyd")
    live = c["livenessProbe"]["exec"]["command"]
    assert live == ["/usr/libexec/blkpolicyd/k8s-probe", "live"], \
        "liveness: the daemon answers (status exits 4 on a rejected policy: a restart loop)"
    assert c["startupProbe"]["exec"]["command"] == live
    assert c["readinessProbe"]["exec"]["command"] == ["/usr/libexec/blkpolicyd/k8s-probe", "ready"]
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert "status" not in c[probe]["exec"]["command"]
        assert image_program(c[probe]["exec"]["command"][0])
    pre = c["lifecycle"]["preStop"]["exec"]["command"]
    (socket,) = arg(c["args"], "--socket")
    # absolute: an imported image has no PATH of its own but the one
    # build-image.sh sets, and a runtime may not supply one
    assert pre == ["/usr/bin/blkpolicyctl", "--socket", socket, "handover"]
    sidecar = container(tree[1], "node-status")
    assert image_program(sidecar["command"][0]) and sidecar["command"][0].endswith("/k8s-node-status")
    assert not image_program("/usr/libexec/blkpolicyd/no-such-probe"), "the check cannot fail"


def test_rbac_is_what_node_status_needs(tree):
    objects = tree[1]
    (sa,) = by_kind(objects, "ServiceAccount")
    (role,) = by_kind(objects, "ClusterRole")
    (binding,) = by_kind(objects, "ClusterRoleBinding")
    ds = daemonset(objects)
    assert pod_spec(ds)["serviceAccountName"] == sa["metadata"]["name"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert {"kind": "ServiceAccount", "name": sa["metadata"]["name"],
            "namespace": ds["metadata"]["namespace"]} in binding["subjects"]
    (ns,) = by_kind(objects, "Namespace")
    assert ns["metadata"]["name"] == ds["metadata"]["namespace"] == sa["metadata"]["namespace"] == "blkpolicyd"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_image_is_this_version(tree):
    with open(os.path.join(TOP, "meson.build")) as f:
        version = re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)
    for c in pod_spec(daemonset(tree[1]))["containers"]:
        assert c["image"] == f"localhost/blkpolicyd:{version}", "contrib/container/build-image.sh's default tag"


def config_maps(objects):
    """ConfigMap data by the name the DaemonSet gave before the hash."""
    return {re.sub(r"-[0-9a-f]{10}$", "", o["metadata"]["name"]): o["data"]
            for o in objects if o["kind"] == "ConfigMap"}


def kubelet_layout(directory, data):
    """A ConfigMap volume as the kubelet writes it: the files in a
    timestamped directory, `..data` a symlink to it, each key a symlink
    through `..data` (so the daemon reads symlinks there)."""
    stamp = os.path.join(directory, "..2026_12_03_11_00_00.000000001")
    os.makedirs(stamp)
    for key, value in data.items():
        with open(os.path.join(stamp, key), "w") as f:
            f.write(value)
        os.symlink(os.path.join("..data", key), os.path.join(directory, key))
    os.symlink(os.path.basename(stamp), os.path.join(directory, "..data"))


def test_config_maps_pass_check_config_and_say_the_mode(tree, blkpolicyd, tmp_path):
    name, objects = tree
    maps = config_maps(objects)
    etc = tmp_path / "etc"
    kubelet_layout(str(etc / "blkpolicyd.conf.d"), maps["blkpolicyd-config"])
    kubelet_layout(str(etc / "policies.d"), maps["blkpolicyd-policies"])
    shutil.copy(os.path.join(TOP, "conf", "blkpolicyd.conf"), etc / "blkpolicyd.conf")   # the image's, from the .deb
    r = subprocess.run([blkpolicyd, "--check-config", f"--config={etc}/blkpolicyd.conf",
                        f"--policy-dir={TOP}/policies", f"--policy-dir={etc}/policies.d"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "0 errors" in r.stdout, r.stdout + r.stderr
    ours = [k for k in maps["blkpolicyd-policies"] if k.endswith(".policy")]
    for policy in ours:
        assert f"{etc}/policies.d/{policy}" in r.stdout, f"{policy} read through the kubelet's symlinks"
    ini = configparser.ConfigParser()
    for key in sorted(maps["blkpolicyd-config"]):
        ini.read_string(maps["blkpolicyd-config"][key])
    assert ini["Daemon"]["mode"] == {"base": "observe", "enforce": "enforce"}[name]
    assert name == "base" or ours, "the overlay adds a policy"


def test_render_is_what_kubectl_kustomize_makes(tree):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl is not installed (not in Debian 12): render() is checked by the tests above only")
    name, objects = tree
    r = subprocess.run([kubectl, "kustomize", TREES[name]], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    theirs = [d for d in yaml.safe_load_all(r.stdout) if d]

    def unhashed(objs):
        out = json.loads(re.sub(r'"(blkpolicyd-(?:config|policies))-[0-9a-z]{10}"', r'"\1"', json.dumps(objs)))
        return sorted(out, key=lambda o: (o["kind"], o["metadata"]["name"]))
    assert unhashed(objects) == unhashed(theirs)
