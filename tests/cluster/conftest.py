"""Fixtures for cluster tests: a running test API server and official-client handles onto it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient

from tests.support.kubeapi import KubeApiServer, write_kubeconfig

CRD_DIR = Path(__file__).resolve().parents[2] / "schemas" / "crds"


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    with KubeApiServer("test") as running:
        yield running
        assert running.errors == [], "the test server failed inside:\n" + "\n".join(running.errors)


@pytest.fixture
def api(server: KubeApiServer, tmp_path: Path) -> client.ApiClient:
    path = write_kubeconfig(tmp_path / "kubeconfig", {"test": server})
    return config.new_client_from_config(config_file=str(path), context="test")


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture
def dynamic(api: client.ApiClient, tmp_path: Path) -> DynamicClient:
    return DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))


@pytest.fixture
def jobtree_crds(server: KubeApiServer) -> list[dict[str, Any]]:
    """The project's CRDs, installed."""
    manifests = [yaml.safe_load(p.read_text()) for p in sorted(CRD_DIR.glob("*.yaml"))]
    server.seed(*manifests)
    return manifests
