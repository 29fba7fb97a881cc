"""List: label and field selectors, limit/continue on a consistent snapshot, resourceVersion rules."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cluster.manifests import GROUP, a_config_map, a_node, a_pod, a_run, status_of
from tests.support.kubeapi import KubeApiServer


@pytest.fixture
def labelled(server: KubeApiServer) -> None:
    server.seed(
        a_config_map("a", {}, tier="gpu", fleet="f1"),
        a_config_map("b", {}, tier="cpu", fleet="f1"),
        a_config_map("c", {}, tier="gpu"),
        a_config_map("d", {}),
    )


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        ("tier=gpu", ["a", "c"]),
        ("tier==gpu", ["a", "c"]),
        ("tier!=gpu", ["b", "d"]),
        ("tier in (gpu, cpu)", ["a", "b", "c"]),
        ("tier notin (gpu)", ["b", "d"]),
        ("fleet", ["a", "b"]),
        ("!fleet", ["c", "d"]),
        ("tier=gpu,fleet=f1", ["a"]),
        ("tier in (gpu),!fleet", ["c"]),
    ],
)
def test_label_selectors_choose_what_kubernetes_would(
    core: client.CoreV1Api, labelled: None, selector: str, want: list[str]
) -> None:
    listed = core.list_namespaced_config_map("default", label_selector=selector)
    assert [cm.metadata.name for cm in listed.items] == want


def test_a_malformed_label_selector_is_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as refused:
        core.list_namespaced_config_map("default", label_selector="tier in gpu")
    assert (status_of(refused.value)["code"], status_of(refused.value)["reason"]) == (400, "BadRequest")


def test_pods_are_selected_by_node_name_and_phase(core: client.CoreV1Api, server: KubeApiServer) -> None:
    server.seed(a_pod("p1", node="n1"), a_pod("p2", node="n2"), a_pod("p3", node="n1"))
    server.kubelet.set_phase("default", "p3", "Running")
    on_n1 = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    assert [p.metadata.name for p in on_n1.items] == ["p1", "p3"]
    running = core.list_namespaced_pod("default", field_selector="spec.nodeName=n1,status.phase!=Pending")
    assert [p.metadata.name for p in running.items] == ["p3"]


def test_objects_are_selected_by_metadata_name_and_namespace(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    other = a_config_map("a", {})
    other["metadata"]["namespace"] = "team"
    server.seed(a_config_map("a", {}), a_config_map("b", {}), other)
    found = core.list_config_map_for_all_namespaces(
        field_selector="metadata.name=a,metadata.namespace!=default"
    )
    assert [(c.metadata.namespace, c.metadata.name) for c in found.items] == [("team", "a")]


def test_cordoned_nodes_are_selected_by_spec_unschedulable(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(a_node("n1"), a_node("n2") | {"spec": {"unschedulable": True}})
    assert [n.metadata.name for n in core.list_node(field_selector="spec.unschedulable=true").items] == ["n2"]
    assert [n.metadata.name for n in core.list_node(field_selector="spec.unschedulable=false").items] == [
        "n1"
    ]


def test_an_unsupported_field_label_is_400_naming_it(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as refused:
        core.list_namespaced_config_map("default", field_selector="data.k=v")
    assert status_of(refused.value)["message"] == "field label not supported: data.k"


def test_pages_follow_the_continue_token_and_together_list_everything_once(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(*(a_config_map(f"cm-{i:02}", {}) for i in range(7)))
    first = core.list_namespaced_config_map("default", limit=3)
    assert first.metadata.remaining_item_count == 4
    names = [c.metadata.name for c in first.items]
    token = first.metadata._continue
    while token:
        page = core.list_namespaced_config_map("default", limit=3, _continue=token)
        names += [c.metadata.name for c in page.items]
        token = page.metadata._continue
    assert names == [f"cm-{i:02}" for i in range(7)]


def test_later_pages_show_the_snapshot_of_the_first_page(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(*(a_config_map(f"cm-{i}", {"v": "old"}) for i in range(4)))
    first = core.list_namespaced_config_map("default", limit=2)
    core.delete_namespaced_config_map("cm-3", "default")
    core.patch_namespaced_config_map("cm-2", "default", {"data": {"v": "new"}})
    core.create_namespaced_config_map("default", a_config_map("cm-9", {}))
    rest = core.list_namespaced_config_map("default", limit=10, _continue=first.metadata._continue)
    assert [(c.metadata.name, c.data["v"]) for c in rest.items] == [("cm-2", "old"), ("cm-3", "old")]
    assert rest.metadata.resource_version == first.metadata.resource_version


def test_a_continue_token_older_than_the_history_window_is_410_expired(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(*(a_config_map(f"cm-{i}", {}) for i in range(4)))
    first = core.list_namespaced_config_map("default", limit=2)
    core.create_namespaced_config_map("default", a_config_map("late", {}))
    server.set_history_window(0)
    with pytest.raises(ApiException) as expired:
        core.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue)
    body = status_of(expired.value)
    assert (body["code"], body["reason"]) == (410, "Expired")
    assert body["metadata"]["continue"]


def test_listing_at_an_exact_resource_version_shows_that_moment(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(a_config_map("a", {}))
    then = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", a_config_map("b", {}))
    past = core.list_namespaced_config_map("default", resource_version=then, resource_version_match="Exact")
    assert [c.metadata.name for c in past.items] == ["a"]


def test_typed_list_items_carry_no_kind_but_custom_resource_items_do(
    api: client.ApiClient, server: KubeApiServer, jobtree_crds: list[dict[str, Any]]
) -> None:
    server.seed(a_config_map("a", {}), a_run("r1"))
    typed = client.CoreV1Api(api).list_namespaced_config_map("default", _preload_content=False).json()
    assert typed["kind"] == "ConfigMapList" and "kind" not in typed["items"][0]
    custom = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, "v1", "default", "runs")
    assert (custom["kind"], custom["items"][0]["kind"]) == ("RunList", "Run")
