"""Create, update and the object metadata the server owns, through the official typed clients."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster.manifests import GROUP, a_config_map, a_pod, a_run, status_of
from tests.support.kubeapi import KubeApiServer


def post(api: client.ApiClient, path: str, body: dict[str, Any], **query: str) -> Any:
    """A POST through the client's low-level API (typed calls refuse undeclared fields before sending)."""
    response = api.call_api(*api.param_serialize("POST", path, body=body, query_params=list(query.items())))
    response.read()
    return response


def test_create_sets_uid_creation_timestamp_and_a_resource_version_from_one_global_counter(
    core: client.CoreV1Api,
) -> None:
    first = core.create_namespaced_config_map("default", a_config_map("one", {"k": "v"}))
    second = core.create_namespaced_config_map("default", a_config_map("two", {"k": "v"}))
    assert int(second.metadata.resource_version) == int(first.metadata.resource_version) + 1
    assert first.metadata.uid != second.metadata.uid
    assert first.metadata.creation_timestamp is not None


def test_creating_a_taken_name_is_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", a_config_map("taken", {}))
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map("default", a_config_map("taken", {}))
    want = {"code": 409, "reason": "AlreadyExists", "message": 'configmaps "taken" already exists'}
    assert {k: status_of(refused.value)[k] for k in want} == want


def test_generate_name_gets_a_five_character_suffix(core: client.CoreV1Api) -> None:
    body = {"metadata": {"generateName": "swap-"}, "data": {}}
    made = {core.create_namespaced_config_map("default", body).metadata.name for _ in range(3)}
    assert len(made) == 3 and all(name.startswith("swap-") and len(name) == 10 for name in made)


def test_creating_in_a_missing_namespace_is_404_naming_the_namespace(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map("nowhere", {"metadata": {"name": "x"}})
    assert status_of(refused.value)["message"] == 'namespaces "nowhere" not found'


def test_a_resource_version_in_a_create_body_is_refused(core: client.CoreV1Api) -> None:
    live = core.create_namespaced_pod("default", a_pod("original"))
    copy = client.ApiClient().sanitize_for_serialization(live)
    copy["metadata"] = {"name": "copy", "resourceVersion": copy["metadata"]["resourceVersion"]}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("default", copy)
    assert status_of(refused.value)["message"] == "resourceVersion should not be set on objects to be created"


def test_update_with_a_stale_resource_version_is_409_conflict(core: client.CoreV1Api) -> None:
    stale = core.create_namespaced_config_map("default", a_config_map("cm", {"k": "1"}))
    fresh = core.read_namespaced_config_map("cm", "default")
    fresh.data = {"k": "2"}
    core.replace_namespaced_config_map("cm", "default", fresh)
    stale.data = {"k": "3"}
    with pytest.raises(ApiException) as refused:
        core.replace_namespaced_config_map("cm", "default", stale)
    body = status_of(refused.value)
    assert (body["code"], body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]
    assert core.read_namespaced_config_map("cm", "default").data == {"k": "2"}


def test_an_update_that_changes_nothing_keeps_the_resource_version(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", a_config_map("same", {"k": "v"}))
    again = core.replace_namespaced_config_map("same", "default", created)
    assert again.metadata.resource_version == created.metadata.resource_version


def test_pod_node_name_and_containers_cannot_change_by_update(core: client.CoreV1Api) -> None:
    live = core.create_namespaced_pod("default", a_pod("p", node="node-1"))
    live.spec.node_name = "node-2"
    with pytest.raises(ApiException) as moved:
        core.replace_namespaced_pod("p", "default", live)
    body = status_of(moved.value)
    assert (body["code"], body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "spec"
    assert "pod updates may not change fields other than" in body["message"]
    live = core.read_namespaced_pod("p", "default")
    live.spec.containers.append(client.V1Container(name="sidecar", image="busybox"))
    with pytest.raises(ApiException) as grown:
        core.replace_namespaced_pod("p", "default", live)
    assert grown.value.status == 422


def test_pod_image_and_added_tolerations_may_change_by_update(core: client.CoreV1Api) -> None:
    live = core.create_namespaced_pod("default", a_pod("p", image="busybox:1"))
    live.spec.containers[0].image = "busybox:2"
    live.spec.tolerations.append(client.V1Toleration(key="spare", operator="Exists", effect="NoSchedule"))
    updated = core.replace_namespaced_pod("p", "default", live)
    assert updated.spec.containers[0].image == "busybox:2"
    assert "spare" in [t.key for t in updated.spec.tolerations]


def test_a_new_pod_is_pending_with_defaults_filled_in(core: client.CoreV1Api) -> None:
    pod = core.create_namespaced_pod("default", a_pod("p", image="trainer:latest"))
    assert (pod.status.phase, pod.status.qos_class) == ("Pending", "BestEffort")
    assert (pod.spec.restart_policy, pod.spec.termination_grace_period_seconds) == ("Always", 30)
    assert pod.spec.containers[0].image_pull_policy == "Always"
    assert {t.key for t in pod.spec.tolerations} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }


def test_pod_status_writes_go_through_the_status_subresource_only(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", a_pod("p"))
    ignored = core.patch_namespaced_pod("p", "default", {"status": {"phase": "Running"}})
    assert ignored.status.phase == "Pending"
    running = core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    assert running.status.phase == "Running"
    assert core.read_namespaced_pod("p", "default").spec.node_name == "node-1"


def test_custom_resource_main_writes_ignore_status_and_status_writes_ignore_spec(
    custom: client.CustomObjectsApi, jobtree_crds: list[dict[str, Any]]
) -> None:
    run = a_run("r1") | {"status": {"phase": "Running"}}
    created = custom.create_namespaced_custom_object(GROUP, "v1", "default", "runs", run)
    assert "status" not in created
    args = (GROUP, "v1", "default", "runs", "r1")
    status_write = custom.patch_namespaced_custom_object_status(
        *args, {"spec": {"owner": "org:other"}, "status": {"phase": "Running"}}
    )
    assert (status_write["spec"]["owner"], status_write["status"]["phase"]) == ("org:team", "Running")
    main_write = custom.patch_namespaced_custom_object(*args, {"status": {"phase": "Failed"}})
    assert main_write["status"]["phase"] == "Running"


def test_generation_counts_spec_changes_of_custom_resources_but_not_status_or_labels(
    custom: client.CustomObjectsApi, jobtree_crds: list[dict[str, Any]]
) -> None:
    args = (GROUP, "v1", "default", "runs", "r1")
    assert custom.create_namespaced_custom_object(*args[:4], a_run("r1"))["metadata"]["generation"] == 1
    custom.patch_namespaced_custom_object_status(*args, {"status": {"phase": "Running"}})
    custom.patch_namespaced_custom_object(*args, {"metadata": {"labels": {"a": "b"}}})
    assert custom.get_namespaced_custom_object(*args)["metadata"]["generation"] == 1
    bumped = custom.patch_namespaced_custom_object(*args, {"spec": {"resources": {"totalGPUs": 16}}})
    assert bumped["metadata"]["generation"] == 2


def test_custom_resource_update_without_a_resource_version_is_422(
    custom: client.CustomObjectsApi, jobtree_crds: list[dict[str, Any]]
) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1", "default", "runs", a_run("r1"))
    with pytest.raises(ApiException) as refused:
        custom.replace_namespaced_custom_object(GROUP, "v1", "default", "runs", "r1", a_run("r1", gpus=4))
    assert status_of(refused.value)["details"]["causes"][0]["field"] == "metadata.resourceVersion"


def test_dry_run_validates_and_answers_without_storing(core: client.CoreV1Api, server: KubeApiServer) -> None:
    before = server.resource_version
    answered = core.create_namespaced_config_map("default", a_config_map("dry", {"k": "v"}), dry_run="All")
    assert answered.metadata.name == "dry"
    assert server.get("v1", "ConfigMap", "dry", "default") is None
    assert server.resource_version == before


def test_invalid_label_values_are_422_naming_metadata_labels(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map("default", a_config_map("x", {}, fleet="not a valid value"))
    assert status_of(refused.value)["details"]["causes"][0]["field"] == "metadata.labels"


def test_lease_times_must_carry_six_fractional_digits_as_go_decodes_micro_time(api: client.ApiClient) -> None:
    leases = client.CoordinationV1Api(api)
    whole_second = client.V1Lease(
        metadata=client.V1ObjectMeta(name="agent"),
        spec=client.V1LeaseSpec(holder_identity="a", renew_time=datetime(2030, 1, 1, tzinfo=UTC)),
    )
    with pytest.raises(ApiException) as refused:
        leases.create_namespaced_lease("default", whole_second)
    assert refused.value.status == 400
    assert "2006-01-02T15:04:05.000000Z07:00" in status_of(refused.value)["message"]
    whole_second.spec.renew_time = datetime(2030, 1, 1, 0, 0, 0, 250_000, tzinfo=UTC)
    stored = leases.create_namespaced_lease("default", whole_second, _preload_content=False)
    assert b'"renewTime":"2030-01-01T00:00:00.250000Z"' in stored.data


def test_concurrent_writers_get_distinct_resource_versions_and_none_is_lost(
    api: client.ApiClient, server: KubeApiServer
) -> None:
    start = server.resource_version
    versions: list[int] = []
    lock = threading.Lock()

    def writer(prefix: str) -> None:
        core = client.CoreV1Api(api)
        for i in range(25):
            made = core.create_namespaced_config_map("default", a_config_map(f"{prefix}-{i}", {}))
            with lock:
                versions.append(int(made.metadata.resource_version))

    threads = [threading.Thread(target=writer, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(versions) == list(range(start + 1, start + 101))


def test_posting_to_a_named_object_is_405_method_not_allowed(api: client.ApiClient) -> None:
    response = post(api, "/api/v1/namespaces/default/configmaps/cm", {"metadata": {"name": "cm"}})
    assert (response.status, orjson.loads(response.data)["reason"]) == (405, "MethodNotAllowed")


def test_events_are_stored_and_selected_by_involved_object(core: client.CoreV1Api) -> None:
    event = {
        "metadata": {"name": "p.swap"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
        "reason": "Swapped",
        "type": "Normal",
        "firstTimestamp": "2030-01-01T00:00:00+00:00",
    }
    created = core.create_namespaced_event("default", event)
    assert created.first_timestamp.year == 2030
    found = core.list_namespaced_event("default", field_selector="involvedObject.name=p,reason=Swapped")
    assert [e.metadata.name for e in found.items] == ["p.swap"]


def test_later_writes_never_change_an_earlier_revision_of_an_object(
    dynamic: Any, core: client.CoreV1Api
) -> None:
    pod = a_pod("p", image="trainer:1")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    created = core.create_namespaced_pod("default", pod)
    then = created.metadata.resource_version
    newer = a_pod("p", image="trainer:2")
    newer["metadata"] = {"name": "p", "namespace": "default"}
    pods = dynamic.resources.get(api_version="v1", kind="Pod")
    pods.server_side_apply(body=newer, field_manager="jobtree", force_conflicts=True)
    core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    past = core.list_namespaced_pod("default", resource_version=then, resource_version_match="Exact").items[0]
    assert (past.spec.containers[0].image, past.status.phase) == ("trainer:1", "Pending")
    assert [m.manager for m in past.metadata.managed_fields] == ["OpenAPI-Generator"]


def test_creating_or_deleting_a_namespaced_collection_without_a_namespace_is_405(
    api: client.ApiClient,
) -> None:
    for method in ("POST", "DELETE"):
        response = api.call_api(
            *api.param_serialize(method, "/api/v1/configmaps", body={"metadata": {"name": "cm"}})
        )
        response.read()
        assert response.status == 405


def test_a_field_a_pod_does_not_declare_is_dropped_with_a_warning(api: client.ApiClient) -> None:
    pod = a_pod("p")
    pod["spec"]["nodeSelecter"] = {"gpu": "h100"}
    response = post(api, "/api/v1/namespaces/default/pods", pod)
    assert response.status == 201
    assert response.getheader("Warning") == '299 - "unknown field \\"spec.nodeSelecter\\""'
    assert "nodeSelecter" not in orjson.loads(response.data)["spec"]


def test_strict_field_validation_refuses_an_undeclared_pod_field(api: client.ApiClient) -> None:
    pod = a_pod("p")
    pod["spec"]["containers"][0]["env"] = [{"name": "A", "valu": "1"}]
    response = post(api, "/api/v1/namespaces/default/pods", pod, fieldValidation="Strict")
    assert response.status == 400
    assert orjson.loads(response.data)["message"] == (
        'strict decoding error: unknown field "spec.containers[0].env[0].valu"'
    )
