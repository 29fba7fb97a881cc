"""`kubectl runs get [RUN...] [-n NAMESPACE | -A]`: a `kubectl get`-like table of runs.

Namespace, name, phase, allocated and desired width, why it waits, and its ETA with a countdown.
The document is `views.runs.run_list`'s.
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.cli.runs import common
from reconciler.views import runs as runviews


@click.command("get")
@common.run_argument(multiple=True)
@click.option("-n", "--namespace", default=None, is_eager=True, help="Only runs of this namespace.")
@click.option("-A", "--all-namespaces", "every", is_flag=True, help="Runs of every namespace (the default).")
@common.fleet_options
@common.reading
def command(
    runs: tuple[str, ...], namespace: str | None, every: bool, repo: str | None, rev: str | None, fmt: str,
    now_text: str | None,
) -> None:  # fmt: skip
    """List runs: phase, GPUs allocated and desired, why a run waits, and when it starts."""
    if every and namespace:
        raise click.UsageError("-A and -n NAMESPACE name different things: give one")
    now = common.now_of(now_text)
    fleet = common.open_fleet(repo, rev)
    if runs:
        keys = [common.find_run(fleet, r, namespace) for r in runs]
    else:
        keys = [k for k in fleet.run_keys if namespace is None or k.split("/", 1)[0] == namespace]
    common.emit(runviews.run_list(fleet, keys, now), fmt, text)


def text(doc: dict[str, Any]) -> str:
    if not doc["runs"]:
        return "No runs.\n"
    rows = [
        [
            r["namespace"],
            r["name"],
            common.phase(r["phase"]),
            str(r["allocatedGPUs"]),
            common.gpus(r["desiredGPUs"]),
            r["pendingReason"] or "-",
            common.eta(r["earliestStart"], r["countdownSeconds"]) if r["earliestStart"] else "-",
        ]
        for r in doc["runs"]
    ]
    headers = ["NAMESPACE", "NAME", "PHASE", "GPUS", "DESIRED", "PENDING REASON", "ETA"]
    return common.table(headers, rows)
