"""Renders a `report.compare` report for people: a terminal text view and one Markdown PR comment.

Markdown stays within GitHub's 65,535-character comment limit: rows that do not fit are left out
and a note says how many and where the full report is. Computes nothing; JSON is the report as is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from reconciler.report import model

COMMENT_LIMIT = 65_535
MARKER = "<!-- jobtree-plan -->"


def as_json(report: model.Report) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


def _code(text: str, cell: bool = True) -> str:
    """`text` as a Markdown code span nothing in it can end: fenced by more backticks than any run
    of them inside, line breaks shown as `⏎`, and in a table `cell` `|` escaped (GitHub splits
    cells on it even in code). File names and quoted YAML values come from whoever opened the pull
    request."""
    text = text.replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎")
    if cell:
        text = text.replace("|", "\\|")
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    pad = " " if longest else ""  # a span may not start or end with its own fence's backticks
    return f"{'`' * (longest + 1)}{pad}{text}{pad}{'`' * (longest + 1)}"


def _payers(entry: model.StartRow) -> str:
    return ", ".join(f"{p['payer']} {p['gpus']}" for p in entry["payers"])


def _usage(u: dict[str, int] | None) -> str:
    if u is None:
        return "—"
    unfunded = f", {u['unfunded']} unfunded" if u.get("unfunded") else ""
    return f"{u['active']} active, {u['spare']} spare, {u['lentOrShared']} out{unfunded}, headroom {u['headroom']}"


def _was(now: Any, before: Any) -> str:
    """A value the change moves from `before` (0 or empty: new)."""
    return f"{now} (was {before})" if before else f"{now}"


def _start_gpus(s: model.StartRow) -> str:
    return f"{s['gpus']} (+{s['spareGPUs']} spare)" if s.get("spareGPUs") else str(s["gpus"])


def _started(s: model.StartRow) -> str:
    return f"{_code(s['run'])} (grows)" if s.get("reason") == "Grow" else _code(s["run"])


def _reserved_why(r: model.ReservedRow) -> str:
    was = r.get("was")
    return f"{r['reason']} (was: {was['reason']})" if was and was["reason"] != r["reason"] else r["reason"]


def _eta(r: model.ReservedRow) -> str:
    """`2026-03-02T10:10:00Z (conservative)`, or `unknown (nothing known makes it startable)`."""
    if r["earliestStart"] is None:
        return "unknown (nothing known makes it startable)"
    return f"{r['earliestStart']} ({r['confidence']})"


def _cut_gpus(c: model.CutRow) -> str:
    before = c.get("gpusBefore", 0)
    return f"none (was {before})" if not c["gpus"] else _was(c["gpus"], before)


def _cut_why(c: model.CutRow) -> str:
    return (
        f"{c['reason']} (asked for: this change lowers desiredTotalGPUs)"
        if c.get("voluntary")
        else c["reason"]
    )


def _conflict_sets(c: model.ConflictRow) -> str:
    def entries(side: list[model.ConflictEntry]) -> str:
        return ", ".join(f"{e['reservation']} ({e['probability']})" for e in side)

    return _was(entries(c["reservations"]) or "none", entries(c.get("before") or []))


def sections(report: model.Report) -> list[tuple[str, list[str], list[str]]]:
    """(title, Markdown table header lines, one Markdown row per item) per non-empty section."""
    out: list[tuple[str, list[str], list[str]]] = []
    if report["starts"]:
        rows = [
            f"| {_started(s)} | {_start_gpus(s)} | {', '.join(s['domains'])} | {_payers(s)} |"
            for s in report["starts"]
        ]
        out.append(("Starts now", ["| run | GPUs | domains | paid by |", "|---|---:|---|---|"], rows))
    if report["reserved"]:
        rows = [
            f"| {_code(r['run'])} | {_eta(r)} | {r['deficitGPUs']} | "
            f"{_reserved_why(r)} | {'; '.join(remedies(r))} |"
            for r in report["reserved"]
        ]
        out.append(("Reserved", ["| run | ETA | deficit | why | remedies |", "|---|---|---:|---|---|"], rows))
    if report["cuts"]:
        rows = [f"| {_code(c['run'])} | {_cut_gpus(c)} | {_cut_why(c)} |" for c in report["cuts"]]
        out.append(("Shrunk or cut", ["| run | GPUs | reason |", "|---|---:|---|"], rows))
    if report["eta"]:
        out.append(("Moves other runs", [], [f"- {e['text']}" for e in report["eta"]]))
    if report["conflicts"]:
        title = "Conflict sets (warned before any cut)"
        rows = [f"| {_code(c['run'])} | {_conflict_sets(c)} |" for c in report["conflicts"]]
        out.append((title, ["| run | reservation (probability) |", "|---|---|"], rows))
    if report.get("unfunded"):
        title = "Funding of running runs (unfunded groups run charged to nobody and are reclaimed first)"
        rows = [
            f"| {_code(u['run'])} | {u['groupsBefore']} | {u['groupsAfter']} |" for u in report["unfunded"]
        ]
        out.append((title, ["| run | unfunded groups before | after |", "|---|---:|---:|"], rows))
    if report.get("updated"):
        title = "Running pods rendered anew (their run's template changed; no GPU moves)"
        rows = [f"| {_code(u['run'])} | {u['pods']} | {', '.join(u['changed'])} |" for u in report["updated"]]
        out.append((title, ["| run | pods | changed |", "|---|---:|---|"], rows))
    if report.get("waiting"):
        title = "Waits, holding no reservation (behind `after`, or for spare GPUs to fill)"
        rows = [f"| {_code(w['run'])} | {w['why']} |" for w in report["waiting"]]
        out.append((title, ["| run | why |", "|---|---|"], rows))
    if report.get("widths"):
        title = "Width asked of a running run"
        rows = [
            f"| {_code(w['run'])} | {w['pending'] or 'nothing'} | {w['before'] or '—'} |"
            for w in report["widths"]
        ]
        out.append((title, ["| run | waits for | before |", "|---|---|---|"], rows))
    if report["budgets"]:
        rows = [
            f"| {_code(b['envelope'])} | {_usage(b['before'])} | {_usage(b['after'])} |"
            for b in report["budgets"]
        ]
        out.append(("Budget usage", ["| envelope | before | after |", "|---|---|---|"], rows))
    return out


DIAGNOSTIC_CHARS = 400  # one invalid-file line in the comment; the full line is in the job summary


def _fit(lines: list[str], room: int) -> tuple[list[str], int]:
    """As many of `lines` as fit in `room` characters (joined by newlines), and how many did not."""
    kept: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > room:
            return kept, len(lines) - i
        kept.append(line)
        used += len(line) + 1
    return kept, 0


OPENING_ROWS = 10  # rows every section keeps room for, whatever the sections before it hold


def _opening(title: str, header: list[str], rows: list[str]) -> int:
    """Characters a section's title, header and first `OPENING_ROWS` rows take."""
    return len(title) + 8 + sum(len(h) + 1 for h in header) + sum(len(r) + 1 for r in rows[:OPENING_ROWS])


def as_markdown(
    report: model.Report,
    diagnostics: list[str],
    limit: int | None = COMMENT_LIMIT,
    pictures: Sequence[tuple[str, str, str | None]] = (),
) -> str:
    """One PR comment of at most `limit` characters (None: everything, for the job summary).

    `pictures`: (what, path, web URL or None) of the base's pictures (`state/fleet.svg`, ...),
    linked under the heading when the host shows files, else named."""
    room = limit if limit is not None else 10**12
    head = [
        MARKER,
        f"### jobtree plan: `{report['base'][:12]}` → `{report['head'][:12]}` at {report['now']}",
        "",
        *([_merge_note(report), ""] if report.get("merged") else []),
    ]
    if pictures:
        shown = [f"[{what}]({url})" if url else f"{what} `{path}`" for what, path, url in pictures]
        head += [f"The fleet before this change: {' · '.join(shown)}", ""]
    note_room = 400  # the overflow note at the end
    room -= len("\n".join(head)) + 1 + note_room
    left_out: list[str] = []
    if diagnostics:
        shown = [
            f"- {_code(d if limit is None or len(d) <= DIAGNOSTIC_CHARS else d[: DIAGNOSTIC_CHARS - 1] + '…', cell=False)}"
            for d in diagnostics
        ]
        kept, more = _fit(shown, min(room // 3, room) - 100)
        block = ["**Invalid files** (left out of the plan):", "", *kept, ""]
        head += block
        room -= len("\n".join(block)) + 1
        if more:
            left_out.append(f"{more} more invalid-file lines (run `jobtree validate`)")
    for line in report.get("stalled") or []:
        head += [f"**{line}.**", ""]
        room -= len(line) + 7
    inherited = report.get("diagnosticsOnBase") or []
    tail: list[str] = []  # after the change under review: what the base already has wrong
    if inherited:
        line = f"{_problems(len(inherited))} already on the base branch (left out of both plans; `jobtree validate` lists them)."
        tail = ["", line]
        room -= len(line) + 2
    if not report["changes"]:
        text = "\n".join(
            [
                *head,
                "No change: merging this moves no GPU, reservation or budget and renders no running pod anew.",
                *tail,
                "",
            ]
        )
        return text + _overflow(left_out)
    body: list[str] = []
    rows_left = 0
    parts = sections(report)
    for i, (title, header, rows) in enumerate(parts):
        block = [*([""] if body else []), f"#### {title}", "", *header]
        size = len("\n".join(block)) + 1
        # every later section keeps room for its title and first rows: a long table never crowds
        # out the rest (budget usage comes last)
        avail = room - sum(_opening(*part) for part in parts[i + 1 :])
        kept, more = _fit(rows, avail - size) if size < avail else ([], len(rows))
        if not kept:  # no room for even one row: leave the section out rather than an empty table
            rows_left += len(rows)
            continue
        body += block + kept
        room -= size + sum(len(r) + 1 for r in kept)
        rows_left += more
    if rows_left:
        left_out.append(f"{rows_left} more rows")
    return "\n".join([*head, *body, *tail, ""]) + _overflow(left_out)


def _merge_note(report: model.Report) -> str:
    return (
        f"The branch has not merged `{report['base'][:12]}`: planned as the merge of both "
        f"(`{(report['merged'] or '')[:12]}`), as it would land."
    )


def _problems(n: int) -> str:
    return f"{n} problem" if n == 1 else f"{n} problems"


def _overflow(left_out: list[str]) -> str:
    if not left_out:
        return ""
    return (
        f"\n> {' and '.join(left_out)} did not fit in one comment; the full report is in the job summary "
        "and the `jobtree-plan` artifact (`jobtree plan --format markdown --output FILE`).\n"
    )


def as_text(report: model.Report, diagnostics: list[str]) -> str:
    lines = [f"plan {report['base'][:12]} -> {report['head'][:12]} at {report['now']}"]
    lines += [_merge_note(report)] if report.get("merged") else []
    lines += [f"invalid: {d}" for d in diagnostics]
    lines += [f"stalled: {line}" for line in report.get("stalled") or []]
    # after the change under review: what the base branch already has wrong
    tail = [f"invalid, already on the base branch: {d}" for d in report.get("diagnosticsOnBase") or []]
    if not report["changes"]:
        return "\n".join([*lines, "no change", *tail]) + "\n"
    for s in report["starts"]:
        verb = "grow    " if s.get("reason") == "Grow" else "start   "
        lines.append(
            f"{verb} {s['run']}: {_start_gpus(s)} GPUs in {', '.join(s['domains'])}; paid by {_payers(s)}"
        )
    for r in report["reserved"]:
        lines.append(
            f"reserve  {r['run']}: ETA {_eta(r)}, deficit {r['deficitGPUs']}, "
            f"{_reserved_why(r)}" + (f"; remedies: {'; '.join(remedies(r))}" if r["remedies"] else "")
        )
    for c in report["cuts"]:
        before = c.get("gpusBefore", 0)
        if c.get("voluntary"):
            lines.append(
                f"shrink   {c['run']}: {c['gpus']} GPUs given back (this change lowers desiredTotalGPUs)"
            )
        elif c["gpus"]:
            was = f"; was {before}" if before else ""
            lines.append(f"cut      {c['run']}: {c['gpus']} GPUs ({c['reason']}{was})")
        else:
            lines.append(f"cut      {c['run']}: no longer cut (was {before} GPUs, {c['reason']})")
    for e in report["eta"]:
        lines.append(f"eta      {e['text']}")
    for conflict in report["conflicts"]:
        lines.append(f"conflict {conflict['run']}: {_conflict_sets(conflict)}")
    for u in report.get("unfunded") or []:
        lines.append(
            f"unfunded {u['run']}: {u['groupsBefore']} -> {u['groupsAfter']} groups charged to nobody"
        )
    for updated in report.get("updated") or []:
        lines.append(
            f"update   {updated['run']}: {updated['pods']} running pod{'s' * (updated['pods'] != 1)} "
            f"rendered anew ({', '.join(updated['changed'])} changed)"
        )
    for w in report.get("waiting") or []:
        lines.append(f"waiting  {w['run']}: {w['why']}")
    for width in report.get("widths") or []:
        lines.append(
            f"width    {width['run']}: {width['pending'] or 'nothing'} (before: {width['before'] or 'nothing'})"
        )
    for b in report["budgets"]:
        lines.append(f"budget   {b['envelope']}: {_usage(b['before'])} -> {_usage(b['after'])}")
    return "\n".join([*lines, *tail]) + "\n"


def remedies(r: model.ReservedRow) -> list[str]:
    """A reservation's remedies as the seeds show them: each with the GPUs it can free, when known
    (`Drop spares in scope (32 GPUs)`)."""
    gpus = r.get("remedyGPUs") or []
    return [
        f"{text} ({gpus[i]} GPUs)" if i < len(gpus) else text for i, text in enumerate(r.get("remedies", []))
    ]
