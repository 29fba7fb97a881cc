"""`jobtree validate`: read a fleet repository (folder or commit), print every problem, exit 0 / 3 / 2.

A thin shell over `schemas.fleetcheck.check_fleet`; it decides nothing and writes nothing.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import click

from reconciler.cli import exitcodes
from reconciler.spec import files as gitread
from reconciler.spec import validated
from schemas import advice
from schemas.common import parse_time
from schemas.diagnostics import Diagnostic
from schemas.fleetcheck import ValidatedFleet

JSON_VERSION = 1


def read_fleet(repo: str, rev: str | None) -> Mapping[str, bytes]:
    """The spec files of `repo`, at `rev` when given; raises click.UsageError with a clear message."""
    try:
        return gitread.read_tree(repo, rev) if rev is not None else gitread.read_worktree(repo)
    except gitread.GitReadError as err:
        raise click.UsageError(str(err)) from None
    except OSError as err:
        raise click.UsageError(f"cannot read {repo}: {err.strerror or err}") from None


def _escape(text: str, prop: bool = False) -> str:
    """GitHub workflow-command escaping (properties also escape ':' and ',')."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def github_line(d: Diagnostic) -> str:
    level = "warning" if d.severity == "warning" else "error"
    return f"::{level} file={_escape(d.path, True)},line={d.line},col={d.col},title={_escape(d.code, True)}::{_escape(d.message)}"


def render_text(fleet: ValidatedFleet) -> str:
    return "".join(f"{d}\n" for d in sorted([*fleet.diagnostics, *fleet.warnings]))


def render_github(fleet: ValidatedFleet) -> str:
    return "".join(f"{github_line(d)}\n" for d in sorted([*fleet.diagnostics, *fleet.warnings]))


def render_json(fleet: ValidatedFleet) -> str:
    doc = {
        "version": JSON_VERSION,
        "valid": fleet.valid,
        "objects": [o.as_json() for o in fleet.objects],
        "diagnostics": [d.as_json() for d in fleet.diagnostics],
        "warnings": [d.as_json() for d in fleet.warnings],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def summary(fleet: ValidatedFleet) -> str:
    total = len(fleet.objects)
    bad = sum(1 for o in fleet.objects if not o.valid)
    w = len(fleet.warnings)
    if fleet.valid:
        return f"fleet valid: {total} objects" + (f" ({w} warning{'s' * (w != 1)})" if w else "")
    n = len(fleet.diagnostics)
    return f"fleet invalid: {n} problem{'s' * (n != 1)}; {bad} of {total} objects excluded from planning"


RENDER = {"text": render_text, "github": render_github, "json": render_json}


def _a_fleet(repo: str, rev: str | None, files: Mapping[str, bytes]) -> None:
    """Exit 2 when `repo` is not a fleet repository at all (no `jobtree.yaml`, no `budgets/`,
    `runs/` or `inventory/`), naming the folders below it that are, instead of a problem for every
    YAML file in it. A fleet that lost its `jobtree.yaml` is still validated (JT020, exit 3)."""
    if any(path == "jobtree.yaml" or path.split("/", 1)[0] in FLEET_FOLDERS for path in files):
        return
    where = f"{repo} at {rev}" if rev is not None else repo
    found = [] if rev is not None else sorted(
        str(p.parent.relative_to(repo)) for depth in ("*", "*/*") for p in Path(repo).glob(f"{depth}/jobtree.yaml")
    )  # fmt: skip
    hint = f"; did you mean {' or '.join(f'jobtree validate {f}' for f in found[:3])}?" if found else ""
    click.echo(
        f"jobtree validate: {where} has no jobtree.yaml (and no budgets/, runs/ or inventory/): it is not a "
        f"fleet repository{hint}",
        err=True,
    )
    sys.exit(exitcodes.USAGE)


FLEET_FOLDERS = ("budgets", "runs", "inventory")


@click.command("validate")
@click.argument("repo", default=".", required=False)
@click.option("--rev", default=None, help="Validate the files at this commit, branch or tag (no checkout).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(sorted(RENDER)),
    default="text",
    show_default=True,
    help="text: path:line:col: CODE message; github: workflow annotations; json: every object's verdict.",
)
@click.option(
    "--now", "now_text", default=None, help="Judge budget windows as of this RFC 3339 time, not the clock."
)
def command(repo: str, rev: str | None, fmt: str, now_text: str | None) -> None:
    """Check a fleet repository: schemas, tenancy, budgets and runs. Exit 0 valid, 3 invalid, 2 usage."""
    try:
        now = parse_time(now_text) if now_text is not None else int(time.time())
    except ValueError as err:
        raise click.UsageError(f"--now {now_text!r}: {err}") from err
    files = read_fleet(repo, rev)
    _a_fleet(repo, rev, files)
    try:
        seen = gitread.cluster_folders(repo, rev)
        observed = gitread.observed_files(repo, rev)
    except (gitread.GitReadError, OSError):
        seen, observed = None, {}  # read_fleet read the spec: a folder it cannot list only skips JT081/JT072
    try:
        flavors = advice.observed_flavors(observed)
        labels = advice.observed_labels(observed, "cluster")
        fleet = validated.check(
            files, clusters_seen=seen, flavors_seen=flavors, cluster_labels=labels, now=now
        )
    except Exception as err:  # noqa: BLE001 - the contract is "no traceback on any input"; exit 4 names the bug
        click.echo(
            f"jobtree validate: internal error ({type(err).__name__}: {err}); please report it", err=True
        )
        sys.exit(exitcodes.OTHER)
    click.echo(RENDER[fmt](fleet), nl=False)
    click.echo(summary(fleet), err=True)
    sys.exit(exitcodes.OK if fleet.valid else exitcodes.INVALID)
