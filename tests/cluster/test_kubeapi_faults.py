"""Fault injection and the request log, as a test of retry and idempotence logic would use them."""

from __future__ import annotations

import time

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.cluster.manifests import a_config_map, status_of
from tests.support.kubeapi import Fault, KubeApiServer


def test_a_429_fault_answers_too_many_requests_with_retry_after_then_lets_requests_through(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.faults.add(
        Fault.respond(429, method="POST", path="/api/v1/namespaces/*/configmaps", retry_after=2)
    )
    with pytest.raises(ApiException) as throttled:
        core.create_namespaced_config_map("default", a_config_map("cm", {}))
    assert throttled.value.headers["Retry-After"] == "2"
    body = status_of(throttled.value)
    assert (body["code"], body["reason"], body["details"]["retryAfterSeconds"]) == (429, "TooManyRequests", 2)
    assert core.create_namespaced_config_map("default", a_config_map("cm", {})).metadata.name == "cm"


def test_faults_fire_by_count_skipping_and_spacing_deterministically(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.faults.add(
        Fault(method="GET", path="/api/v1/namespaces/default/configmaps", code=500, times=2, skip=1, every=2)
    )
    outcomes = []
    for _ in range(6):
        try:
            core.list_namespaced_config_map("default")
            outcomes.append(200)
        except ApiException as failure:
            outcomes.append(failure.status)
    assert outcomes == [200, 500, 200, 500, 200, 200]


def test_a_409_fault_looks_like_a_real_conflict(core: client.CoreV1Api, server: KubeApiServer) -> None:
    server.faults.add(Fault.respond(409, method="PUT"))
    created = core.create_namespaced_config_map("default", a_config_map("cm", {}))
    with pytest.raises(ApiException) as refused:
        core.replace_namespaced_config_map("cm", "default", created)
    assert status_of(refused.value)["reason"] == "Conflict"


def test_a_slow_fault_delays_the_response_but_serves_it(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.faults.add(Fault.slow(0.3, method="GET", path="/api/v1/namespaces"))
    began = time.monotonic()
    assert len(core.list_namespace().items) == 4
    assert time.monotonic() - began >= 0.3


def test_a_disconnect_fault_breaks_a_post_without_an_answer(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.faults.add(Fault.disconnect_request(method="POST"))
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.create_namespaced_config_map("default", a_config_map("cm", {}))
    assert server.get("v1", "ConfigMap", "cm", "default") is None
    assert [(r.method, r.code, r.fault) for r in server.requests] == [("POST", 0, "disconnect")]


def test_a_get_cut_off_once_is_retried_by_the_client_transparently(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.faults.add(Fault.disconnect_request(method="GET", path="/api/v1/nodes"))
    assert core.list_node().items == []
    assert [(r.path, r.code) for r in server.requests] == [("/api/v1/nodes", 0), ("/api/v1/nodes", 200)]


def test_a_dropped_watch_is_cut_after_the_given_number_of_events(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(*(a_config_map(f"cm-{i}", {}) for i in range(5)))
    server.faults.add(Fault.drop_watch(2, path="/api/v1/namespaces/default/configmaps"))
    seen = []
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for event in watch.Watch().stream(core.list_namespaced_config_map, "default", timeout_seconds=5):
            seen.append(event["object"].metadata.name)
    assert seen == ["cm-0", "cm-1"]


def test_a_cleanly_ended_watch_is_resumed_by_the_client_from_the_last_version(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(*(a_config_map(f"cm-{i}", {}) for i in range(3)))
    server.faults.add(Fault.drop_watch(2, path="/api/v1/namespaces/default/configmaps", clean=True))
    watcher = watch.Watch()
    seen = []
    for event in watcher.stream(core.list_namespaced_config_map, "default"):
        seen.append(event["object"].metadata.name)
        if len(seen) == 2:
            core.create_namespaced_config_map("default", a_config_map("late", {}))
        if len(seen) == 4:
            watcher.stop()
    assert seen == ["cm-0", "cm-1", "cm-2", "late"]
    watches = [r for r in server.requests if r.watch]
    assert [r.query.get("resourceVersion") for r in watches][0] is None
    assert (
        watches[1].query["resourceVersion"]
        == server.get("v1", "ConfigMap", "cm-1", "default")["metadata"]["resourceVersion"]
    )


def test_the_request_log_shows_that_a_repeated_apply_still_sends_a_patch_but_changes_nothing(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    body = a_config_map("cm", {"k": "v"})
    apply = {"field_manager": "jobtree", "_content_type": "application/apply-patch+yaml"}
    core.patch_namespaced_config_map("cm", "default", body, **apply)
    mark = server.requests.mark()
    version = server.resource_version
    core.read_namespaced_config_map("cm", "default")
    core.patch_namespaced_config_map("cm", "default", body, **apply)
    writes = server.requests.writes(since=mark)
    assert [(w.method, w.path, w.query["fieldManager"], w.content_type, w.code) for w in writes] == [
        ("PATCH", "/api/v1/namespaces/default/configmaps/cm", "jobtree", "application/apply-patch+yaml", 200)
    ]
    assert server.resource_version == version


def test_faulted_requests_are_logged_with_the_fault_and_the_code_sent(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.faults.add(Fault.respond(500, method="GET", path="/api/v1/nodes"))
    with pytest.raises(ApiException):
        core.list_node()
    logged = server.requests.since(0)[-1]
    assert (logged.method, logged.path, logged.code, logged.fault) == (
        "GET",
        "/api/v1/nodes",
        500,
        "respond 500",
    )


def test_a_seeded_chance_fault_fires_on_the_same_requests_every_run() -> None:
    def outcomes() -> list[int]:
        with KubeApiServer("chance") as chancy:
            chancy.faults.add(Fault(method="GET", code=503, times=None, probability=0.5, seed=7))
            configuration = client.Configuration()
            configuration.host = chancy.url
            core = client.CoreV1Api(client.ApiClient(configuration))
            codes = []
            for _ in range(12):
                try:
                    core.list_node()
                    codes.append(200)
                except ApiException as failure:
                    codes.append(failure.status)
            return codes

    first = outcomes()
    assert first == outcomes()
    assert 200 in first and 503 in first
