# SPDX-License-Identifier: LGPL-2.1-or-later
"""The part of kustomize contrib/kubernetes uses, for the tests that read
its manifests with no kustomize binary (none in Debian 12): resources,
namespace, configMapGenerator (create, merge, replace) and images. Any
other key is refused, so a kustomization that grows one fails its test
instead of being read half. tests/k8s-manifests.py compares it with
`kubectl kustomize` where kubectl is installed."""
import hashlib
import json
import os

import yaml

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "Node"}
KUSTOMIZE_KEYS = {"apiVersion", "kind", "namespace", "resources", "configMapGenerator", "images"}


def load_yaml(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def generate(gen, base_dir, existing):
    """One configMapGenerator entry: a ConfigMap of its files (the key is
    the file's name), created, or merged into or replacing the one of the
    same name that a resource brought."""
    data = {}
    for path in gen.get("files", []):
        with open(os.path.join(base_dir, path)) as f:
            data[os.path.basename(path)] = f.read()
    behavior = gen.get("behavior", "create")
    assert set(gen) <= {"name", "files", "behavior"}, f"configMapGenerator: keys {set(gen)} not rendered here"
    if behavior == "create":
        assert gen["name"] not in existing, f"{gen['name']}: generated twice"
        existing[gen["name"]] = data
    elif behavior == "merge":
        existing[gen["name"]] = {**existing[gen["name"]], **data}
    elif behavior == "replace":
        assert gen["name"] in existing, f"{gen['name']}: replace of a ConfigMap no resource made"
        existing[gen["name"]] = data
    else:
        raise AssertionError(f"configMapGenerator behavior {behavior!r}")


def render_tree(path):
    """(objects, generated ConfigMaps by name) of one kustomization."""
    with open(os.path.join(path, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    assert set(k) <= KUSTOMIZE_KEYS, f"{path}: kustomization keys {set(k) - KUSTOMIZE_KEYS} not rendered here"
    objects, maps = [], {}
    for res in k.get("resources", []):
        full = os.path.normpath(os.path.join(path, res))
        if os.path.isdir(full):
            o, m = render_tree(full)
            objects += o
            maps.update(m)
        else:
            objects += load_yaml(full)
    for gen in k.get("configMapGenerator", []):
        generate(gen, path, maps)
    if "namespace" in k:
        for o in objects:
            if o["kind"] not in CLUSTER_SCOPED:
                o["metadata"]["namespace"] = k["namespace"]
            for s in o.get("subjects", []):
                if s.get("kind") == "ServiceAccount":
                    s["namespace"] = k["namespace"]
    for img in k.get("images", []):
        for o in objects:
            for c in pod_spec(o).get("containers", []) if o["kind"] == "DaemonSet" else []:
                name = c["image"].rsplit(":", 1)[0]
                if name == img["name"]:
                    c["image"] = f"{img.get('newName', name)}:{img.get('newTag', c['image'].rsplit(':', 1)[1])}"
    return objects, maps


def render(path):
    """The objects `kubectl apply -k path` sends: the generated ConfigMaps
    named NAME-HASH, and the DaemonSet's volumes renamed to match (kustomize's
    hash is another one; any hash of the data makes a change roll out)."""
    objects, maps = render_tree(path)
    names = {}
    for name, data in maps.items():
        digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]
        names[name] = f"{name}-{digest}"
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "data": data,
                        "metadata": {"name": names[name], "namespace": namespace_of(objects)}})
    for o in objects:
        if o["kind"] == "DaemonSet":
            for v in pod_spec(o).get("volumes", []):
                if "configMap" in v and v["configMap"]["name"] in names:
                    v["configMap"]["name"] = names[v["configMap"]["name"]]
    return objects


def namespace_of(objects):
    return next(o["metadata"]["namespace"] for o in objects if o["kind"] == "DaemonSet")


def pod_spec(ds):
    return ds["spec"]["template"]["spec"]
