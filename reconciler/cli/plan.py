"""`jobtree plan [REPO] --base REV [--head REV] [--now T] [--format text|json|markdown] [--exit-code] [--output FILE]`.

The verb: options, printing and exit codes. The pass is `reconciler.passes.pr` (it returns the
report, or raises `PlanFailure` or `HandEdited`); the views are `reconciler.report.render`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from reconciler.cli import exitcodes
from reconciler.git import branch as gitbranch
from reconciler.git import errors, hosting
from reconciler.git import read as gitread
from reconciler.passes import pipeline, pr
from reconciler.perf import batchgc
from reconciler.report import model
from reconciler.report import render as planreport
from schemas.common import parse_time


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
    """Plan the change HEAD makes to the fleet in REPO against BASE.

    Exit 0 no change (or changes without --exit-code), 1 changes with --exit-code, 2 usage error
    (--now before the base's last pass included),
    3 fleet files this change makes invalid (problems the base already has are listed, not failed;
    an inventory it deletes or empties counts) or hand-edited state/ or rendered/, 4 any other failure."""
    try:
        now = parse_time(now_text) if now_text is not None else int(time.time())
    except ValueError as err:
        raise click.UsageError(f"--now {now_text!r}: {err}") from err
    try:
        git = gitread.open_repo(repo)
        base_commit, head_commit = gitread.resolve(git, base), gitread.resolve(git, head)
    except (errors.NotARepository, errors.RevisionNotFound) as err:
        raise click.UsageError(str(err)) from err
    except errors.GitStoreError as err:
        click.echo(f"jobtree: {err}", err=True)
        sys.exit(exitcodes.OTHER)
    try:
        with batchgc.paused(last=True):
            report = pr.plan(git, base_commit, head_commit, now, now_text is not None)
        diagnostics = report["diagnostics"]
        text = _render(report, diagnostics, fmt, _pictures(git, base_commit) if fmt == "markdown" else [])
    except pr.HandEdited as err:
        _refused(err)
        return
    except pr.PlanFailure as err:
        click.echo(f"jobtree plan: {err}", err=True)
        sys.exit(exitcodes.USAGE if isinstance(err, pr.NowBeforeBase) else exitcodes.OTHER)
    except (pipeline.InvariantViolation, errors.GitStoreError, OSError) as err:
        click.echo(f"jobtree plan: {err}", err=True)
        sys.exit(exitcodes.OTHER)
    except Exception as err:  # noqa: BLE001 - the contract is "no traceback"; exit 4 names the bug
        click.echo(f"jobtree plan: internal error ({type(err).__name__}: {err}); please report it", err=True)
        sys.exit(exitcodes.OTHER)
    click.echo(text, nl=False)
    if output:
        links = _pictures(git, base_commit) if fmt == "markdown" else []
        full = (
            planreport.as_markdown(report, diagnostics, limit=None, pictures=links)
            if fmt == "markdown"
            else text
        )
        try:
            Path(output).write_text(full, encoding="utf-8")
        except OSError as err:
            click.echo(f"jobtree plan: cannot write --output {output}: {err.strerror or err}", err=True)
            sys.exit(exitcodes.OTHER)
    if diagnostics:
        sys.exit(exitcodes.INVALID)
    if exit_code and report["changes"]:
        sys.exit(exitcodes.CHANGES)


def _refused(err: pr.HandEdited) -> None:
    """Exit 3 naming the owned files head changed by hand since where it left the base."""
    click.echo("jobtree: refusing to plan: state/ and rendered/ are written only by jobtree, but", err=True)
    for sha, path, why in err.found:
        because = f": {why}, so its state/ and rendered/ edits are refused" if why else ""
        click.echo(f"  {path} (changed by hand in {sha[:12]}{because})", err=True)
    where = f" (git checkout {err.fork[:12]} -- <file>, or git rm <file> for one the branch added)"
    click.echo(
        f"put those files back as they were where the branch left the base{where}, or drop those "
        "commits; jobtree rewrites state/ and rendered/ after merge",
        err=True,
    )
    sys.exit(exitcodes.INVALID)


def _render(
    report: model.Report, diagnostics: list[str], fmt: str, pictures: list[tuple[str, str, str | None]]
) -> str:
    if fmt == "json":
        return planreport.as_json(report)
    if fmt == "markdown":
        return planreport.as_markdown(report, diagnostics, pictures=pictures)
    return planreport.as_text(report, diagnostics)


PICTURES = (("fleet map", "state/fleet.svg"), ("reservation timeline", "state/timeline.svg"))


def _pictures(git: gitread.Repository, base: gitread.Commit) -> list[tuple[str, str, str | None]]:
    """The base's pictures, with their page on the Git host (`origin`, or GitHub Actions' variables)
    when it has one: the comment links them."""
    host = hosting.Repo.of(gitbranch.remote_url(git, "origin"))
    return [
        (what, path, host.blob(str(base.id), path) if host is not None else None)
        for what, path in PICTURES
        if gitread.entry_at(base.tree, path) is not None
    ]
