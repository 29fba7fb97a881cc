"""Every pod jobtree renders passes PodSecurity `baseline` (§3, §7.6), as kube-apiserver's own admission judges it.

The template fleet reconciled once renders its runs' pods (the full `PodTemplateSpec` of
rai-llm/pretrain-64 with its securityContext, `/dev/shm` and tolerations; spares on the pause
image; the short form's pods). Each is created with `dryRun=All` in a namespace labelled
`pod-security.kubernetes.io/enforce: baseline`: the real PodSecurity admission plugin checks it and
nothing is stored. A copy of one of them adding NET_ADMIN is refused, so the check is on.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.controlplane import Cluster
from tests.support.controlplane.plane import HTTPError
from tests.support.git import reconciled

ENFORCED = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


def rendered_pods(work: Path) -> list[dict[str, Any]]:
    pods = []
    for path in sorted((work / "rendered").rglob("*.yaml")):
        pods += [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Pod"]
    return pods


def admitted(server: Cluster, pod: dict[str, Any]) -> str | None:
    """None when the server admits `pod` (a dry run: nothing stored), else its refusal."""
    namespace = pod["metadata"]["namespace"]
    try:
        server.plane.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
    except HTTPError as err:
        return str(json.loads(err.body)["message"])
    return None


@pytest.fixture
def pods(server: Cluster, tmp_path: Path) -> list[dict[str, Any]]:
    work, _ = reconciled(tmp_path)
    found = rendered_pods(work)
    for namespace in sorted({p["metadata"]["namespace"] for p in found}):
        server.seed(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": ENFORCED}}
        )
    return found


def test_every_rendered_pod_of_the_template_fleet_passes_pod_security_baseline(
    server: Cluster, pods: list[dict[str, Any]]
) -> None:
    images = {c["image"] for p in pods for c in p["spec"]["containers"]}
    assert len(pods) > 20 and any("pause" in i for i in images)  # groups and spares alike
    assert any(p["spec"].get("securityContext") for p in pods)  # the full template's own
    refused = {p["metadata"]["name"]: why for p in pods if (why := admitted(server, p)) is not None}
    assert refused == {}
    assert server.list("v1", "Pod") == []  # dry runs: nothing stored


def test_a_pod_adding_a_capability_baseline_forbids_is_refused_by_the_same_check(
    server: Cluster, pods: list[dict[str, Any]]
) -> None:
    pod = copy.deepcopy(pods[0])
    pod["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": ["NET_ADMIN"]}}
    why = admitted(server, pod)
    assert why is not None and 'violates PodSecurity "baseline:latest"' in why and "NET_ADMIN" in why
