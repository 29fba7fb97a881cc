"""Delete: finalizers, propagation through owner references, graceful pods, collections, namespaces, CRDs."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster.manifests import GROUP, a_config_map, a_pod, a_run, status_of
from tests.support.kubeapi import KubeApiServer


def owned_by(owner: Any, name: str) -> dict[str, Any]:
    manifest = a_config_map(name, {})
    manifest["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid}
    ]
    return manifest


def test_deleting_a_config_map_answers_with_a_success_status_and_it_is_gone(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", a_config_map("cm", {}))
    answer = core.delete_namespaced_config_map("cm", "default")
    assert (answer["status"], answer["details"]["name"], answer["details"]["uid"]) == (
        "Success",
        "cm",
        created.metadata.uid,
    )
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("cm", "default")
    assert gone.value.status == 404


def test_a_finalizer_keeps_the_object_with_a_deletion_timestamp_until_it_is_removed(
    core: client.CoreV1Api,
) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cm", "finalizers": ["jobtree.io/journal"]}}
    )
    core.delete_namespaced_config_map("cm", "default")
    lingering = core.read_namespaced_config_map("cm", "default")
    assert lingering.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_config_map(
            "cm", "default", {"metadata": {"finalizers": ["jobtree.io/journal", "x.io/y"]}}
        )
    assert refused.value.status == 422
    core.patch_namespaced_config_map("cm", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("cm", "default")
    assert gone.value.status == 404


def test_background_deletion_removes_dependents_whose_owners_are_all_gone(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map("default", a_config_map("owner", {}))
    core.create_namespaced_config_map("default", owned_by(owner, "child"))
    core.delete_namespaced_config_map("owner", "default")
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == []


def test_orphan_deletion_keeps_dependents_and_drops_their_owner_reference(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map("default", a_config_map("owner", {}))
    core.create_namespaced_config_map("default", owned_by(owner, "child"))
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Orphan")
    remaining = core.list_namespaced_config_map("default").items
    assert [(c.metadata.name, c.metadata.owner_references) for c in remaining] == [("child", None)]


def test_foreground_deletion_waits_for_dependents_held_by_finalizers(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map("default", a_config_map("owner", {}))
    child = owned_by(owner, "child")
    child["metadata"]["finalizers"] = ["jobtree.io/hold"]
    core.create_namespaced_config_map("default", child)
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Foreground")
    waiting = core.read_namespaced_config_map("owner", "default")
    assert waiting.metadata.finalizers == ["foregroundDeletion"]
    core.patch_namespaced_config_map("child", "default", {"metadata": {"finalizers": None}})
    assert core.list_namespaced_config_map("default").items == []


def test_deleting_a_pod_without_kubelet_emulation_removes_it_at_once_and_returns_it(
    core: client.CoreV1Api,
) -> None:
    core.create_namespaced_pod("default", a_pod("p"))
    answer = core.delete_namespaced_pod("p", "default")
    assert (answer.metadata.name, answer.metadata.deletion_grace_period_seconds) == ("p", 0)
    assert core.list_namespaced_pod("default").items == []


def test_with_kubelet_emulation_a_graceful_delete_lingers_until_the_kubelet_finishes(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.kubelet_emulation = True
    core.create_namespaced_pod("default", a_pod("p"))
    server.kubelet.set_phase("default", "p", "Running")
    core.delete_namespaced_pod("p", "default", grace_period_seconds=30)
    lingering = core.read_namespaced_pod("p", "default")
    assert (
        lingering.metadata.deletion_grace_period_seconds,
        lingering.metadata.deletion_timestamp is not None,
    ) == (30, True)
    assert server.kubelet.terminating_pods() == [("default", "p")]
    server.kubelet.finish_termination("default", "p")
    assert core.list_namespaced_pod("default").items == []


def test_with_kubelet_emulation_grace_period_zero_removes_the_pod_at_once(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.kubelet_emulation = True
    core.create_namespaced_pod("default", a_pod("p"))
    server.kubelet.set_phase("default", "p", "Running")
    core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    assert core.list_namespaced_pod("default").items == []


def test_delete_with_a_stale_resource_version_precondition_is_409(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", a_config_map("cm", {}))
    core.patch_namespaced_config_map("cm", "default", {"data": {"k": "v"}})
    options = client.V1DeleteOptions(
        preconditions=client.V1Preconditions(resource_version=created.metadata.resource_version)
    )
    with pytest.raises(ApiException) as refused:
        core.delete_namespaced_config_map("cm", "default", body=options)
    assert status_of(refused.value)["reason"] == "Conflict"


def test_delete_collection_removes_only_what_the_label_selector_matches(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(
        a_config_map("a", {}, fleet="f1"),
        a_config_map("b", {}, fleet="f2"),
        a_config_map("c", {}, fleet="f1"),
    )
    core.delete_collection_namespaced_config_map("default", label_selector="fleet=f1")
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == ["b"]


def test_deleting_a_namespace_terminates_it_then_removes_it_with_its_content(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    held = a_config_map("held", {})
    held["metadata"] |= {"namespace": "team", "finalizers": ["jobtree.io/hold"]}
    server.seed(held)
    core.delete_namespace("team")
    assert core.read_namespace("team").status.phase == "Terminating"
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map("team", {"metadata": {"name": "new"}})
    assert status_of(refused.value)["reason"] == "Forbidden"
    core.patch_namespaced_config_map("held", "team", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespace("team")
    assert gone.value.status == 404


def test_deleting_a_crd_deletes_its_custom_resources(
    api: client.ApiClient, server: KubeApiServer, jobtree_crds: list[dict[str, Any]]
) -> None:
    server.seed(a_run("r1"))
    client.ApiextensionsV1Api(api).delete_custom_resource_definition(f"runs.{GROUP}")
    assert server.list(f"{GROUP}/v1", "Budget") == []
    with pytest.raises(LookupError):
        server.list(f"{GROUP}/v1", "Run")
    assert server.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"runs.{GROUP}") is None
