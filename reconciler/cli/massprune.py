"""The options `jobtree apply` and `jobtree reconcile --apply` share to prune most of a cluster's running pods at once.

Declares them only: `reconciler.passes.apply.prune_limit` turns them into the share
`reconciler.cluster.massprune` holds prunes back at.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])


def options(lead: str = "") -> Callable[[F], F]:
    """`--allow-mass-prune` and `--prune-share`, their help opening with `lead` ("With --apply: ")."""

    def add(command: F) -> F:
        command = click.option(
            "--prune-share", type=click.FloatRange(0.0, 1.0), default=None, metavar="FRACTION",
            help=f"{lead}The largest share of a cluster's running pods one pass prunes (default 0.5).",
        )(command)  # fmt: skip
        return click.option(
            "--allow-mass-prune", is_flag=True,
            help=f"{lead}Prune however many running pods the commit drops (else at most --prune-share).",
        )(command)  # fmt: skip

    return add
