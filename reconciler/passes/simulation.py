"""Simulation: play a Scenario through the real pipeline on the embedded cluster, virtual clock.

At one instant: workloads that finish then (`workloads`: a run's duration of useful work, counted by
`passes.workloads`), steps in file order, then one pass if any is due (a finish, a step, a
reservation's earliestStart, an envelope window edge, a tick), then checkpoints. Same file, same bytes out.
The `jobtree simulate` verb (options, output) is `simulate`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner import manifests, records
from planner.context import Event
from planner.reasons import Closure, Ledger, Phase, Role
from planner.world import FleetState, WorkloadEvent
from reconciler.passes import pipeline
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.passes.workloads import Work
from reconciler.spec import validated
from reconciler.state import codec as statefiles
from schemas.common import format_time, parse_duration, parse_time
from schemas.load import Symlink, bad_document_diagnostic, load_object
from schemas.scenario import MAX_TICKS, Scenario
from schemas.yamldoc import BadDocument, Document, parse_all


def at_time(text: str, start: int) -> int:
    return start + parse_duration(text[1:]) if text.startswith("+") else parse_time(text)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (lists replaced whole)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


@dataclass
class Simulation:
    scenario: Scenario
    raw: dict[str, Any]
    start: int = 0
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    texts: dict[tuple[str, str, str], bytes] = field(default_factory=dict)
    state: FleetState = field(default_factory=FleetState)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    last: Any = None
    timeline: list[str] = field(default_factory=list)
    history: Any = None  # a `history.History` when `--git DIR` records each pass as a commit
    work: dict[str, Work] = field(default_factory=dict)  # runs with a duration: their useful work

    def __post_init__(self) -> None:
        spec = self.scenario.spec
        self.start = parse_time(spec.start) if not spec.start.startswith("+") else 0
        self.cluster = EmbeddedCluster(spec.inventory)
        fleet_raw = self.raw.get("spec", {}).get("fleet") or {}
        self.fleet_file = statefiles.dump(
            {
                "apiVersion": "rq.davidlangworthy.io/v1",
                "kind": "FleetConfig",
                "metadata": {"name": "scenario"},
                "spec": fleet_raw,
            }
        )
        self.spec_cache: validated.Spec | None = None
        self.docs: dict[tuple[str, str, str], list[Document]] = {}
        self.validated: dict[str, Any] = {}  # path -> (documents, their checked entries)
        self.durations = {w.run: w.duration for w in spec.workloads}
        self.working: set[str] = set()  # runs whose work is not finished (a subset of `work`)
        self.lost: dict[str, list[tuple[int, int]]] = {}  # run -> (instant of a cut, GPU-seconds it lost)

    # -- spec files ------------------------------------------------------------------------------
    def files(self) -> dict[str, bytes]:
        out = {"jobtree.yaml": self.fleet_file}
        for key, obj in sorted(self.objects.items()):
            kind, ns, name = key
            path = f"budgets/{name}.yaml" if kind == "Budget" else f"runs/{ns}/{name}.yaml"
            if key not in self.texts:
                self.texts[key] = statefiles.dump(obj)
            out[path] = self.texts[key]
        return out

    def documents(self) -> dict[str, list[Document]]:
        """The same spec as `files()`, handed over already parsed: no YAML round trip per pass. An
        object left unchanged keeps its document list, so it is not validated again (`validated`)."""
        out: dict[str, list[Document]] = {}
        for key, obj in sorted(self.objects.items()):
            kind, ns, name = key
            path = f"budgets/{name}.yaml" if kind == "Budget" else f"runs/{ns}/{name}.yaml"
            docs = self.docs.get(key)
            if docs is None or docs[0].data is not obj:
                docs = self.docs[key] = [Document(path, 0, obj, 1, 1)]
            out[path] = docs
        return out

    def read_spec(self) -> validated.Spec:
        return validated.read_spec({"jobtree.yaml": self.fleet_file}, self.documents(), self.validated)

    def apply_step(self, step: Any, index: int, now: int) -> None:
        if step.apply is not None:
            for obj in step.apply:
                kind = obj.get("kind") if isinstance(obj, dict) else None
                meta = obj.get("metadata") if isinstance(obj, dict) else None
                if not isinstance(meta, dict):
                    meta = {}
                if kind not in ("Budget", "Run") or not meta.get("name"):
                    self.notes.append(f"step {index}: apply needs Budget or Run objects with metadata.name")
                    continue
                key = (str(kind), str(meta.get("namespace") or ""), str(meta["name"]))
                self.objects[key] = obj  # never mutated: merge_patch builds new dicts
                self.texts.pop(key, None)
        elif step.patch is not None:
            p = step.patch
            key = (p.kind, p.namespace or "", p.name)
            if key not in self.objects:
                self.notes.append(f"step {index}: patch of unknown {p.kind} {p.namespace or ''}/{p.name}")
            else:
                self.objects[key] = merge_patch(self.objects[key], p.merge)
                self.texts.pop(key, None)
        elif step.delete is not None:
            d = step.delete
            self.objects.pop((d.kind, d.namespace or "", d.name), None)
        elif step.node is not None:
            err = self.cluster.node_event(step.node.name, step.node.event, now)
            if err:
                self.notes.append(f"step {index}: {err}")
        elif step.workload is not None:
            self.cluster.workload.append(
                WorkloadEvent(step.workload.run, step.workload.event, step.workload.group)
            )
        self.spec_cache = None

    # -- passes ----------------------------------------------------------------------------------
    def run_pass(self, now: int) -> None:
        if self.spec_cache is None:
            self.spec_cache = self.read_spec()
        result = pipeline.run_pass(
            self.spec_cache, self.cluster, self.state, now, render=self.history is not None
        )
        if self.history is not None and self.last is not None:  # as `state.nexttree` keeps their blobs
            result.rendered = manifests.keep_frozen(result.manifests, result.frozen, self.last.manifests)
        self.state = result.state
        self.last = result
        if self.history is not None:
            inventory = self.scenario.spec.inventory.model_dump(exclude_none=True)
            spec_files = {**self.files(), "inventory/nodes.yaml": statefiles.dump(inventory)}
            self.history.record(now, spec_files, result, self.spec_cache.fleet.git.author)
        self.count_work(now, result)
        self.ledger += [ev.as_json(records.time_text) for ev in result.events]
        self.ledger += [m.as_json(records.time_text) for m in result.moves]
        if result.events:
            self.timeline.append(f"{format_time(now)}  pass: " + _summary(result.events))

    def due_times(self) -> set[int]:
        """Instants a pass is due without a step: what the last pass said is due (ETAs, windows, spent
        GPU-hour caps), or before any pass, the budgets' windows."""
        if self.last is not None:
            return set(self.last.due)
        out: set[int] = set()
        for b in self.spec_cache.budgets if self.spec_cache else []:
            for e in b.spec.envelopes:
                out |= {t for t in (e.start, e.end) if t is not None}
        return out

    def snapshot(self, now: int) -> dict[str, Any]:
        res = self.last
        st = self.state
        diags = [d.as_json() for d in (self.spec_cache.diagnostics if self.spec_cache else [])]
        return {
            "at": format_time(now),
            "runs": dict(sorted(res.runs.items())) if res else {},
            "nodes": self.cluster.node_report(),
            "diagnostics": diags
            + [{"message": n} for n in self.notes]
            + [{"node": node, "message": msg} for node, msg in (res.node_problems if res else [])],
            "reservations": {k: statefiles.reservation_obj(r) for k, r in sorted(st.reservations.items())},
            "budgets": dict(sorted(res.budgets.items())) if res else {},
            "leases": [records.lease_obj(x) for x in st.leases if x.open],
        }

    def play(self) -> dict[str, Any]:
        spec = self.scenario.spec
        until = at_time(spec.until, self.start)
        steps = sorted(
            ((at_time(s.at, self.start), i, s) for i, s in enumerate(spec.steps)), key=lambda t: (t[0], t[1])
        )
        tick = spec.tick
        if tick is not None and (tick <= 0 or max(0, until - self.start) // tick + 1 > MAX_TICKS):
            raise ValueError(f"tick {tick}s from {self.start} to {until} is not a bounded number of passes")
        next_tick = self.start if tick else None
        last_pass: int | None = None
        idx = 0
        self.spec_cache = self.read_spec()
        while True:
            candidates = []
            if idx < len(steps):
                candidates.append(steps[idx][0])
            if next_tick is not None:
                candidates.append(next_tick)
            candidates += [t for t in self.due_times() if last_pass is None or t > last_pass]
            candidates += self.work_due()
            candidates = [t for t in candidates if t <= until]
            if not candidates:
                break
            now = min(candidates)
            due = now in self.due_times() and (last_pass is None or now > last_pass)
            marks: list[str] = []
            due = self.finish_work(now) or due
            while idx < len(steps) and steps[idx][0] == now:
                _, i, step = steps[idx]
                if step.checkpoint is not None:
                    marks.append(step.checkpoint)
                else:
                    self.apply_step(step, i, now)
                    due = True
                idx += 1
            if next_tick is not None and now == next_tick:
                due = True
                next_tick = now + tick if tick else None
            if due:
                self.run_pass(now)
                last_pass = now
            for label in marks:
                self.checkpoints[label] = self.snapshot(now)
        out = {
            "scenario": self.scenario.metadata.name,
            "checkpoints": self.checkpoints,
            "final": self.snapshot(until),
            "ledger": self.ledger,
        }
        if spec.workloads:
            out["workloads"] = self.work_report(until)
        return out

    # -- workloads with a duration (docs/scenarios.md) -------------------------------------------
    def work_due(self) -> list[int]:
        """Instants at which a running workload completes its duration, at its present width."""
        return [t for run in self.working if (t := self.work[run].due()) is not None]

    def finish_work(self, now: int) -> bool:
        """Workloads complete at `now` succeed, as their pods would: observed by this instant's pass."""
        done = sorted(run for run in self.working if self.work[run].due() == now)
        self.cluster.workload += [WorkloadEvent(run, "Succeed") for run in done]
        return bool(done)

    def count_work(self, now: int, result: Any) -> None:
        """After the pass at `now`: each run's work up to now at the width it had, a cut's loss, its new width."""
        if not self.durations:
            return
        gpus: dict[str, int] = {}
        for lease in result.open_leases:
            if lease.role != Role.SPARE:
                gpus[lease.run] = gpus.get(lease.run, 0) + lease.gpus
        cut = {ev.lease.run for ev in result.events if loses_work(ev)}
        for run in sorted((self.durations.keys() & result.specs.keys()) | self.working):
            spec = result.specs.get(run)
            w = self.work.get(run)
            if w is None:
                if spec is None:
                    continue
                w = Work(self.durations[run] * spec.spec.resources.totalGPUs, since=now, segment=now)
                self.work[run] = w
                self.working.add(run)
            if spec is not None:
                w.checkpoint = spec.spec.runtime.checkpoint
            if run in cut:
                self.lost.setdefault(run, []).append((now, w.cut(now)))
            rec = result.state.runs.get(run)
            if rec is not None and rec.phase == Phase.SUCCEEDED:
                w.run_at(now, 0)
                w.finished = now
                self.working.discard(run)
            else:
                w.run_at(now, gpus.get(run, 0))

    def work_report(self, until: int) -> dict[str, Any]:
        """`workloads` of the output: each run's work needed, done, lost (GPU-seconds), cuts and finish."""
        out: dict[str, Any] = {}
        for run, w in sorted(self.work.items()):
            w.advance(until)
            out[run] = {
                "needGPUSeconds": w.need,
                "doneGPUSeconds": w.done,
                "lostGPUSeconds": w.lost,
                "cuts": w.cuts,
                "finished": format_time(w.finished) if w.finished is not None else None,
            }
        return out


# Closures of a working lease that stop its run's work short of a checkpoint: a cut, a failed node.
# (`Shrink` is the run's own elastic step down, `Completed` its end; the rest follow one of these.)
LOSES_WORK = frozenset(
    {Closure.RANDOM_PREEMPT, Closure.RECLAIM_UNFUNDED, Closure.RECLAIMED_BY_SPARE, Closure.NODE_FAILURE}
)


def loses_work(ev: Event) -> bool:
    return ev.event == Ledger.END and ev.lease.role != Role.SPARE and ev.closure in LOSES_WORK


def _summary(events: list[Any]) -> str:
    starts: dict[str, int] = {}
    ends: dict[str, str] = {}
    for ev in events:
        if ev.event == "Start" and ev.lease.role != "Spare":
            starts[ev.lease.run] = starts.get(ev.lease.run, 0) + ev.lease.gpus
        elif ev.event == "End":
            ends.setdefault(ev.lease.run, ev.reason)
    parts = [f"+{r} {n} GPUs" for r, n in sorted(starts.items())] + [
        f"-{r} ({why})" for r, why in sorted(ends.items())
    ]
    return ", ".join(parts) if parts else "no lease changes"


def load_scenario(
    path: str, read: tuple[list[Document], list[BadDocument]] | None = None
) -> tuple[Scenario | None, dict[str, Any], list[str]]:
    """The Scenario in `path` with its raw data, or the diagnostics. `read`: the file's documents
    when the caller already parsed it (`prefetch`); otherwise it is read here."""
    if read is None:  # one big file, rarely wrong: positions only when a diagnostic asks
        read = parse_all(Path(path).read_bytes(), path, positions=False)
    return _scenario_of(path, read)


def _scenario_of(
    path: str, read: tuple[list[Document], list[BadDocument]]
) -> tuple[Scenario | None, dict[str, Any], list[str]]:
    docs, bad = read
    diags = [bad_document_diagnostic(path, b) for b in bad]
    if diags:
        return None, {}, [str(d) for d in diags]
    if len(docs) != 1:
        return None, {}, [f"{path}:1:1: JT002 a scenario file holds exactly one Scenario document"]
    loaded, diags = load_object(docs[0], ["Scenario"])
    if loaded is None:
        return None, {}, [str(d) for d in diags]
    if loaded.model.spec.start.startswith("+"):
        return (
            None,
            {},
            [
                f"{path}:{docs[0].where(('spec', 'start'))[0]}:1: JT010 spec.start must be an absolute RFC 3339 time"
            ],
        )
    return loaded.model, docs[0].data, []


@dataclass(frozen=True, slots=True)
class FleetStart:
    """A fleet repository at one commit as the scenario it is (`from_fleet`)."""

    scenario: Scenario | None
    raw: dict[str, Any]
    state: FleetState  # the state jobtree last committed there: the state before the first pass
    errors: list[str]  # why there is no scenario (file:line:col lines, or what to do)
    commit: str = ""


def from_fleet(repo_path: str, rev: str | None, now: int | None, until: str, tick: str | None) -> FleetStart:
    """The fleet repository at `rev` (default: its fleet branch) as a scenario: its Budgets and Runs
    applied at the start, its inventory (or, with clusters configured, their nodes as the commit
    last observed them: `state/observed/`) as the embedded cluster, and the state jobtree committed
    there as the state before the first pass. The clock starts at that state's `asOf` (a fleet never
    reconciled needs `now`), or at `now` when given and not earlier; `until` and `tick` as a
    scenario's. Files that do not parse are left out and named in `errors` only when nothing is left.
    """
    from reconciler.git import read as gitread
    from reconciler.git.errors import GitStoreError
    from reconciler.passes import clusters
    from reconciler.spec import files as specfiles
    from reconciler.state import memo as passmemo

    try:
        repo = gitread.open_repo(repo_path)
        branch = rev or _fleet_branch(repo)
        commit = gitread.resolve(repo, branch)
        spec_files = specfiles.read_tree(repo_path, str(commit.id))
        memo = passmemo.cached(repo, commit) or passmemo.read(repo, commit)
    except GitStoreError as err:
        return FleetStart(None, {}, FleetState(), [f"{repo_path}: {err}"])
    state = memo.state()
    start = state.as_of if now is None else max(now, state.as_of or now)
    if start is None:
        return FleetStart(None, {}, state, [
            f"{repo_path}: the fleet at {str(commit.id)[:12]} has no state yet (never reconciled), so "
            "there is no last pass to start from: give --now"
        ])  # fmt: skip
    fleet_doc = _first(spec_files.get("jobtree.yaml", b""), "jobtree.yaml")
    found = fleet_doc.get("spec")
    fleet_spec: dict[str, Any] = found if isinstance(found, dict) else {}
    objects: list[Any] = []
    for path, data in sorted(spec_files.items()):
        if path.startswith(("budgets/", "runs/")) and not isinstance(data, Symlink):
            docs, _ = parse_all(data, path, positions=False)
            objects += [d.data for d in docs if isinstance(d.data, dict)]
    if fleet_spec.get("clusters"):  # the configured clusters as this commit last observed them
        validated_spec = validated.read_spec({"jobtree.yaml": spec_files.get("jobtree.yaml", b"")})
        recorded = clusters.observed_files(memo.blobs, lambda oid: gitread.read_blob(repo, oid))
        observed = clusters.recorded_nodes(validated_spec, recorded)
        inventory: dict[str, Any] = {"nodes": [_node_entry(n) for _, n in sorted(observed.items())]}
    else:
        inventory = _first(spec_files.get("inventory/nodes.yaml", b""), "inventory/nodes.yaml")
    raw = {
        "apiVersion": "rq.davidlangworthy.io/v1",
        "kind": "Scenario",
        "metadata": {"name": str((fleet_doc.get("metadata") or {}).get("name") or "fleet")},
        "spec": {
            "start": format_time(start),
            "fleet": fleet_spec,
            "inventory": inventory,
            "steps": [{"at": "+0m", "apply": objects}] if objects else [],
            "until": until,
            **({"tick": tick} if tick else {}),
        },
    }
    where = f"{repo_path}@{str(commit.id)[:12]}"
    scenario, raw, errors = _scenario_of(where, ([Document(where, 0, raw, 1, 1)], []))
    return FleetStart(scenario, raw, state, errors, str(commit.id))


def _fleet_branch(repo: Any) -> str:
    """The branch jobtree.yaml names at HEAD (`git.branch`, main when unset)."""
    from reconciler.passes.reconcile import configured_branch

    return configured_branch(repo)


def _first(data: bytes, path: str) -> dict[str, Any]:
    """The first document of a spec file as a mapping (empty when it does not read as one)."""
    docs, _ = parse_all(data, path, positions=False) if data else ([], [])
    return docs[0].data if docs and isinstance(docs[0].data, dict) else {}


def _node_entry(node: Any) -> dict[str, Any]:
    """An observed node as an inventory `nodes` entry (its state and cordon with it)."""
    state = (
        "Deleted"
        if node.deleted
        else "Failed"
        if node.out_of_service
        else "Ready"
        if node.ready
        else "NotReady"
    )
    return {"name": node.name, "gpus": node.gpus, "labels": dict(node.labels), "cordoned": node.cordoned,
            "state": state}  # fmt: skip
