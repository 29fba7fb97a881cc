"""The agent's /metrics, /healthz and /readyz (§7.4) scraped over HTTP, and its JSON log lines."""

from __future__ import annotations

import http.client
import io
import json
import logging
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from reconciler.cluster.agent import health
from tests.support.agents import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock(0.0)


@pytest.fixture
def metrics() -> health.Metrics:
    return health.Metrics.create()


@pytest.fixture
def probe(metrics: health.Metrics, clock: Clock) -> Iterator[tuple[health.Health, int]]:
    checks = health.Health(metrics.registry, limit=30.0, clock=clock)
    server, thread = checks.serve("127.0.0.1", 0)
    yield checks, server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def get(port: int, path: str) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read().decode()
    finally:
        conn.close()


def test_metrics_are_scraped_with_their_names_types_and_labels(
    metrics: health.Metrics, probe: tuple[health.Health, int]
) -> None:
    metrics.swapped("east", 0.042)
    metrics.swapped("east", 0.3)
    metrics.decline("east", "no_spare")
    metrics.decline("east", "spec_invalid")
    metrics.decline("east", "no_spare")
    metrics.awaiting_fold.set(3)
    metrics.leading("agent-a", True)
    metrics.intent_finished.inc(2)

    code, content_type, text = get(probe[1], "/metrics")

    assert (code, content_type) == (200, CONTENT_TYPE_LATEST)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    want_types = {
        "jobtree_agent_swaps": "counter",
        "jobtree_agent_swaps_declined": "counter",
        "jobtree_agent_swap_latency_seconds": "histogram",
        "jobtree_agent_journal_awaiting_fold": "gauge",
        "jobtree_agent_leader": "gauge",
        "jobtree_agent_intent_entries_finished": "counter",
    }
    assert {name: families[name].type for name in want_types} == want_types
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples
    }
    assert samples[("jobtree_agent_swaps_total", (("cluster", "east"),))] == 2
    assert samples[("jobtree_agent_swaps_declined_total", (("cluster", "east"), ("reason", "no_spare")))] == 2
    assert (
        samples[("jobtree_agent_swaps_declined_total", (("cluster", "east"), ("reason", "spec_invalid")))]
        == 1
    )
    assert samples[("jobtree_agent_swap_latency_seconds_count", ())] == 2
    assert samples[("jobtree_agent_swap_latency_seconds_bucket", (("le", "0.05"),))] == 1
    assert samples[("jobtree_agent_swap_latency_seconds_bucket", (("le", "0.5"),))] == 2
    assert samples[("jobtree_agent_swap_latency_seconds_bucket", (("le", "0.005"),))] == 0
    assert samples[("jobtree_agent_swap_latency_seconds_bucket", (("le", "5.0"),))] == 2
    assert samples[("jobtree_agent_journal_awaiting_fold", ())] == 3
    assert samples[("jobtree_agent_leader", (("identity", "agent-a"),))] == 1
    assert samples[("jobtree_agent_intent_entries_finished_total", ())] == 2


def test_the_agents_metrics_stay_out_of_the_global_registry(metrics: health.Metrics) -> None:
    metrics.swapped("east", 0.01)
    assert REGISTRY.get_sample_value("jobtree_agent_swaps_total", {"cluster": "east"}) is None
    assert metrics.registry.get_sample_value("jobtree_agent_swaps_total", {"cluster": "east"}) == 1
    health.Metrics.create()  # a second agent in one process registers without a clash


def test_healthz_is_ok_while_every_loop_beats_within_its_limit(
    probe: tuple[health.Health, int], clock: Clock
) -> None:
    checks, port = probe
    assert get(port, "/healthz")[0] == 200  # no loop has started yet
    checks.beat("watch-nodes")
    checks.beat("swap", within=5.0)
    clock.now = 4.0
    assert get(port, "/healthz")[:1] == (200,)

    clock.now = 6.0
    code, _, text = get(port, "/healthz")

    assert code == 500
    assert text == "loop swap has not beaten for 6.0s (limit 5s)\n"
    checks.beat("swap", within=5.0)
    assert get(port, "/healthz")[0] == 200
    clock.now = 40.0
    checks.forget("swap")
    assert get(port, "/healthz")[2] == "loop watch-nodes has not beaten for 40.0s (limit 30s)\n"


def test_readyz_answers_once_the_watches_have_synced(probe: tuple[health.Health, int]) -> None:
    checks, port = probe
    assert get(port, "/readyz") == (503, "text/plain; charset=utf-8", health.NOT_SYNCED + "\n")

    checks.ready()
    assert get(port, "/readyz")[::2] == (200, "ok\n")

    checks.not_ready("lost the watch of nodes")
    assert get(port, "/readyz")[::2] == (503, "lost the watch of nodes\n")


def test_other_paths_are_not_found(probe: tuple[health.Health, int]) -> None:
    code, _, text = get(probe[1], "/metricz")
    assert (code, text) == (404, "no such path: /metricz\n")


def test_one_connection_serves_many_scrapes(probe: tuple[health.Health, int]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", probe[1], timeout=5)
    try:
        for path in ("/healthz", "/metrics", "/readyz", "/healthz"):
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            assert response.status in (200, 503)
    finally:
        conn.close()


def test_log_lines_are_json_with_the_extra_fields() -> None:
    out = io.StringIO()
    log = health.logger("jobtree.agent.test", stream=out)
    health.logger("jobtree.agent.test", stream=out)  # asked again: still one line per record

    log.info("swapped %s", "t/r group 0", extra={"run": "t/r", "node": "n1", "latency_s": 0.04})
    log.warning("declined", extra={"reason": "no_spare"})

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 2
    first = lines[0]
    assert first["msg"] == "swapped t/r group 0" and first["level"] == "info"
    assert (first["run"], first["node"], first["latency_s"]) == ("t/r", "n1", 0.04)
    assert first["ts"].endswith("Z") and len(first["ts"]) == len("2026-03-02T09:00:00.000Z")
    assert (lines[1]["level"], lines[1]["reason"]) == ("warning", "no_spare")
    assert logging.getLogger("jobtree.agent.test").propagate is False
