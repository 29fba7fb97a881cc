"""`kubectl runs get [RUN]... [-n NAMESPACE | -A] [-o wide|name|yaml|json]`: a `kubectl get`-like table of runs.

Namespace, name, phase, allocated and desired width, why it waits, and its ETA with a countdown;
`-o wide` adds the owner, the place in line, when it started and the planner's message; `-o
yaml|json` prints the Run objects (spec and status, as `kubectl get runs -o yaml` shows them in
the cluster), `--format json` the `RunList` document (`views.runs.run_list`).
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.cli.runs import common
from reconciler.views import runs as runviews


@click.command("get")
@common.run_argument(multiple=True)
@click.option(
    "-n", "--namespace", default=None, is_eager=True, shell_complete=common.complete_namespaces,
    help="Only runs of this namespace.",
)  # fmt: skip
@click.option("-A", "--all-namespaces", "every", is_flag=True, help="Runs of every namespace (the default).")
@common.fleet_options(objects=True)
@common.reading
def command(
    runs: tuple[str, ...], namespace: str | None, every: bool, repo: str | None, rev: str | None, fmt: str,
    objects: bool, now_text: str | None,
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
    if objects:
        common.objects([runviews.run_object(fleet, k) for k in keys], fmt, single=len(runs) == 1)
        return
    common.emit(runviews.run_list(fleet, keys, now), fmt, text, wide=wide, names=names)


def _row(r: dict[str, Any], now: str) -> list[str]:
    return [
        r["namespace"],
        r["name"],
        common.phase(r["phase"]),
        str(r["allocatedGPUs"]),
        common.gpus(r["desiredGPUs"]),
        r["pendingReason"] or "-",
        common.eta(r["earliestStart"], r["countdownSeconds"], now) if r["earliestStart"] else "-",
    ]


def _overdue(doc: dict[str, Any]) -> str:
    """The note on an ETA in the past: how old the last pass read is (empty when none is past)."""
    return common.last_pass(doc) if any(common.overdue(r["earliestStart"], doc) for r in doc["runs"]) else ""


HEADERS = ["NAMESPACE", "NAME", "PHASE", "GPUS", "DESIRED", "PENDING REASON", "ETA"]


def text(doc: dict[str, Any]) -> str:
    if not doc["runs"]:
        return "No runs.\n"
    return common.table(HEADERS, [_row(r, doc["now"]) for r in doc["runs"]]) + _overdue(doc)


def wide(doc: dict[str, Any]) -> str:
    if not doc["runs"]:
        return "No runs.\n"
    rows = [
        [
            *_row(r, doc["now"]),
            r["owner"] or "-",
            common.place(r["inLine"]),
            r["startedAt"] or "-",
            r["message"] or "-",
        ]
        for r in doc["runs"]
    ]
    return common.table([*HEADERS, "OWNER", "IN LINE", "STARTED", "MESSAGE"], rows) + _overdue(doc)


def names(doc: dict[str, Any]) -> list[str]:
    return [f"run/{r['namespace']}/{r['name']}" for r in doc["runs"]]
