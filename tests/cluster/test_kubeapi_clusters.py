"""Several servers at once, addressed from one kubeconfig as a fleet addresses its clusters."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client, config

from tests.cluster.manifests import a_node
from tests.support.kubeapi import clusters


def test_two_clusters_from_one_kubeconfig_are_separate_servers_with_separate_state(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    with clusters(["east", "west"], path) as servers:
        servers["east"].seed(a_node("e1"))
        servers["west"].seed(a_node("w1"), a_node("w2"))
        contexts, current = config.list_kube_config_contexts(config_file=str(path))
        assert ([c["name"] for c in contexts], current["name"]) == (["east", "west"], "east")
        nodes = {
            name: [
                n.metadata.name
                for n in client.CoreV1Api(config.new_client_from_config(str(path), context=name))
                .list_node()
                .items
            ]
            for name in ("east", "west")
        }
        assert nodes == {"east": ["e1"], "west": ["w1", "w2"]}
        assert servers["east"].url != servers["west"].url
        assert len(servers["west"].requests) == 1


def test_the_kubeconfig_names_each_cluster_and_user_after_its_context(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    with clusters(["east"], path) as servers:
        written = yaml.safe_load(path.read_text())
        assert written["clusters"] == [{"name": "east", "cluster": {"server": servers["east"].url}}]
        assert written["contexts"][0]["context"] == {
            "cluster": "east",
            "user": "east-user",
            "namespace": "default",
        }
        assert written["current-context"] == "east"
