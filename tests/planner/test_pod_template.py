"""The pod template rendered (DESIGN §3): a full PodTemplateSpec becomes each pod as written, and jobtree
sets only nodeName, hostname, subdomain, restartPolicy, its labels, its JOBTREE_* variables and the GPU
container's GPUs. The short form renders as it always did."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from planner import manifests
from reconciler.state import yamlstyle
from schemas import podtemplate
from schemas.run import Run
from tests.support.builders import a_budget, a_lease, a_run, scenario
from tests.support.corpus import VALID
from tests.support.scenarios import A32, at, play_sim

NCCL = yaml.safe_load((VALID / "run-full-template.yaml").read_text())["spec"]["template"]
OWNED = {"nodeName", "hostname", "subdomain", "restartPolicy"}


def pods_of(template: dict[str, Any], spares: int = 0) -> list[dict[str, Any]]:
    """The pods of t/r (16 GPUs in two groups of 8 on domain A) rendered from `template`."""
    run = a_run("t/r", "org:t").gpus(16).groups(8).spares(spares).template(template).build()
    budget = a_budget("t", "org:t").envelope("h", 32).build()
    _, sim = play_sim(scenario({"t": "org:t"}, A32, [at(0, apply=[budget, run])]))
    pods = [m for m in sim.last.manifests.values() if m["kind"] == "Pod"]
    return sorted(pods, key=lambda m: m["metadata"]["name"])


def active(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p["metadata"]["labels"]["rq.davidlangworthy.io/role"] == "Active"]


def test_a_full_template_is_each_pods_spec_with_only_jobtrees_fields_set() -> None:
    pods = active(pods_of(NCCL))
    assert len(pods) == 2
    for pod in pods:
        spec = pod["spec"]
        want_untouched = {k: v for k, v in NCCL["spec"].items() if k != "containers"}
        assert {k: v for k, v in spec.items() if k not in OWNED and k != "containers"} == want_untouched
        assert (spec["restartPolicy"], spec["subdomain"], spec["hostname"]) == (
            "Never",
            "r",
            pod["metadata"]["name"],
        )
        metrics, nccl = spec["containers"]
        assert metrics == NCCL["spec"]["containers"][0]  # not the GPU container: exactly as written
        want_nccl = {k: v for k, v in NCCL["spec"]["containers"][1].items() if k not in ("env", "resources")}
        assert {k: v for k, v in nccl.items() if k not in ("env", "resources")} == want_nccl
        assert nccl["resources"] == {
            "requests": {"cpu": "32", "memory": "512Gi", "vpc.amazonaws.com/efa": 4, "nvidia.com/gpu": 8},
            "limits": {"memory": "512Gi", "vpc.amazonaws.com/efa": 4, "nvidia.com/gpu": 8},
        }
        names = [e["name"] for e in nccl["env"]]
        jobtree = [n for n in names if n.startswith("JOBTREE_")]
        assert names == [*jobtree, "NCCL_DEBUG", "POD_IP"]  # jobtree's first, the template's after, in order
        assert {"JOBTREE_RUN", "JOBTREE_WORLD_SIZE", "JOBTREE_RANK_BASE"} <= set(jobtree)
        labels = pod["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "nccl-tests"
        assert labels["rq.davidlangworthy.io/run"] == "r"
        assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert {p["spec"]["nodeName"] for p in pods} == {"A-n00", "A-n01"}


def test_what_a_template_sets_of_jobtrees_part_is_overwritten() -> None:
    template = copy.deepcopy(NCCL)
    spec = template["spec"]
    spec.update(nodeName="A-n03", hostname="mine", subdomain="mine", restartPolicy="Always")
    gpu = spec["containers"][1]
    gpu["env"].insert(0, {"name": "JOBTREE_RANK_BASE", "value": "99"})
    gpu["resources"]["limits"]["nvidia.com/gpu"] = 1
    template["metadata"]["labels"].update(
        {"rq.davidlangworthy.io/run": "other", "app.kubernetes.io/managed-by": "me"}
    )
    for pod in active(pods_of(template)):
        assert pod["spec"]["nodeName"] in {"A-n00", "A-n01"}
        assert (pod["spec"]["restartPolicy"], pod["spec"]["subdomain"]) == ("Never", "r")
        assert pod["spec"]["hostname"] == pod["metadata"]["name"]
        env = pod["spec"]["containers"][1]["env"]
        assert [e["value"] for e in env if e["name"] == "JOBTREE_RANK_BASE"] in (["0"], ["8"])
        assert pod["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpu"] == 8
        labels = pod["metadata"]["labels"]
        assert (labels["rq.davidlangworthy.io/run"], labels["app.kubernetes.io/managed-by"]) == (
            "r",
            "jobtree",
        )


def test_the_gpus_go_to_the_first_container_when_gpu_container_is_not_named() -> None:
    template = copy.deepcopy(NCCL)
    del template["gpuContainer"]
    for pod in active(pods_of(template)):
        metrics, nccl = pod["spec"]["containers"]
        assert metrics["resources"]["limits"]["nvidia.com/gpu"] == 8
        assert "limits" not in nccl["resources"] or "nvidia.com/gpu" not in nccl["resources"]["limits"]
        assert manifests.pod_gpus(pod) == 8


def test_rendering_never_changes_the_template_and_gives_the_same_bytes_twice() -> None:
    template = copy.deepcopy(NCCL)
    first = [yamlstyle.dumps(p) for p in pods_of(template)]
    assert template == NCCL
    assert [yamlstyle.dumps(p) for p in pods_of(template)] == first


def test_rendering_leaves_the_parsed_run_as_it_was() -> None:
    # the Run is also mirrored into the cluster as written: the pods' JOBTREE_* variables and GPUs are
    # the pods', never the Run's
    run = Run.model_validate(a_run("t/r", "org:t").gpus(8).template(NCCL).build())
    leases = [a_lease("t/r", "A-n00", 8)]
    first = manifests.render(leases, {"t/r": run}, {})
    assert run.spec.template.model_dump(mode="json", exclude_defaults=True) == NCCL
    assert manifests.render(leases, {"t/r": run}, {}) == first


def test_every_rendered_pod_spec_is_a_core_v1_pod_spec() -> None:
    pods = pods_of(NCCL, spares=1)
    assert {p["metadata"]["labels"]["rq.davidlangworthy.io/role"] for p in pods} == {"Active", "Spare"}
    for pod in pods:
        assert podtemplate.spec_problems(pod["spec"]) == [], pod["metadata"]["name"]


def test_a_spare_pod_tolerates_what_the_workload_tolerates() -> None:
    spares = [
        p for p in pods_of(NCCL, spares=1) if p["metadata"]["labels"]["rq.davidlangworthy.io/role"] == "Spare"
    ]
    assert spares
    for pod in spares:
        assert pod["spec"]["tolerations"] == NCCL["spec"]["tolerations"]
        assert "nvidia.com/gpu" not in str(pod["spec"]["containers"])


def test_a_short_template_renders_as_before_and_jobtrees_variables_win() -> None:
    short = {
        "image": "registry.example/train:1",
        "env": [{"name": "JOBTREE_WORLD_SIZE", "value": "1"}, {"name": "LR", "value": "0.1"}],
    }
    for pod in active(pods_of(short)):
        (container,) = pod["spec"]["containers"]
        assert container["name"] == "workload" and container["image"] == "registry.example/train:1"
        sizes = [e["value"] for e in container["env"] if e["name"] == "JOBTREE_WORLD_SIZE"]
        assert sizes == ["16"]
        assert container["env"][-1] == {"name": "LR", "value": "0.1"}
        assert container["resources"] == {"limits": {"nvidia.com/gpu": 8}, "requests": {"nvidia.com/gpu": 8}}
