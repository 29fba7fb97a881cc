"""The commit message of a state commit (step 6 of a pass), its one author: subject, one line per decision, trailer.

`message` is what `reconcile` commits: the hand-edited files written back (if any), then the plan's
decisions (`summary`), then the `Spec-Commit: <sha>` trailer naming the spec commit the pass read
(`reconciler.git.ownership` reads it back). `simulate --git` uses the same words with a heading.
Words only: what the commit holds is `nexttree`'s, writing it `reconciler.git.write`'s.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence

from planner.context import Event
from planner.plan import Plan
from reconciler.git.ownership import TRAILER, Start
from reconciler.state import layout
from schemas.common import format_time

MAX_MESSAGE_LINES = 40  # detail lines of one kind in a message body
EDITS_NAMED = 5  # hand-editing commits named in the line that says so
_SUBJECT_MAX = 72


def message(
    plan: Plan,
    meaningful: Sequence[str],
    spec_commit: str,
    start: Start | None = None,
    restored: Sequence[str] = (),
    heading: str = "",
) -> str:
    """The whole message of the state commit `plan` makes, changing the owned files `meaningful`.

    `restored`: hand-edited files the commit writes back (see `nexttree.next_tree`), said first and
    left out of the decisions (they are written back, not rendered anew); `start` is where the pass
    planned from. `heading` opens the subject (`simulate --git`: `pass at <time>`)."""
    return format_message(lines(plan, meaningful, start, restored), spec_commit, heading)


def lines(
    plan: Plan,
    meaningful: Sequence[str],
    start: Start | None = None,
    restored: Sequence[str] = (),
    observed: Sequence[str] = (),
) -> list[str]:
    """The message's lines, news first (the subject is made of the first ones): hand-edited files
    written back (if any), the plan's decisions, the agent's swaps folded in (`folded`), what
    changed in the observed clusters (`observed`: lines from `state.observed.changes`), then what
    merely stays so (runs still waiting) and the runs each decision concerns."""
    written_back = set(restored)
    news, standing, details = _decisions(plan, [p for p in meaningful if p not in written_back])
    decided = news + folded(plan) + list(observed) + standing + details
    if not restored or start is None:
        return decided
    head, *more = hand_edits(start, list(restored))
    return [head, *decided, *more]


def format_message(summary_lines: list[str], spec_commit: str, heading: str = "") -> str:
    """Subject line, blank line, one bullet per decision, blank line, `Spec-Commit: <sha>` trailer.

    `heading` opens the subject (`jobtree: pass at <time>: ...`, as `simulate --git` writes) and is
    not repeated in the body."""
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", spec_commit):
        raise ValueError(f"spec commit must be a full hex sha, got {spec_commit!r}")
    lines = [line.strip() for line in summary_lines if line.strip()]
    prefix = f"jobtree: {heading}: " if heading else "jobtree: "
    subject = prefix + "refresh state"
    if lines:  # as many whole lines as fit (the body lists them all); a first line too long is cut
        room = _SUBJECT_MAX - len(prefix)
        head = lines[0] if len(lines[0]) <= room else lines[0][: room - 1] + "…"
        for line in lines[1:]:
            if len(head) + 2 + len(line) > room:
                break
            head += "; " + line
        subject = prefix + head
    body = "\n".join(f"- {line}" for line in lines) or "- no decision changed; state refreshed"
    return f"{subject}\n\n{body}\n\n{TRAILER}: {spec_commit}\n"


def hand_edits(start: Start, restored: list[str]) -> list[str]:
    """Lines for hand-edited files written back: one for the subject, then why and which files (capped)."""
    shown, more = restored[:MAX_MESSAGE_LINES], len(restored) - MAX_MESSAGE_LINES
    edits = ", ".join(sha[:12] for sha in start.edited_in[:EDITS_NAMED])
    edits += ", ..." if len(start.edited_in) > EDITS_NAMED else ""
    return [
        f"wrote back {len(restored)} file{'s' * (len(restored) != 1)} changed by hand in {edits}",
        f"planned from jobtree's own {str(start.commit.id)[:12]}: state/ and rendered/ are written only by jobtree",
        *(f"{path} written back" for path in shown),
        *([f"... and {more} more"] if more > 0 else []),
    ]


def summary(plan: Plan, meaningful: Sequence[str] = ()) -> list[str]:
    """One line per decision kind (news first), then the runs concerned: what a reviewer reads in
    `git log`. `meaningful`: the paths the commit changes, for running runs whose pods are rendered anew."""
    news, standing, details = _decisions(plan, meaningful)
    return news + standing + details


def _decisions(plan: Plan, meaningful: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """(news: one line per kind of decision this pass made, a single run named; standing: what
    merely stays so, the runs still waiting; details: one line per run concerned)."""
    started: Counter[str] = Counter()
    grown: Counter[str] = Counter()
    swapped: set[str] = set()
    ended: dict[str, set[str]] = {}
    for ev in plan.events:
        if ev.event == "Start" and ev.reason == "Swap":
            swapped.add(ev.lease.run)  # a group moved onto its spare: neither a start nor growth
        elif ev.event == "Start" and ev.lease.role in ("Active", "Borrowed"):
            (grown if ev.reason == "Grow" else started)[ev.lease.run] += ev.lease.gpus
        elif ev.event == "End":
            kind = ev.closure.value if ev.closure is not None else ev.reason
            ended.setdefault(kind, set()).add(ev.lease.run)
    waiting = {k: r for k, r in plan.state.reservations.items() if r.state == "Pending"}
    reserved = sorted(waiting.keys() - plan.waiting_before)  # by this pass
    unfunded, refunded = _funding_changes(plan)
    updated = _rendered_anew(plan, meaningful)
    news: list[str] = []
    for verb, opened in (("started", started), ("grew", grown)):
        if opened:
            news.append(f"{verb} {_named(opened)} ({'+' * (verb == 'grew')}{sum(opened.values())} GPUs)")
    if swapped:
        news.append(f"swapped {_named(swapped)} onto hot spares")
    for reason, closed in sorted(ended.items()):
        news.append(f"{reason}: {_named(closed)}")
    if reserved:
        also = f" ({len(waiting)} waiting)" if len(waiting) > len(reserved) else ""
        news.append(f"reserved {_named(reserved)}{also}")
    if plan.moves:
        news.append(f"ETA moved for {_named({m.run for m in plan.moves})}")
    if unfunded:
        news.append(f"unfunded: {_named(unfunded)} (running, charged to nobody, reclaimed first)")
    if refunded:
        news.append(f"funded again: {_named(refunded)}")
    if plan.lifted:
        news.append(f"conflict-set warnings lifted: {len(plan.lifted)}")
    if plan.newly_invalid:
        news.append(f"invalid run files: {len(plan.newly_invalid)} (kept as they were until fixed)")
    if updated:
        news.append(f"rendered pods anew for {_named(updated)} (no GPU moved)")
    standing = [f"{_runs(len(waiting))} waiting"] if waiting and not reserved else []
    details = [f"{run} +{gpus} GPUs" for run, gpus in sorted((started + grown).items())]
    details += [f"{run} swapped to spare" for run in sorted(swapped)]
    for reason, closed in sorted(ended.items()):
        details += [f"{run} {reason}" for run in sorted(closed)]
    details += [f"{run} unfunded ({_groups(n)})" for run, n in sorted(unfunded.items())]
    details += [f"{run} funded again ({_groups(n)})" for run, n in sorted(refunded.items())]
    details += [
        f"{run} reserved, ETA {_eta(waiting[run].earliest_start)}: {waiting[run].reason}" for run in reserved
    ]
    details += [f"{m.run} ETA {_eta(m.previous)} -> {_eta(m.earliest_start)}: {m.reason}" for m in plan.moves]
    details += [f"{run} no longer warned by {res}: {_why_lifted(plan, res)}" for res, run in plan.lifted]
    details += [f"{run} invalid: fix {path}" for run, path in plan.newly_invalid.items()]
    details += [f"{run} pods rendered anew" for run in updated]
    if len(details) > MAX_MESSAGE_LINES:
        details = details[:MAX_MESSAGE_LINES] + [f"... and {len(details) - MAX_MESSAGE_LINES} more"]
    return news, standing, details


def _named(runs: Collection[str]) -> str:
    """The run itself when there is one (`team-a/a1`), else how many (`3 runs`)."""
    return next(iter(runs)) if len(runs) == 1 else _runs(len(runs))


def folded(plan: Plan) -> list[str]:
    """One line per journal entry of the in-cluster agent this pass folded in (§7.5), naming it and
    what it did: `folded journal entry <id>: <run> group <g> swapped to <node>` (a group with no
    spare: its closure). An entry folded before makes no event, so no line."""
    by_entry: dict[str, list[Event]] = {}
    for ev in plan.events:
        if ev.journal is not None:
            by_entry.setdefault(ev.journal, []).append(ev)
    out = []
    for entry, events in sorted(by_entry.items()):
        swapped = sorted(
            {
                (ev.lease.run, ev.lease.group, ev.lease.node)
                for ev in events
                if ev.event == "Start" and ev.reason == "Swap"
            }
        )
        said = [f"{run} group {group} swapped to {node}" for run, group, node in swapped]
        moved = {(run, group) for run, group, _ in swapped}
        ended = sorted(
            {
                (ev.lease.run, ev.lease.group, ev.closure.value if ev.closure is not None else ev.reason)
                for ev in events
                if ev.event == "End"
                and ev.lease.role == "Active"
                and (ev.lease.run, ev.lease.group) not in moved
            }
        )
        said += [f"{run} group {group} {closure}" for run, group, closure in ended]
        out.append(f"folded journal entry {entry}: " + ("; ".join(said) or "leases moved, no group lost"))
    return out


def _eta(at: int | None) -> str:
    return "unknown" if at is None else format_time(at)


def _why_lifted(plan: Plan, reservation: str) -> str:
    res = plan.state.reservations.get(reservation)
    if res is None or res.state == "Released":
        return "it started"
    if res.state != "Pending":
        return "it was withdrawn"
    return f"its forecast changed ({res.reason})"


def _rendered_anew(plan: Plan, meaningful: Sequence[str]) -> list[str]:
    """Runs whose rendered pods changed though no lease of theirs moved: their template (image,
    command, env) did, or their nodes' cluster."""
    moved = {ev.lease.run for ev in plan.events}
    runs = {run for run in map(layout.rendered_run, meaningful) if run is not None}
    return sorted(runs - moved)


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _groups(n: int) -> str:
    return f"{n} group" if n == 1 else f"{n} groups"


def _funding_changes(plan: Plan) -> tuple[Counter[str], Counter[str]]:
    """Groups still running that this pass left charged to nobody, and those funded again, per run."""
    running = plan.running_groups
    after, before = plan.state.unfunded & running, plan.unfunded_before & running
    return Counter(run for run, _ in after - before), Counter(run for run, _ in before - after)
