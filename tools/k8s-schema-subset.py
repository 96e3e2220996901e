#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes tests/k8s/schemas.json: the definitions of Kubernetes' OpenAPI v2
document that contrib/kubernetes uses, as strict JSON Schema, for
tests/k8s-manifests.py to validate the manifests with and no cluster.

  tools/k8s-schema-subset.py SWAGGER.json VERSION > tests/k8s/schemas.json

SWAGGER.json is Kubernetes' api/openapi-spec/swagger.json (kubernetes/
kubernetes, or its copy kubernetes/swagger.json.unprocessed in kubernetes-
client/python), VERSION the release it is of, written into the output.
Run it again to move to a newer release.

What it does to the definitions, as the API server sees an object:
  - keeps the kinds below and every definition they reach by $ref;
  - additionalProperties false on every object with properties and no
    additionalProperties of its own: `kubectl apply --validate=strict`
    (the default since 1.25's server-side field validation) rejects an
    unknown field, where plain JSON Schema would let `hostNetwrok` pass;
  - IntOrString (maxUnavailable: 1 or "10%") and Quantity (cpu: 1 or
    "10m") accept a number or a string, as their JSON forms do;
  - drops descriptions: the file is read by a test, not by people."""
import json
import sys

# The kinds contrib/kubernetes applies, and a Node: what k8s-node-status
# patches (its labels and annotations are ObjectMeta's).
KINDS = [("", "v1", "Namespace"), ("", "v1", "ServiceAccount"), ("", "v1", "ConfigMap"), ("", "v1", "Node"),
         ("apps", "v1", "DaemonSet"), ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
         ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")]
NUMBER_OR_STRING = {"io.k8s.apimachinery.pkg.util.intstr.IntOrString": ["integer", "string"],
                    "io.k8s.apimachinery.pkg.api.resource.Quantity": ["number", "string"]}
PREFIX = "#/definitions/"


def refs(node):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"].removeprefix(PREFIX)
        for v in node.values():
            yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


def strict(node):
    """A copy without descriptions, every object closed."""
    if isinstance(node, list):
        return [strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items() if k != "description"}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def kind_names(defs):
    """(group, version, kind) -> definition name, from the
    x-kubernetes-group-version-kind every top-level kind carries."""
    names = {}
    for name, d in defs.items():
        for gvk in d.get("x-kubernetes-group-version-kind", []):
            names.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return names


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} SWAGGER.json VERSION")
    with open(sys.argv[1]) as f:
        defs = json.load(f)["definitions"]
    names = kind_names(defs)
    kinds, todo = {}, []
    for gvk in KINDS:
        if gvk not in names:
            sys.exit(f"{sys.argv[1]}: no definition of {gvk}")
        api = f"{gvk[0]}/{gvk[1]}" if gvk[0] else gvk[1]
        kinds[f"{api} {gvk[2]}"] = names[gvk]
        todo.append(names[gvk])
    keep = {}
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        if name in NUMBER_OR_STRING:
            keep[name] = {"type": NUMBER_OR_STRING[name]}
            continue
        keep[name] = strict(defs[name])
        todo.extend(refs(defs[name]))
    json.dump({"kubernetes": sys.argv[2], "kinds": dict(sorted(kinds.items())),
               "definitions": dict(sorted(keep.items()))}, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
