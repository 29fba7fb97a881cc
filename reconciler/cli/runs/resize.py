"""`kubectl runs shrink RUN --by N` and `grow RUN --by N`: a new desiredTotalGPUs, proposed as a pull request.

The run's file gets `spec.malleable.desiredTotalGPUs` set to its desired width (the maximum when
unset) minus or plus N, on a new branch, with every other byte of the file kept
(`reconciler.spec.runfile`); a width outside [minTotalGPUs, maxTotalGPUs] or not a multiple of
stepGPUs is refused (exit 2) naming the widths it may take. Then as `submit`: pushed, planned,
and where to open the pull request.
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.cli import exitcodes
from reconciler.cli.runs import common, submit
from reconciler.spec import runfile


def _resize(
    sign: int, run: str, by: int, namespace: str | None, branch: str | None, remote: str, dry_run: bool,
    repo: str | None, rev: str | None, fmt: str, now_text: str | None,
) -> None:  # fmt: skip
    verb = "shrink" if sign < 0 else "grow"
    now = common.now_of(now_text)
    fleet = submit.fresh_fleet(repo, rev, remote, dry_run)
    key = common.find_run(fleet, run, namespace)
    spec = fleet.specs.get(key)
    if spec is None:
        common.fail(
            f"{key} has no valid spec at {fleet.where()}: fix its file first (kubectl runs get {key})",
            exitcodes.INVALID,
        )
    m = spec.spec.malleable
    if m is None:
        common.fail(
            f"{key} is not malleable: its width is fixed at {spec.spec.resources.totalGPUs} GPUs (set "
            "spec.malleable to let it grow and shrink, or change totalGPUs and re-submit it)",
            exitcodes.USAGE,
        )
    desired = m.desiredTotalGPUs if m.desiredTotalGPUs is not None else m.maxTotalGPUs
    width = desired + sign * by
    allowed = list(range(-(-m.minTotalGPUs // m.stepGPUs) * m.stepGPUs, m.maxTotalGPUs + 1, m.stepGPUs))
    if width not in allowed:
        common.fail(
            f"{verb} {key} by {by}: {width} GPUs is not a width it may take: from its desired {desired}, "
            f"it may be {', '.join(map(str, allowed))} (minTotalGPUs {m.minTotalGPUs}, maxTotalGPUs "
            f"{m.maxTotalGPUs}, stepGPUs {m.stepGPUs})",
            exitcodes.USAGE,
        )
    held = fleet.run_file(key)
    if held is None:
        common.fail(f"the file of {key} is not in {fleet.where()}", exitcodes.OTHER)
    path, data = held
    try:
        edited = runfile.with_desired(data, width)
    except (runfile.EditRefused, runfile.Unreadable) as err:
        common.fail(f"{path}: {err}", exitcodes.OTHER)
    title = f"runs: {verb} {key} to {width} GPUs"
    message = f"{title}\n\ndesiredTotalGPUs {desired} -> {width} (kubectl runs {verb} --by {by}).\n"
    submit.run_proposal(
        fleet, key, path, edited, message, title, branch, remote, dry_run, now, now_text is not None, fmt
    )


def _by(words: str) -> Any:
    """`--by N`: a count of GPUs, 1 or more (click refuses 0 and negatives, saying so)."""
    return click.option("--by", type=click.IntRange(min=1), required=True, metavar="N", help=words)


@click.command("shrink")
@common.run_argument()
@_by("GPUs to give back: a positive multiple of stepGPUs.")
@common.namespace_option
@submit.proposal_options
@common.fleet_options
@common.reading
def shrink(
    run: str, by: int, namespace: str | None, branch: str | None, remote: str, dry_run: bool,
    repo: str | None, rev: str | None, fmt: str, now_text: str | None,
) -> None:  # fmt: skip
    """Lower RUN's desiredTotalGPUs by N on a branch, keeping its file's comments and layout; push it,
    print its plan and where to open the pull request."""
    _resize(-1, run, by, namespace, branch, remote, dry_run, repo, rev, fmt, now_text)


@click.command("grow")
@common.run_argument()
@_by("GPUs to add: a positive multiple of stepGPUs.")
@common.namespace_option
@submit.proposal_options
@common.fleet_options
@common.reading
def grow(
    run: str, by: int, namespace: str | None, branch: str | None, remote: str, dry_run: bool,
    repo: str | None, rev: str | None, fmt: str, now_text: str | None,
) -> None:  # fmt: skip
    """Raise RUN's desiredTotalGPUs by N on a branch, keeping its file's comments and layout; push it,
    print its plan and where to open the pull request."""
    _resize(1, run, by, namespace, branch, remote, dry_run, repo, rev, fmt, now_text)
