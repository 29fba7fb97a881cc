"""`jobtree agent` as its Deployment runs it: a process that leads, swaps, reports on /metrics, and steps down on SIGTERM.

The fleet of `test_swap` (`r1`: groups on n1 and n2, spares on n3 and n4), applied to the control
plane; the agent runs as a subprocess with the kubeconfig context `east` of its own ServiceAccount
(deploy/'s jobtree-agent), its leader Lease in `jobtree-system`, its endpoints on a free port.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from reconciler.cli import exitcodes
from reconciler.cluster.agent import leader, main
from tests.support.agents import until
from tests.support.clusterfleet import API, OUT_OF_SERVICE, T0, ClusterFleet, api, pods, spared_fleet
from tests.support.controlplane import Cluster
from tests.support.git import cli_env, free_port

SYSTEM = "jobtree-system"


def agent_process(fleet: ClusterFleet, port: int, *options: str, stderr: Any) -> subprocess.Popen[str]:
    """`jobtree agent --cluster east` as its own process, with the fleet's agent credentials and
    /metrics, /healthz, /readyz on `port`."""
    return subprocess.Popen(
        [sys.executable, "-m", "reconciler.cli", "agent", "--cluster", "east", "--context", "east",
         "--listen", f"127.0.0.1:{port}", *options],
        env={**cli_env(), "KUBECONFIG": str(fleet.agent_kubeconfig)}, stderr=stderr, text=True,
    )  # fmt: skip


def leading(port: int, identity: str) -> float | None:
    """The leader gauge of the replica whose identity starts with `identity` (a random suffix follows)."""
    found = [
        v for k, v in samples(port).items() if k.startswith(f"jobtree_agent_leader{{identity={identity}_")
    ]
    return found[0] if found else None


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


def samples(port: int) -> dict[str, float]:
    """Every sample of /metrics as `name{label=value,...}` -> value."""
    out = {}
    for family in text_string_to_metric_families(get(port, "/metrics")[1]):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def test_the_agent_process_leads_swaps_counts_and_hands_over_on_sigterm(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    port = free_port()
    log = tmp_path / "agent.log"
    with log.open("w") as sink:
        agent = agent_process(fleet, port, "--namespace", SYSTEM, "--identity", "replica-a", stderr=sink)
        try:
            until(lambda: get(port, "/readyz")[0] == 200, timeout=20.0, what="/readyz to answer 200")
            assert get(port, "/healthz")[0] == 200 and get(port, "/nowhere")[0] == 404
            until(lambda: leading(port, "replica-a") == 1.0, timeout=10.0)
            api(fleet).patch_node("n2", {"spec": {"taints": [OUT_OF_SERVICE]}})
            until(lambda: server.get("v1", "Pod", "r1-g1-n4", "t"), what="the replacement pod")
            until(lambda: samples(port).get("jobtree_agent_swaps_total{cluster=east}") == 1.0)
            seen = samples(port)
            assert seen["jobtree_agent_swap_latency_seconds_count{}"] == 1.0
            assert seen["jobtree_agent_journal_awaiting_fold{}"] == 1.0  # Applied, not yet Folded
            assert seen["process_resident_memory_bytes{}"] > 0 and seen["process_cpu_seconds_total{}"] > 0
        finally:
            agent.send_signal(signal.SIGTERM)
            code = agent.wait(timeout=20)
    assert code == 128 + signal.SIGTERM  # as every verb a signal stops (reconciler.cli.signals)
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n3", "r1-g1-n4"]
    lease = server.get("coordination.k8s.io/v1", "Lease", "jobtree-agent-acme-east", SYSTEM)
    assert lease is not None and not lease["spec"].get("holderIdentity")  # given up: the other leads at once
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    (swap,) = [x for x in lines if x["msg"] == "swap"]
    assert (swap["run"], swap["group"], swap["to"], swap["fenced"]) == ("t/r1", 1, "n4", ["n2"])
    assert swap["entry"] == server.list(API, "JournalEntry")[0]["metadata"]["name"]
    assert all(x["why"] for x in lines if "why" in x), [x for x in lines if "why" in x]  # never `"why": ""`
    assert [x["why"] for x in lines if x["msg"] == "stopping"] == ["asked to stop: giving the lead up"]


def test_an_agent_process_whose_lease_another_replica_took_exits_to_start_again_as_a_follower(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    fleet.reconcile(T0)
    port = free_port()
    agent = agent_process(
        fleet,
        port,
        "--namespace",
        SYSTEM,
        "--identity",
        "replica-a",
        "--lease-duration",
        "3",
        stderr=subprocess.PIPE,
    )
    try:
        until(lambda: leading(port, "replica-a") == 1.0, timeout=20.0, what="replica-a to lead")
        # another replica holds the Lease now (as after a partition that outlasted replica-a's deadline)
        server.patch("coordination.k8s.io/v1", "Lease", "jobtree-agent-acme-east",
                     {"spec": {"holderIdentity": "replica-b_0123456789", "leaseDurationSeconds": 15,
                               "renewTime": leader.micro_time(datetime.now(UTC))}}, SYSTEM)  # fmt: skip
        code = agent.wait(timeout=20)
        _, err = agent.communicate()
    finally:
        if agent.poll() is None:
            agent.kill()
    assert code == exitcodes.OTHER
    assert "lost the lead" in err and "exiting to start again as a follower" in err
    lease = server.get("coordination.k8s.io/v1", "Lease", "jobtree-agent-acme-east", SYSTEM)
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-b_0123456789"  # left alone


def test_an_agent_started_before_the_fleet_is_applied_waits_not_ready_then_serves(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = spared_fleet(server, tmp_path, monkeypatch)
    port = free_port()
    agent = agent_process(
        fleet, port, stderr=subprocess.DEVNULL
    )  # its Lease where kubectl looks: the context's namespace
    try:
        until(
            lambda: "apply the fleet first" in get(port, "/readyz")[1],
            timeout=20.0,
            what="the reason it waits",
        )
        assert (
            get(port, "/readyz")[0] == 503 and get(port, "/healthz")[0] == 200
        )  # the deployment may come first
        assert agent.poll() is None  # waiting, not crash-looping
        fleet.reconcile(T0)  # the first apply brings the CRDs and the FleetConfig mirror
        until(lambda: get(port, "/readyz")[0] == 200, timeout=20.0, what="ready once the fleet is applied")
        until(lambda: any(k.startswith("jobtree_agent_leader") and v == 1.0 for k, v in samples(port).items()),
              timeout=10.0, what="the agent to lead")  # fmt: skip
        lease = server.get("coordination.k8s.io/v1", "Lease", "jobtree-agent-acme-east", SYSTEM)
        assert lease is not None and lease["spec"]["holderIdentity"].startswith(f"{socket.gethostname()}_")
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=20)


def test_the_leader_lease_lives_in_the_given_namespace_else_the_pods_else_the_contexts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = {
        "apiVersion": "v1", "kind": "Config", "current-context": "east",
        "clusters": [{"name": n, "cluster": {"server": f"http://127.0.0.1:{p}"}} for n, p in (("east", 1), ("west", 2))],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "east", "context": {"cluster": "east", "user": "u", "namespace": "ops"}},
                     {"name": "west", "context": {"cluster": "west", "user": "u"}}],
    }  # fmt: skip
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(document))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setattr(main, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "namespace")
    assert main.lease_namespace("mine", "east") == "mine"
    assert main.lease_namespace(None, "east") == "ops"  # as kubectl --context east would read it
    assert main.lease_namespace(None, "west") == "default"  # a context naming none: kubectl's default
    assert main.lease_namespace(None, None) == main.DEFAULT_NAMESPACE  # no service account file
    (tmp_path / "namespace").write_text("fleet-ops\n")
    assert main.lease_namespace(None, None) == "fleet-ops"  # in a pod: its own namespace
