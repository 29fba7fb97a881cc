"""`jobtree timeline [REPO] [--rev REV] [-o FILE]`: the reservation timeline SVG of a commit.

The same picture every reconcile writes as `state/timeline.svg` (`reconciler.state.timeline`).
"""

from __future__ import annotations

import click

from reconciler.cli import pictures
from reconciler.views import pictures as drawn


@click.command("timeline")
@pictures.options
def command(repo: str, rev: str | None, output: str | None) -> None:
    """Draw the reservation timeline of REPO: each waiting run's earliest start, the window it waits
    for and the runs its activation may cut. SVG on stdout, or in --output FILE."""
    pictures.write(drawn.reservations(pictures.fleet(repo, rev)), output)
