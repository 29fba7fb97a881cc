"""A minimal OpenAPI v3 surface, enough for kubectl to see that the server validates fields itself.

Read by the HTTP handler for /openapi/v3 and /openapi/v3/<api|apis/g>/<v>. Each group-version
document lists, for every served kind, the resource paths with their operations, the
`x-kubernetes-group-version-kind` extension and the `fieldValidation`/`fieldManager`/`force`
query parameters: kubectl reads exactly that to decide to send `fieldValidation=Strict` instead of
validating on the client. The documents carry no component schemas, so `kubectl explain` and
client-side (non server-side) `kubectl apply` of built-in kinds do not work; /openapi/v2 is 404.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from tests.support.kubeapi.resources import Catalog, ResourceType

Obj = dict[str, Any]
QUERY = ("dryRun", "fieldManager", "fieldValidation", "pretty")


def _prefix(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _document(served: list[ResourceType]) -> Obj:
    paths: Obj = {}
    for rt in served:
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        base = "/" + _prefix(rt.group, rt.version) + ("/namespaces/{namespace}" if rt.namespaced else "")

        def operation(action: str, extra: tuple[str, ...] = (), rt: ResourceType = rt, gvk: Obj = gvk) -> Obj:
            names = QUERY + extra
            return {
                "operationId": f"{action}{rt.kind}",
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [{"name": n, "in": "query", "schema": {"type": "string"}} for n in names],
                "responses": {"200": {"description": "OK"}},
            }

        paths[f"{base}/{rt.plural}"] = {"get": operation("list"), "post": operation("post")}
        paths[f"{base}/{rt.plural}/{{name}}"] = {
            "get": operation("get"),
            "put": operation("put"),
            "patch": operation("patch", ("force",)),
            "delete": operation("delete"),
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def group_version_document(catalog: Catalog, group: str, version: str) -> Obj | None:
    served = sorted(
        (rt for rt in catalog.all() if rt.group_version == (group, version)), key=lambda rt: rt.plural
    )
    return _document(served) if served else None


def root(catalog: Catalog) -> Obj:
    """The /openapi/v3 index; each entry's hash changes when that group-version's types change."""
    out: Obj = {}
    for group, versions in sorted(catalog.group_versions().items()):
        for version in versions:
            document = group_version_document(catalog, group, version)
            digest = hashlib.sha256(orjson.dumps(document)).hexdigest()[:32].upper()
            prefix = _prefix(group, version)
            out[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest}"}
    return {"paths": out}
