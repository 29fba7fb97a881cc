"""The agent's list-then-watch caches against the real control plane, through the official client."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml

from reconciler.cluster import connect, kinds, observations
from reconciler.cluster.informer import Cache
from tests.support import REPO
from tests.support.agents import until
from tests.support.clusterfleet import FAST, node
from tests.support.controlplane import Cluster, write_kubeconfig
from tests.support.controlplane.nodes import TOPOLOGY_LABELS, gpu_node, realistic


def test_a_kind_not_served_yet_is_listed_again_after_a_growing_pause_then_followed_once_served(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crd = ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "journalentries.rq.davidlangworthy.io")
    server.delete(*crd)  # the fleet is not applied yet: the kind is not served
    until(lambda: server.get(*crd) is None, what="the CRD to go")
    monkeypatch.setenv(
        "KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", {"east": server}, "agent"))
    )
    api = connect.api(connect.Target("east", "east", "acme", policy=FAST))
    cache = Cache(api, kinds.JOURNAL)
    stop = threading.Event()
    mark = server.requests.mark()
    worker = threading.Thread(target=cache.run, args=(stop,), daemon=True)
    worker.start()
    try:
        assert cache.synced.wait(5.0) and cache.items() == []  # empty, not an error
        time.sleep(1.0)
        lists = [r for r in server.requests.since(mark) if r.path.endswith("/journalentries")]
        assert 1 <= len(lists) <= 4  # 0.2 s, 0.4 s, 0.8 s apart: not one list per round trip
        server.seed(yaml.safe_load((REPO / "schemas" / "crds" / "journalentries.yaml").read_text()))
        entry = {"apiVersion": "rq.davidlangworthy.io/v1", "kind": "JournalEntry", "metadata": {"name": "e1"},
                 "spec": {"cluster": "east", "at": "2026-03-02T09:00:00Z",
                          "fenced": [{"node": "n1", "cause": "OutOfService"}]}}  # fmt: skip
        server.seed(entry)
        until(lambda: cache.get("e1"), timeout=15.0, what="the entry once the kind is served")
    finally:
        stop.set()
        worker.join(timeout=5)


def test_a_production_node_is_kept_as_the_few_fields_the_agent_reads_and_a_relist_updates_in_place(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.seed(*(realistic(gpu_node(f"g{i}")) for i in range(5)))
    served = server.get("v1", "Node", "g0")
    assert served is not None and len(json.dumps(served)) > 15_000  # NFD/GFD labels, images, managedFields
    monkeypatch.setenv(
        "KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", {"east": server}, "agent"))
    )
    api = connect.api(connect.Target("east", "east", "acme", policy=FAST))
    told: list[tuple[str, str]] = []
    keys = set(TOPOLOGY_LABELS.values())
    cache = Cache(api, kinds.NODE, slim=lambda n: observations.slim_node(n, keys), page=2,
                  on_change=lambda _, event, obj: told.append((event, obj["metadata"]["name"])))  # fmt: skip
    cache.relist()
    kept = cache.get("g0")
    assert kept is not None and len(json.dumps(kept)) < 1_000
    assert set(kept["metadata"]) == {"name", "labels", "resourceVersion"}  # no managedFields, annotations
    assert set(kept["metadata"]["labels"]) == keys
    assert kept["status"] == {
        "allocatable": {"nvidia.com/gpu": "8"},
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": kept["status"]["conditions"][0]["lastTransitionTime"]}],
    }  # fmt: skip
    assert sorted(told) == [("ADDED", f"g{i}") for i in range(5)]
    before = {name: cache.get(name) for _, name in told}
    told.clear()
    server.delete("v1", "Node", "g4")
    until(lambda: server.get("v1", "Node", "g4") is None, what="g4 to go")
    cache.relist()
    assert told == [("DELETED", "g4")]  # the others unchanged: updated in place, told nothing
    assert all(cache.get(f"g{i}") == before[f"g{i}"] for i in range(4)) and len(cache) == 4


def test_an_event_older_than_an_object_put_since_changes_nothing(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.seed(node("n1"))
    server.ensure_namespace("t")
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", {"east": server})))
    api = connect.api(connect.Target("east", "east", "acme", policy=FAST))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "t"},
           "spec": {"nodeName": "n1", "containers": [{"name": "w", "image": "x"}]}}  # fmt: skip
    held: list[tuple[str, str | None]] = []  # each event taken in, and the uid the cache then holds

    def uid() -> str | None:
        return ((cache.get("p", "t") or {}).get("metadata") or {}).get("uid")

    cache = Cache(api, kinds.POD, on_change=lambda _, event, obj: held.append((event, uid())))
    api.create(kinds.POD, pod)
    cache.relist()
    api.delete(kinds.POD, "p", "t", grace=0)
    until(lambda: server.get("v1", "Pod", "p", "t") is None, what="the pod to go")
    again = api.create(kinds.POD, pod)  # its successor, under the same name
    cache.put(again)  # as the reconciler puts what apply wrote
    held.clear()
    cache.watch_once(seconds=2)  # the old pod's end, then the new one's events, from the relist's version
    assert held and {u for _, u in held} == {again["metadata"]["uid"]}  # never the old pod's DELETED
    assert uid() == again["metadata"]["uid"]
