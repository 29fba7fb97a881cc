"""`kubectl runs budgets usage [--owner O]`: each envelope's use: owned, lent out, borrowed in, unfunded, spare, hours, headroom.

The document is `views.usage.usage`'s.
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.cli.runs import common
from reconciler.views import usage as usageviews


@click.group("budgets")
def command() -> None:
    """Budgets as the researcher's verbs read them."""


@command.command("usage")
@click.option("--owner", default=None, help="Only this owner's budgets (e.g. org:ai:rai:sys).")
@common.fleet_options
@common.reading
def usage(owner: str | None, repo: str | None, rev: str | None, fmt: str, now_text: str | None) -> None:
    """Per envelope: concurrency, owned, lent out, borrowed in, unfunded, spare, GPU-hours and cap,
    headroom, window."""
    now = common.now_of(now_text)
    fleet = common.open_fleet(repo, rev)
    if owner is not None and owner not in {b.spec.owner for b in fleet.budgets.values()}:
        known = ", ".join(sorted({b.spec.owner for b in fleet.budgets.values()}))
        common.fail(f"no budget is owned by {owner!r}; owners: {known}", 2)
    common.emit(usageviews.usage(fleet, now, owner), fmt, text)


def _hours(e: dict[str, Any]) -> str:
    used = f"{e['gpuHours']:g}"
    return f"{used}/{e['maxGPUHours']:g}" if e["maxGPUHours"] is not None else used


def _window(e: dict[str, Any]) -> str:
    w = e["window"]
    if not w["start"] and not w["end"]:
        return "open-ended"
    text = f"{w['start'] or '…'} to {w['end'] or '…'}"
    return text if e["open"] else f"{text} (closed now)"


def _borrowed(e: dict[str, Any]) -> str:
    if not e["borrowedInGPUs"]:
        return "0"
    lenders = ", ".join(f"{b['owner']} {b['gpus']}" for b in e["borrowedFrom"])
    return f"{e['borrowedInGPUs']} ({lenders})"


def text(doc: dict[str, Any]) -> str:
    if not doc["envelopes"]:
        return "No budgets.\n"
    rows = [
        [
            f"{e['budget']}/{e['envelope']}",
            str(e["concurrency"]),
            str(e["ownedGPUs"]),
            str(e["lentOutGPUs"]),
            _borrowed(e),
            str(e["unfundedGPUs"]),
            str(e["spareGPUs"]),
            _hours(e),
            common.gpus(e["headroom"]),
            _window(e),
        ]
        for e in doc["envelopes"]
    ]
    headers = [
        "ENVELOPE",
        "CONCURRENCY",
        "OWNED",
        "LENT OUT",
        "BORROWED IN",
        "UNFUNDED",
        "SPARE",
        "GPU-HOURS",
        "HEADROOM",
        "WINDOW",
    ]
    return common.table(headers, rows)
