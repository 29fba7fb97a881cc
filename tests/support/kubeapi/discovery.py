"""Discovery documents: /version, /api, /api/v1, /apis, /apis/<group>, /apis/<group>/<version>.

Read by the HTTP handler from the catalog, so a CRD's group appears the moment the CRD is stored
and disappears when it is deleted. Only the legacy (unaggregated) format is served; clients that
ask for aggregated discovery (kubectl does) fall back to it, as they do with older servers.
OpenAPI is in `openapi` (a minimal v3 surface); /openapi/v2 is not served.
"""

from __future__ import annotations

from typing import Any

from tests.support.kubeapi.resources import SUBRESOURCE_VERBS, Catalog, ResourceType

Obj = dict[str, Any]


def version_info(minor: int) -> Obj:
    return {
        "major": "1",
        "minor": str(minor),
        "emulationMajor": "1",
        "emulationMinor": str(minor),
        "gitVersion": f"v1.{minor}.0",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.23.4",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group(name: str, versions: list[str]) -> Obj:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": dict(entries[0])}


def group_list(catalog: Catalog) -> Obj:
    groups = catalog.group_versions()
    builtin = ["coordination.k8s.io", "apiextensions.k8s.io"]
    names = [g for g in builtin if g in groups] + sorted(g for g in groups if g and g not in builtin)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(n, groups[n]) for n in names]}


def group(catalog: Catalog, name: str) -> Obj | None:
    versions = catalog.group_versions().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def resource_list(catalog: Catalog, group_name: str, version: str) -> Obj | None:
    served = sorted(
        (rt for rt in catalog.all() if rt.group == group_name and rt.version == version),
        key=lambda rt: rt.plural,
    )
    if not served:
        return None
    resources: list[Obj] = []
    for rt in served:
        resources.append(_entry(rt))
        for sub in sorted(rt.subresources):
            verbs = ["update"] if sub == "finalize" else list(SUBRESOURCE_VERBS)
            resources.append(
                {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": verbs,
                }
            )
    group_version = f"{group_name}/{version}" if group_name else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def _entry(rt: ResourceType) -> Obj:
    entry: Obj = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": sorted(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry
