"""`jobtree reconcile [REPO] [--once | --interval 60s] [--now T] [--push] [--apply]`: the verb; the loop is `schedule`, a pass `reconciliation`.

This module stays light on purpose: on a clone with no parse cache yet (a first pass, a fresh CI
clone), the spec files at HEAD are parsed in a forked child (`specprefetch`) while the engine's
modules (pydantic models, the planner: most of a second) import here, so both CPUs of a small
machine work from the start.
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.spec import parsed as specprefetch


@click.command("reconcile")
@click.argument("repo", default=".", type=click.Path(file_okay=False))
@click.option("--once", is_flag=True, help="One pass, then exit (the default without --interval).")
@click.option("--interval", default=None, help="Keep reconciling every DURATION (e.g. 60s), and when due.")
@click.option("--now", "now_text", default=None, help="Plan as of this RFC 3339 time instead of the clock.")
@click.option("--push", is_flag=True, help="Push the state commit to the remote (compare-and-swap).")
@click.option("--apply", is_flag=True, help="Hand the pushed commit to the cluster stage.")
@click.option("--remote", default="origin", show_default=True)
@click.option("--branch", default=None, help="Branch to reconcile (default: git.branch of jobtree.yaml).")
@click.option(
    "--quiet", is_flag=True, help="No progress lines on stderr (problems in the fleet files still are)."
)
def command(**options: Any) -> None:
    """Reconcile the fleet repository REPO: plan, commit state/ and rendered/, optionally push.

    Problems in the fleet files are printed to stderr as `jobtree validate` prints them (even with
    --quiet: they are problems, not progress); the objects concerned are left out and the valid
    ones reconciled, so the exit code stays 0. An invalid jobtree.yaml or inventory/nodes.yaml (or
    an inventory missing or empty while leases are open) is different: every object depends on
    them, so the pass plans and commits nothing and exits 3 (what runs keeps running). With --interval a pass prints problems when they differ from the
    last pass's, not every time.
    """
    early = specprefetch.start(options["repo"])
    from reconciler.cli import schedule  # the engine, imported while the child parses (module docstring)

    schedule.run(**options, early=early)
