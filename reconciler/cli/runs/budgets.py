"""`kubectl runs budgets usage [--owner O]`: each envelope's use, and what each owner's runs hold on others' envelopes.

Per envelope: concurrency, what it funds for its owner, shares with family, lends to sponsored
runs, leaves charged to nobody, spares, GPU-hours and cap, headroom and window; then, per borrowing
owner and paying envelope, the GPUs its runs hold there as family or from a sponsor (also where
the owner has no envelope of its own). `-o wide` adds each envelope's flavor and selector. The
document is `views.usage.usage`'s.
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.cli import exitcodes
from reconciler.cli.runs import common
from reconciler.views import usage as usageviews


@click.group("budgets")
def command() -> None:
    """Budgets as the researcher's verbs read them."""


@command.command("usage")
@click.option(
    "--owner", default=None, shell_complete=common.complete_owners,
    help="Only this owner's budgets, and what its runs hold on others' (e.g. org:ai:rai:sys).",
)  # fmt: skip
@common.fleet_options
@common.reading
def usage(owner: str | None, repo: str | None, rev: str | None, fmt: str, now_text: str | None) -> None:
    """Per envelope: concurrency, own, shared with family, lent to sponsored runs, unfunded, spare,
    GPU-hours and cap, headroom, window; then what each owner's runs hold on others' envelopes,
    family and sponsors apart."""
    now = common.now_of(now_text)
    fleet = common.open_fleet(repo, rev)
    known = usageviews.owners(fleet)
    if owner is not None and owner not in known:
        common.fail(f"no budget or tenant is owned by {owner!r}; owners: {', '.join(known)}", exitcodes.USAGE)
    common.emit(usageviews.usage(fleet, now, owner), fmt, text, wide=wide, names=names)


def _hours(e: dict[str, Any]) -> str:
    used = f"{e['gpuHours']:g}"
    return f"{used}/{e['maxGPUHours']:g}" if e["maxGPUHours"] is not None else used


def _window(e: dict[str, Any]) -> str:
    w = e["window"]
    if not w["start"] and not w["end"]:
        return "open-ended"
    text = f"{w['start'] or '…'} to {w['end'] or '…'}"
    return text if e["open"] else f"{text} (closed now)"


HEADERS = [
    "ENVELOPE",
    "CONCURRENCY",
    "OWN",
    "TO FAMILY",
    "TO SPONSORED",
    "UNFUNDED",
    "SPARE",
    "GPU-HOURS",
    "HEADROOM",
    "WINDOW",
]


def _row(e: dict[str, Any]) -> list[str]:
    return [
        f"{e['budget']}/{e['envelope']}",
        str(e["concurrency"]),
        str(e["ownedGPUs"]),
        str(e["sharedWithFamilyGPUs"]),
        str(e["lentToSponsoredGPUs"]),
        str(e["unfundedGPUs"]),
        str(e["spareGPUs"]),
        _hours(e),
        common.gpus(e["headroom"]),
        _window(e),
    ]


def _borrowing(doc: dict[str, Any]) -> str:
    if not doc["borrowing"]:
        return ""
    rows = [
        [
            b["borrower"],
            f"{b['budget']}/{b['envelope']}",
            b["lender"],
            b["funding"],
            str(b["gpus"]),
            ", ".join(b["runs"]),
        ]
        for b in doc["borrowing"]
    ]
    return "\nHeld on other owners' envelopes:\n" + common.table(
        ["BORROWER", "ENVELOPE", "PAID BY", "AS", "GPUS", "RUNS"], rows
    )


def _empty(doc: dict[str, Any]) -> str:
    if doc["owner"] is not None:
        return f"{doc['owner']} has no envelope of its own.\n"
    return "No budgets.\n"


def text(doc: dict[str, Any]) -> str:
    table = common.table(HEADERS, [_row(e) for e in doc["envelopes"]]) if doc["envelopes"] else _empty(doc)
    return table + _borrowing(doc)


def wide(doc: dict[str, Any]) -> str:
    if not doc["envelopes"]:
        return _empty(doc) + _borrowing(doc)
    rows = [
        [*_row(e), e["flavor"], ",".join(f"{k}={v}" for k, v in sorted(e["selector"].items())) or "*"]
        for e in doc["envelopes"]
    ]
    return common.table([*HEADERS, "FLAVOR", "SELECTOR"], rows) + _borrowing(doc)


def names(doc: dict[str, Any]) -> list[str]:
    return [f"envelope/{e['budget']}/{e['envelope']}" for e in doc["envelopes"]]
