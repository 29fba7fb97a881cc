"""The project's CRDs on the server: structural schema pruning and validation, scopes, printer columns."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster.manifests import GROUP, a_run, status_of
from tests.support.kubeapi import KubeApiServer

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


def test_the_project_crds_are_established_as_soon_as_they_are_created(
    api: client.ApiClient, jobtree_crds: list[dict[str, Any]]
) -> None:
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(f"runs.{GROUP}")
    conditions = {c.type: c.status for c in crd.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd.status.accepted_names.kind == "Run" and crd.status.stored_versions == ["v1"]


def test_a_wrong_type_is_422_naming_the_field(
    custom: client.CustomObjectsApi, jobtree_crds: list[dict[str, Any]]
) -> None:
    run = a_run("r1")
    run["spec"]["resources"]["totalGPUs"] = "sixteen"
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(GROUP, "v1", "default", "runs", run)
    body = status_of(refused.value)
    assert (body["code"], body["reason"], body["details"]["kind"]) == (422, "Invalid", "Run")
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueTypeInvalid",
            "message": 'Invalid value: "string": spec.resources.totalGPUs in body must be of type integer: "string"',
            "field": "spec.resources.totalGPUs",
        }
    ]


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        (lambda r: r["spec"].pop("owner"), "spec.owner", "FieldValueRequired"),
        (
            lambda r: r["spec"]["resources"].update(totalGPUs=0),
            "spec.resources.totalGPUs",
            "FieldValueInvalid",
        ),
        (lambda r: r["spec"].update(owner="two words"), "spec.owner", "FieldValueInvalid"),
        (lambda r: r["spec"].update(after=["Bad_Name"]), "spec.after[0]", "FieldValueInvalid"),
        (lambda r: r["spec"].update(spares=1, sparesPerGroup=1), "spec", "FieldValueInvalid"),
        (
            lambda r: r["spec"].update(runtime={"checkpoint": True}),
            "spec.runtime.checkpoint",
            "FieldValueTypeInvalid",
        ),
    ],
    ids=[
        "missing owner",
        "zero gpus",
        "owner with a space",
        "bad run name",
        "spares and alias",
        "boolean duration",
    ],
)
def test_schema_rules_of_the_run_crd_are_enforced(
    custom: client.CustomObjectsApi, jobtree_crds: list[dict[str, Any]], change: Any, field: str, reason: str
) -> None:
    run = a_run("r1")
    change(run)
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(GROUP, "v1", "default", "runs", run)
    causes = status_of(refused.value)["details"]["causes"]
    assert [(c["field"], c["reason"]) for c in causes] == [(field, reason)]


def test_int_or_string_fields_take_either(
    custom: client.CustomObjectsApi, jobtree_crds: list[dict[str, Any]]
) -> None:
    for name, checkpoint in (("a", 900), ("b", "15m")):
        run = a_run(name)
        run["spec"]["runtime"] = {"checkpoint": checkpoint}
        created = custom.create_namespaced_custom_object(GROUP, "v1", "default", "runs", run)
        assert created["spec"]["runtime"]["checkpoint"] == checkpoint


def test_status_preserves_unknown_fields_where_the_schema_says_so(
    custom: client.CustomObjectsApi, server: KubeApiServer, jobtree_crds: list[dict[str, Any]]
) -> None:
    server.seed(a_run("r1"))
    status = {"phase": "Running", "placement": {"groups": [{"nodes": ["n1"]}]}}
    patched = custom.patch_namespaced_custom_object_status(
        GROUP, "v1", "default", "runs", "r1", {"status": status}
    )
    assert patched["status"] == status


def test_cluster_scoped_budgets_live_outside_namespaces(
    custom: client.CustomObjectsApi, jobtree_crds: list[dict[str, Any]]
) -> None:
    budget = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Budget",
        "metadata": {"name": "org-t"},
        "spec": {"owner": "org:t"},
    }
    created = custom.create_cluster_custom_object(GROUP, "v1", "budgets", budget)
    assert "namespace" not in created["metadata"]
    listed = custom.list_cluster_custom_object(GROUP, "v1", "budgets")
    assert [b["metadata"]["name"] for b in listed["items"]] == ["org-t"]


def test_a_crd_without_a_schema_is_422(api: client.ApiClient, jobtree_crds: list[dict[str, Any]]) -> None:
    crd = copy.deepcopy(jobtree_crds[0])
    crd["metadata"]["name"] = f"things.{GROUP}"
    crd["spec"]["names"] = {"plural": "things", "kind": "Thing"}
    del crd["spec"]["versions"][0]["schema"]
    with pytest.raises(ApiException) as refused:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    assert (
        status_of(refused.value)["details"]["causes"][0]["field"] == "spec.versions[0].schema.openAPIV3Schema"
    )


def test_a_table_request_gets_name_and_the_crd_printer_columns(
    custom: client.CustomObjectsApi, server: KubeApiServer, jobtree_crds: list[dict[str, Any]]
) -> None:
    running = {"phase": "Running", "message": "bound 16 GPUs", "width": {"allocated": 16, "desired": 16}}
    server.seed(a_run("r1", gpus=16) | {"status": running})
    other = a_run("r2", namespace="team", gpus=8)
    server.seed(other)
    response = custom.list_cluster_custom_object(
        GROUP, "v1", "runs", _headers={"Accept": TABLE}, _preload_content=False
    )
    table = response.json()
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == ["Name", "Phase", "Width", "Desired", "Reason", "Owner", "Age"]
    rows = [(r["object"]["metadata"]["namespace"], r["cells"][:6]) for r in table["rows"]]
    assert rows == [
        ("default", ["r1", "Running", 16, 16, "bound 16 GPUs", "org:team"]),
        ("team", ["r2", None, None, None, None, "org:team"]),
    ]
    assert table["rows"][0]["cells"][6].endswith("s")


def test_a_table_watch_sends_one_row_per_event_with_columns_only_in_the_first(
    custom: client.CustomObjectsApi, server: KubeApiServer, jobtree_crds: list[dict[str, Any]]
) -> None:
    server.seed(a_run("r1"), a_run("r2"))
    response = custom.list_namespaced_custom_object(
        GROUP,
        "v1",
        "default",
        "runs",
        watch=True,
        timeout_seconds=1,
        _headers={"Accept": TABLE},
        _preload_content=False,
    )
    events = [orjson.loads(line) for line in response.data.splitlines() if line]
    assert [(e["type"], e["object"]["kind"], e["object"]["rows"][0]["cells"][0]) for e in events] == [
        ("ADDED", "Table", "r1"),
        ("ADDED", "Table", "r2"),
    ]
    assert [len(e["object"]["columnDefinitions"]) for e in events] == [7, 0]


def test_openapi_v3_tells_kubectl_that_patches_take_field_validation(
    api: client.ApiClient, jobtree_crds: list[dict[str, Any]]
) -> None:
    def get(path: str) -> Any:
        response = api.call_api(*api.param_serialize("GET", path))
        response.read()
        return orjson.loads(response.data)

    index = get("/openapi/v3")["paths"]
    assert {"api/v1", f"apis/{GROUP}/v1", "apis/coordination.k8s.io/v1"} <= set(index)
    document = get(index[f"apis/{GROUP}/v1"]["serverRelativeURL"])
    patch = document["paths"][f"/apis/{GROUP}/v1/namespaces/{{namespace}}/runs/{{name}}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": GROUP, "version": "v1", "kind": "Run"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"] if p["in"] == "query"]
