"""Server-side apply as jobtree uses it: field manager `jobtree`, force, ownership, conflicts, pruning."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from tests.cluster.manifests import GROUP, a_config_map, a_run, status_of
from tests.support.kubeapi import KubeApiServer


@pytest.fixture
def config_maps(dynamic: DynamicClient) -> Any:
    return dynamic.resources.get(api_version="v1", kind="ConfigMap")


def fields_of(obj: Any, manager: str, operation: str = "Apply") -> dict[str, Any]:
    entries = obj["metadata"]["managedFields"]
    found = [e for e in entries if e["manager"] == manager and e["operation"] == operation]
    assert len(found) == 1, entries
    fields: dict[str, Any] = found[0]["fieldsV1"]
    return fields


def test_apply_creates_the_object_and_records_what_the_manager_applied(config_maps: Any) -> None:
    applied = config_maps.server_side_apply(
        body=a_config_map("cm", {"k": "v"}, fleet="f1"), field_manager="jobtree"
    ).to_dict()
    assert applied["data"] == {"k": "v"}
    want = {"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:fleet": {}}}}
    assert fields_of(applied, "jobtree") == want


def test_applying_the_same_configuration_again_changes_nothing(
    config_maps: Any, server: KubeApiServer
) -> None:
    first = config_maps.server_side_apply(body=a_config_map("cm", {"k": "v"}), field_manager="jobtree")
    before = server.resource_version
    again = config_maps.server_side_apply(body=a_config_map("cm", {"k": "v"}), field_manager="jobtree")
    assert again.metadata.resourceVersion == first.metadata.resourceVersion
    assert server.resource_version == before


def test_another_manager_changing_an_owned_field_is_a_409_conflict_naming_field_and_owner(
    config_maps: Any,
) -> None:
    config_maps.server_side_apply(body=a_config_map("cm", {"k": "v", "j": "w"}), field_manager="jobtree")
    with pytest.raises(ApiException) as refused:
        config_maps.server_side_apply(
            body=a_config_map("cm", {"k": "other", "j": "x"}), field_manager="agent"
        )
    body = status_of(refused.value)
    assert (body["code"], body["reason"]) == (409, "Conflict")
    assert body["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "jobtree"', "field": ".data.j"},
        {"reason": "FieldManagerConflict", "message": 'conflict with "jobtree"', "field": ".data.k"},
    ]
    assert body["message"] == 'Apply failed with 2 conflicts: conflicts with "jobtree":\n- .data.j\n- .data.k'


def test_applying_an_equal_value_shares_ownership_without_conflict(config_maps: Any) -> None:
    config_maps.server_side_apply(body=a_config_map("cm", {"k": "v"}), field_manager="jobtree")
    shared = config_maps.server_side_apply(
        body=a_config_map("cm", {"k": "v"}), field_manager="agent"
    ).to_dict()
    assert fields_of(shared, "jobtree") == fields_of(shared, "agent") == {"f:data": {"f:k": {}}}


def test_force_takes_ownership_from_the_previous_manager(config_maps: Any) -> None:
    config_maps.server_side_apply(body=a_config_map("cm", {"k": "v", "j": "w"}), field_manager="jobtree")
    forced = config_maps.server_side_apply(
        body=a_config_map("cm", {"k": "other"}), field_manager="agent", force_conflicts=True
    ).to_dict()
    assert forced["data"] == {"k": "other", "j": "w"}
    assert fields_of(forced, "jobtree") == {"f:data": {"f:j": {}}}
    assert fields_of(forced, "agent") == {"f:data": {"f:k": {}}}


def test_fields_a_manager_stops_applying_are_removed_unless_another_manager_owns_them(
    config_maps: Any,
) -> None:
    config_maps.server_side_apply(
        body=a_config_map("cm", {"mine": "1", "shared": "2"}), field_manager="jobtree"
    )
    config_maps.server_side_apply(body=a_config_map("cm", {"shared": "2"}), field_manager="agent")
    after = config_maps.server_side_apply(body=a_config_map("cm", {}), field_manager="jobtree")
    assert after.data.to_dict() == {"shared": "2"}


def test_a_field_last_written_by_an_update_conflicts_with_apply_naming_the_updater(
    config_maps: Any, core: client.CoreV1Api
) -> None:
    config_maps.server_side_apply(body=a_config_map("cm", {"k": "v"}), field_manager="jobtree")
    core.patch_namespaced_config_map("cm", "default", {"data": {"k": "edited"}}, field_manager="kubectl-edit")
    with pytest.raises(ApiException) as refused:
        config_maps.server_side_apply(body=a_config_map("cm", {"k": "v"}), field_manager="jobtree")
    assert status_of(refused.value)["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-edit" using v1: .data.k'
    )
    restored = config_maps.server_side_apply(
        body=a_config_map("cm", {"k": "v"}), field_manager="jobtree", force_conflicts=True
    )
    assert restored.data.k == "v"


def test_apply_without_a_field_manager_is_422(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_config_map(
            "cm", "default", a_config_map("cm", {}), _content_type="application/apply-patch+yaml"
        )
    body = status_of(refused.value)
    assert (body["code"], body["details"]["causes"][0]["field"]) == (422, "fieldManager")


def test_apply_merges_keyed_list_items_and_each_manager_owns_its_own(dynamic: DynamicClient) -> None:
    services = dynamic.resources.get(api_version="v1", kind="Service")

    def service(*ports: int) -> dict[str, Any]:
        listed = [{"name": f"p{p}", "port": p} for p in ports]
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc", "namespace": "default"},
            "spec": {"ports": listed},
        }

    services.server_side_apply(body=service(80, 443), field_manager="jobtree")
    both = services.server_side_apply(body=service(9090), field_manager="agent")
    assert [p.port for p in both.spec.ports] == [80, 443, 9090]
    assert 'k:{"port":9090,"protocol":"TCP"}' in fields_of(both.to_dict(), "agent")["f:spec"]["f:ports"]
    after = services.server_side_apply(body=service(443), field_manager="jobtree")
    assert [p.port for p in after.spec.ports] == [443, 9090]


def test_apply_of_a_custom_resource_status_goes_through_the_status_subresource(
    dynamic: DynamicClient, jobtree_crds: list[dict[str, Any]]
) -> None:
    runs = dynamic.resources.get(api_version=f"{GROUP}/v1", kind="Run")
    run = a_run("r1") | {"status": {"phase": "Running"}}
    created = runs.server_side_apply(body=run, field_manager="jobtree").to_dict()
    assert "status" not in created
    assert "f:status" not in fields_of(created, "jobtree")
    status_body = {
        "apiVersion": run["apiVersion"],
        "kind": "Run",
        "metadata": {"name": "r1", "namespace": "default"},
        "status": {"phase": "Running"},
    }
    with_status = runs.status.server_side_apply(body=status_body, field_manager="jobtree").to_dict()
    assert with_status["status"] == {"phase": "Running"}
    entries = {(e["manager"], e.get("subresource", "")) for e in with_status["metadata"]["managedFields"]}
    assert entries == {("jobtree", ""), ("jobtree", "status")}


def test_apply_of_a_field_the_crd_does_not_declare_fails_with_500_as_the_real_server_does(
    dynamic: DynamicClient, jobtree_crds: list[dict[str, Any]]
) -> None:
    run = a_run("r1")
    run["spec"]["typo"] = True
    runs = dynamic.resources.get(api_version=f"{GROUP}/v1", kind="Run")
    with pytest.raises(ApiException) as refused:
        runs.server_side_apply(body=run, field_manager="jobtree")
    body = status_of(refused.value)
    assert body["code"] == 500 and "reason" not in body
    assert body["message"].endswith(".spec.typo: field not declared in schema")


def test_create_prunes_an_undeclared_custom_resource_field_and_warns(
    api: client.ApiClient, jobtree_crds: list[dict[str, Any]]
) -> None:
    run = a_run("r1")
    run["spec"]["typo"] = True
    response = client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, "v1", "default", "runs", run, _preload_content=False
    )
    assert b"typo" not in response.data
    assert response.headers["Warning"] == '299 - "unknown field \\"spec.typo\\""'


def test_strict_field_validation_refuses_unknown_fields_with_400(
    custom: client.CustomObjectsApi, jobtree_crds: list[dict[str, Any]]
) -> None:
    run = a_run("r1")
    run["spec"]["typo"] = True
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(GROUP, "v1", "default", "runs", run, field_validation="Strict")
    assert status_of(refused.value)["message"] == 'strict decoding error: unknown field "spec.typo"'


def test_apply_with_a_stale_resource_version_is_409(config_maps: Any) -> None:
    first = config_maps.server_side_apply(body=a_config_map("cm", {"k": "1"}), field_manager="jobtree")
    config_maps.server_side_apply(body=a_config_map("cm", {"k": "2"}), field_manager="jobtree")
    stale = a_config_map("cm", {"k": "3"})
    stale["metadata"]["resourceVersion"] = first.metadata.resourceVersion
    with pytest.raises(ApiException) as refused:
        config_maps.server_side_apply(body=stale, field_manager="jobtree")
    assert status_of(refused.value)["reason"] == "Conflict"


def test_apply_of_a_field_a_built_in_kind_does_not_declare_fails_with_500(dynamic: DynamicClient) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"unschedulabel": True}}
    with pytest.raises(ApiException) as refused:
        dynamic.resources.get(api_version="v1", kind="Node").server_side_apply(
            body=node, field_manager="jobtree"
        )
    assert status_of(refused.value)["message"].endswith(".spec.unschedulabel: field not declared in schema")
