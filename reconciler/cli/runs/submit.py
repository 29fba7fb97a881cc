"""`kubectl runs submit -f FILE [-n NAMESPACE] [--replace]`: a run proposed as a pull request, with the plan of it.

The file (YAML, or JSON turned into YAML) is validated by the validator against the fleet (exit 3
on any problem it brings, each on its own line), written to `runs/<namespace>/<name>.yaml` on a new
branch `runs/<namespace>/<name>`, committed as you, pushed; then the plan of the change is printed
(the report `jobtree plan` posts on pull requests) and where to open the pull request. With
`GITHUB_TOKEN` set the pull request is opened, its body the plan. The work is
`reconciler.passes.propose`'s; `show` prints a proposal for `shrink` and `grow` too.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from reconciler.cli import exitcodes
from reconciler.cli.runs import common
from reconciler.git import branch as gitbranch
from reconciler.git import errors
from reconciler.git import remote as gitremote
from reconciler.passes import pr, propose
from reconciler.report import render as planreport
from reconciler.spec import runfile
from reconciler.views import fleet as fleetview
from schemas import load
from schemas.common import format_time

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
    _readable(path, given)
    fleet = fresh_fleet(repo, rev, remote, dry_run)
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
    if sub.converted:  # JSON: the validator reads it as given, so each problem is at the line written
        _refuse(
            path, propose.problems_brought(fleet.repo, fleet.sha, target, _json_at(given, ns)), target, None
        )
    _draft_note(fleet, path, target)
    run_proposal(
        fleet, key, target, text, f"runs: {verb} {key}\n\nSubmitted with kubectl runs submit -f {Path(path).name}.\n",
        f"runs: {verb} {key}", branch, remote, dry_run, now, now_text is not None, fmt,
        as_given=(path, given),
    )  # fmt: skip


def _readable(path: str, given: bytes) -> None:
    """Exit 3 with the validator's own words, at the line and column of the file as given, when it
    is not one readable YAML or JSON document (a tab, a bad indent, broken JSON)."""
    if given.lstrip().startswith(b"{"):
        try:
            json.loads(given)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            where = f"{err.lineno}:{err.colno}" if isinstance(err, json.JSONDecodeError) else "1:1"
            why = err.msg if isinstance(err, json.JSONDecodeError) else "the file is not UTF-8 text"
            _refuse(path, [f"{path}:{where}: JT001 not valid JSON: {why}"], path, None)
        return
    _, bad = load.load_documents(path, given)
    _refuse(path, [str(d) for d in bad], path, None)


def _json_at(given: bytes, namespace: str) -> bytes:
    """A JSON Run as the validator reads it, with the namespace it is submitted to when it names none
    (then its lines are those of the file re-indented)."""
    obj = json.loads(given)
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(meta, dict) and not meta.get("namespace"):
        meta["namespace"] = namespace
        return json.dumps(obj, indent=2).encode()
    return given


def _refuse(path: str, problems: list[str], target: str, lines: dict[int, int] | None) -> None:
    """Exit 3 naming each problem at `path`, the person's file (what the validator says of `target`,
    its place in the fleet; `lines`: target line -> line of the file as given)."""
    if not problems:
        return
    click.echo(f"kubectl runs: {path} is refused; the validator says:", err=True)
    for problem in problems:
        click.echo(f"  {_at_given(problem, target, path, lines)}", err=True)
    sys.exit(exitcodes.INVALID)


def _at_given(problem: str, target: str, path: str, lines: dict[int, int] | None) -> str:
    found = re.match(rf"{re.escape(target)}:(\d+):(\d+): (.*)", problem, re.S)
    if found is None:
        return problem
    line = int(found[1])
    return f"{path}:{(lines or {}).get(line, line)}:{found[2]}: {found[3]}"


def _line_map(committed: bytes, given: bytes) -> dict[int, int]:
    """Line of `committed` -> line of `given` it came from (a line submit added: the one before it)."""
    theirs = given.decode("utf-8", "replace").splitlines()
    ours = committed.decode("utf-8", "replace").splitlines()
    out: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ours, theirs, autojunk=False).get_opcodes():
        for k in range(i1, i2):
            if tag == "delete":  # a line submit added: shown at the line it follows
                out[k + 1] = max(1, j1)
            else:  # the same line, or a rewritten one: its counterpart in the file as given
                out[k + 1] = j1 + min(k - i1, j2 - j1 - 1) + 1
    return out


def _draft_note(fleet: fleetview.Fleet, path: str, target: str) -> None:
    """Say so when the file submitted lies in the fleet's clone where jobtree reads no run (a draft
    beside `jobtree.yaml`): `jobtree validate` there would flag it (JT004)."""
    try:
        inside = Path(path).resolve().relative_to(fleet.folder.resolve()).as_posix()
    except ValueError:
        return
    if inside != target:
        click.echo(
            f"kubectl runs: note: {path} is a draft inside the fleet's clone, where jobtree reads no run: "
            f"`jobtree validate` flags it (JT004) until you delete it or keep drafts outside the clone",
            err=True,
        )


def fresh_fleet(repo: str | None, rev: str | None, remote: str, dry_run: bool) -> fleetview.Fleet:
    """The fleet to propose against: the fleet branch fetched from `remote` first (unless --rev
    names a commit), so a change is planned on what is there now, not on what was last fetched.
    A fetch that fails stops a proposal (exit 4; its push would fail too), and a dry run says so
    and plans on what was last fetched."""
    fleet = common.open_fleet(repo, rev)
    if rev is not None or gitbranch.remote_url(fleet.repo, remote) is None:
        return fleet
    token = next((os.environ[e] for e in PUSH_TOKEN_ENVS if os.environ.get(e)), None)
    branch = fleetview.fleet_branch(fleet.repo)
    try:
        gitremote.fetch(fleet.repo, remote, branch, token=token)
    except errors.GitStoreError as err:
        if not dry_run:
            common.fail(
                f"cannot fetch {branch} from {remote} to plan on the newest fleet: {err}", exitcodes.OTHER
            )
        click.echo(
            f"kubectl runs: note: could not fetch {remote} ({err}); planned on what was last fetched",
            err=True,
        )
        return fleet
    return common.open_fleet(repo, rev)


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
    remote: str, dry_run: bool, now: int, now_given: bool, fmt: str, as_given: tuple[str, bytes] | None = None,
) -> None:  # fmt: skip
    """Propose `data` at `path` for run `key` and print what happened (exits 3 on problems, 2 on a
    branch that exists, 4 on any other failure). `as_given`: the person's file and its bytes, which
    problems are reported against (their name, their lines)."""
    name = None if dry_run else branch or f"runs/{key}"
    token = next((os.environ[e] for e in PUSH_TOKEN_ENVS if os.environ.get(e)), None)
    try:
        done = propose.propose(
            fleet.repo, run=key, base=fleet.sha, base_branch=fleetview.fleet_branch(fleet.repo), path=path,
            data=data, message=message, title=title, branch=name, now=now, now_given=now_given, remote=remote,
            token=token, github_token=os.environ.get(PR_TOKEN_ENV) or None,
        )  # fmt: skip
    except propose.Invalid as err:
        if as_given is None:
            _refuse(path, err.problems, path, None)
        else:
            _refuse(as_given[0], err.problems, path, _line_map(data, as_given[1]))
    except propose.BranchTaken as err:
        common.fail(f"{err}: pass --branch NAME to push another", exitcodes.USAGE)
    except pr.HandEdited as err:
        common.fail(f"cannot plan on this base: {err}", exitcodes.INVALID)
    except (pr.PlanFailure, errors.GitStoreError) as err:
        common.fail(str(err), exitcodes.OTHER)
    show(done, fmt, fleet, now)


def show(done: propose.Proposal, fmt: str, fleet: fleetview.Fleet, now: int) -> None:
    if fmt in (common.JSON, common.YAML, common.NAME):
        doc = {"version": 1, "kind": "Proposal", "rev": fleet.rev, "now": format_time(now)} | done.as_json()
        common.emit(doc, fmt, lambda d: "", names=lambda d: [f"run/{d['run']}"])
        return
    if done.branch is None:
        click.echo(f"{done.path} for {done.run} is valid (dry run: no branch made, nothing pushed).")
    elif done.pushed and done.updated:
        click.echo(
            f"Pushed {done.branch} to {done.remote}: {done.path} ({done.commit[:12]}), a new commit on your "
            "open branch (its pull request shows it)."
        )
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
