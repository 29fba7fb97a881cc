"""`kubectl runs watch RUN [--interval 10s] [--once]`: a run as it changes, refreshed when the fleet branch moves.

Shows the phase, desired vs allocated width, a waiting run's ETA, place in line and last ETA move
(with its reason), active and spare leases, the funding split (own, family, sponsors) and the
run's recent ledger events; every `--interval` it fetches the fleet branch from origin and shows
the run again when the branch moved (on a terminal the screen is redrawn). `--once` prints once,
for scripts. The document is `views.runs.watch`'s.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from reconciler.cli import exitcodes
from reconciler.cli.runs import common, plan
from reconciler.git import branch as gitbranch
from reconciler.git import errors
from reconciler.git import remote as gitremote
from reconciler.views import fleet as fleetview
from reconciler.views import runs as runviews
from schemas.common import parse_duration

CLEAR = "\x1b[H\x1b[2J"


@click.command("watch")
@common.run_argument()
@common.namespace_option
@click.option("--interval", default="10s", show_default=True, help="How often to fetch the fleet branch.")
@click.option("--once", is_flag=True, help="Print the run once and exit (for scripts).")
@common.fleet_options
@common.reading
def command(
    run: str, namespace: str | None, interval: str, once: bool, repo: str | None, rev: str | None, fmt: str,
    now_text: str | None,
) -> None:  # fmt: skip
    """Watch RUN: phase, desired vs allocated width, place in line and ETA moves, leases, funding,
    recent events, as the fleet moves."""
    try:
        every = parse_duration(interval)
    except ValueError as err:
        raise click.UsageError(f"--interval {interval!r}: {err}") from None
    fleet = common.open_fleet(repo, rev)
    key = common.find_run(fleet, run, namespace)
    show(fleet, key, common.now_of(now_text), fmt, first=True)
    if once:
        return
    branch = fleetview.fleet_branch(fleet.repo)
    # with no origin to fetch, the local branch is watched as it moves
    remote = gitbranch.remote_url(fleet.repo, fleetview.REMOTE) is not None
    shown = fleet.sha
    try:
        while True:
            time.sleep(every)
            try:
                if remote:
                    gitremote.fetch(fleet.repo, fleetview.REMOTE, branch)
            except errors.GitStoreError as err:  # a network hiccup: say so, keep watching
                click.echo(f"kubectl runs watch: {err}", err=True)
            fresh = common.open_fleet(repo, rev)
            if fresh.sha != shown:
                shown = fresh.sha
                show(fresh, key, common.now_of(now_text), fmt, first=False)
    except KeyboardInterrupt:
        sys.exit(exitcodes.OK)


def show(fleet: fleetview.Fleet, key: str, now: int, fmt: str, first: bool) -> None:
    if not first and fmt in (common.TEXT, common.WIDE) and sys.stdout.isatty():
        click.echo(CLEAR, nl=False)
    elif not first and fmt in (common.TEXT, common.WIDE, common.YAML):
        click.echo("---" if fmt == common.YAML else "")
    common.emit(runviews.watch(fleet, key, now), fmt, text, names=common.run_name)


def _group(g: dict[str, Any]) -> str:
    if g["role"] == "Borrowed":
        who = f"fill on other runs' spare GPUs, metered to {', '.join(p['owner'] for p in g['payers'])}"
    elif g["unfunded"]:
        who = "unfunded"
    else:
        who = ", ".join(common.payer(p) for p in g["payers"])
    return f"  group {g['group']}: {g['gpus']} GPUs on {common.nodes(g['nodes'])} ({g['domain']}), {who}"


def _event(e: dict[str, Any]) -> str:
    if e["event"] in ("Start", "End"):
        where = ", ".join(e["nodes"])
        return f"  {e['at']}  {e['event']:<5} group {e['group']} {e['role']} {e['gpus']} GPUs on {where}: {e['reason']}"
    moved = f"{e['previous'] or 'unknown'} -> {e['earliestStart'] or 'unknown'}"
    return f"  {e['at']}  ETA moved {moved}: {e['reason']}"


def _owners(entries: list[dict[str, Any]] | None) -> str:
    listed = ", ".join(f"{s['owner']} {s['gpus']}" for s in entries or [])
    return f" ({listed})" if listed else ""


def funding_words(f: dict[str, Any]) -> str:
    """`8 own, 8 family (org:acme:rai 8), 16 from sponsors (org:acme:media:vision 16), 0 unfunded,
    0 fill`: own, family and sponsors apart (a status written before the split says `borrowed`)."""
    if "familyGPUs" not in f:
        shared = f"{f.get('borrowedGPUs', 0)} borrowed from family or sponsors{_owners(f.get('sponsors'))}"
    else:
        shared = (
            f"{f['familyGPUs']} family{_owners(f.get('family'))}, "
            f"{f.get('sponsoredGPUs', 0)} from sponsors{_owners(f.get('sponsors'))}"
        )
    return f"{f.get('ownedGPUs', 0)} own, {shared}, {f.get('unfundedGPUs', 0)} unfunded, {f.get('fillGPUs', 0)} fill"


def text(doc: dict[str, Any]) -> str:
    w, f = doc["width"], doc["funding"]
    lines = [f"{doc['run']}  {common.phase(doc['phase'])}  ({common.read_at(doc)}, {doc['now']})"]
    if doc["message"]:
        lines.append(f"  {doc['message']}")
    desired = f"desired {w['desired']} (min {w['min']}, max {w['max']})" if "desired" in w else "fixed"
    lines.append(
        f"width: {w.get('allocated', 0)} allocated, {desired}"
        + (f"; {w['pending']}" if w.get("pending") else "")
    )
    r = doc["reservation"]
    if r is not None:
        when = (
            common.eta(r["earliestStart"], r["countdownSeconds"], doc["now"])
            if r["earliestStart"]
            else "ETA unknown"
        )
        lines.append(f"reserved, {when}: {r['reason']}")
        for line in (plan.place(r["inLine"]), plan.moved(r["lastMove"])):
            if line:
                lines.append(f"  {line}")
    for title, key in (("active", "active"), ("spare", "spare"), ("fill (on others' spares)", "fill")):
        held = doc["leases"][key]
        if held:
            lines.append(f"{title}: {sum(g['gpus'] for g in held)} GPUs")
            lines += [_group(g) for g in held]
    if f:
        lines.append(f"funding: {funding_words(f)}")
    if doc["events"]:
        lines.append("recent events:")
        lines += [_event(e) for e in doc["events"]]
    out = "\n".join(lines) + "\n"
    return out + (common.last_pass(doc) if r is not None and common.overdue(r["earliestStart"], doc) else "")
