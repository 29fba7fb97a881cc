"""`kubectl runs leases RUN`: every lease of a run: group, role, nodes and slots, who paid, when, why it closed.

`-o wide` adds each lease's name, why it opened and how it is funded (own, family, sponsor or
fill); `-o yaml|json` prints the Lease objects as `state/` holds them; `--format json` the
`RunLeases` document (`views.runs.lease_rows`).
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.cli.runs import common
from reconciler.views import runs as runviews


def slots(node: str, numbers: list[int]) -> str:
    """`A-n03#0-7`, or `A-n03#0,2` when the slots are not one range."""
    if numbers and numbers == list(range(numbers[0], numbers[-1] + 1)):
        span = f"{numbers[0]}-{numbers[-1]}" if len(numbers) > 1 else str(numbers[0])
    else:
        span = ",".join(map(str, numbers))
    return f"{node}#{span}"


HEADERS = ["GROUP", "ROLE", "SLOTS", "GPUS", "PAID BY", "FUNDING", "START", "END", "CLOSURE"]


def _row(x: dict[str, Any]) -> list[str]:
    return [
        str(x["group"]),
        x["role"],
        slots(x["node"], x["slots"]),
        str(x["gpus"]),
        common.payer(x["payer"]),
        x["funding"],
        x["start"],
        x["end"] or "-",
        x["closureReason"] or ("open" if x["end"] is None else "-"),
    ]


def _none(doc: dict[str, Any]) -> str:
    return f"{doc['run']} holds no lease (none open, none closed within retention).\n"


def text(doc: dict[str, Any]) -> str:
    if not doc["leases"]:
        return _none(doc)
    return f"Leases of {doc['run']} ({common.read_at(doc)}):\n" + common.table(
        HEADERS, [_row(x) for x in doc["leases"]]
    )


def wide(doc: dict[str, Any]) -> str:
    if not doc["leases"]:
        return _none(doc)
    rows = [[*_row(x), x["reason"], x["lease"]] for x in doc["leases"]]
    return f"Leases of {doc['run']} ({common.read_at(doc)}):\n" + common.table(
        [*HEADERS, "OPENED", "LEASE"], rows
    )


def names(doc: dict[str, Any]) -> list[str]:
    return [f"lease/{x['lease']}" for x in doc["leases"]]


@click.command("leases")
@common.run_argument()
@common.namespace_option
@common.fleet_options(objects=True)
@common.reading
def command(
    run: str, namespace: str | None, repo: str | None, rev: str | None, fmt: str, objects: bool,
    now_text: str | None,
) -> None:  # fmt: skip
    """Show who paid for each lease of RUN: group, role, nodes and GPU slots, payer, start, end, closure."""
    now = common.now_of(now_text)
    fleet = common.open_fleet(repo, rev)
    key = common.find_run(fleet, run, namespace)
    if objects:
        common.objects(runviews.lease_objects(fleet, key), fmt, single=False)
        return
    common.emit(runviews.lease_rows(fleet, key, now), fmt, text, wide=wide, names=names)
