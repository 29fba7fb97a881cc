"""`kubectl runs submit -f FILE [-n NAMESPACE] [--replace]`: a run proposed as a pull request, with the plan of it.

The file (YAML, or JSON turned into YAML) is validated by the validator against the fleet (exit 3
on any problem it brings, each on its own line), written to `runs/<namespace>/<name>.yaml` on a new
branch `runs/<namespace>/<name>`, committed as you, pushed; then the plan of the change is printed
(the report `jobtree plan` posts on pull requests) and where to open the pull request. With
`GITHUB_TOKEN` set the pull request is opened, its body the plan. The work is
`reconciler.passes.propose`'s; `show` prints a proposal for `shrink` and `grow` too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from reconciler.cli import exitcodes
from reconciler.cli.runs import common
from reconciler.git import errors
from reconciler.passes import pr, propose
from reconciler.report import render as planreport
from reconciler.spec import runfile
from reconciler.views import fleet as fleetview

PUSH_TOKEN_ENVS = ("JOBTREE_GIT_TOKEN", "GITHUB_TOKEN")  # HTTPS push credentials, in this order
PR_TOKEN_ENV = "GITHUB_TOKEN"


def proposal_options(f: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--branch", default=None, help="The branch to push (default: runs/<namespace>/<name>)."
            ),
            click.option("--remote", default="origin", show_default=True, help="Where to push the branch."),
            click.option(
                "--dry-run", is_flag=True, help="Validate and plan only: no branch, nothing pushed."
            ),
        ]
    ):
        f = option(f)
    return f


@click.command("submit")
@click.option(
    "-f", "--file", "path", required=True, type=click.Path(dir_okay=False), help="The Run, YAML or JSON."
)
@click.option("-n", "--namespace", default=None, help="The run's namespace, when the file names none.")
@click.option("--replace", is_flag=True, help="Replace a run of that name that exists already.")
@proposal_options
@common.fleet_options
@common.reading
def command(
    path: str, namespace: str | None, replace: bool, branch: str | None, remote: str, dry_run: bool,
    repo: str | None, rev: str | None, fmt: str, now_text: str | None,
) -> None:  # fmt: skip
    """Submit a run: validate it, push it on a branch of its own, print its plan and where to open
    the pull request (opened for you with GITHUB_TOKEN set)."""
    now = common.now_of(now_text)
    try:
        given = Path(path).read_bytes()
    except OSError as err:
        raise click.UsageError(f"cannot read {path}: {err.strerror or err}") from None
    fleet = common.open_fleet(repo, rev)
    try:
        sub = runfile.submitted(given)
    except runfile.Unreadable as err:
        common.fail(f"{path}: {err}", exitcodes.INVALID)
    if sub.kind != "Run" or not sub.name:
        common.fail(
            f"{path}: submit takes a Run with metadata.name (found kind {sub.kind!r})", exitcodes.INVALID
        )
    ns = sub.namespace or namespace or _namespace_of(fleet, given)
    if namespace is not None and sub.namespace is not None and namespace != sub.namespace:
        raise click.UsageError(f"{path} says namespace {sub.namespace}, not -n {namespace}")
    if ns is None:
        raise click.UsageError(f"{path} names no namespace: pass -n NAMESPACE")
    text = sub.text if sub.namespace else _with_namespace(sub.text, ns)
    key = f"{ns}/{sub.name}"
    held = fleet.run_file(key) if key in fleet.run_keys else None
    if held is not None and not replace:
        common.fail(f"a run {key} exists already ({held[0]}): pass --replace to replace it", exitcodes.USAGE)
    target = held[0] if held is not None else f"runs/{ns}/{sub.name}.yaml"
    verb = "replace" if held is not None else "submit"
    run_proposal(
        fleet, key, target, text, f"runs: {verb} {key}\n\nSubmitted with kubectl runs submit -f {Path(path).name}.\n",
        f"runs: {verb} {key}", branch, remote, dry_run, now, now_text is not None, fmt,
    )  # fmt: skip


def _namespace_of(fleet: fleetview.Fleet, given: bytes) -> str | None:
    """The one tenant namespace whose owner is the run's owner, for a file that names no namespace."""
    from schemas.yamldoc import parse_all

    docs, _ = parse_all(given, "submitted", positions=False)
    owner = (
        ((docs[0].data or {}).get("spec") or {}).get("owner")
        if len(docs) == 1 and isinstance(docs[0].data, dict)
        else None
    )
    found = [ns for ns, o in fleet.tenants.items() if o == owner]
    return found[0] if len(found) == 1 else None


def _with_namespace(text: bytes, ns: str) -> bytes:
    try:
        return runfile.with_namespace(text, ns)
    except runfile.EditRefused as err:
        raise click.UsageError(str(err)) from None


def run_proposal(
    fleet: fleetview.Fleet, key: str, path: str, data: bytes, message: str, title: str, branch: str | None,
    remote: str, dry_run: bool, now: int, now_given: bool, fmt: str,
) -> None:  # fmt: skip
    """Propose `data` at `path` for run `key` and print what happened (exits 3 on problems, 2 on a
    branch that exists, 4 on any other failure)."""
    name = None if dry_run else branch or f"runs/{key}"
    token = next((os.environ[e] for e in PUSH_TOKEN_ENVS if os.environ.get(e)), None)
    try:
        done = propose.propose(
            fleet.repo, run=key, base=fleet.sha, base_branch=fleetview.fleet_branch(fleet.repo), path=path,
            data=data, message=message, title=title, branch=name, now=now, now_given=now_given, remote=remote,
            token=token, github_token=os.environ.get(PR_TOKEN_ENV) or None,
        )  # fmt: skip
    except propose.Invalid as err:
        click.echo(f"kubectl runs: {path} is refused; the validator says:", err=True)
        for problem in err.problems:
            click.echo(f"  {problem}", err=True)
        sys.exit(exitcodes.INVALID)
    except propose.BranchTaken as err:
        common.fail(f"{err}: pass --branch NAME to push another", exitcodes.USAGE)
    except pr.HandEdited as err:
        common.fail(f"cannot plan on this base: {err}", exitcodes.INVALID)
    except (pr.PlanFailure, errors.GitStoreError) as err:
        common.fail(str(err), exitcodes.OTHER)
    show(done, fmt)


def show(done: propose.Proposal, fmt: str) -> None:
    if fmt == "json":
        common.emit({"version": 1, "kind": "Proposal"} | done.as_json(), fmt, lambda d: "")
        return
    if done.branch is None:
        click.echo(f"{done.path} for {done.run} is valid (dry run: no branch made, nothing pushed).")
    elif done.pushed:
        click.echo(f"Pushed {done.branch} to {done.remote}: {done.path} ({done.commit[:12]}).")
    else:
        click.echo(f"Committed {done.path} on {done.branch} ({done.commit[:12]}).")
    click.echo(f"\nThe plan of this change against {done.base_branch} ({done.base[:12]}):")
    click.echo(planreport.as_text(done.report, done.report["diagnostics"]), nl=False)
    if done.pull_request:
        click.echo(f"\nPull request: {done.pull_request}")
    elif done.compare_url:
        click.echo(f"\nOpen the pull request: {done.compare_url}")
    for note in done.notes:
        click.echo(note if done.pull_request or done.compare_url else f"\n{note}")
