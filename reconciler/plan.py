"""`jobtree plan`: what merging HEAD would change against BASE, for a pull-request comment.

Reads both specs and the committed `state/` at BASE through pygit2 (no checkout), plans both at
the same `now` from that one state with the embedded cluster, and reports the difference
(`prdiff`, rendered by `planreport`). Writes nothing to Git. A head that edits `state/` or
`rendered/` in commits other than the reconciler's own is refused before anything is planned.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
import pygit2

from planner.world import FleetState
from reconciler import gitstore, pipeline, planreport, prdiff, statefiles
from reconciler.embedded import EmbeddedCluster, nodes_from_inventory
from reconciler.reconcile import SPEC_PREFIXES
from schemas.common import parse_time

EXIT_CHANGES, EXIT_USAGE, EXIT_INVALID, EXIT_OTHER = 1, 2, 3, 4


def _state_at(repo: pygit2.Repository, rev: str) -> FleetState:
    files = gitstore.read_files(repo, rev, ["state/"])
    return statefiles.decode({p: b for p, b in files.items() if not p.startswith("state/ledger/")})


def _domains(spec: pipeline.Spec) -> dict[str, str]:
    return {
        name: obs.labels.get("fabric.domain", "?")
        for name, obs in nodes_from_inventory(spec.inventory).items()
    }


@click.command("plan")
@click.argument("repo", default=".", type=click.Path(file_okay=False))
@click.option(
    "--base", required=True, help="The branch or commit the change would merge into (e.g. origin/main)."
)
@click.option("--head", default="HEAD", show_default=True, help="The change to plan.")
@click.option("--now", "now_text", default=None, help="Plan as of this RFC 3339 time instead of the clock.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True
)
@click.option("--exit-code", is_flag=True, help="Exit 1 when merging would change anything, 0 when not.")
@click.option(
    "--output", type=click.Path(dir_okay=False), default=None, help="Also write the full report here."
)
def command(
    repo: str, base: str, head: str, now_text: str | None, fmt: str, exit_code: bool, output: str | None
) -> None:
    """Plan the change HEAD makes to the fleet in REPO against BASE."""
    try:
        now = parse_time(now_text) if now_text else int(time.time())
    except ValueError as err:
        raise click.UsageError(f"--now {now_text!r}: {err}") from err
    try:
        git = gitstore.open_repo(repo)
        base_commit, head_commit = gitstore.resolve(git, base), gitstore.resolve(git, head)
    except gitstore.RevisionNotFound as err:
        raise click.UsageError(str(err)) from err
    except gitstore.GitStoreError as err:
        click.echo(f"jobtree: {err}", err=True)
        sys.exit(EXIT_OTHER)
    head_spec = pipeline.read_spec(gitstore.read_files(git, str(head_commit.id), SPEC_PREFIXES))
    edits = gitstore.hand_edited(
        git, str(base_commit.id), str(head_commit.id), reconciler_email=head_spec.fleet.git.author.email
    )
    if edits:
        click.echo(
            "jobtree: refusing to plan: state/ and rendered/ are written only by jobtree, but", err=True
        )
        for sha, path in edits:
            click.echo(f"  {path} (changed by hand in {sha[:12]})", err=True)
        click.echo(
            "revert those files to what the base branch holds; jobtree rewrites them after merge", err=True
        )
        sys.exit(EXIT_INVALID)
    base_spec = pipeline.read_spec(gitstore.read_files(git, str(base_commit.id), SPEC_PREFIXES))
    try:
        before = pipeline.run_pass(
            base_spec, EmbeddedCluster(base_spec.inventory), _state_at(git, str(base_commit.id)), now
        )
        after = pipeline.run_pass(
            head_spec, EmbeddedCluster(head_spec.inventory), _state_at(git, str(base_commit.id)), now
        )
    except pipeline.InvariantViolation as err:
        click.echo(f"jobtree: {err}", err=True)
        sys.exit(EXIT_OTHER)
    domains = {**_domains(base_spec), **_domains(head_spec)}
    report = prdiff.compare(
        before, after, domains, base=str(base_commit.id), head=str(head_commit.id), now=now
    )
    diagnostics = [str(d) for d in head_spec.diagnostics]
    report["diagnostics"] = diagnostics
    if fmt == "json":
        text = planreport.as_json(report)
    elif fmt == "markdown":
        text = planreport.as_markdown(report, diagnostics)
    else:
        text = planreport.as_text(report, diagnostics)
    click.echo(text, nl=False)
    if output:
        full = planreport.as_markdown(report, diagnostics, limit=10**9) if fmt == "markdown" else text
        Path(output).write_text(full)
    if diagnostics:
        sys.exit(EXIT_INVALID)
    if exit_code and report["changes"]:
        sys.exit(EXIT_CHANGES)
