"""`jobtree plan`: what merging HEAD would change against BASE, for a pull-request comment.

Reads both specs and the committed `state/` at BASE through pygit2 (no checkout), plans both at
the same `now` from that one state with the embedded cluster, and reports the difference
(`prdiff`, rendered by `planreport`). Spec files are read as `reconcile` reads them (`speccache`:
parsed once per blob id, a broken budget file planned as its last valid version); nothing is
written to Git but the parse cache in the Git dir and, for a head that has not merged the base,
the merge commit planned (no ref names it). A head that edits `state/` or
`rendered/` in commits other than the reconciler's own is refused before anything is planned: its
own commits carry the fleet's git author and a `Spec-Commit` trailer and are reachable from the base
or from the fleet's branch (local or fetched), or, made elsewhere (`reconcile --branch pr`), hold
exactly what jobtree computes for them (`provenance`, at most `MAX_RECOMPUTED` per plan).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import pygit2
from pygit2.enums import SortMode

from planner.world import FleetState
from reconciler.cli import exitcodes
from reconciler.git import ownership as authorship
from reconciler.git import store as gitstore
from reconciler.passes import pipeline, provenance
from reconciler.passes.embedded import EmbeddedCluster, nodes_from_inventory
from reconciler.perf import batchgc, forkmap
from reconciler.report import compare as prdiff
from reconciler.report import render as planreport
from reconciler.spec import commit as speccache
from reconciler.state import codec as statefiles
from reconciler.state import handedits
from reconciler.state import memo as passmemo
from schemas import diagnostics as codes
from schemas.common import format_time, parse_time
from schemas.diagnostics import Diagnostic
from schemas.fleet import GitAuthor

MAX_RECOMPUTED = 20  # commits off the fleet's branch proven by recomputing a pass each (seconds apiece)


class PlanFailure(Exception):
    """Planning could not finish; the message says what is wrong and what to do (exit 4)."""

    exit_code = exitcodes.OTHER


class NowBeforeBase(PlanFailure):
    """`--now` is earlier than the base's last pass: a wrong option, so exit 2 like click's own."""

    exit_code = exitcodes.USAGE


def _state_at(repo: pygit2.Repository, commit: pygit2.Commit, email: str) -> FleetState:
    """The state `reconcile` would start from at `commit` (jobtree's last own state when files were
    changed by hand since): from the clone's pass cache when it describes that commit, else decoded
    (on every CPU). Both planning passes start from it: a pass works on copies."""
    commit = handedits.state_start(repo, commit, email).commit
    try:
        return (passmemo.cached(repo, commit) or passmemo.read(repo, commit)).state()
    except Exception as err:  # noqa: BLE001 - damaged machine-written files: name the file, never a traceback
        files = gitstore.read_files(repo, str(commit.id), ["state/"])
        files = {p: b for p, b in files.items() if not p.startswith("state/ledger/")}
        culprit = next((p for p in sorted(files) if not _decodes(p, files[p])), "state/")
        raise PlanFailure(
            f"cannot read {culprit} at base {str(commit.id)[:12]} ({type(err).__name__}: "
            f"{' '.join(str(err).split())[:200]}); state/ on the base branch is damaged: restore it from "
            "history (git log -- state/) and let jobtree reconcile rewrite it"
        ) from None


def _decodes(path: str, data: bytes) -> bool:
    try:
        statefiles.decode({path: data})
    except Exception:  # noqa: BLE001 - probing which file is damaged
        return False
    return True


def _domains(spec: pipeline.Spec) -> dict[str, str]:
    return {
        name: obs.labels.get("fabric.domain", "?")
        for name, obs in nodes_from_inventory(spec.inventory).items()
    }


def _changed(repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree) -> set[str]:
    diff = old.diff_to_tree(new) if old is not None else new.diff_to_tree(swap=True)
    return {p for d in diff.deltas for p in (d.old_file.path, d.new_file.path) if p}


def branch_tips(repo: pygit2.Repository, branch: str) -> list[str]:
    """Where the reconciler's own commits are: its branch as fetched from each remote
    (`refs/remotes/<remote>/<branch>`), or here in a clone with no remote (`refs/heads/<branch>`).
    Not a local branch beside a remote: anyone can point that at anything. A state commit of
    jobtree's not yet on a remote is proven by recomputing it instead (`provenance`)."""
    remotes = list(repo.remotes.names())
    names = [f"refs/remotes/{r}/{branch}" for r in remotes] if remotes else [f"refs/heads/{branch}"]
    tips = []
    for name in names:
        ref = repo.references.get(name)
        if ref is not None and isinstance(ref.target, pygit2.Oid):
            tips.append(str(ref.target))
    return tips


def _spec_is_ancestor(repo: pygit2.Repository, commit: pygit2.Commit, spec: str) -> bool:
    if any(str(p.id) == spec for p in commit.parents):
        return True  # the usual case, no history walk
    try:
        return bool(repo.descendant_of(commit.id, pygit2.Oid(hex=spec)))
    except (KeyError, ValueError, pygit2.GitError):
        return False  # a commit this repository does not hold


def disguised_edits(repo: pygit2.Repository, base: str, head: str, email: str) -> list[tuple[str, str, str]]:
    """`(commit, path, why)` for owned paths changed by commits that claim to be the reconciler's (its
    email and a `Spec-Commit` trailer) but cannot be: it writes one-parent commits touching only
    state/ and rendered/, computed from the spec commit its trailer names, an ancestor."""
    walker = repo.walk(gitstore.resolve(repo, head).id, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    walker.hide(gitstore.resolve(repo, base).id)
    found: list[tuple[str, str, str]] = []
    for commit in walker:
        if not authorship.claims_reconciler(commit, email):
            continue
        per_parent = [_changed(repo, p.tree, commit.tree) for p in commit.parents] or [
            _changed(repo, None, commit.tree)
        ]
        paths = set.intersection(*per_parent)
        owned = {p for p in paths if p.startswith(gitstore.OWNED_PREFIXES)}
        if not owned:
            continue
        spec = gitstore.spec_commit_of(commit.message) or ""
        if not authorship.reconciler_commit(repo, commit, email):
            why = "a reconciler commit has one parent and changes only state/ and rendered/"
        elif not _spec_is_ancestor(repo, commit, spec):
            why = f"its Spec-Commit {spec[:12]} is not one of its ancestors"
        else:
            continue
        found += [(str(commit.id), p, why) for p in sorted(owned)]
    return found


def _unproven(git: pygit2.Repository, shas: list[str], email: str) -> dict[str, str | None]:
    """Per commit claiming to be the reconciler's: None when its content proves it (recomputed, see
    `provenance`), else why not. Beyond `MAX_RECOMPUTED` such commits none is recomputed."""
    claimants = [
        sha
        for sha in dict.fromkeys(shas)
        if authorship.claims_reconciler(git[sha].peel(pygit2.Commit), email)
    ]
    if len(claimants) > MAX_RECOMPUTED:
        why = (
            f"jobtree proves at most {MAX_RECOMPUTED} such commits per plan by recomputing them "
            f"(this branch has {len(claimants)})"
        )
        return dict.fromkeys(claimants, why)
    out: dict[str, str | None] = {}
    for sha in claimants:
        verdict = provenance.verify(git, git[sha].peel(pygit2.Commit))
        out[sha] = None if verdict.proven else verdict.why
    return out


def _refuse_hand_edits(
    git: pygit2.Repository,
    base: pygit2.Commit,
    head: pygit2.Commit,
    fork: pygit2.Oid,
    author: GitAuthor,
    branch: str,
) -> None:
    """Exit 3 naming the owned files head changed by hand since `fork` (where it left base)."""
    # the reconciler commits to `branch`: its commits in head were there, or made elsewhere and proven by content
    edits = authorship.hand_edited(
        git,
        str(base.id),
        str(head.id),
        reconciler_email=author.email,
        reconciler_tips=branch_tips(git, branch),
    )
    claimed = f"authored as {author.name} <{author.email}> but is not on {branch}"
    off_branch = _unproven(git, [sha for sha, _ in edits], author.email)
    found = [
        (sha, path, f"{claimed}, and {off_branch[sha]}" if sha in off_branch else "")
        for sha, path in edits
        if off_branch.get(sha, "") is not None
    ]
    named = {(sha, path) for sha, path, _ in found}
    found += [e for e in disguised_edits(git, str(base.id), str(head.id), author.email) if e[:2] not in named]
    # an edit the branch itself put back merges nothing: only what head still differs in
    start = git[fork].peel(pygit2.Commit).tree
    found = [e for e in found if gitstore.entry_at(start, e[1]) != gitstore.entry_at(head.tree, e[1])]
    if not found:
        return
    click.echo("jobtree: refusing to plan: state/ and rendered/ are written only by jobtree, but", err=True)
    for sha, path, why in found:
        because = f": {why}, so its state/ and rendered/ edits are refused" if why else ""
        click.echo(f"  {path} (changed by hand in {sha[:12]}{because})", err=True)
    where = f" (git checkout {str(fork)[:12]} -- <file>, or git rm <file> for one the branch added)"
    click.echo(
        f"put those files back as they were where the branch left the base{where}, or drop those "
        "commits; jobtree rewrites state/ and rendered/ after merge",
        err=True,
    )
    sys.exit(exitcodes.INVALID)


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
        git = gitstore.open_repo(repo)
        base_commit, head_commit = gitstore.resolve(git, base), gitstore.resolve(git, head)
    except (gitstore.NotARepository, gitstore.RevisionNotFound) as err:
        raise click.UsageError(str(err)) from err
    except gitstore.GitStoreError as err:
        click.echo(f"jobtree: {err}", err=True)
        sys.exit(exitcodes.OTHER)
    try:
        with batchgc.paused():
            report, diagnostics = _plan(git, base_commit, head_commit, now, now_text is not None)
        text = _render(report, diagnostics, fmt)
    except PlanFailure as err:
        click.echo(f"jobtree plan: {err}", err=True)
        sys.exit(err.exit_code)
    except (pipeline.InvariantViolation, gitstore.GitStoreError, OSError) as err:
        click.echo(f"jobtree plan: {err}", err=True)
        sys.exit(exitcodes.OTHER)
    except Exception as err:  # noqa: BLE001 - the contract is "no traceback"; exit 4 names the bug
        click.echo(f"jobtree plan: internal error ({type(err).__name__}: {err}); please report it", err=True)
        sys.exit(exitcodes.OTHER)
    click.echo(text, nl=False)
    if output:
        full = planreport.as_markdown(report, diagnostics, limit=None) if fmt == "markdown" else text
        try:
            Path(output).write_text(full, encoding="utf-8")
        except OSError as err:
            click.echo(f"jobtree plan: cannot write --output {output}: {err.strerror or err}", err=True)
            sys.exit(exitcodes.OTHER)
    if diagnostics:
        sys.exit(exitcodes.INVALID)
    if exit_code and report["changes"]:
        sys.exit(exitcodes.CHANGES)


def _plan(
    git: pygit2.Repository, base_commit: pygit2.Commit, head_commit: pygit2.Commit, now: int, now_given: bool
) -> tuple[dict[str, object], list[str]]:
    fork = git.merge_base(base_commit.id, head_commit.id)
    if fork is None:
        unrelated = f"{str(head_commit.id)[:12]} shares no history with the base {str(base_commit.id)[:12]}"
        if git.is_shallow:
            raise PlanFailure(
                f"{unrelated} in this shallow clone: fetch the full history (actions/checkout with "
                "fetch-depth: 0, or git fetch --unshallow) and plan again"
            )
        raise PlanFailure(f"{unrelated}: the branches are unrelated; rebase the change onto the base")
    base_spec, _, _ = speccache.read_spec(git, base_commit)
    # who the reconciler is comes from the base branch: a pull request cannot name itself the reconciler
    # and so is the branch it commits to: a reconciler commit in head must have been on that branch
    _refuse_hand_edits(
        git, base_commit, head_commit, fork, base_spec.fleet.git.author, base_spec.fleet.git.branch
    )
    state = _state_at(git, base_commit, base_spec.fleet.git.author.email)
    if state.as_of is not None and now < state.as_of:
        if now_given:  # leases the plan ends would end before they started
            raise NowBeforeBase(
                f"--now {format_time(now)} is before the base's last pass (asOf {format_time(state.as_of)}"
                " in state/fleet.yaml): plan at or after it"
            )
        now = state.as_of  # this clock is behind the reconciler's: plan as it would, from its asOf
    merged = _merged(git, base_commit, head_commit, base_spec.fleet.git.author)
    head_spec, _, _ = speccache.read_spec(git, merged)
    domains = {**_domains(base_spec), **_domains(head_spec)}

    def outlines(specs: Sequence[pipeline.Spec]) -> list[dict[str, Any]]:
        """Each spec planned from the base state, as `prdiff` compares plans."""
        return [
            prdiff.outline(
                pipeline.run_pass(s, EmbeddedCluster(s.inventory), state, now, render=False), domains
            )
            for s in specs
        ]

    # reconcile plans nothing while jobtree.yaml or the inventory is invalid (`FleetInvalid`): a side
    # whose one is plans nothing, and a head that breaks one changes nothing but fails the check
    stalled = {
        side: pipeline.stalled(spec, state) for side, spec in (("base", base_spec), ("head", head_spec))
    }
    base_side = forkmap.start(outlines, [] if stalled["base"] else [base_spec], least=1)  # forked meanwhile
    head_side = [] if stalled["head"] else outlines([head_spec])
    before = base_side.wait()[0] if not stalled["base"] else prdiff.NOTHING_PLANNED
    after = head_side[0] if head_side else before
    report = prdiff.compare(before, after, base=str(base_commit.id), head=str(head_commit.id), now=now)
    report["merged"] = str(merged.id) if merged.id not in (head_commit.id, base_commit.id) else None
    report["stalled"] = [
        f"{path} {why} at {side}: reconcile plans nothing there until fixed"
        for side, files in stalled.items()
        for path, why in files.items()
    ]
    # a problem the base already has is not this change's: it is shown, but fails nothing
    on_base = {(d.path, d.code, d.message) for d in base_spec.diagnostics}
    diagnostics = [str(d) for d in head_spec.diagnostics if (d.path, d.code, d.message) not in on_base]
    flagged = {d.path for d in head_spec.diagnostics}
    diagnostics += [  # an inventory this change deletes or empties: no file diagnostic says so
        str(
            Diagnostic(path, 1, 1, codes.INVENTORY, f"{path} {why}: after merge reconcile would plan nothing")
        )
        for path, why in stalled["head"].items()
        if path not in stalled["base"] and path not in flagged
    ]
    report["diagnostics"] = diagnostics
    report["diagnosticsOnBase"] = [
        str(d) for d in head_spec.diagnostics if (d.path, d.code, d.message) in on_base
    ]
    return report, diagnostics


def _merged(
    git: pygit2.Repository, base: pygit2.Commit, head: pygit2.Commit, author: GitAuthor
) -> pygit2.Commit:
    """The commit merging head into base would make, whose spec is planned: head itself when it
    already contains base (a rebased branch, GitHub's merge ref), base when base already contains
    head, else the merge of the two, written as a commit no ref names (as GitHub's
    `refs/pull/N/merge`), the same bytes for the same two commits. Planning head's own tree instead
    would read runs added on base since the branch left it as deleted by the change, and report
    them cut. Only its spec is read: `state/` and `rendered/` are taken from base where both sides
    changed them (the branch's own state commits, `reconcile --branch`, against newer ones on base)."""
    if head.id == base.id or git.descendant_of(head.id, base.id):
        return head
    if git.descendant_of(base.id, head.id):
        return base
    index = git.merge_commits(base, head)
    clashes = sorted({e.path for entries in (index.conflicts or ()) for e in entries if e is not None})
    spec = [p for p in clashes if not p.startswith(gitstore.OWNED_PREFIXES)]
    if spec:
        raise PlanFailure(
            f"{str(head.id)[:12]} does not merge cleanly into {str(base.id)[:12]} (conflicts in "
            f"{', '.join(spec[:10])}{' and more' if len(spec) > 10 else ''}): merge the base into "
            "the branch (or rebase it), resolve, and plan again"
        )
    for path in clashes:  # jobtree's own files: base's side (plans read state from base anyway)
        ours = index.conflicts[path][1]
        del index.conflicts[path]
        if ours is not None:
            index.add(ours)
    when = max(base.commit_time, head.commit_time)
    sig = pygit2.Signature(author.name, author.email, when, 0)
    try:
        tree = index.write_tree(git)
        oid = git.create_commit(
            None, sig, sig, f"jobtree plan: {head.id} merged into {base.id}\n", tree, [base.id, head.id]
        )
    except pygit2.GitError as err:
        raise PlanFailure(
            f"cannot write the merge of {str(head.id)[:12]} into {str(base.id)[:12]} to plan it ({err}); "
            "plan in a clone you can write to, or merge the base into the branch first"
        ) from None
    return git[oid].peel(pygit2.Commit)


def _render(report: dict[str, object], diagnostics: list[str], fmt: str) -> str:
    if fmt == "json":
        return planreport.as_json(report)
    if fmt == "markdown":
        return planreport.as_markdown(report, diagnostics)
    return planreport.as_text(report, diagnostics)
