"""Renders a `prdiff` report for people: a terminal text view and one Markdown PR comment.

Markdown stays within GitHub's 65,535-character comment limit: rows that do not fit are left out
and a note says how many and where the full report is. Computes nothing; JSON is the report as is.
"""

from __future__ import annotations

import json
from typing import Any

COMMENT_LIMIT = 65_535
MARKER = "<!-- jobtree-plan -->"


def as_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


def _payers(entry: dict[str, Any]) -> str:
    return ", ".join(f"{p['payer']} {p['gpus']}" for p in entry["payers"])


def _usage(u: dict[str, int] | None) -> str:
    if u is None:
        return "—"
    return f"{u['active']} active, {u['spare']} spare, {u['lentOrShared']} out, headroom {u['headroom']}"


def sections(report: dict[str, Any]) -> list[tuple[str, list[str], list[str]]]:
    """(title, Markdown table header lines, one Markdown row per item) per non-empty section."""
    out: list[tuple[str, list[str], list[str]]] = []
    if report["starts"]:
        rows = [
            f"| `{s['run']}` | {s['gpus']} | {', '.join(s['domains'])} | {_payers(s)} |"
            for s in report["starts"]
        ]
        out.append(("Starts now", ["| run | GPUs | domains | paid by |", "|---|---:|---|---|"], rows))
    if report["reserved"]:
        rows = [
            f"| `{r['run']}` | {r['earliestStart']} ({r['confidence']}) | {r['deficitGPUs']} | {r['reason']} | "
            f"{'; '.join(r['remedies'])} |"
            for r in report["reserved"]
        ]
        out.append(("Reserved", ["| run | ETA | deficit | why | remedies |", "|---|---|---:|---|---|"], rows))
    if report["cuts"]:
        rows = [f"| `{c['run']}` | {c['gpus']} | {c['reason']} |" for c in report["cuts"]]
        out.append(("Shrunk or cut", ["| run | GPUs | reason |", "|---|---:|---|"], rows))
    if report["eta"]:
        out.append(("Moves other runs", [], [f"- {e['text']}" for e in report["eta"]]))
    if report["conflicts"]:
        rows = [f"| `{c['run']}` | {', '.join(c['reservations'])} |" for c in report["conflicts"]]
        out.append(
            (
                "Put in a conflict set (warned before any cut)",
                ["| run | reservation (probability) |", "|---|---|"],
                rows,
            )
        )
    if report["budgets"]:
        rows = [
            f"| `{b['envelope']}` | {_usage(b['before'])} | {_usage(b['after'])} |" for b in report["budgets"]
        ]
        out.append(("Budget usage", ["| envelope | before | after |", "|---|---|---|"], rows))
    return out


def as_markdown(report: dict[str, Any], diagnostics: list[str], limit: int = COMMENT_LIMIT) -> str:
    head = [
        MARKER,
        f"### jobtree plan: `{report['base'][:12]}` → `{report['head'][:12]}` at {report['now']}",
        "",
    ]
    if diagnostics:
        head += ["**Invalid files** (left out of the plan):", "", *[f"- `{d}`" for d in diagnostics[:50]], ""]
    if not report["changes"]:
        return "\n".join([*head, "No change: merging this moves no GPU, reservation or budget.", ""])
    parts = sections(report)
    budget = limit - len("\n".join(head)) - 400  # room for the overflow note
    body: list[str] = []
    left_out = 0
    for title, header, rows in parts:
        block = [*([""] if body else []), f"#### {title}", "", *header]
        if len("\n".join(body + block)) > budget:
            left_out += len(rows)
            continue
        body += block
        for i, row in enumerate(rows):
            if len("\n".join(body)) + len(row) + 1 > budget:
                left_out += len(rows) - i
                break
            body.append(row)
    text = "\n".join([*head, *body, ""])
    if left_out:
        text += (
            f"\n> {left_out} more rows did not fit in one comment; the full report is in the job summary "
            "(`jobtree plan --format markdown --output FILE`).\n"
        )
    return text


def as_text(report: dict[str, Any], diagnostics: list[str]) -> str:
    lines = [f"plan {report['base'][:12]} -> {report['head'][:12]} at {report['now']}"]
    lines += [f"invalid: {d}" for d in diagnostics]
    if not report["changes"]:
        return "\n".join([*lines, "no change"]) + "\n"
    for s in report["starts"]:
        lines.append(
            f"start    {s['run']}: {s['gpus']} GPUs in {', '.join(s['domains'])}; paid by {_payers(s)}"
        )
    for r in report["reserved"]:
        lines.append(
            f"reserve  {r['run']}: ETA {r['earliestStart']} ({r['confidence']}), deficit {r['deficitGPUs']}, "
            f"{r['reason']}" + (f"; remedies: {'; '.join(r['remedies'])}" if r["remedies"] else "")
        )
    for c in report["cuts"]:
        lines.append(f"cut      {c['run']}: {c['gpus']} GPUs ({c['reason']})")
    for e in report["eta"]:
        lines.append(f"eta      {e['text']}")
    for c in report["conflicts"]:
        lines.append(f"conflict {c['run']}: {', '.join(c['reservations'])}")
    for b in report["budgets"]:
        lines.append(f"budget   {b['envelope']}: {_usage(b['before'])} -> {_usage(b['after'])}")
    return "\n".join(lines) + "\n"
