"""`kubectl runs sponsors [--owner O]`: who may lend to whom, the caps, what is lent and what is left.

With `--owner`, the envelopes that owner lends from and those whose lending policy admits it.
The document is `views.usage.sponsors`'s.
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.cli.runs import common
from reconciler.views import usage as usageviews


@click.command("sponsors")
@click.option(
    "--owner", default=None, shell_complete=common.complete_owners,
    help="Only envelopes this owner lends from or may borrow from.",
)  # fmt: skip
@common.fleet_options
@common.reading
def command(owner: str | None, repo: str | None, rev: str | None, fmt: str, now_text: str | None) -> None:
    """Lending envelopes: who may borrow (lending.to), caps, GPUs and GPU-hours lent and left, and
    the runs that name each lender as a sponsor."""
    now = common.now_of(now_text)
    fleet = common.open_fleet(repo, rev)
    common.emit(usageviews.sponsors(fleet, now, owner), fmt, text, wide=wide, names=names)


def _cap(value: float | None, left: float | None) -> str:
    return "no cap" if value is None or left is None else f"{left:g} of {value:g}"


HEADERS = ["ENVELOPE", "LENDER", "LENDS TO", "LENT", "GPUS LEFT", "GPU-HOURS LEFT", "RUNS NAMING IT"]


def _none(doc: dict[str, Any]) -> str:
    who = f" to or from {doc['owner']}" if doc["owner"] else ""
    return f"No envelope lends{who}.\n"


def _rows(doc: dict[str, Any]) -> list[list[str]]:
    return [
        [
            f"{e['budget']}/{e['envelope']}",
            e["lender"],
            ", ".join(e["to"]) or "nobody",
            str(e["lentGPUs"]),
            _cap(e["maxConcurrency"], e["leftGPUs"]),
            _cap(e["maxGPUHours"], e["leftGPUHours"]),
            ", ".join(b["run"] for b in e["borrowers"]) or "-",
        ]
        for e in doc["lenders"]
    ]


def text(doc: dict[str, Any]) -> str:
    return common.table(HEADERS, _rows(doc)) if doc["lenders"] else _none(doc)


def wide(doc: dict[str, Any]) -> str:
    if not doc["lenders"]:
        return _none(doc)
    rows = [
        [*row, e["flavor"], common.gpus(e["headroom"])]
        for row, e in zip(_rows(doc), doc["lenders"], strict=True)
    ]
    return common.table([*HEADERS, "FLAVOR", "HEADROOM"], rows)


def names(doc: dict[str, Any]) -> list[str]:
    return [f"envelope/{e['budget']}/{e['envelope']}" for e in doc["lenders"]]
