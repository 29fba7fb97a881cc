"""One pass of `jobtree reconcile` (the verb is `reconcile`, its loop `schedule`): read, validate, plan, commit, push.

One pass reads the fleet spec and `state/` at the branch head through pygit2 (no checkout
needed), observes the embedded cluster (`inventory/nodes.yaml`), plans, and commits `state/` and
`rendered/` only when a decision changed. With `--push` the commit goes to the remote as a
compare-and-swap: a push that lost a race is thrown away, and the pass re-reads and re-plans.
Every step before the push is local and the commit is one ref update, so a crash anywhere
converges on the next pass. Applying to a real cluster is the cluster stage's job, not this one's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import click
import pygit2

from planner.plan import Plan
from planner.world import FleetState
from reconciler.git import remote as gitremote
from reconciler.git import store as gitstore
from reconciler.git.checkout import journal as checkoutjournal
from reconciler.git.checkout import worktree
from reconciler.git.lock import writer_lock
from reconciler.git.remote import PushStatus
from reconciler.git.store import GitStoreError, PermanentGitError, TemporaryGitError
from reconciler.passes import pipeline
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.perf import batchgc
from reconciler.perf import diskcache as passcache
from reconciler.spec import commit as speccache
from reconciler.spec import parsed as specprefetch
from reconciler.state import handedits
from reconciler.state import memo as passmemo
from reconciler.state import nexttree as gitsink
from schemas.common import format_time
from schemas.diagnostics import Diagnostic
from schemas.layout import FLEET_FILE, INVENTORY_FILE

SUMMARY_SHOWN = 3  # commit message lines repeated on stdout
TOKEN_ENV = "JOBTREE_GIT_TOKEN"
MAX_CLOCK_SKEW = 5 * 60  # a clock further behind the last pass's asOf than this is not drift: said so


@dataclass(slots=True)
class Outcome:
    """What one pass did, for people (`str`) and for callers (the webhook, tests)."""

    commit: str | None = None  # the new state commit, None when nothing meaningful changed
    head: str = ""  # the branch head after the pass
    pushed: bool = False
    attempts: int = 1
    changed: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)  # invalid objects were left out of planning
    next_due: int | None = None  # the next instant something is due without a push
    state_from: str = ""  # where the state came from: "decoded" (Git), "cached" (disk) or "in memory"
    spec_parsed: int = 0  # spec files parsed this pass (the others came from the parse cache)

    @property
    def problems(self) -> int:
        return len(self.diagnostics)

    def __str__(self) -> str:
        if self.commit is None and self.pushed:
            return f"no new change; pushed {self.head[:12]}, which an earlier pass committed but did not push"
        if self.commit is None:
            return f"no change at {self.head[:12]}; nothing committed"
        where = "pushed" if self.pushed else "committed"
        shown = self.summary[:SUMMARY_SHOWN]
        more = len(self.summary) - len(shown)
        tail = f"; ... {more} more in the commit message" if more > 0 else ""
        return f"{where} {self.commit[:12]}: " + ("; ".join(shown) or "state refreshed") + tail


def _progress(enabled: bool) -> Callable[[str], None]:
    start = time.monotonic()

    def say(text: str) -> None:
        if enabled:
            click.echo(f"[{time.monotonic() - start:6.2f}s] {text}", err=True)

    return say


def _spec_commit(repo: pygit2.Repository, head: pygit2.Commit, email: str) -> str:
    """The commit the spec was read from: the head, or what the reconciler's own head names."""
    if head.author.email == email:
        named = gitstore.spec_commit_of(head.message)
        if named is not None:
            return named
    return str(head.id)


def _due(plan_state: FleetState, spec: pipeline.Spec, now: int) -> int | None:
    times = [r.earliest_start for r in plan_state.reservations.values() if r.state == "Pending"]
    for b in spec.budgets:
        for e in b.spec.envelopes:
            times += [t for t in (e.start, e.end) if t is not None]
    later = [t for t in times if t > now]
    return min(later) if later else None


class FleetInvalid(Exception):
    """jobtree.yaml or inventory/nodes.yaml stops the pass (`pipeline.stalled`): every object depends
    on them, so it plans and commits nothing, and what runs keeps running as the last state commit says."""

    WHAT = {
        FLEET_FILE: "tenants, accounting and the Git identity",
        INVENTORY_FILE: "the embedded cluster's nodes",
    }

    def __init__(self, files: dict[str, str], diagnostics: list[Diagnostic]) -> None:
        named = " and ".join(files)
        super().__init__(
            f"{'; '.join(f'{f} {why}' for f, why in files.items())}, so nothing was planned or committed: "
            f"{'; '.join(self.WHAT[f] for f in files)} come from {'it' if len(files) == 1 else 'them'}, "
            f"and what runs keeps running as the last state commit says; fix {named} and push"
        )
        self.diagnostics = diagnostics


@dataclass(slots=True)
class Planned:
    head: pygit2.Commit
    spec: pipeline.Spec
    tree: gitsink.NextTree
    plan: Plan
    state_from: str
    spec_parsed: int
    start: handedits.Start  # the commit whose state was planned from (the head unless hand-edited)
    restored: list[str]  # hand-edited files the next tree writes back
    now: int  # the instant planned: the one asked for, or the last pass's asOf when that is later


def plan_once(
    repo: pygit2.Repository,
    branch: str,
    now: int,
    say: Callable[[str], None],
    memos: dict[tuple[tuple[str, str], ...], passmemo.Memo] | None = None,
    early: specprefetch.Prefetch | None = None,
    now_given: bool | None = None,
) -> Planned:
    """Read the branch head, validate, plan: the next tree (not yet committed) and the plan.

    `memos`: decoded owned trees this process already holds (by tree ids), tried before the cache.
    A pass never plans before the last one (`asOf`): a `now` given earlier (`now_given`), or a clock
    behind (a reconciler that lost a race to one whose clock runs ahead, or a pass pushed with a
    future --now) plans as of `asOf` and says so. `now_given` None: silent (recomputing a recorded
    pass).
    """
    head = gitstore.resolve(repo, branch)
    spec, count, parsed = speccache.read_spec(repo, head, early)
    say(
        f"read {count} spec files at {str(head.id)[:12]} ({parsed} parsed, {count - parsed} cached): "
        f"{len(spec.budgets)} budgets, {len(spec.runs)} runs valid, {len(spec.diagnostics)} problems"
    )
    start = handedits.state_start(repo, head, spec.fleet.git.author.email)
    if start.files:
        say(
            f"{_files(len(start.files))} under state/ or rendered/ changed by hand since jobtree's "
            f"{str(start.commit.id)[:12]}: planning from that commit's state"
        )
    memo = (memos or {}).get(passmemo.owned_trees(repo, start.commit))
    source = "in memory"
    if memo is None:
        memo, source = passmemo.cached(repo, start.commit), "cached"
    if memo is None:
        memo, source = passmemo.read(repo, start.commit), "decoded"
    state = memo.state()
    say(
        f"read state ({source}): {sum(1 for x in state.leases if x.open)} open leases, "
        f"{len(state.reservations)} reservations"
    )
    if state.as_of is not None and now < state.as_of:  # leases it closed would end before they started
        was, then = format_time(now), format_time(state.as_of)
        where = f"asOf {then} in state/fleet.yaml at {str(start.commit.id)[:12]}"
        if now_given is not None:  # said even with --quiet: the pass is not planned when asked for
            asked = f"--now {was}" if now_given else f"the clock ({was})"
            far = (
                " (more than a clock's drift: a pass pushed with a future --now, or this clock is wrong; "
                "reservations and windows fall due only as of that time)"
                if not now_given and state.as_of - now > MAX_CLOCK_SKEW
                else ""
            )
            click.echo(
                f"jobtree: {asked} is before the last pass ({where}){far}: a pass never goes back in "
                f"time, so this one plans as of {then}",
                err=True,
            )
        now = state.as_of
    stops = pipeline.stalled(spec, state)
    if stops:
        raise FleetInvalid(stops, spec.diagnostics)
    result = pipeline.run_pass(spec, EmbeddedCluster(spec.inventory), state, now)
    say(f"planned: {len(result.events)} lease events")
    for _, problem in result.node_problems:
        say(f"node left out: {problem}")
    tree = gitsink.next_tree(result, memo, lambda oid: gitstore.read_blob(repo, oid))
    restored = handedits.write_back(head, tree, start)
    say(
        f"rendered {len(tree.blobs)} files, {len(tree.contents)} written anew, "
        f"{len(tree.meaningful)} with changed decisions"
        + (f", {_files(len(restored))} changed by hand written back" if restored else "")
    )
    return Planned(head, spec, tree, result, source, parsed, start, restored, now)


def _changed_files(tree: gitsink.NextTree, restored: list[str]) -> int:
    """Owned files the next tree adds, removes or changes (meters and `asOf` included)."""
    before, after = tree.kept.blobs, tree.blobs
    changed = {p for p, blob in after.items() if before.get(p) != blob} | (before.keys() - after.keys())
    return len(changed | set(restored))


def _no_branch(repo: pygit2.Repository, branch: str, named: bool, remote: str | None) -> str:
    """Why there is nothing to reconcile on `branch`, and what to do."""
    where = repo.workdir or repo.path
    if repo.head_is_unborn and not any(r.startswith("refs/heads/") for r in repo.references):
        return f"{where} has no commits yet: commit the fleet files to {branch} first"
    nowhere = f"here or on {remote}" if remote else "here"
    tag = (
        f" ({branch} is a tag; jobtree commits state to a branch)"
        if f"refs/tags/{branch}" in repo.references
        else ""
    )
    if named:
        return f"there is no branch {branch!r} {nowhere}{tag}: pass --branch with an existing branch"
    current = "" if repo.head_is_detached or repo.head_is_unborn else repo.head.shorthand
    hint = f", or pass --branch {current}" if current and current != branch else ""
    return (
        f"there is no branch {branch!r} {nowhere}{tag}, which jobtree.yaml's git.branch names (main when "
        f"unset): set git.branch to the branch the fleet lives on{hint}"
    )


def _summary(planned: Planned) -> list[str]:
    """The commit's lines: hand-edited files written back (if any), then the plan's decisions."""
    restored = set(planned.restored)  # written back, not rendered anew: said by `handedits.summary`
    lines = gitsink.summary(planned.plan, [p for p in planned.tree.meaningful if p not in restored])
    if not planned.restored:
        return lines
    head, *details = handedits.summary(planned.start, planned.restored)
    return [head, *lines, *details]


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def reconcile_once(
    repo_path: str | os.PathLike[str],
    *,
    now: int | None = None,
    push: bool = False,
    apply: bool = False,
    remote: str = "origin",
    branch: str | None = None,
    attempts: int = 5,
    progress: bool = False,
    early: specprefetch.Prefetch | None = None,
    lock_wait: float = 0.0,
) -> Outcome:
    """One reconcile pass; raises GitStoreError (temporary or permanent) with a message for people.

    `lock_wait`: seconds to wait for another writer's pass on the same clone (`writer_lock`)."""
    say = _progress(progress)
    repo = gitstore.open_repo(repo_path)
    token = os.environ.get(TOKEN_ENV)
    outcome = Outcome(attempts=0)
    memos: dict[tuple[tuple[str, str], ...], passmemo.Memo] = {}
    with batchgc.paused(), writer_lock(repo_path, lock_wait, say):
        want_branch = branch or configured_branch(repo)
        if not repo.is_bare and repo.head_is_unborn:  # a clone of a remote whose HEAD is another branch
            unborn = str(repo.references["HEAD"].target).removeprefix("refs/heads/")
            say(
                f"the work tree is on {unborn}, which has no commits; jobtree reconciles {want_branch}: "
                f"`git checkout {want_branch}` shows its files"
            )

        def attempt() -> gitremote.PushResult:
            outcome.attempts += 1
            outcome.commit, outcome.changed, outcome.summary = None, [], []
            moment = now if now is not None else int(time.time())
            expected = None
            # Before anything moves the branch: files a killed pass left half written are put back
            # (those its checkout journal names, then owned ones), so they never read as local edits.
            checking = time.monotonic()
            rewound = set(checkoutjournal.recover(repo))
            put_back, copies = worktree.restore_owned(repo, want_branch)
            owned = sorted(set(put_back) - rewound)
            if rewound:
                say(f"restored {_files(len(rewound))} a killed pass left half written")
            if owned:  # jobtree owns these folders: whatever changed them, the commit is what holds
                named = ", ".join(owned[:5]) + (f" and {len(owned) - 5} more" if len(owned) > 5 else "")
                copied = f"; a copy of each as it was is in {copies}" if copies else ""
                click.echo(  # shown even with --quiet: a person's file may be among them
                    f"jobtree: put back {_files(len(owned))} under state/ and rendered/ as {want_branch} "
                    f"has them (jobtree writes these folders; keep notes elsewhere): {named}{copied}",
                    err=True,
                )
            has_branch = repo.references.get(f"refs/heads/{want_branch}") is not None
            if not (rewound or owned) and has_branch and worktree.checked_out(repo, want_branch):
                say(
                    f"checked out files of {want_branch} are as committed ({time.monotonic() - checking:.2f} s)"
                )
            if push:
                synced = gitremote.sync_with_remote(
                    repo, remote, want_branch, discard_unpushed=True, token=token,
                    author_email=_fleet_author(repo, want_branch),
                )  # fmt: skip
                tracking = repo.references.get(f"refs/remotes/{remote}/{want_branch}")
                expected = str(tracking.target) if tracking is not None else None
                say(f"fetched {remote}/{want_branch}: {synced.value}")
            if repo.references.get(f"refs/heads/{want_branch}") is None:
                raise PermanentGitError(
                    _no_branch(repo, want_branch, branch is not None, remote if push else None)
                )
            planned = plan_once(repo, want_branch, moment, say, memos, early, now_given=now is not None)
            head, spec, tree, result = planned.head, planned.spec, planned.tree, planned.plan
            outcome.state_from, outcome.spec_parsed = planned.state_from, planned.spec_parsed
            outcome.diagnostics = list(spec.diagnostics)
            moment = planned.now
            outcome.next_due = _due(result.state, spec, moment)
            outcome.head = str(head.id)
            memo = tree.kept
            later: list[worktree.Pending] = []
            packs: list[str] = []  # packs this attempt wrote: a push to a local path hands them over
            try:
                if tree.meaningful:
                    author = spec.fleet.git.author
                    summary = _summary(planned)
                    message = gitstore.format_message(summary, _spec_commit(repo, head, author.email))
                    started = time.monotonic()
                    oid = gitstore.commit_tree(
                        repo, want_branch, str(head.id), tree.blobs, tree.contents, message=message,
                        author_name=author.name, author_email=author.email, now=moment, pending=later,
                        packs=packs,
                    )  # fmt: skip
                    outcome.commit = str(oid) if oid is not None else None
                    outcome.head = outcome.commit or outcome.head
                    outcome.changed = tree.meaningful
                    outcome.summary = summary
                    if oid is not None:
                        memo = tree.memo
                        memo.trees = passmemo.owned_trees(repo, gitstore.resolve(repo, str(oid)))
                    say(
                        f"committed {outcome.head[:12]} in {time.monotonic() - started:.2f} s "
                        f"({_files(_changed_files(tree, planned.restored))} changed, "
                        f"{len(tree.meaningful)} with changed decisions"
                        + (", work tree updating meanwhile)" if later else ")")
                    )
                memos[memo.trees] = memo
                where, kept = passcache.directory(repo), memo

                def keep() -> None:
                    passmemo.save(where, kept)

                later.append(worktree.Pending(keep, "saving the pass cache"))
                if not push:
                    return gitremote.PushResult(
                        PushStatus.UP_TO_DATE, remote, want_branch, outcome.head, None
                    )
                pushing = time.monotonic()
                pushed = gitremote.push(repo, remote, want_branch, expected, token=token, packs=packs)
                say(f"push to {remote}: {pushed.status.value} in {time.monotonic() - pushing:.2f} s")
                return pushed
            finally:
                waited = time.monotonic()
                for work in later:
                    work.wait()
                if later:
                    say(f"work tree and pass cache written ({time.monotonic() - waited:.2f} s waited)")

        result = gitremote.run_with_retry(attempt, attempts=attempts)
        if push:
            if result.status == PushStatus.REFUSED:
                raise PermanentGitError(f"{remote} refused the state commit: {result.message}")
            if result.status == PushStatus.STALE:
                why = result.message if result.locked else f"{remote}/{want_branch} kept moving"
                raise TemporaryGitError(f"{why} during {attempts} attempts; the next pass retries")
            outcome.pushed = result.status == PushStatus.PUSHED
    if apply:
        outcome.summary.append("apply: the embedded cluster has nothing to apply")
    return outcome


def configured_branch(repo: pygit2.Repository) -> str:
    """The `git.branch` of jobtree.yaml at the current HEAD, else `main`."""
    try:
        spec = pipeline.read_spec(fleet_file(repo))
        return spec.fleet.git.branch
    except GitStoreError:
        return "main"


def fleet_file(repo: pygit2.Repository, rev: str = "HEAD") -> dict[str, bytes]:
    """`{"jobtree.yaml": bytes}` at `rev` (empty when absent): all `read_spec` needs for the settings."""
    data = gitstore.read_file(repo, rev, "jobtree.yaml")
    return {"jobtree.yaml": data} if data is not None else {}


def _fleet_author(repo: pygit2.Repository, branch: str) -> str | None:
    """The `git.author` email of jobtree.yaml at the local branch head: the author of the state commits
    this clone may hold unpushed (they change only state/ and rendered/, so not jobtree.yaml itself)."""
    if repo.references.get(f"refs/heads/{branch}") is None:
        return None
    return pipeline.read_spec(fleet_file(repo, f"refs/heads/{branch}")).fleet.git.author.email
