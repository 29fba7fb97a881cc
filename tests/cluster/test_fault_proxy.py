"""The fault proxy in front of the real API server (test support): it times what the client does, not itself.

A client talking to kube-apiserver directly keeps its TLS connection open between writes. The proxy
sends each write on a connection that has carried no request (so it never repeats a write), and opens
that connection after the previous write's answer, so the handshake is not inside the next write's
time: the agent's fence-to-replacement latency is measured through it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client, config

from tests.support.controlplane import Cluster, proxy


def core(server: Cluster, tmp_path: Path) -> client.CoreV1Api:
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig", identity=None)
    return client.CoreV1Api(config.new_client_from_config(str(kubeconfig), context=server.name))


def written(server: Cluster, tmp_path: Path, names: list[str]) -> list[bool]:
    """Create a ConfigMap per name, one after another; whether each write opened its connection."""
    api = core(server, tmp_path)
    mark = server.requests.mark()
    for name in names:
        api.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"k": name})
        )
    found = {c.metadata.name for c in api.list_namespaced_config_map("default").items if c.metadata}
    assert set(names) <= found  # each write arrived (once: a second create would be refused)
    return [r.connected for r in server.requests.writes(mark)]


def test_a_write_after_a_write_finds_its_connection_to_the_server_already_open(
    server: Cluster, tmp_path: Path
) -> None:
    connected = written(server, tmp_path, [f"warm-{i}" for i in range(4)])
    assert len(connected) == 4 and connected[1:] == [False, False, False]


def test_a_connection_kept_too_long_for_the_servers_idle_timeout_is_not_written_on(
    server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proxy, "SPARE_FOR", 0.0)  # every warmed connection is already too old
    assert written(server, tmp_path, [f"stale-{i}" for i in range(3)]) == [True, True, True]
