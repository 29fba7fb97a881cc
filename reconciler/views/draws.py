"""A fair-lottery cut replayed from what Git holds: the candidates of each draw, the picks, and code to rerun it.

An activation that reaches the lottery publishes its seed on the Reservation and in the closure of
every lease it ends (`RandomPreempt(<seed>)`). The candidates of draw k are the Active groups in
the reservation's scope of the runs it could cut: members of its published conflict set warned for
the notice period, running with leases open when the lottery began (after the reclaims, dropped
spares and shrinks of the same instant), minus what draws 0..k-1 cut (a fixed-width run, or a
malleable one pushed below its minimum, goes whole). That is worked out here from the leases in
`state/` and checked by `planner.lottery.replay`: `reproduced` says whether the replay picks
exactly the groups the ledger shows cut. Leases closed longer ago than the fleet's retention are
gone from `state/`; such a draw is said to be not reproducible, never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from planner.lottery import draw, replay
from planner.reasons import Closure, Role, closure_text
from planner.world import Lease, Reservation
from reconciler.views.fleet import Fleet

Candidate = tuple[str, str, int]  # (owner, run, group)


@dataclass(slots=True)
class Lottery:
    reservation: str
    seed: str
    at: int | None  # the activation instant (None: no lease ended with this seed is left in state/)
    closure: str  # `RandomPreempt(<seed>)`, as each lease it ended says
    cut: dict[str, list[int]] = field(default_factory=dict)  # run -> groups ended with this seed
    rounds: list[list[Candidate]] = field(default_factory=list)  # candidates before each draw
    picks: list[str] = field(default_factory=list)  # `ns/name#group`, as replay gives them
    reproduced: bool = False

    def code(self) -> str:
        """A few lines anyone can run (with jobtree installed) to replay the draws."""
        rounds = ",\n    ".join(repr(r) for r in self.rounds)
        return (
            "from planner.lottery import replay\n"
            f"print(replay({self.seed!r}, [\n    {rounds},\n]))\n"
            f"# {self.picks!r}"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "reservation": self.reservation,
            "seed": self.seed,
            "closureReason": self.closure,
            "cut": {run: groups for run, groups in sorted(self.cut.items())},
            "draws": [
                {"k": k, "candidates": [list(c) for c in cands], "picked": pick}
                for k, (cands, pick) in enumerate(zip(self.rounds, self.picks, strict=False))
            ],
            "reproduced": self.reproduced,
            "replay": self.code() if self.reproduced else None,
        }


def lotteries_that_cut(fleet: Fleet, run: str) -> list[Lottery]:
    """Every lottery whose seed ended a lease of `run` (from its leases in `state/`), replayed."""
    seeds = {}
    for res in fleet.reservations().values():
        if res.seed:
            seeds[closure_text(Closure.RANDOM_PREEMPT, res.seed)] = res
    out = []
    for closure in sorted({x.closure for x in fleet.leases(run) if x.closure in seeds}):
        out.append(replayed(fleet, seeds[closure]))
    return out


def replayed(fleet: Fleet, res: Reservation) -> Lottery:
    """The lottery `res` drew, worked out from `state/` and replayed."""
    assert res.seed is not None
    closure = closure_text(Closure.RANDOM_PREEMPT, res.seed)
    notice = fleet.spec.fleet.reservations.noticePeriod
    min_runtime = fleet.spec.fleet.reservations.minRuntime
    members = [c for c in res.conflicts]
    leases = {c.run: fleet.leases(c.run) for c in members}
    ended = [x for held in leases.values() for x in held if x.closure == closure]
    lottery = Lottery(res.run, res.seed, ended[0].ended if ended else None, closure)
    for x in ended:
        if x.role == Role.ACTIVE and x.group not in lottery.cut.setdefault(x.run, []):
            lottery.cut[x.run].append(x.group)
    at = lottery.at
    if at is None:
        return lottery
    scope = set(res.domains)

    def domain(lease: Lease) -> str:
        obs = fleet.nodes.get(lease.node)
        labels = obs.labels if obs is not None else {}
        return f"{labels.get('region', '?')}/{labels.get('cluster', '?')}/{labels.get('fabric.domain', '?')}"

    def open_at_draw(x: Lease) -> bool:  # open when the lottery began
        return x.start < at and (x.ended is None or x.ended > at or x.closure == closure)

    groups: dict[str, dict[int, int]] = {}  # run -> group -> Active GPUs in scope when the lottery began
    active: dict[str, int] = defaultdict(int)  # run -> Active GPUs anywhere then
    for entry in members:
        held = [x for x in leases[entry.run] if open_at_draw(x) and x.role == Role.ACTIVE]
        started = min((x.start for x in held), default=None)
        if entry.since > at - notice or started is None or started + min_runtime > at:
            continue
        owner = fleet.owner_of(entry.run)
        if owner is None:
            continue
        for x in held:
            active[entry.run] += x.gpus
            if domain(x) in scope:
                groups.setdefault(entry.run, {}).setdefault(x.group, 0)
                groups[entry.run][x.group] += x.gpus
    cands = sorted((fleet.owner_of(r) or "", r, g) for r, gs in groups.items() for g in gs)
    left = {(r, g) for r, gs in lottery.cut.items() for g in gs}
    for k in range(len(cands)):
        if not left or not cands:
            break
        lottery.rounds.append(list(cands))
        pick_run, pick_group = draw(res.seed, k, cands)
        lottery.picks.append(f"{pick_run}#{pick_group}")
        spec = fleet.specs.get(pick_run)
        m = spec.spec.malleable if spec is not None else None
        gone = groups[pick_run][pick_group]
        whole = m is None or active[pick_run] - gone < m.minTotalGPUs
        out = set(groups[pick_run]) if whole else {pick_group}
        if not out <= {g for r, g in left if r == pick_run}:
            return lottery  # the replay picks a group the ledger does not show cut: not reproduced
        left -= {(pick_run, g) for g in out}
        active[pick_run] -= sum(groups[pick_run][g] for g in out)
        for g in out:
            del groups[pick_run][g]
        cands = [c for c in cands if not (c[1] == pick_run and c[2] in out)]
    lottery.reproduced = not left and replay(res.seed, lottery.rounds) == lottery.picks
    return lottery
