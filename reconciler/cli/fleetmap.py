"""`jobtree map [REPO] [--rev REV] [-o FILE]`: the fleet map SVG (domains x nodes x GPU slots) of a commit.

The same picture every reconcile writes as `state/fleet.svg` (`reconciler.state.fleetmap`),
drawn here from any commit's `state/` (`reconciler.views.pictures`).
"""

from __future__ import annotations

import click

from reconciler.cli import pictures
from reconciler.views import pictures as drawn


@click.command("map")
@pictures.options
def command(repo: str, rev: str | None, output: str | None) -> None:
    """Draw the fleet map of REPO: every GPU slot of every node, coloured by run, role and who pays;
    hover a slot for its run. SVG on stdout, or in --output FILE."""
    pictures.write(drawn.fleet_map(pictures.fleet(repo, rev)), output)
