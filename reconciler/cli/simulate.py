"""`jobtree simulate SCENARIO [--format json|text] [--git DIR]`: the verb; the engine is `simulation`.

This module stays light on purpose: a big scenario file is parsed in a child process
(`prefetch`) while the engine's modules (pydantic models, the planner: about half a second)
import here, so the two CPUs of a small machine overlap the two.
"""

from __future__ import annotations

import click

from reconciler.perf import batchgc, prefetch


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
    from reconciler.passes import simulation  # imported while the child parses (see the module docstring)

    with batchgc.paused():
        simulation.play_and_print(scenario, fmt, git_dir, reading.result())
