"""Watch through the official client's `watch.Watch`: replay, resume, expiry, bookmarks, selectors, timeouts."""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.cluster.manifests import a_config_map, a_pod
from tests.support.kubeapi import KubeApiServer


def take(events: int, list_call: Callable[..., Any], *args: Any, **kwargs: Any) -> list[tuple[str, str]]:
    """The first `events` (type, name) pairs of a watch."""
    watcher = watch.Watch()
    seen = []
    for event in watcher.stream(list_call, *args, **kwargs):
        seen.append((event["type"], event["raw_object"]["metadata"].get("name", "")))
        if len(seen) == events:
            watcher.stop()
    return seen


def test_a_watch_from_a_resource_version_replays_later_changes_in_order(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", a_config_map("a", {"v": "1"}))
    core.patch_namespaced_config_map("a", "default", {"data": {"v": "2"}})
    core.delete_namespaced_config_map("a", "default")
    seen = take(3, core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=5)
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_a_watch_without_a_resource_version_starts_with_the_current_objects(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(a_config_map("a", {}), a_config_map("b", {}))
    assert take(2, core.list_namespaced_config_map, "default", timeout_seconds=5) == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


def test_a_watch_sees_changes_made_while_it_is_open(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_pod("default").metadata.resource_version

    def later() -> None:
        time.sleep(0.2)
        core.create_namespaced_pod("default", a_pod("p"))

    writer = threading.Thread(target=later)
    writer.start()
    began = time.monotonic()
    seen = take(1, core.list_namespaced_pod, "default", resource_version=start, timeout_seconds=10)
    writer.join()
    assert seen == [("ADDED", "p")]
    assert time.monotonic() - began < 5


def test_resuming_from_the_last_seen_version_skips_what_was_already_seen(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_config_map("default").metadata.resource_version
    first = core.create_namespaced_config_map("default", a_config_map("a", {}))
    core.create_namespaced_config_map("default", a_config_map("b", {}))
    assert take(1, core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=5) == [
        ("ADDED", "a")
    ]
    resumed = take(
        1,
        core.list_namespaced_config_map,
        "default",
        resource_version=first.metadata.resource_version,
        timeout_seconds=5,
    )
    assert resumed == [("ADDED", "b")]


def test_a_watch_from_before_the_history_window_fails_with_410(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.set_history_window(2)
    start = core.list_namespaced_config_map("default").metadata.resource_version
    for name in ("a", "b", "c"):
        core.create_namespaced_config_map("default", a_config_map(name, {}))
    with pytest.raises(ApiException) as expired:
        take(1, core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=5)
    assert expired.value.status == 410
    assert "too old resource version" in str(expired.value.reason)


def test_a_watch_filtered_by_label_sees_objects_enter_and_leave_the_selection(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", a_config_map("a", {}))
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"fleet": "f1"}}})
    core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"fleet": None}}})
    seen = take(
        3,
        core.list_namespaced_config_map,
        "default",
        resource_version=start,
        label_selector="fleet=f1",
        timeout_seconds=5,
    )
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_bookmarks_carry_the_current_resource_version_to_the_client() -> None:
    with KubeApiServer("bookmarks", bookmark_interval=0.05) as quick:
        configuration = client.Configuration()
        configuration.host = quick.url
        core = client.CoreV1Api(client.ApiClient(configuration))
        quick.seed(a_config_map("unrelated", {}))
        start = "1"
        watcher = watch.Watch()
        for event in watcher.stream(
            core.list_namespaced_pod,
            "default",
            resource_version=start,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ):
            assert event["type"] == "BOOKMARK"
            watcher.stop()
        assert watcher.resource_version == str(quick.resource_version)


def test_send_initial_events_ends_the_initial_state_with_an_annotated_bookmark(
    core: client.CoreV1Api, server: KubeApiServer
) -> None:
    server.seed(a_config_map("a", {}))
    watcher = watch.Watch()
    events = []
    for event in watcher.stream(
        core.list_namespaced_config_map,
        "default",
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        timeout_seconds=5,
    ):
        events.append(event)
        if event["type"] == "BOOKMARK":
            watcher.stop()
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["raw_object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_timeout_seconds_ends_an_idle_stream_which_spends_no_cpu_meanwhile(core: client.CoreV1Api) -> None:
    began = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_SELF)
    events = list(
        watch.Watch().stream(core.list_namespaced_pod, "default", resource_version="1", timeout_seconds=1)
    )
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert events == []
    assert 0.9 <= time.monotonic() - began < 3
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) < 0.2
