"""`jobtree simulate SCENARIO [--format json|text] [--git DIR]`: the verb; the engine is `passes.simulation`.

This module stays light on purpose: a big scenario file is parsed in a child process
(`perf.prefetch`) while the engine's modules (pydantic models, the planner: about half a second)
are imported by `play_and_print`, so the two CPUs of a small machine overlap the two.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from reconciler.cli import exitcodes, jsonout
from reconciler.perf import batchgc, prefetch
from schemas.yamldoc import BadDocument, Document


@click.command("simulate")
@click.argument("scenario", type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["json", "text"]), default="text", show_default=True)
@click.option(
    "--git", "git_dir", type=click.Path(file_okay=False), default=None,
    help="Also write each pass as a commit to a new repository in this directory.",
)  # fmt: skip
def command(scenario: str, fmt: str, git_dir: str | None) -> None:
    """Play SCENARIO with a virtual clock and print checkpoints, final state and ledger."""
    reading = prefetch.start(scenario)
    with batchgc.paused():
        play_and_print(scenario, fmt, git_dir, reading.result())


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


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
    from reconciler.passes.history import History
    from reconciler.passes.pipeline import InvariantViolation
    from reconciler.passes.simulation import Simulation, load_scenario

    sc, raw, errors = load_scenario(scenario, read)
    if sc is None:
        for e in errors:
            click.echo(e, err=True)
        sys.exit(exitcodes.INVALID)
    sim = Simulation(sc, raw)
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
