"""Vendor core/v1's PodSpec as a JSON Schema (schemas/vendor/), from the OpenAPI spec Kubernetes itself publishes.

`make corev1` runs it: `go mod download` fetches the k8s.io/kubernetes Go module of VERSION (through
the Go module proxy, or from the module cache), whose api/openapi-spec/v3/api__v1_openapi.json is the
document kube-apiserver serves at /openapi/v3/api/v1. `convert` turns the closure of PodSpec into a
Draft 2020-12 JSON Schema with kube-apiserver's strict field validation (an unknown field is an error)
and the few rules its Go validation adds that a schema can say (names, int32 ranges, the quantity
syntax, a container's image). Pure except `main`; jobtree reads the committed file, never the network.
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

MODULE = "k8s.io/kubernetes"
VERSION = "v1.37.2"
SPEC_FILE = "api/openapi-spec/v3/api__v1_openapi.json"
ROOT = "io.k8s.api.core.v1.PodSpec"
OUT = Path(__file__).resolve().parent.parent / "schemas" / "vendor" / "core-v1-podspec.schema.json"

# resource.Quantity's syntax, as k8s.io/apimachinery's quantity.go parses it (and as controller-gen
# writes it into CRDs): a signed decimal number, then a binary (Ki..Ei), decimal (n..E) or exponent suffix.
QUANTITY_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
DNS_LABEL = {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
INT32 = {"minimum": -(2**31), "maximum": 2**31 - 1}
INT64 = {"minimum": -(2**63), "maximum": 2**63 - 1}
# What kube-apiserver's pod validation (pkg/apis/core/validation) requires beyond the OpenAPI document
# and a JSON Schema can express: container and volume names are DNS-1123 labels, a pod's containers
# name an image. Cross-field rules (unique names, mounts of declared volumes) are jobtree's rules.
ADDITIONS: dict[str, dict[str, Any]] = {
    "io.k8s.api.core.v1.Container": {"required": ["image", "name"], "properties": {"name": DNS_LABEL}},
    "io.k8s.api.core.v1.Volume": {"properties": {"name": DNS_LABEL}},
}
DROPPED = {"description", "default", "format"}  # prose and server-side defaults: no part of what is valid


def closure(schemas: dict[str, Any], root: str) -> list[str]:
    """Every definition `root` refers to, directly or not, sorted."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += sorted(_refs(schemas[name]) - seen)
    return sorted(seen)


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        out = {node["$ref"].rsplit("/", 1)[-1]} if isinstance(node.get("$ref"), str) else set()
        for value in node.values():
            out |= _refs(value)
        return out
    if isinstance(node, list):
        return set().union(*map(_refs, node)) if node else set()
    return set()


def _node(node: Any) -> Any:
    """One OpenAPI schema node as JSON Schema: refs to $defs, a lone allOf ref inlined, objects
    closed, int32/int64 bounded, prose and x-kubernetes hints dropped."""
    if isinstance(node, list):
        return [_node(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in DROPPED or key.startswith("x-kubernetes-"):
            continue
        if key == "$ref":
            out["$ref"] = "#/$defs/" + value.rsplit("/", 1)[-1]
        elif key == "properties":
            out["properties"] = {k: _node(v) for k, v in value.items()}
        else:
            out[key] = _node(value)
    all_of = out.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and set(all_of[0]) == {"$ref"}:
        out.pop("allOf")
        out["$ref"] = all_of[0]["$ref"]
    if node.get("format") == "int32":
        out.update(INT32)
    elif node.get("format") == "int64":
        out.update(INT64)
    if out.get("type") == "object" and "properties" in out:
        out["additionalProperties"] = False  # strict field validation, as kubectl asks the server for
    return out


def _special(name: str, node: dict[str, Any]) -> dict[str, Any] | None:
    """The apimachinery types the OpenAPI document leaves loose, as the server really decodes them."""
    if name == "io.k8s.apimachinery.pkg.api.resource.Quantity":
        return {
            "title": "quantity",
            "anyOf": [{"type": "string", "pattern": QUANTITY_PATTERN}, {"type": "number"}],
        }
    if name == "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
        return {"title": "int-or-string", "anyOf": [{"type": "integer", **INT32}, {"type": "string"}]}
    if node.get("type") == "object" and "properties" not in node:
        return {"type": "object"}  # FieldsV1 and the like: any object
    return None


def convert(document: dict[str, Any], root: str = ROOT) -> dict[str, Any]:
    """The OpenAPI v3 document of core/v1 to a JSON Schema of `root` with its closure in $defs."""
    schemas = document["components"]["schemas"]
    defs: dict[str, Any] = {}
    for name in closure(schemas, root):
        node = _special(name, schemas[name]) or _node(schemas[name])
        extra = ADDITIONS.get(name, {})
        if extra:
            node = copy.deepcopy(node)
            node["required"] = sorted({*node.get("required", []), *extra.get("required", [])})
            for prop, rule in extra.get("properties", {}).items():
                node["properties"][prop] = rule
        defs[name] = node
    return {"$ref": f"#/$defs/{root}", "$defs": defs}


def published(document: dict[str, Any], source: bytes, version: str) -> dict[str, Any]:
    schema = convert(document)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"core/v1 PodSpec of Kubernetes {version}",
        "$comment": (
            f"Generated by `make corev1` from {MODULE}@{version} {SPEC_FILE} "
            f"(sha256 {hashlib.sha256(source).hexdigest()}); do not edit."
        ),
        **schema,
    }


def text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


def module_dir(version: str) -> Path:
    """The module's folder in the Go module cache, downloaded through the proxy when missing."""
    done = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{version}"], capture_output=True, text=True, check=False
    )
    info = json.loads(done.stdout or "{}")
    if done.returncode != 0 or "Dir" not in info:
        sys.exit(
            f"corev1: go mod download {MODULE}@{version} failed: {info.get('Error') or done.stderr.strip()}"
        )
    return Path(info["Dir"])


def main() -> None:
    version = sys.argv[1] if len(sys.argv) > 1 else VERSION
    source = (module_dir(version) / SPEC_FILE).read_bytes()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text(published(json.loads(source), source, version)), encoding="utf-8")
    print(f"wrote {OUT.relative_to(OUT.parent.parent.parent)} from {MODULE}@{version}")


if __name__ == "__main__":
    main()
