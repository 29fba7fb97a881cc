"""`kubectl runs leases RUN`: every lease of a run: group, role, nodes and slots, who paid, when, why it closed.

The document is `views.runs.lease_rows`'s.
"""

from __future__ import annotations

from typing import Any

from reconciler.cli.runs import common
from reconciler.views import runs as runviews


def slots(node: str, numbers: list[int]) -> str:
    """`A-n03#0-7`, or `A-n03#0,2` when the slots are not one range."""
    if numbers and numbers == list(range(numbers[0], numbers[-1] + 1)):
        span = f"{numbers[0]}-{numbers[-1]}" if len(numbers) > 1 else str(numbers[0])
    else:
        span = ",".join(map(str, numbers))
    return f"{node}#{span}"


def text(doc: dict[str, Any]) -> str:
    if not doc["leases"]:
        return f"{doc['run']} holds no lease (none open, none closed within retention).\n"
    rows = [
        [
            str(x["group"]),
            x["role"],
            slots(x["node"], x["slots"]),
            str(x["gpus"]),
            common.payer(x["payer"]),
            x["start"],
            x["end"] or "-",
            x["closureReason"] or ("open" if x["end"] is None else "-"),
        ]
        for x in doc["leases"]
    ]
    headers = ["GROUP", "ROLE", "SLOTS", "GPUS", "PAID BY", "START", "END", "CLOSURE"]
    return f"Leases of {doc['run']} ({common.read_at(doc)}):\n" + common.table(headers, rows)


command = common.run_view(
    "leases",
    runviews.lease_rows,
    text,
    "Show who paid for each lease of RUN: group, role, nodes and GPU slots, payer, start, end, closure.",
)
