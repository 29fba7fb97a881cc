"""Jobtree on a trace: the trace as a Scenario, played by the real simulator (`reconciler.passes.simulation`).

Each team is a tenant with its Budget (family parents as in the trace), each job a Run applied at
its submission with its duration as a scenario workload, each outage a node Fail and, once
repaired, Ready and Uncordon. A run's owner deletes its file once it has succeeded or failed (a
tidy fleet repository; Jobtree plans the runs it holds). Records what `metrics` needs from every
pass: leases opened and closed, each reservation's first published `earliestStart`, pass times.
Decides nothing: every decision is the planner's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from evaluation.outcome import Holding, Outcome, Promise, Result
from evaluation.trace import FLAVOR, Job, Trace
from planner.reasons import Closure, Ledger, Phase, ResState, Role
from reconciler.passes.simulation import Simulation, loses_work
from reconciler.perf import batchgc
from schemas.common import format_time
from schemas.scenario import Scenario

API = "rq.davidlangworthy.io/v1"


@dataclass(frozen=True, slots=True)
class Settings:
    """The fleet settings a replay varies (the template's defaults)."""

    notice: int = 900
    min_runtime: int = 7200
    lottery: bool = True  # False: `reservations.lottery: false`, structural cuts only

    def label(self) -> str:
        lottery = "" if self.lottery else ", no lottery"
        return f"notice {self.notice // 60}m, minRuntime {self.min_runtime / 3600:g}h{lottery}"


def scenario(trace: Trace, settings: Settings = Settings()) -> dict[str, Any]:
    """The Scenario document that plays `trace` (what `jobtree simulate` would read)."""
    submitting = {j.team for j in trace.jobs}
    budgets = [_budget(t.name, t.owner, t.parent, t.gpus) for t in trace.teams]
    steps: list[dict[str, Any]] = [{"at": "+0s", "apply": budgets}]
    steps += [{"at": f"+{j.submit}s", "apply": [_run(j, _owner(trace, j.team))]} for j in trace.jobs]
    for o in trace.outages:
        steps.append({"at": f"+{o.down}s", "node": {"name": o.node, "event": "Fail"}})
        if o.up < trace.horizon:
            steps.append({"at": f"+{o.up}s", "node": {"name": o.node, "event": "Ready"}})
            steps.append({"at": f"+{o.up}s", "node": {"name": o.node, "event": "Uncordon"}})
    return {
        "apiVersion": API,
        "kind": "Scenario",
        "metadata": {"name": trace.name.lower()},
        "spec": {
            "start": format_time(trace.start),
            "fleet": {
                "tenants": [
                    {"namespace": t.name, "owner": t.owner} for t in trace.teams if t.name in submitting
                ],
                "reservations": {
                    "noticePeriod": settings.notice,
                    "minRuntime": settings.min_runtime,
                    "lottery": settings.lottery,
                },
            },
            "inventory": {
                "domains": [
                    {
                        "name": d.name,
                        "region": "us-west",
                        "cluster": "gpu-a",
                        "flavor": FLAVOR,
                        "nodes": d.nodes,
                        "gpusPerNode": d.gpus_per_node,
                    }
                    for d in trace.domains
                ]
            },  # fmt: skip
            "workloads": [{"run": f"{j.team}/{j.name}", "duration": j.duration} for j in trace.jobs],
            "steps": steps,
            "until": f"+{trace.horizon}s",
        },
    }


def _owner(trace: Trace, team: str) -> str:
    return next(t.owner for t in trace.teams if t.name == team)


def _budget(name: str, owner: str, parent: str | None, gpus: int) -> dict[str, Any]:
    envelopes = [{"name": "h100", "flavor": FLAVOR, "concurrency": gpus}] if gpus else []
    spec: dict[str, Any] = {"owner": owner, "envelopes": envelopes}
    if parent is not None:
        spec["parents"] = [parent]
    return {"apiVersion": API, "kind": "Budget", "metadata": {"name": name}, "spec": spec}


def _run(job: Job, owner: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"owner": owner, "resources": {"gpuType": FLAVOR, "totalGPUs": job.gpus}}
    if job.group is not None:
        spec["locality"] = {"groupGPUs": job.group}
    if job.malleable_min is not None:
        step = job.group or job.gpus
        spec["malleable"] = {"minTotalGPUs": job.malleable_min, "maxTotalGPUs": job.gpus, "stepGPUs": step}
    if job.spares:
        spec["sparesPerGroup"] = job.spares
    if job.checkpoint is not None:
        spec["runtime"] = {"checkpoint": job.checkpoint}
    if job.opportunistic:
        spec["opportunistic"] = True
    return {
        "apiVersion": API,
        "kind": "Run",
        "metadata": {"name": job.name, "namespace": job.team},
        "spec": spec,
    }


class Replay(Simulation):
    """The simulator, watched pass by pass."""

    def watch(self, trace: Trace) -> None:
        self.trace = trace
        self.jobs = {f"{j.team}/{j.name}": j for j in trace.jobs}
        self.outcomes = {key: Outcome(j) for key, j in self.jobs.items()}
        self.opened: dict[str, tuple[int, Any]] = {}  # open lease name -> (start, lease)
        self.holdings: list[Holding] = []
        self.working_gpus: dict[str, int] = {}
        self.first_eta: dict[
            tuple[str, int], tuple[int, int]
        ] = {}  # (run, reservation created) -> (published, ETA)
        self.waiting_promises: dict[str, list[tuple[int, int]]] = {}
        self.promises: list[Promise] = []
        self.decisions: list[float] = []

    def run_pass(self, now: int) -> None:
        began = time.perf_counter()
        super().run_pass(now)
        self.decisions.append(time.perf_counter() - began)
        result = self.last
        for ev in result.events:
            self._lease_event(ev)
        for key, res in self.state.reservations.items():
            if (
                res.state == ResState.PENDING
                and res.earliest_start is not None
                and (key, res.created) not in self.first_eta
            ):
                self.first_eta[(key, res.created)] = (now, res.earliest_start)
                self.waiting_promises.setdefault(key, []).append((now, res.earliest_start))
        done = [k for k, rec in self.state.runs.items() if rec.phase in (Phase.SUCCEEDED, Phase.FAILED)]
        for key in done:  # its owner deletes the finished run's file
            ns, name = key.split("/", 1)
            if self.objects.pop(("Run", ns, name), None) is not None:
                self.spec_cache = None

    def _lease_event(self, ev: Any) -> None:
        lease = ev.lease
        run = lease.run
        working = lease.role != Role.SPARE
        if ev.event == Ledger.START:
            self.opened[lease.name] = (ev.at, lease)
            if working:
                before = self.working_gpus.get(run, 0)
                self.working_gpus[run] = before + lease.gpus
                if before == 0 and run in self.outcomes:
                    self.outcomes[run].starts.append(ev.at)
                    for published, eta in self.waiting_promises.pop(run, []):
                        self.promises.append(Promise(run, published, eta, ev.at))
            return
        start, _ = self.opened.pop(lease.name, (ev.at, lease))
        if lease.role != Role.BORROWED:  # fill overlays a spare's slots: those GPUs are counted once
            self.holdings.append(Holding(run, run.split("/")[0], start, ev.at, lease.gpus, working))
        else:
            self.holdings.append(Holding(run, run.split("/")[0], start, ev.at, 0, True))
        if working:
            self.working_gpus[run] = self.working_gpus.get(run, 0) - lease.gpus
        if loses_work(ev) and run in self.outcomes:
            paid = self.outcomes[run].paid
            label = _paid(lease)
            if paid.get(ev.at, "own") == "own":  # a cut that takes borrowed GPUs is told as borrowed
                paid[ev.at] = label
            losses = self.outcomes[run].losses
            if not losses or losses[-1][0] != ev.at:
                losses.append((ev.at, str(ev.closure), 0))
            elif (
                ev.closure == Closure.NODE_FAILURE
            ):  # a failure and a cut at one instant: the failure caused it
                losses[-1] = (ev.at, str(ev.closure), 0)

    def finish(self) -> Result:
        end = self.trace.horizon + self.start
        for _, (start, lease) in sorted(self.opened.items()):
            gpus = 0 if lease.role == Role.BORROWED else lease.gpus
            self.holdings.append(
                Holding(lease.run, lease.run.split("/")[0], start, end, gpus, lease.role != Role.SPARE)
            )
        for run, waits in sorted(self.waiting_promises.items()):
            self.promises += [Promise(run, published, eta, None) for published, eta in waits]
        for key, out in self.outcomes.items():
            w = self.work.get(key)
            if w is None:
                continue
            w.advance(end)
            out.done = w.done
            out.finished = w.finished
        _attribute_losses(self)
        return Result(
            "Jobtree", True, self.trace, self.outcomes, self.holdings, self.promises, decisions=self.decisions
        )


def _paid(lease: Any) -> str:
    """Who paid for a lease whose work was lost: the run's own budget, a borrowed one, or a spare's."""
    if lease.role == Role.BORROWED:
        return "spare"
    return "own" if lease.funding in (None, "own") else "borrowed"


def _attribute_losses(replay: Replay) -> None:
    """Each loss's GPU-seconds, from the simulator's own count of the work each cut sent back."""
    for key, out in replay.outcomes.items():
        w = replay.work.get(key)
        if w is None or not out.losses:
            continue
        lost = replay.lost.get(key, [])
        out.losses = [(at, cause, next((n for t, n in lost if t == at), 0)) for at, cause, _ in out.losses]


def play(trace: Trace, settings: Settings = Settings()) -> Result:
    """Play `trace` through Jobtree with `settings`; times are shifted so they count from the trace's start."""
    doc = scenario(trace, settings)
    began = time.perf_counter()
    sim = Replay(Scenario.model_validate(doc), doc)
    sim.watch(trace)
    with batchgc.paused():
        sim.play()
    result = sim.finish()
    result.seconds = time.perf_counter() - began
    return _relative(result, trace.start)


def _relative(result: Result, start: int) -> Result:
    """Absolute instants to seconds from the trace's start, as the baselines count."""
    for out in result.outcomes.values():
        out.starts = [t - start for t in out.starts]
        out.finished = out.finished - start if out.finished is not None else None
        out.losses = [(t - start, cause, n) for t, cause, n in out.losses]
        out.paid = {t - start: who for t, who in out.paid.items()}
    result.holdings = [
        Holding(h.job, h.team, h.start - start, h.end - start, h.gpus, h.working) for h in result.holdings
    ]
    result.promises = [
        Promise(
            p.job,
            p.published - start,
            p.predicted - start,
            p.started - start if p.started is not None else None,
        )
        for p in result.promises
    ]
    return result
