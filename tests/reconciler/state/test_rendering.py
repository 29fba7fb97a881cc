"""A run's rendered files come again from the last pass's memo only when nothing they are made of
changed: whatever changes in a run's open leases, the next tree from the memo equals the next tree
rendered whole."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.plan import Plan
from planner.reasons import Role
from planner.world import FleetState
from reconciler.passes import pipeline
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.spec import validated
from reconciler.state import memo as passmemo
from reconciler.state import nexttree, rendering
from tests.support.git import T0, template_files

SPEC = validated.read_spec(template_files())
ORIGINS = {run: f"blob of {path}" for run, path in SPEC.run_files.items()}  # what Git would name
PLAN = pipeline.run_pass(SPEC, EmbeddedCluster(SPEC.inventory), FleetState(), T0, render=False)
EMPTY = passmemo.Memo((), {}, {})
FIELDS = ("name", "rank", "start", "slots", "node", "cluster")


def changed(plan: Plan, index: int, what: str) -> Plan:
    """`plan` with one open lease's `what` changed (another lease name, rank, start, slot or node),
    or its node's cluster label."""
    leases = list(plan.open_leases)
    lease = leases[index % len(leases)]
    nodes = sorted(plan.clusters)
    if what == "cluster":  # the node relabelled into another cluster: its pods move to that folder
        return dataclasses.replace(plan, clusters={**plan.clusters, lease.node: "elsewhere"}, rendered=None)
    new = {
        "name": {"name": lease.name + "-b"},
        "rank": {"rank": (lease.rank or 0) + 1},
        "start": {"start": lease.start - 60},
        "slots": {"slots": tuple(s + 1 for s in lease.slots)},
        "node": {"node": nodes[(nodes.index(lease.node) + 1) % len(nodes)]},
    }[what]
    leases[index % len(leases)] = dataclasses.replace(lease, **new)  # type: ignore[arg-type]
    others = [x for x in plan.state.leases if not x.open]
    state = dataclasses.replace(plan.state, leases=others + leases)
    return dataclasses.replace(plan, state=state, open_leases=leases, rendered=None)


def tree(plan: Plan, memo: passmemo.Memo, contents: dict[str, bytes]) -> nexttree.NextTree:
    return nexttree.next_tree(plan, memo, contents.__getitem__, origins=ORIGINS)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, 1000), what=st.sampled_from(FIELDS))
def test_a_run_whose_leases_changed_is_rendered_again_as_a_whole_render_would(index: int, what: str) -> None:
    first = tree(PLAN, EMPTY, {})
    assert first.problems == []
    later = changed(PLAN, index, what)
    from_memo = tree(later, first.memo, dict(first.contents))
    whole = tree(later, EMPTY, {})
    rendered = {p: b for p, b in whole.blobs.items() if p.startswith("rendered/")}
    assert {p: b for p, b in from_memo.blobs.items() if p.startswith("rendered/")} == rendered


def test_an_unchanged_plan_renders_no_pod_again() -> None:
    first = tree(PLAN, EMPTY, {})
    digests = rendering.inputs(PLAN, rendering.open_by_run(PLAN), ORIGINS)
    assert digests and all(d is not None for d in digests.values())
    again = tree(PLAN, first.memo, dict(first.contents))
    assert not any(path.startswith("rendered/") for path in again.meaningful)
    assert {p: b for p, b in again.blobs.items() if p.startswith("rendered/")} == {
        p: b for p, b in first.blobs.items() if p.startswith("rendered/")
    }


def test_a_run_whose_spec_file_changed_is_rendered_again() -> None:
    run = next(iter(rendering.open_by_run(PLAN)))
    before = rendering.inputs(PLAN, rendering.open_by_run(PLAN), ORIGINS)
    after = rendering.inputs(PLAN, rendering.open_by_run(PLAN), {**ORIGINS, run: "another blob"})
    assert before[run] != after[run]
    assert all(before[r] == after[r] for r in before if r != run)
    assert rendering.inputs(PLAN, rendering.open_by_run(PLAN), {})[run] is None  # no blob: every pass


def test_a_filling_run_is_rendered_again_when_the_fillers_grace_changes_and_no_other_run_is() -> None:
    by_run = rendering.open_by_run(PLAN)
    filler, other = sorted(by_run)[:2]
    held = {**by_run, filler: [dataclasses.replace(x, role=Role.BORROWED) for x in by_run[filler]]}
    before = rendering.inputs(PLAN, held, ORIGINS)
    after = rendering.inputs(dataclasses.replace(PLAN, fill_grace=30), held, ORIGINS)
    assert before[filler] != after[filler]  # fill.gracePeriodSeconds is rendered on its pods
    assert before[other] == after[other]
    pods, _ = rendering.render(dataclasses.replace(PLAN, fill_grace=3), held, [filler])
    graces = {m["spec"]["terminationGracePeriodSeconds"] for m in pods.values() if m["kind"] == "Pod"}
    assert graces == {3}
