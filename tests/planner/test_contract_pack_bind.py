"""Contract scenarios for §4.3 pack (where) and §4.4 bind (leases, slots, pods).

Domain keys are region/cluster/fabric.domain; every builder domain is in west/c1, so keys sort by
the domain name. Node names are <domain>-n<NN>.
"""

from __future__ import annotations

from typing import Any

from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import (
    A32,
    at,
    group_gpus,
    node_gpus,
    open_leases,
    play,
    play_sim,
    slot_problems,
    starts,
)


def _one(run: Any, domains: list[dict[str, Any]] | None = None, gpus: int = 128, **kw: Any) -> dict[str, Any]:
    return scenario(
        {"t": "org:t"}, domains or A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", gpus).build(), run.build()])],
        **kw,
    )  # fmt: skip


def _groups_on(state: dict[str, Any], run: str, role: str = "Active") -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for x in open_leases(state, run, role):
        g = out.setdefault(x["spec"]["group"], {})
        for slot in x["spec"]["slice"]["nodes"]:
            g[slot.split("#")[0]] = g.get(slot.split("#")[0], 0) + 1
    return out


def test_group_gpus_splits_the_run_with_a_smaller_last_group() -> None:
    # 20 in groups of 8 → 8, 8, 4; nodes most free then name: A-n00, A-n01, then 4 on A-n02
    out = play(_one(a_run("t/r", "org:t").gpus(20).groups(8)))
    assert _groups_on(out["final"], "t/r") == {0: {"A-n00": 8}, 1: {"A-n01": 8}, 2: {"A-n02": 4}}


def test_without_group_gpus_chunks_fill_the_emptiest_domain_first_then_spill() -> None:
    # A 16 free, B 24 free; 32 GPUs without groups: B is filled to empty (24), the rest (8) goes to
    # A on A-n00. Each chunk stays inside one domain.
    out = play(_one(a_run("t/r", "org:t").gpus(32), [domain("A", 2), domain("B", 3)]))
    leases = open_leases(out["final"], "t/r")
    assert node_gpus(leases) == {"B-n00": 8, "B-n01": 8, "B-n02": 8, "A-n00": 8}
    for g in group_gpus(leases):
        doms = {n[0] for x in leases if x["spec"]["group"] == g for n in x["spec"]["slice"]["nodes"]}
        assert len(doms) == 1
    assert sorted(group_gpus(leases).values()) == [8, 24]


def test_a_later_group_prefers_the_domain_its_run_already_uses() -> None:
    # A and B both 16 free. Group 0: tie → domain key A. Group 1: A is already used (8 free left)
    # and preferred over B (16 free). Group 2: A is full → B.
    out = play(_one(a_run("t/r", "org:t").gpus(24).groups(8), [domain("A", 2), domain("B", 2)]))
    assert _groups_on(out["final"], "t/r") == {0: {"A-n00": 8}, 1: {"A-n01": 8}, 2: {"B-n00": 8}}


def test_growth_stays_in_the_domain_the_run_already_uses() -> None:
    # A 16, B 24. Admitted at 8 in B (most free). +1m: B (used, 16 free) over A (16 free, key
    # first). +2m: B (used, 8 free) over A (16 free, most free). All three groups in B.
    doc = _one(
        a_run("t/r", "org:t").gpus(8).groups(8).malleable(8, 24, 8),
        [domain("A", 2), domain("B", 3)],
        until="+3m",
    )
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert _groups_on(out["final"], "t/r") == {0: {"B-n00": 8}, 1: {"B-n01": 8}, 2: {"B-n02": 8}}


def test_nodes_in_a_domain_go_most_free_first_then_by_name() -> None:
    # x takes 4 of A-n00. y (12, no groups): A-n01 8, A-n02 8, A-n03 8, A-n00 4 → 8 on A-n01 and
    # 4 on A-n02, one lease per node of its single group.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_run("t/x", "org:t").gpus(4).build()]),
         at(1, apply=[a_run("t/y", "org:t").gpus(12).build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    assert node_gpus(open_leases(out["final"], "t/x")) == {"A-n00": 4}
    y = open_leases(out["final"], "t/y")
    assert node_gpus(y) == {"A-n01": 8, "A-n02": 4}
    assert len(y) == 2 and {x["spec"]["group"] for x in y} == {0}


def test_spares_follow_all_active_groups_each_in_its_groups_domain() -> None:
    # A and B 24 each; 32 in groups of 16 with 2 spares per group. Group 0 → A (key) on A-n00/01;
    # group 1 cannot fit A's 8 → B-n00/01. Then spares: group 0's 2 in A on A-n02, group 1's in B
    # on B-n02.
    out = play(_one(a_run("t/r", "org:t").gpus(32).groups(16).spares(2), [domain("A", 3), domain("B", 3)]))
    st = out["final"]
    assert _groups_on(st, "t/r") == {0: {"A-n00": 8, "A-n01": 8}, 1: {"B-n00": 8, "B-n01": 8}}
    assert _groups_on(st, "t/r", "Spare") == {0: {"A-n02": 2}, 1: {"B-n02": 2}}


def test_spares_take_the_most_free_node_of_the_domain() -> None:
    # 12 in groups of 8 with 1 spare: group 0 on A-n00, group 1 on 4 of A-n01. Spare of group 0:
    # most free node is A-n02 (8; A-n03 ties, name first); spare of group 1: A-n03 (8 > A-n02's 7).
    out = play(_one(a_run("t/r", "org:t").gpus(12).groups(8).spares(1)))
    assert _groups_on(out["final"], "t/r", "Spare") == {0: {"A-n02": 1}, 1: {"A-n03": 1}}


def test_packing_is_all_or_nothing_for_the_requested_width() -> None:
    # 16 of 32 are taken by another team; 24 in groups of 8 do not fit: nothing is placed
    doc = scenario(
        {"t": "org:t", "u": "org:u"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_budget("u", "org:u").envelope("h", 64).build(),
                      a_run("u/x", "org:u").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(24).groups(8).build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    assert starts(out, "t/r") == [] and out["final"]["runs"]["t/r"]["phase"] == "Pending"
    status = out["final"]["reservations"]["t/r"]["status"]
    assert status["reason"] == "cluster short by 8 GPUs in scope" and status["forecast"]["deficitGPUs"] == 8


def test_each_group_goes_where_its_remaining_funding_can_pay() -> None:
    # c owns 8 in A only, its parent pays 8 in B only. Group 0 → A (fundable tie 8/8, key A) paid
    # by c; group 1: A has no fundable GPUs left, so B, paid by the parent.
    doc = scenario(
        {"c": "org:p:c"}, [domain("A", 2), domain("B", 2)],
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 8, selector={"fabric.domain": "B"}).build(),
                      a_budget("c", "org:p:c", "org:p").envelope("h", 8, selector={"fabric.domain": "A"}).build(),
                      a_run("c/r", "org:p:c").gpus(16).groups(8).build()])],
    )  # fmt: skip
    out = play(doc)
    by_group = {
        x["spec"]["group"]: (node_gpus([x]), x["spec"]["payer"]["owner"]) for x in out["final"]["leases"]
    }
    assert by_group == {0: ({"A-n00": 8}, "org:p:c"), 1: ({"B-n00": 8}, "org:p")}


# ------------------------------------------------------------------------------------------ bind


def _two_payers() -> dict[str, Any]:
    # c owns 4, the parent pays the other 4 of one 8-GPU group on one node: two leases there
    return scenario(
        {"c": "org:p:c"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 8).build(),
                      a_budget("c", "org:p:c", "org:p").envelope("h", 4).build(),
                      a_run("c/r", "org:p:c").gpus(8).build()])],
    )  # fmt: skip


def test_one_lease_per_group_node_and_payer() -> None:
    out = play(_two_payers())
    leases = open_leases(out["final"], "c/r")
    assert sorted((x["spec"]["payer"]["owner"], len(x["spec"]["slice"]["nodes"])) for x in leases) == [
        ("org:p", 4),
        ("org:p:c", 4),
    ]
    assert {n for x in leases for n in node_gpus([x])} == {"A-n00"}
    assert slot_problems(out["final"]) == []
    assert out["final"]["runs"]["c/r"]["message"] == "bound 8 GPUs"


def test_one_pod_per_group_and_node_labelled_pinned_and_sized_to_its_leases() -> None:
    out, sim = play_sim(_two_payers())
    pods = [m for m in sim.last.manifests.values() if m["kind"] == "Pod"]
    assert len(pods) == 1
    pod = pods[0]
    labels = pod["metadata"]["labels"]
    assert labels["rq.davidlangworthy.io/run"] == "r"
    assert labels["rq.davidlangworthy.io/group-index"] == "0"
    assert labels["rq.davidlangworthy.io/role"] == "Active"
    lease_names = {x["metadata"]["name"] for x in open_leases(out["final"], "c/r")}
    assert labels["rq.davidlangworthy.io/lease"] in lease_names
    assert pod["spec"]["nodeName"] == "A-n00"
    assert pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == 8
    assert [m for m in sim.last.manifests.values() if m["kind"] == "Service"], "a headless Service per run"


def test_spare_pods_anchor_the_spare_without_holding_a_gpu() -> None:
    out, sim = play_sim(_one(a_run("t/r", "org:t").gpus(8).spares(2)))
    spare = [
        m
        for m in sim.last.manifests.values()
        if m["metadata"]["labels"].get("rq.davidlangworthy.io/role") == "Spare"
    ]
    assert len(spare) == 1 and spare[0]["spec"]["nodeName"] == "A-n01"
    assert all(
        "nvidia.com/gpu" not in c.get("resources", {}).get("requests", {})
        for c in spare[0]["spec"]["containers"]
    )


def test_slot_numbers_are_node_global_and_freed_slots_are_reused() -> None:
    # one node of 8 GPUs: x takes 3, y the other 5 (no slot shared); x succeeds at +5m and z (3)
    # gets exactly the three slots x held, the only free ones
    doc = scenario(
        {"t": "org:t"}, [domain("S", 1)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_run("t/x", "org:t").gpus(3).build()]),
         at(1, apply=[a_run("t/y", "org:t").gpus(5).build()]),
         at(5, workload={"run": "t/x", "event": "Succeed"}),
         at(6, apply=[a_run("t/z", "org:t").gpus(3).build()]),
         at(2, checkpoint="full")],
        until="+7m",
    )  # fmt: skip
    out = play(doc)
    full = out["checkpoints"]["full"]
    x_slots = {s for lease in open_leases(full, "t/x") for s in lease["spec"]["slice"]["nodes"]}
    y_slots = {s for lease in open_leases(full, "t/y") for s in lease["spec"]["slice"]["nodes"]}
    assert x_slots | y_slots == {f"S-n00#{i}" for i in range(8)} and not x_slots & y_slots
    z_slots = {s for lease in open_leases(out["final"], "t/z") for s in lease["spec"]["slice"]["nodes"]}
    assert z_slots == x_slots
    assert slot_problems(out["final"]) == []


def test_pods_carry_the_workload_template_and_rendezvous_environment() -> None:
    run = a_run("t/r", "org:t").gpus(16).groups(8).build()
    run["spec"]["template"] = {
        "image": "registry.example/train:1",
        "command": ["python", "train.py"],
        "env": [{"name": "LR", "value": "0.1"}],
    }
    out, sim = play_sim(
        scenario({"t": "org:t"}, A32, [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), run])])
    )
    pods = sorted(
        (m for m in sim.last.manifests.values() if m["kind"] == "Pod"),
        key=lambda m: m["metadata"]["labels"]["rq.davidlangworthy.io/group-index"],
    )
    assert len(pods) == 2
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        assert container["image"] == "registry.example/train:1"
        assert container["command"] == ["python", "train.py"]
        assert {"name": "LR", "value": "0.1"} in container["env"]
    # each pod knows the world size; rank bases differ per group (which variable names carry them
    # is the implementation's choice, so only the values are checked)
    values = [{e["value"] for e in pod["spec"]["containers"][0]["env"]} for pod in pods]
    assert all("16" in v for v in values)


def test_a_closed_lease_takes_its_pod_with_it() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/m", "org:t").gpus(32).groups(8).malleable(8, 32, 8).build()]),
         at(3, patch={"kind": "Run", "namespace": "t", "name": "m",
                      "merge": {"spec": {"malleable": {"desiredTotalGPUs": 16}}}})],
        until="+4m",
    )  # fmt: skip
    out, sim = play_sim(doc)
    pods = [m for m in sim.last.manifests.values() if m["kind"] == "Pod"]
    assert sorted(m["metadata"]["labels"]["rq.davidlangworthy.io/group-index"] for m in pods) == ["0", "1"]
    assert sum(m["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] for m in pods) == 16


def test_a_chunk_goes_only_as_far_as_the_funding_reaching_its_domain_pays() -> None:
    # c pays 2 GPUs in A (its own envelope, A only), its parent 8 in B (B only). 8 GPUs without
    # groups: A is the most free domain (32 vs 16) but funding there covers 2, so the first chunk is
    # those 2 (A-n00, paid by c) and the other 6 go to B (B-n00, paid by the parent). Filling A's
    # free GPUs regardless of who pays would leave the run unplaced although it is funded and fits.
    doc = scenario(
        {"c": "org:p:c"}, [domain("A", 4), domain("B", 2)],
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 8, selector={"fabric.domain": "B"}).build(),
                      a_budget("c", "org:p:c", "org:p").envelope("h", 2, selector={"fabric.domain": "A"}).build(),
                      a_run("c/r", "org:p:c").gpus(8).build()])],
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["c/r"]["phase"] == "Running"
    paid = sorted(
        (n, x["spec"]["payer"]["owner"]) for x in out["final"]["leases"] for n in node_gpus([x]).items()
    )
    assert paid == [(("A-n00", 2), "org:p:c"), (("B-n00", 6), "org:p")]


def test_spares_that_do_not_fit_after_all_groups_are_placed_with_each_group() -> None:
    # A holds 18 GPUs (3 nodes of 6), B 16 (2 of 8). 16 GPUs in groups of 8, 2 spares each.
    # Groups first: group 0 → A, group 1 → A too (10 free there), leaving A 2 GPUs for 4 spares.
    # Each group with its spares instead: group 0 and its spares take 10 of A, group 1 (8 + 2) no
    # longer fits A's 8 and goes to B. The run starts rather than waiting for capacity it has.
    out = play(
        _one(a_run("t/r", "org:t").gpus(16).groups(8).spares(2), [domain("A", 3, gpus=6), domain("B", 2)])
    )
    st = out["final"]
    assert st["runs"]["t/r"]["phase"] == "Running"
    assert _groups_on(st, "t/r") == {0: {"A-n00": 6, "A-n01": 2}, 1: {"B-n00": 8}}
    assert _groups_on(st, "t/r", "Spare") == {0: {"A-n02": 2}, 1: {"B-n01": 2}}
