"""Generated scenarios and the invariants every pass of them must keep (issue "Decisions II").

`scenario_of(seed)` builds a random fleet and timeline from one integer (stdlib `random.Random`,
so a failing seed replays exactly); `play_checked(doc)` plays it through the real simulator and
checks, after every pass, what DESIGN §4 promises whatever the fleet:

- the planner never refuses its own plan (a §4.9 violation raises in the pipeline);
- no Running run is below its minimum width (§4.7; completed groups count toward it);
- no run a pass cut (RandomPreempt, ReclaimUnfunded, DropSpare, a resolver's Shrink) gets a lease
  opened again by that same pass (§4.6: activation is all-or-nothing);
- every cut is attributed to a reservation whose run started in that pass (a lottery cut by its
  seed, §4.6);
- a Pending reservation's ETA is never in the past, and a reservation never turns Released while
  its run stays Pending (§4.5);
- a fully funded reservation with a non-empty conflict set starts by its `earliestStart` plus one
  notice period unless its forecast moved, with a `ReservationMoved` ledger event (§4.5);
- a second pass at the same instant from the pass's own output changes nothing (§4.5).

Returns what it found as sentences (empty: every invariant held), so a test can say which seed
broke what.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from planner.lottery import seed_for
from planner.world import FleetState
from reconciler.passes import pipeline
from reconciler.passes.simulation import Simulation, at_time
from schemas.common import parse_duration, parse_time
from schemas.scenario import Scenario
from tests.support.builders import a_budget, a_run, domain, scenario

TEAMS = ("org:r:a:x", "org:r:a:y", "org:r:b:z")
PARENTS = {"org:r:a:x": "org:r:a", "org:r:a:y": "org:r:a", "org:r:b:z": "org:r:b", "org:r:a": "org:r",
           "org:r:b": "org:r"}  # fmt: skip
NAMESPACE = {owner: owner.rsplit(":", 1)[1] for owner in TEAMS}
FLAVORS = ("H100-80GB", "A100")
CUTS = (
    "RandomPreempt",
    "ReclaimUnfunded",
    "DropSpare",
)  # an activation's cuts (its Shrink reads as voluntary)
DECIDED = (*CUTS, "Shrink", "ReclaimedBySpare")  # a pass's decisions: no lease opens again for the run
SEED = re.compile(r"^RandomPreempt\((0x[0-9a-f]{16})\)$")


def scenario_of(seed: int) -> dict[str, Any]:
    """`scenario_from` a generator seeded with `seed` (the same seed, the same scenario)."""
    doc = scenario_from(random.Random(seed))
    doc["metadata"]["name"] = f"generated-{seed}"
    return doc


def scenario_from(rng: random.Random) -> dict[str, Any]:
    """A random fleet (1-3 domains, budgets with family, lending, windows and caps), 3-12 runs of
    every shape, and a timeline of submissions, failures, completions and edits, drawn from `rng`
    (hypothesis hands one it can shrink)."""
    doms = []
    for i, name in enumerate("ABC"[: rng.randint(1, 3)]):
        flavor = FLAVORS[0] if i == 0 or rng.random() < 0.7 else FLAVORS[1]
        doms.append(domain(name, rng.randint(1, 4), rng.choice([4, 8, 8]), flavor, cluster=f"c{i}"))
    horizon = 0
    budgets = [_budget(rng, owner) for owner in (*TEAMS, "org:r:a", "org:r:b", "org:r")]
    steps: list[dict[str, Any]] = [{"at": "+0m", "apply": budgets}]
    runs: list[dict[str, Any]] = []
    minute = 0
    for i in range(rng.randint(3, 12)):
        minute += rng.choice([0, 0, 1, 5, 10, 30])
        run = _run(rng, i, runs)
        runs.append(run)
        steps.append({"at": f"+{minute}m", "apply": [run]})
    nodes = [f"{d['name']}-n{j:02d}" for d in doms for j in range(d["nodes"])]
    for _ in range(rng.randint(0, 8)):
        minute += rng.choice([1, 5, 15, 30, 60])
        steps.append(_event(rng, minute, runs, budgets, nodes))
    horizon = minute + rng.choice([60, 120, 240])
    tenants = {ns: owner for owner, ns in NAMESPACE.items()}
    fleet = {
        "reservations": {
            "noticePeriod": rng.choice(["0s", "1m", "5m", "15m", "15m"]),
            "minRuntime": rng.choice(["0s", "0s", "10m", "30m", "2h"]),
        }
    }
    doc = scenario(tenants, doms, steps, until=f"+{horizon}m", fleet=fleet)
    doc["spec"]["tick"] = rng.choice(["1m", "5m", "15m", "15m"])
    doc["metadata"]["name"] = "generated"
    return doc


def _budget(rng: random.Random, owner: str) -> dict[str, Any]:
    b = a_budget(owner.replace(":", "-"), owner, *([PARENTS[owner]] if owner in PARENTS else []))
    for i in range(rng.choice([0, 1, 1, 2])):
        fields: dict[str, Any] = {}
        if rng.random() < 0.3:
            fields["selector"] = {"cluster": rng.choice(["c0", "c1", "*"])}
        if rng.random() < 0.2:
            fields["sharing"] = "none"
        if rng.random() < 0.3:
            fields["lending"] = {"allow": True, "to": [rng.choice(["*", "org:r:a:*", "org:r:b:z"])]}
            if rng.random() < 0.5:
                fields["lending"]["maxConcurrency"] = rng.choice([0, 8, 16])
        if rng.random() < 0.15:
            fields["maxGPUHours"] = rng.choice([4, 16, 64])
        if rng.random() < 0.15:
            fields["start"] = f"2026-03-02T{9 + rng.randint(0, 3):02d}:{rng.choice([0, 30]):02d}:00Z"
        if rng.random() < 0.1:
            fields["end"] = f"2026-03-02T{11 + rng.randint(0, 3):02d}:00:00Z"
        flavor = FLAVORS[0] if rng.random() < 0.8 else FLAVORS[1]
        b.envelope(f"e{i}", rng.choice([0, 8, 16, 16, 24, 32, 48]), flavor, **fields)
    return b.build()


def _run(rng: random.Random, i: int, before: list[dict[str, Any]]) -> dict[str, Any]:
    owner = rng.choice(TEAMS)
    flavor = FLAVORS[0] if rng.random() < 0.85 else rng.choice([FLAVORS[1], "H100"])
    r = a_run(f"{NAMESPACE[owner]}/r{i}", owner, flavor)
    shape = rng.choice(["plain", "grouped", "malleable", "malleable", "spares", "borrow", "fill", "huge"])
    if shape == "plain":
        r.gpus(rng.choice([1, 2, 4, 8]))
    elif shape == "grouped":
        r.gpus(rng.choice([8, 16, 24])).groups(rng.choice([4, 8]), spread=rng.random() < 0.7)
    elif shape == "malleable":
        step = rng.choice([4, 8])
        low = step * rng.randint(1, 2)
        high = low + step * rng.randint(0, 3)
        r.gpus(high).malleable(low, high, step, desired=rng.choice([None, None, low, high]))
        if rng.random() < 0.5:
            r.groups(rng.choice([g for g in (4, 8) if step % g == 0]))
    elif shape == "spares":
        r.gpus(rng.choice([8, 16])).groups(rng.choice([4, 8])).spares(rng.choice([1, 2, 4]))
    elif shape == "borrow":
        r.gpus(16).groups(8).borrowing(
            rng.choice([t for t in TEAMS if t != owner]), cap=rng.choice([None, 8])
        )
    elif shape == "fill":
        r.gpus(rng.choice([2, 4])).opportunistic()
    else:
        r.gpus(rng.choice([64, 100]))
    if rng.random() < 0.3:
        r.checkpointed()
    mine = [x for x in before if x["metadata"]["namespace"] == NAMESPACE[owner]]
    if mine and rng.random() < 0.15:
        r.after(rng.choice(mine)["metadata"]["name"])
    return r.build()


def _event(
    rng: random.Random,
    minute: int,
    runs: list[dict[str, Any]],
    budgets: list[dict[str, Any]],
    nodes: list[str],
) -> dict[str, Any]:
    kind = rng.choice(["fail", "fail", "cordon", "uncordon", "succeed", "succeed-group", "fail-run",
                       "desired", "delete", "budget"])  # fmt: skip
    at = f"+{minute}m"
    run = rng.choice(runs)
    key = f"{run['metadata']['namespace']}/{run['metadata']['name']}"
    if kind in ("fail", "cordon", "uncordon"):
        event = {"fail": rng.choice(["Fail", "Delete"]), "cordon": "Cordon", "uncordon": "Uncordon"}[kind]
        return {"at": at, "node": {"name": rng.choice(nodes), "event": event}}
    if kind == "succeed":
        return {"at": at, "workload": {"run": key, "event": "Succeed"}}
    if kind == "succeed-group":
        return {"at": at, "workload": {"run": key, "event": "Succeed", "group": rng.randint(0, 2)}}
    if kind == "fail-run":
        return {"at": at, "workload": {"run": key, "event": "Fail"}}
    if kind == "desired" and run["spec"].get("malleable"):
        m = run["spec"]["malleable"]
        want = rng.randrange(m["minTotalGPUs"], m["maxTotalGPUs"] + 1, m["stepGPUs"])
        merge = {"spec": {"malleable": {"desiredTotalGPUs": want}}}
        return {"at": at, "patch": {"kind": "Run", "namespace": run["metadata"]["namespace"],
                                    "name": run["metadata"]["name"], "merge": merge}}  # fmt: skip
    if kind == "delete":
        return {"at": at, "delete": {"kind": "Run", "namespace": run["metadata"]["namespace"],
                                     "name": run["metadata"]["name"]}}  # fmt: skip
    b = rng.choice(budgets)
    envs = [{**e, "concurrency": rng.choice([0, 8, 16, 32])} for e in b["spec"]["envelopes"]]
    return {"at": at, "apply": [{**b, "spec": {**b["spec"], "envelopes": envs}}]}


@dataclass
class Checked:
    """What `play_checked` saw: the problems found, and how many passes and cuts it watched."""

    problems: list[str] = field(default_factory=list)
    passes: int = 0
    cuts: int = 0
    activations: int = 0


def play_checked(doc: dict[str, Any]) -> Checked:
    """Play a scenario, checking the invariants above after every pass."""
    sim = Simulation(Scenario.model_validate(doc), doc)
    notice = parse_duration(doc["spec"]["fleet"].get("reservations", {}).get("noticePeriod", "15m"))
    seen = Checked()
    real = sim.run_pass
    promised: dict[str, tuple[int, int]] = {}  # reservation -> (ETA, the pass that published it)
    stepped = {at_time(step["at"], sim.start) for step in doc["spec"]["steps"]}  # and window edges:
    stepped |= {
        parse_time(env[edge])
        for step in doc["spec"]["steps"]
        for obj in step.get("apply", ())
        if obj["kind"] == "Budget"
        for env in obj["spec"]["envelopes"]
        for edge in ("start", "end")
        if edge in env
    }

    def checked(now: int) -> None:
        before: FleetState = sim.state
        was_pending = {k for k, r in before.reservations.items() if r.state == "Pending"}
        try:
            real(now)
        except pipeline.InvariantViolation as exc:
            seen.problems.append(f"{_t(now)}: the planner refused its own plan: {exc}")
            raise _Stop from exc
        seen.passes += 1
        plan = sim.last
        events = plan.events
        started = {e.lease.run for e in events if e.event == "Start" and str(e.lease.reason) != "Swap"}
        activated = {
            r
            for r in started
            if (res := sim.state.reservations.get(r)) is not None
            and res.state == "Released"
            and res.ended == now
        }
        seen.activations += len(activated)
        for e in events:
            if e.event != "End":
                continue
            why = e.reason
            kind = why.split("(")[0]
            if kind in DECIDED and e.lease.run in started:
                seen.problems.append(f"{_t(now)}: {e.lease.run} ended ({why}) and started again in one pass")
            if kind in CUTS:
                seen.cuts += 1
                if not activated:
                    seen.problems.append(f"{_t(now)}: {e.lease.run} cut ({why}) but no reservation started")
                m = SEED.match(why)
                if m and not any(seed_for(r, now) == m.group(1) for r in activated):
                    seen.problems.append(
                        f"{_t(now)}: lottery seed {m.group(1)} of no reservation started now"
                    )
        for key, rec in sim.state.runs.items():
            status = plan.runs.get(key)
            if rec.phase != "Running" or status is None:
                continue
            low = status["width"].get("min")
            counted = status["width"]["allocated"] + rec.completed
            if low is not None and counted < low:
                seen.problems.append(f"{_t(now)}: {key} Running with {counted} GPUs, below its minimum {low}")
        for key, res in sim.state.reservations.items():
            if res.state == "Pending" and " by 0 GPUs" in res.reason:
                seen.problems.append(f"{_t(now)}: {key} waits, '{res.reason}'")
            if res.state == "Pending" and res.earliest_start is not None and res.earliest_start < now:
                seen.problems.append(
                    f"{_t(now)}: {key}'s earliestStart {_t(res.earliest_start)} is in the past"
                )
            if key in was_pending and res.state == "Released" and sim.state.runs[key].phase == "Pending":
                seen.problems.append(f"{_t(now)}: {key}'s reservation released while its run stays Pending")
        moved = {m.run for m in plan.moves}
        for m in plan.moves:
            was, res = before.reservations.get(m.run), sim.state.reservations.get(m.run)
            if now in stepped or events or was is None or res is None:
                continue  # a step, a window edge or a decision of this pass changed the forecast
            same = (was.reason, was.deficit, {e.run for e in was.conflicts}) == (
                res.reason,
                res.deficit,
                {e.run for e in res.conflicts},
            )
            receded = m.previous is not None and now < m.previous and (res.earliest_start or 0) > m.previous
            if same and receded:
                seen.problems.append(
                    f"{_t(now)}: {m.run}'s ETA moved from {_t(m.previous or 0)} to {_t(res.earliest_start or 0)} "
                    f"with nothing changed ({res.reason})"
                )
        for key, (eta, _) in list(promised.items()):
            res = sim.state.reservations.get(key)
            if res is None or res.state != "Pending" or key in moved:
                promised.pop(key)
            elif now > eta + notice:
                seen.problems.append(
                    f"{_t(now)}: {key} funded, warned and due at {_t(eta)} still waits, its ETA never moved"
                )
                promised.pop(key)
        for key, res in sim.state.reservations.items():
            funded = res.why is not None and str(res.why) == "cluster short"
            if res.state == "Pending" and res.earliest_start is not None and res.conflicts and funded:
                promised.setdefault(key, (res.earliest_start, now))
        assert sim.spec_cache is not None
        again = pipeline.run_pass(sim.spec_cache, sim.cluster, sim.state, now, render=False)
        if again.events or again.moves:
            what = sorted({f"{e.event} {e.lease.run} {e.reason}" for e in again.events})
            seen.problems.append(f"{_t(now)}: a second pass at the same instant changed {what[:4]}")
        elif again.state.reservations != sim.state.reservations:
            diff = sorted(k for k in again.state.reservations.keys() | sim.state.reservations.keys()
                          if again.state.reservations.get(k) != sim.state.reservations.get(k))  # fmt: skip
            seen.problems.append(f"{_t(now)}: a second pass at the same instant changed reservations {diff}")
        elif again.runs != plan.runs:
            diff = sorted(k for k in plan.runs if plan.runs[k] != again.runs.get(k))
            seen.problems.append(f"{_t(now)}: a second pass at the same instant changed runs {diff}")

    sim.run_pass = checked  # type: ignore[method-assign]  # observe every pass the simulator makes
    try:
        sim.play()
    except _Stop:
        pass
    return seen


class _Stop(Exception):
    """The planner refused a plan: nothing after it can be checked."""


def _t(instant: int) -> str:
    from schemas.common import format_time

    return format_time(instant)[11:19]
