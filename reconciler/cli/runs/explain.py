"""`kubectl runs explain RUN`: the decision trail in words, who pays and why, where and why, why it waits.

A run whose file does not validate quotes the validator's first problem with it. Why it waits
says when its ETA is and why then, its place in line, what activation will do (the resolver's
steps, each with the GPUs it can free) and what a person could change. The document is `views.trail.explain`'s; a lottery cut comes with its published seed and the few
lines of Python that replay the draw (`planner.lottery.replay`).
"""

from __future__ import annotations

from typing import Any

from reconciler.cli.runs import common, plan
from reconciler.views import trail


def text(doc: dict[str, Any]) -> str:
    lines = [
        f"{doc['run']}: {common.phase(doc['phase'])}" + (f", {doc['message']}" if doc["message"] else "")
    ]
    if doc["problems"]:
        more = len(doc["problems"]) - 1
        also = f" ({more} more problem{'s' * (more > 1)}: jobtree validate)" if more else ""
        lines.append(f"  its file does not validate{also}:")
        lines.append(f"  {doc['problems'][0]}")
    lines.append("")
    lines.append("What happened:")
    lines += [f"  {e['at']}  {e['text']}" for e in doc["trail"]] or ["  nothing recorded yet"]
    if doc["funding"]:
        lines += ["", "Who pays:"]
        lines += [f"  group {f['group']} ({f['role']}, {f['gpus']} GPUs): {f['why']}" for f in doc["funding"]]
    if doc["placement"]:
        lines += ["", "Where it runs:"]
        lines += [
            f"  group {p['group']} ({p['role']}) in {p['domain']} on {common.nodes(p['nodes'])}: {p['why']}"
            for p in doc["placement"]
        ]
    waiting = doc["waiting"]
    if waiting is not None:
        lines += ["", "Why it waits:", f"  {waiting['reason']}"]
        res = waiting["reservation"]
        if res is not None:
            if res["earliestStart"] is None:
                lines.append(
                    "  earliestStart unknown: nothing known (a window opening, a run ending) makes it startable"
                )
            else:
                eta = common.eta(res["earliestStart"], res["countdownSeconds"], doc["now"])
                lines.append(f"  earliestStart {eta}, confidence {res['confidence']}")
                if res["etaReason"]:
                    lines.append(f"  why then: {res['etaReason']}")
            for line in (plan.place(res["inLine"]), plan.moved(res["lastMove"])):
                if line:
                    lines.append(f"  {line}")
            if res["deficitGPUs"]:
                lines.append(
                    f"  short by {res['deficitGPUs']} GPUs in {', '.join(res['scope']) or 'its scope'}"
                )
        if waiting["atActivation"]:
            lines.append(
                "  at activation the resolver will, in this order: " + "; ".join(waiting["atActivation"])
            )
        lines.append("  what would change that: " + "; ".join(waiting["wouldChange"]))
        if res is not None and common.overdue(res["earliestStart"], doc):
            lines.append("  " + common.last_pass(doc).rstrip("\n"))
    if doc["conflicts"]:
        lines += ["", "Who may cut it (it was warned first):"]
        lines += [
            f"  reservation {c['reservation']} at {common.eta(c['earliestStart'], c['countdownSeconds'], doc['now'])}, "
            f"probability {c['probability']}"
            for c in doc["conflicts"]
        ]
    for lot in doc["lotteries"]:
        lines += ["", f"The lottery of {lot['reservation']} (seed {lot['seed']}):"]
        for d in lot["draws"]:
            owners = len({c[0] for c in d["candidates"]})
            lines.append(
                f"  draw {d['k']}: {len(d['candidates'])} groups of {owners} owners; picked {d['picked']}"
            )
        if lot["replay"]:
            lines.append("  replay it (Python, with jobtree installed):")
            lines += [f"    {line}" for line in lot["replay"].splitlines()]
        else:
            lines.append(
                "  the candidates are no longer all in state/ (leases are kept for the fleet's retention): "
                "replay it with planner.lottery.replay from an older commit's state/"
            )
    return "\n".join(lines) + "\n"


command = common.run_view(
    "explain",
    trail.explain,
    text,
    "Explain RUN: what happened to it and why, who pays for it, where it runs, why it waits.",
)
