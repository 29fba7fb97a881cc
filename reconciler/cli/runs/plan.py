"""`kubectl runs plan RUN`: when a waiting run starts and why not now, or what a running run holds.

The seeds' block: earliestStart with a countdown computed now, the deficit and its scope, the
conflict set with each member's probability, the remedies with the GPUs each can free, the reason.
The document is `views.runs.plan`'s.
"""

from __future__ import annotations

from typing import Any

from reconciler.cli.runs import common
from reconciler.views import runs as runviews


def remedies(res: dict[str, Any]) -> str:
    return "; ".join(
        f"{r['remedy']} ({r['gpus']} GPUs)" if r["gpus"] else r["remedy"] for r in res["remedies"]
    )


def reservation_lines(res: dict[str, Any]) -> list[str]:
    eta = common.eta(res["earliestStart"], res["countdownSeconds"])
    lines = [f"earliestStart: {eta}; confidence {res['confidence']}"]
    scope = ", ".join(res["scope"]) or "nowhere its funding reaches"
    lines.append(f"deficit: {res['deficitGPUs']} GPUs in {scope}")
    if res["windowOpens"]:
        lines.append(f"window opens: {res['windowOpens']}")
    if res["payingEnvelope"]:
        lines.append(f"paid by: {common.payer(res['payingEnvelope'])}")
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
    if doc["reservation"] is not None:
        lines += reservation_lines(doc["reservation"])
    elif doc["phase"] in ("Pending", "Waiting"):
        lines.append("no reservation: it holds nothing and is not in line for a forecast (see the message)")
    if doc["holds"]:
        lines.append("holds:")
        lines += held_lines(doc["holds"])
    for c in doc["conflicts"]:
        when = common.eta(c["earliestStart"], c["countdownSeconds"])
        lines.append(
            f"may be cut when {c['reservation']} activates at {when}: probability {c['probability']}"
        )
    return "\n".join(lines) + "\n"


command = common.run_view(
    "plan",
    runviews.plan,
    text,
    "Show RUN's reservation (ETA, deficit, scope, conflict set, remedies), or what it holds now.",
)
