"""`kubectl runs …` (and `jobtree runs …`): the researcher's verbs, one module each, loaded lazily.

Installed as the kubectl plugin `kubectl-runs`, this group is the top level (`kubectl runs submit
-f run.yaml`); under `jobtree` it is the `runs` verb. The verbs read the fleet repository through
`reconciler.views` and write runs through `reconciler.passes.propose`; `common` holds what they share.
"""

from __future__ import annotations

import importlib

import click

VERBS = {
    "get": "reconciler.cli.runs.get",
    "plan": "reconciler.cli.runs.plan",
    "watch": "reconciler.cli.runs.watch",
    "explain": "reconciler.cli.runs.explain",
    "leases": "reconciler.cli.runs.leases",
    "budgets": "reconciler.cli.runs.budgets",
    "sponsors": "reconciler.cli.runs.sponsors",
    "submit": "reconciler.cli.runs.submit",
    "shrink": "reconciler.cli.runs.resize:shrink",
    "grow": "reconciler.cli.runs.resize:grow",
}  # verb -> module exposing `command` (or `module:attribute`)


class _Lazy(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(VERBS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        where = VERBS.get(name)
        if where is None:
            return None
        mod, _, attribute = where.partition(":")
        command: click.Command = getattr(importlib.import_module(mod), attribute or "command")
        return command


@click.group("runs", cls=_Lazy, context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """The researcher's verbs: submit runs, see their plan, watch them, ask why.

    Each reads a clone of the fleet repository (--repo, else $JOBTREE_REPO, else the repository
    around the working directory) at the fleet branch as last fetched (--rev to choose). RUN is
    NAME (in -n NAMESPACE, else the one namespace that has it) or NAMESPACE/NAME, with or without
    `run/` before it (as -o name prints it). Output as kubectl's: -o text, wide, name, json or yaml.
    Exit codes: 0 success, 2 usage (an unknown run: the closest names are said), 3 invalid run
    files (submit, shrink, grow), 4 any other failure."""
