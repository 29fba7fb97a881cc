"""Patches the client sends: JSON merge, JSON patch, strategic merge (the typed clients' default)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster.manifests import GROUP, a_config_map, a_pod, a_run, status_of


def test_merge_patch_merges_maps_and_null_deletes_a_key(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", a_config_map("cm", {"a": "1", "b": "2"}))
    patched = core.patch_namespaced_config_map(
        "cm", "default", {"data": {"b": None, "c": "3"}}, _content_type="application/merge-patch+json"
    )
    assert patched.data == {"a": "1", "c": "3"}


def test_strategic_merge_patch_merges_containers_by_name(core: client.CoreV1Api) -> None:
    pod = a_pod("p")
    pod["spec"]["containers"].append({"name": "sidecar", "image": "envoy:1"})
    core.create_namespaced_pod("default", pod)
    patched = core.patch_namespaced_pod(
        "p", "default", {"spec": {"containers": [{"name": "sidecar", "image": "envoy:2"}]}}
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("main", "busybox:1.36"),
        ("sidecar", "envoy:2"),
    ]


def test_strategic_merge_patch_replaces_lists_without_a_merge_key(core: client.CoreV1Api) -> None:
    pod = a_pod("p")
    pod["spec"]["containers"][0]["args"] = ["--a", "--b"]
    core.create_namespaced_pod("default", pod)
    patched = core.patch_namespaced_pod(
        "p", "default", {"spec": {"containers": [{"name": "main", "image": "x:1"}]}}
    )
    assert patched.spec.containers[0].args == ["--a", "--b"]
    node_patch = {"spec": {"taints": [{"key": "out", "effect": "NoExecute"}]}}
    core.create_node(
        {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "old", "effect": "NoSchedule"}]}}
    )
    assert [t.key for t in core.patch_node("n", node_patch).spec.taints] == ["out"]


def test_strategic_merge_patch_delete_directive_removes_one_list_item(core: client.CoreV1Api) -> None:
    ports = [{"name": "http", "port": 80}, {"name": "https", "port": 443}]
    core.create_namespaced_service("default", {"metadata": {"name": "svc"}, "spec": {"ports": ports}})
    patched = core.patch_namespaced_service(
        "svc", "default", {"spec": {"ports": [{"port": 80, "$patch": "delete"}]}}
    )
    assert [p.port for p in patched.spec.ports] == [443]


def test_strategic_merge_patch_can_delete_from_a_primitive_list(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cm", "finalizers": ["a.io/x", "b.io/y"]}}
    )
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/x"]}}
    assert core.patch_namespaced_config_map("cm", "default", patch).metadata.finalizers == ["b.io/y"]


def test_json_patch_applies_operations_in_order(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", a_config_map("cm", {"a": "1"}))
    patched = core.patch_namespaced_config_map(
        "cm",
        "default",
        [
            {"op": "add", "path": "/data/b", "value": "2"},
            {"op": "replace", "path": "/data/a", "value": "10"},
            {"op": "add", "path": "/metadata/labels", "value": {"x/y": "z"}},
        ],
    )
    assert (patched.data, patched.metadata.labels) == ({"a": "10", "b": "2"}, {"x/y": "z"})


def test_json_patch_whose_test_operation_fails_is_422_and_changes_nothing(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", a_config_map("cm", {"a": "1"}))
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_config_map(
            "cm",
            "default",
            [
                {"op": "test", "path": "/data/a", "value": "2"},
                {"op": "replace", "path": "/data/a", "value": "3"},
            ],
        )
    assert (status_of(refused.value)["code"], status_of(refused.value)["reason"]) == (422, "Invalid")
    after = core.read_namespaced_config_map("cm", "default")
    assert (after.data, after.metadata.resource_version) == ({"a": "1"}, created.metadata.resource_version)


def test_json_patch_with_a_resource_version_test_is_an_optimistic_lock(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", a_config_map("cm", {"a": "1"}))
    version = created.metadata.resource_version
    lock = {"op": "test", "path": "/metadata/resourceVersion", "value": version}
    core.patch_namespaced_config_map(
        "cm", "default", [lock, {"op": "replace", "path": "/data/a", "value": "2"}]
    )
    with pytest.raises(ApiException) as late:
        core.patch_namespaced_config_map(
            "cm", "default", [lock, {"op": "replace", "path": "/data/a", "value": "3"}]
        )
    assert late.value.status == 422


def test_merge_patch_carrying_a_stale_resource_version_is_409(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", a_config_map("cm", {"a": "1"}))
    core.patch_namespaced_config_map("cm", "default", {"data": {"a": "2"}})
    stale = {"metadata": {"resourceVersion": created.metadata.resource_version}, "data": {"a": "3"}}
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_config_map("cm", "default", stale, _content_type="application/merge-patch+json")
    assert status_of(refused.value)["reason"] == "Conflict"


def test_strategic_merge_patch_of_a_custom_resource_is_415(
    custom: client.CustomObjectsApi, jobtree_crds: list[dict[str, Any]]
) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1", "default", "runs", a_run("r1"))
    with pytest.raises(ApiException) as refused:
        custom.patch_namespaced_custom_object(
            GROUP,
            "v1",
            "default",
            "runs",
            "r1",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert (status_of(refused.value)["code"], status_of(refused.value)["reason"]) == (
        415,
        "UnsupportedMediaType",
    )


def test_patching_a_missing_object_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        core.patch_namespaced_config_map("ghost", "default", {"data": {}})
    assert status_of(missing.value)["message"] == 'configmaps "ghost" not found'
