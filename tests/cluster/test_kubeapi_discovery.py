"""Discovery through the official client: version, groups, resource lists, CRD groups coming and going."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from tests.cluster.manifests import GROUP, a_run
from tests.support.kubeapi import KubeApiServer


def test_version_reports_a_kubernetes_1_32_server(api: client.ApiClient) -> None:
    info = client.VersionApi(api).get_code()
    assert (info.major, info.minor, info.git_version) == ("1", "32", "v1.32.0")


def test_core_group_lists_pods_with_their_verbs_short_name_and_status_subresource(
    api: client.ApiClient,
) -> None:
    resources = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    pods = resources["pods"]
    assert (pods.kind, pods.namespaced, pods.short_names, pods.categories) == ("Pod", True, ["po"], ["all"])
    assert {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"} == set(
        pods.verbs
    )
    assert set(resources["pods/status"].verbs) == {"get", "patch", "update"}
    assert resources["nodes"].namespaced is False


def test_apis_lists_coordination_and_apiextensions_groups(api: client.ApiClient) -> None:
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert groups["coordination.k8s.io"].preferred_version.group_version == "coordination.k8s.io/v1"
    assert "apiextensions.k8s.io" in groups


def test_crd_group_appears_once_the_crd_exists_and_disappears_when_it_is_deleted(
    api: client.ApiClient, jobtree_crds: list[dict[str, Any]]
) -> None:
    groups = client.ApisApi(api).get_api_versions().groups
    assert GROUP in [g.name for g in groups]
    listed = client.CustomObjectsApi(api).get_api_resources(GROUP, "v1").resources
    runs = next(r for r in listed if r.name == "runs")
    assert (runs.kind, runs.namespaced, runs.singular_name) == ("Run", True, "run")
    assert "runs/status" in [r.name for r in listed]
    assert next(r for r in listed if r.name == "budgets").namespaced is False
    ext = client.ApiextensionsV1Api(api)
    for crd in jobtree_crds:
        ext.delete_custom_resource_definition(crd["metadata"]["name"])
    assert GROUP not in [g.name for g in client.ApisApi(api).get_api_versions().groups]
    with pytest.raises(ApiException) as gone:
        client.CustomObjectsApi(api).get_api_resources(GROUP, "v1")
    assert gone.value.status == 404


def test_dynamic_client_finds_builtin_and_custom_kinds_by_walking_discovery(
    dynamic: DynamicClient, jobtree_crds: list[dict[str, Any]]
) -> None:
    runs = dynamic.resources.get(api_version=f"{GROUP}/v1", kind="Run")
    runs.create(body=a_run("r1"), namespace="default")
    listed = runs.get(namespace="default")
    assert [item.metadata.name for item in listed.items] == ["r1"]
    nodes = dynamic.resources.get(api_version="v1", kind="Node")
    assert nodes.namespaced is False
    with pytest.raises(ResourceNotFoundError):
        dynamic.resources.get(api_version=f"{GROUP}/v1", kind="Journal")


def test_dynamic_client_sees_a_crd_created_after_it_first_read_discovery(
    server: KubeApiServer, dynamic: DynamicClient, jobtree_crds: list[dict[str, Any]]
) -> None:
    dynamic.resources.get(api_version="v1", kind="Pod")
    server.seed(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"journals.{GROUP}"},
            "spec": {
                "group": GROUP,
                "names": {"plural": "journals", "kind": "Journal"},
                "scope": "Namespaced",
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
    )
    journals = dynamic.resources.get(api_version=f"{GROUP}/v1", kind="Journal")
    assert journals.namespaced is True


def test_unknown_paths_and_resources_are_404_not_found(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as missing:
        client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, "v1", "default", "runs")
    assert missing.value.status == 404
