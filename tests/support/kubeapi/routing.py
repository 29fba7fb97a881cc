"""URL paths to what they address: a discovery document, or a resource (namespace, name, subresource).

Used by the HTTP handler before any verb runs. `/api/v1/...` and `/apis/<group>/<version>/...`
follow the real layout, including the ambiguity of `/api/v1/namespaces/<name>/status`. Legacy
`/api/v1/watch/...` paths and proxy/log/exec/binding/eviction subresources are not routed (404).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.kubeapi import status
from tests.support.kubeapi.resources import Catalog, ResourceType

NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True, slots=True)
class Discovery:
    document: str  # version, health, api, apis, group, group_version, openapi, openapi_group_version
    group: str = ""
    version: str = ""


@dataclass(frozen=True, slots=True)
class Resource:
    rt: ResourceType
    namespace: str = ""
    name: str = ""
    subresource: str = ""


def route(path: str, catalog: Catalog) -> Discovery | Resource:
    parts = [p for p in path.split("/") if p]
    if not parts:
        raise status.path_not_found()
    if parts == ["version"]:
        return Discovery("version")
    if parts[0] in ("healthz", "readyz", "livez") and len(parts) <= 2:
        return Discovery("health")
    if parts[:2] == ["openapi", "v3"]:
        rest = parts[2:]
        if not rest:
            return Discovery("openapi")
        if rest[0] == "api" and len(rest) == 2:
            return Discovery("openapi_group_version", "", rest[1])
        if rest[0] == "apis" and len(rest) == 3:
            return Discovery("openapi_group_version", rest[1], rest[2])
    if parts[0] == "api":
        if len(parts) == 1:
            return Discovery("api")
        if parts[1] != "v1":
            raise status.path_not_found()
        if len(parts) == 2:
            return Discovery("group_version", "", "v1")
        return _resource("", "v1", parts[2:], catalog)
    if parts[0] == "apis":
        if len(parts) == 1:
            return Discovery("apis")
        if len(parts) == 2:
            return Discovery("group", parts[1])
        if len(parts) == 3:
            return Discovery("group_version", parts[1], parts[2])
        return _resource(parts[1], parts[2], parts[3:], catalog)
    raise status.path_not_found()


def _resource(group: str, version: str, rest: list[str], catalog: Catalog) -> Resource:
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise status.path_not_found()
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    rt = catalog.find(group, version, plural)
    if rt is None or (namespace and not rt.namespaced):
        raise status.path_not_found()
    if rt.namespaced and name and not namespace:
        raise status.path_not_found()
    if subresource and subresource not in rt.subresources:
        raise status.path_not_found()
    return Resource(rt, namespace, name, subresource)
