"""`kubectl runs plan RUN`: when a waiting run starts and why not now, or what a running run holds.

The seeds' block: earliestStart with a countdown computed now and why it is then, the place in
line, the deficit and its scope, the conflict set with each member's probability, the remedies
with the GPUs each can free, the reason, and the last time the ETA moved (and why). The document is
`views.runs.plan`'s.
"""

from __future__ import annotations

from typing import Any

from reconciler.cli.runs import common
from reconciler.views import runs as runviews


def remedies(res: dict[str, Any]) -> str:
    return "; ".join(
        f"{r['remedy']} ({r['gpus']} GPUs)" if r["gpus"] else r["remedy"] for r in res["remedies"]
    )


def place(entry: dict[str, Any] | None) -> str | None:
    """`3rd in line of 5: 2 ahead, 1 of them in its scope (team-a/a2)`, `first in line (the only
    run waiting)`."""
    if entry is None:
        return None
    n, of = entry["position"], entry["of"]
    if not entry["ahead"]:
        return "first in line (the only run waiting)" if of == 1 else f"first in line ({of} runs waiting)"
    nth = f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
    scoped = entry.get("aheadInScope")
    near = ""
    if scoped is not None:
        near = f", {len(scoped)} of them in its scope" + (f" ({', '.join(scoped)})" if scoped else "")
    return f"{nth} in line of {of}: {entry['ahead']} ahead{near}"


def moved(move: dict[str, Any] | None) -> str | None:
    if move is None:
        return None
    return (
        f"ETA moved at {move['at']}: {move['previous'] or 'unknown'} -> {move['earliestStart'] or 'unknown'} "
        f"({move['reason']})"
    )


def reservation_lines(res: dict[str, Any], doc: dict[str, Any]) -> list[str]:
    lines = [
        f"earliestStart: {common.eta(res['earliestStart'], res['countdownSeconds'], doc['now'])}; confidence {res['confidence']}"
    ]
    if res["earliestStart"] is None:
        lines[0] = "earliestStart: unknown: nothing known (a window opening, a run ending) makes it startable"
    elif res["etaReason"]:
        lines.append(f"  why then: {res['etaReason']}")
    for line in (place(res["inLine"]), moved(res["lastMove"])):
        if line:
            lines.append(line)
    scope = ", ".join(res["scope"]) or "nowhere its funding reaches"
    lines.append(f"deficit: {res['deficitGPUs']} GPUs in {scope}")
    if res["windowOpens"]:
        lines.append(f"window opens: {res['windowOpens']}")
    if res["payingEnvelope"]:
        lines.append(f"would be paid by: {common.payer(res['payingEnvelope'])}")
    members = [f"{c['run']} ({c['probability']})" for c in res["conflictSet"]]
    lines.append(f"conflictSet: {', '.join(members) if members else 'none'}")
    lines.append(f"remedies: {remedies(res) or 'none'}")
    lines.append(f"reason: {res['reason']}")
    return lines


def held_lines(held: list[dict[str, Any]]) -> list[str]:
    rows = [
        [
            str(g["group"]),
            g["role"],
            str(g["gpus"]),
            g["domain"],
            common.nodes(g["nodes"]),
            "charged to nobody (unfunded)"
            if g["unfunded"]
            else ", ".join(common.payer(p) for p in g["payers"]),
        ]
        for g in held
    ]
    return [
        "  " + line
        for line in common.table(["GROUP", "ROLE", "GPUS", "DOMAIN", "NODES", "PAID BY"], rows).splitlines()
    ]


def text(doc: dict[str, Any]) -> str:
    width = doc["width"]
    sized = f", {width.get('allocated', 0)} GPUs" + (
        f" (desired {width['desired']})" if "desired" in width else ""
    )
    lines = [f"{doc['run']}: {common.phase(doc['phase'])}{sized}"]
    if doc["message"]:
        lines.append(f"  {doc['message']}")
    res = doc["reservation"]
    if res is not None:
        lines += reservation_lines(res, doc)
    elif doc["phase"] in ("Pending", "Waiting"):
        lines.append("no reservation: it holds nothing and is not in line for a forecast (see the message)")
    if doc["holds"]:
        lines.append("holds:")
        lines += held_lines(doc["holds"])
    for c in doc["conflicts"]:
        when = common.eta(c["earliestStart"], c["countdownSeconds"], doc["now"])
        lines.append(
            f"may be cut when {c['reservation']} activates at {when}: probability {c['probability']}"
        )
    out = "\n".join(lines) + "\n"
    if (res is not None and common.overdue(res["earliestStart"], doc)) or any(
        common.overdue(c["earliestStart"], doc) for c in doc["conflicts"]
    ):
        out += common.last_pass(doc)
    return out


command = common.run_view(
    "plan",
    runviews.plan,
    text,
    "Show RUN's reservation (ETA and why then, place in line, deficit, scope, conflict set, remedies), "
    "or what it holds now.",
)
