"""What `jobtree map` and `jobtree timeline` share: the repository and revision options, and writing the SVG.

Exit 2 for a folder outside a repository or an unknown revision, 4 for a file that cannot be written.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from reconciler.cli import exitcodes
from reconciler.git import errors
from reconciler.views import fleet as fleetview


def options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "-o", "--output", default=None, type=click.Path(dir_okay=False), help="Write the SVG here."
    )(f)
    f = click.option(
        "--rev",
        default=None,
        help="The commit to draw (default: the fleet branch, as `kubectl runs` reads it).",
    )(f)
    return click.argument("repo", default=".", type=click.Path(file_okay=False))(f)


def fleet(repo: str, rev: str | None) -> fleetview.Fleet:
    try:
        return fleetview.open_fleet(repo, rev)
    except fleetview.WhereError as err:
        raise click.UsageError(str(err)) from None
    except errors.GitStoreError as err:
        click.echo(f"jobtree: {err}", err=True)
        sys.exit(exitcodes.OTHER)


def write(picture: str, output: str | None) -> None:
    if output is None:
        click.echo(picture, nl=False)
        return
    try:
        Path(output).write_text(picture, encoding="utf-8")
    except OSError as err:
        click.echo(f"jobtree: cannot write {output}: {err.strerror or err}", err=True)
        sys.exit(exitcodes.OTHER)
