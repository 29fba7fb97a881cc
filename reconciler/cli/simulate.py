"""`jobtree simulate SCENARIO [--format json|text] [--git DIR]`: the verb; the engine is `passes.simulation`.

This module stays light on purpose: a big scenario file is parsed in a child process
(`perf.prefetch`) while the engine's modules (pydantic models, the planner: about half a second)
are imported by `play_and_print`, so the two CPUs of a small machine overlap the two.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from reconciler.cli import exitcodes, jsonout
from reconciler.perf import batchgc, prefetch
from schemas.yamldoc import BadDocument, Document

if TYPE_CHECKING:  # annotations only: the engine is imported when a scenario is played
    from planner.world import FleetState
    from schemas.scenario import Scenario


@click.command("simulate")
@click.argument("scenario", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["json", "text"]), default="text", show_default=True)
@click.option(
    "--git",
    "git_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Also write each pass as a commit to a new repository in this directory.",
)
@click.option(
    "--fleet",
    "fleet_repo",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Start from this fleet repository instead of a SCENARIO: its Budgets and Runs, its inventory "
    "(or its clusters as last observed) and the state jobtree committed, from that state's asOf.",
)
@click.option(
    "--rev", default=None, help="With --fleet: the commit to start from (default: the fleet branch)."
)
@click.option(
    "--now", "now_text", default=None, help="With --fleet: start at this RFC 3339 time (not before asOf)."
)
@click.option(
    "--until", default="+0m", show_default=True, help="With --fleet: play until this offset or time."
)
@click.option("--tick", default=None, help="With --fleet: also a pass every DURATION (e.g. 5m).")
def command(
    scenario: str | None, fmt: str, git_dir: str | None, fleet_repo: str | None, rev: str | None,
    now_text: str | None, until: str, tick: str | None,
) -> None:  # fmt: skip
    """Play SCENARIO (or the fleet repository --fleet) with a virtual clock and print checkpoints, final state and ledger."""
    if (scenario is None) == (fleet_repo is None):
        raise click.UsageError("give a SCENARIO file or --fleet REPO (one of them)")
    if fleet_repo is None and (rev, now_text, tick) != (None, None, None):
        raise click.UsageError("--rev, --now and --tick go with --fleet; a scenario file sets its own times")
    if fleet_repo is not None:
        with batchgc.paused():
            play_fleet(fleet_repo, rev, now_text, until, tick, fmt, git_dir)
        return
    assert scenario is not None
    reading = prefetch.start(scenario)
    with batchgc.paused():
        play_and_print(scenario, fmt, git_dir, reading.result())


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def play_fleet(
    repo: str,
    rev: str | None,
    now_text: str | None,
    until: str,
    tick: str | None,
    fmt: str,
    git_dir: str | None,
) -> None:
    """`simulate --fleet`: the repository as the scenario it is (`simulation.from_fleet`), played."""
    from reconciler.passes.simulation import from_fleet
    from schemas.common import parse_time

    try:
        now = parse_time(now_text) if now_text is not None else None
    except ValueError as err:
        raise click.UsageError(f"--now {now_text!r}: {err}") from err
    start = from_fleet(repo, rev, now, until, tick)
    if start.scenario is None:
        for e in start.errors:
            click.echo(e, err=True)
        sys.exit(exitcodes.INVALID)
    _play(start.scenario, start.raw, fmt, git_dir, start.state)


def render_text(result: dict[str, Any], sim_timeline: list[str]) -> str:
    lines = [f"scenario {result['scenario']}"]
    lines += sim_timeline
    for label, st in result["checkpoints"].items():
        lines.append(f"checkpoint {label} at {st['at']}:")
        for run, s in st["runs"].items():
            lines.append(
                f"  {run:<32} {s['phase']:<10} {s['width'].get('allocated', 0):>6} GPUs  {s['message']}"
            )
        for key, r in st["reservations"].items():
            rs = r["status"]
            eta = r["spec"]["earliestStart"] or "unknown (nothing known makes it startable)"
            lines.append(f"  reservation {key}: {rs['state']} earliestStart {eta} — {rs['reason']}")
    return "\n".join(lines) + "\n"


def play_and_print(
    scenario: str, fmt: str, git_dir: str | None, read: tuple[list[Document], list[BadDocument]] | None = None
) -> None:
    """The `jobtree simulate` verb's work: play the file and print it as `fmt` (exits on errors)."""
    from reconciler.passes.simulation import load_scenario

    sc, raw, errors = load_scenario(scenario, read)
    if sc is None:
        for e in errors:
            click.echo(e, err=True)
        sys.exit(exitcodes.INVALID)
    _play(sc, raw, fmt, git_dir)


def _play(
    sc: Scenario, raw: dict[str, Any], fmt: str, git_dir: str | None, state: FleetState | None = None
) -> None:
    """Play a loaded scenario (from `state`: the state before its first pass) and print it as `fmt`."""
    from reconciler.passes.history import History
    from reconciler.passes.pipeline import InvariantViolation
    from reconciler.passes.simulation import Simulation

    sim = Simulation(sc, raw)
    if state is not None:
        sim.state = state
    if git_dir is not None:
        try:
            sim.history = History(git_dir)
        except ValueError as err:
            raise click.UsageError(str(err)) from err
    try:
        result = sim.play()
    except InvariantViolation as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exitcodes.OTHER)
    if sim.history is not None:
        h = sim.history
        click.echo(
            f"wrote {_count(h.commits, 'pass', 'passes')} as state commits, after "
            f"{_count(h.spec_commits, 'commit')} of the spec files they planned, to {git_dir} (branch main)",
            err=True,
        )
    if fmt == "json":
        sys.stdout.flush()
        sys.stdout.buffer.write(jsonout.dumps(result))
    else:
        sys.stdout.write(render_text(result, sim.timeline))
