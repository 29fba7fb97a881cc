"""One pass of `jobtree reconcile`, in numbered phases; returns an `Outcome` and never prints.

As Kueue's `schedule()`, each phase is one call, and a comment states its rule:

1. repair: files a killed pass left half written, and owned files changed in the work tree, are
   put back as the branch has them (`reconciler.git.checkout`);
2. sync (with --push): fetch, and fast-forward the branch to the remote (jobtree's own unpushed
   state commits are dropped, a person's never);
3. read: the spec at the branch head (`reconciler.spec`) and the state jobtree last committed
   (`reconciler.git.ownership`, `reconciler.state.memo`);
4. plan: the clusters observed (the configured ones, `passes.clusters`, else the embedded one),
   the planner run (`pipeline.run_pass`); nothing while work is on a cluster the pass cannot
   believe (`passes.trust`: `ClustersDoubted`);
5. next tree: `state/` and `rendered/` as the plan makes them, hand-edited files written back
   (`reconciler.state.nexttree`);
6. commit: only when a decision changed, with the message `reconciler.state.message` writes;
7. push (with --push): compare-and-swap; a push that lost a race is thrown away and phases 2-7
   run again (`remote.run_with_retry`);
8. apply (with --apply, once pushed): the branch head to every configured cluster (`passes.apply`);
   with --push, the agent's journal entries the pass folded in (read with the observation, phase 4)
   are then marked Folded on each cluster applied, and Folded ones past retention deleted (§7.5).

Every step before the push is local and the commit is one ref update, so a crash anywhere
converges on the next pass. Progress lines go to the `say` callback the caller gives; warnings a
person must see (even with --quiet) come back in `Outcome.warnings`, or, when the pass fails, as
notes on its exception (PEP 678 `__notes__`). Talking to clusters is `reconciler.cluster`'s.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.plan import Plan
from planner.world import Failover, FleetState
from reconciler.git import ownership
from reconciler.git import read as gitread
from reconciler.git import remote as gitremote
from reconciler.git import write as gitwrite
from reconciler.git.checkout import journal as checkoutjournal
from reconciler.git.checkout import worktree
from reconciler.git.errors import GitStoreError, PermanentGitError, TemporaryGitError
from reconciler.git.lock import writer_lock
from reconciler.git.remote import PushStatus
from reconciler.passes import clusters, pipeline, trust
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.perf import batchgc
from reconciler.spec import commit as speccache
from reconciler.spec import parsed as specprefetch
from reconciler.spec import validated
from reconciler.state import memo as passmemo
from reconciler.state import message, nexttree
from schemas import messages
from schemas.common import format_time
from schemas.diagnostics import Diagnostic
from schemas.layout import FLEET_FILE, INVENTORY_FILE

SUMMARY_SHOWN = 3  # commit message lines repeated on stdout
TOKEN_ENV = "JOBTREE_GIT_TOKEN"
MAX_CLOCK_SKEW = 5 * 60  # a clock further behind the last pass's asOf than this is not drift: said so

if TYPE_CHECKING:
    from reconciler.cluster.observe import Listed
    from reconciler.cluster.watched import Watches
    from reconciler.passes.apply import ApplyOutcome

Say = Callable[[str], None]


def _silent(text: str) -> None:
    """Progress nobody asked for."""


@dataclass(slots=True)
class Outcome:
    """What one pass did, for people (`str`) and for callers (the command line, the webhook, tests)."""

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
    warnings: list[str] = field(default_factory=list)  # for people, even with --quiet (the CLI prints them)
    applied: ApplyOutcome | None = None  # with --apply and clusters configured: what each cluster got
    folded: dict[str, tuple[str, ...]] = field(default_factory=dict)  # cluster -> journal entries folded in
    now: int | None = None  # the instant the pass planned

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


class ClustersDoubted(FleetInvalid):
    """Work the last state commit places on a cluster the pass cannot believe (`passes.trust`: one
    jobtree.yaml does not name, or never observed): it plans and commits nothing, exit 3."""

    def __init__(self, why: list[str], diagnostics: list[Diagnostic]) -> None:
        Exception.__init__(
            self,
            "; ".join(why) + ". Nothing was planned, committed or applied: what runs keeps running as the "
            "last state commit says",
        )
        self.diagnostics = diagnostics


@dataclass(frozen=True, slots=True)
class Planned:
    """Phases 3-5 of a pass: what was read, the plan, and the next tree (not yet committed)."""

    head: gitread.Commit
    spec: validated.Spec
    tree: nexttree.NextTree
    plan: Plan
    state_from: str
    spec_parsed: int
    start: ownership.Start  # the commit whose state was planned from (the head unless hand-edited)
    now: int  # the instant planned: the one asked for, or the last pass's asOf when that is later
    warnings: tuple[str, ...] = ()  # for people, even with --quiet
    observed: tuple[str, ...] = ()  # what changed in the configured clusters, for the commit message
    folded: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # cluster -> journal entries folded
    listed: Mapping[str, Listed] = field(default_factory=dict)  # cluster -> what observe listed, for apply

    @property
    def restored(self) -> list[str]:
        """Hand-edited files the next tree writes back."""
        return self.tree.restored


Memos = dict[tuple[tuple[str, str], ...], passmemo.Memo]


@dataclass(slots=True)
class Kept:
    """What a long-lived reconciler (`reconcile --interval`, the webhook) keeps in memory from one
    pass for the next: the decoded owned files of the commit it left (by tree ids) and the spec it
    read (documents by blob id, with what validation remembered of them). The caches on disk are
    for a process's first pass; after it only what changed is parsed, validated and decoded. A
    cache only spares work: every entry is keyed by what it was computed from."""

    memos: Memos = field(default_factory=dict)
    spec: speccache.Kept = field(default_factory=speccache.Kept)
    # `reconcile --interval`'s: the configured clusters' nodes and pods, kept by watch between passes
    # (`reconciler.cluster.watched`; None: every pass lists them); the caller closes them
    watches: Watches | None = None


def plan_once(
    repo: gitread.Repository,
    branch: str,
    now: int,
    say: Say = _silent,
    memos: Memos | None = None,
    early: specprefetch.Prefetch | None = None,
    now_given: bool | None = None,
    observer: Observer | None = None,
    kept: speccache.Kept | None = None,
) -> Planned:
    """Phases 3-5: read the branch head, validate, plan; the next tree (not yet committed) and the plan.

    `memos`: decoded owned trees this process already holds (by tree ids), tried before the cache.
    `kept`: the spec this process read last (`speccache.Kept`), updated here.
    `observer`: the cluster the pass observes, given the spec, the state, the recorded observations
    (`state/observed/`) and the instant; by default the configured clusters, observed now (the
    embedded cluster when none is configured).
    A pass never plans before the last one (`asOf`): a `now` given earlier (`now_given`), or a clock
    behind (a reconciler that lost a race to one whose clock runs ahead, or a pass pushed with a
    future --now) plans as of `asOf` and says so in `warnings`. `now_given` None: silent
    (recomputing a recorded pass).
    """
    # 3. read: the spec at the head, the state jobtree last committed (the head's, unless hand-edited)
    head = gitread.resolve(repo, branch)
    spec, count, parsed = speccache.read_spec(repo, head, early, kept)
    say(
        f"read {_n(count, 'spec file')} at {str(head.id)[:12]} ({parsed} parsed, {count - parsed} cached): "
        f"{_n(len(spec.budgets), 'budget')}, {_n(len(spec.runs), 'run')} valid, {_n(len(spec.diagnostics), 'problem')}"
    )
    start = ownership.state_start(repo, head, spec.fleet.git.author.email)
    if start.files:
        say(
            f"{_files(len(start.files))} under state/ or rendered/ changed by hand since jobtree's "
            f"{str(start.commit.id)[:12]}: planning from that commit's state"
        )
    memo, source = _memo(repo, start.commit, memos or {})
    state = memo.state()
    say(
        f"read state ({source}): {_n(sum(1 for x in state.leases if x.open), 'open lease')}, "
        f"{_n(len(state.reservations), 'reservation')}"
    )
    now, warnings = _not_before_last_pass(now, state, start, now_given)
    # 4. plan: nothing while jobtree.yaml or the inventory stops the pass; a plan breaking an invariant raises
    stops = pipeline.stalled(spec, state)
    if stops:
        raise _noted(FleetInvalid(stops, spec.diagnostics), warnings)
    # ... and nothing while work is on a cluster it cannot believe: unnamed, never observed (`trust`)
    recorded = clusters.observed_files(memo.blobs, lambda oid: gitread.read_blob(repo, oid))
    read = {memo.blobs[path]: data for path, data in recorded.items()}  # the observed files, read once
    where = (
        trust.placed(state, memo.blobs, lambda oid: read.get(oid) or gitread.read_blob(repo, oid))
        if spec.fleet.clusters
        else {}
    )
    lost = trust.unknown(spec, where)
    if lost:
        raise _noted(ClustersDoubted(lost, spec.diagnostics), warnings)
    cluster = (observer or _observe_now)(spec, state, recorded, now)
    # what configured clusters showed: swaps to fold, files and message lines to commit, entries to mark
    swaps: tuple[Failover, ...] = ()
    seen: nexttree.Observed | None = None
    lines: tuple[str, ...] = ()
    folded: dict[str, tuple[str, ...]] = {}
    if isinstance(cluster, clusters.Configured):
        warnings += cluster.warnings
        doubts = trust.doubted(cluster, where)
        if doubts:
            raise _noted(ClustersDoubted(doubts, spec.diagnostics), warnings)
        for note in cluster.notes:
            say(note)
        swaps, seen, lines, folded = (
            cluster.failovers(),
            cluster.record(now),
            tuple(cluster.lines()),
            cluster.folded(),
        )
    try:  # the pods are rendered with the next tree, only for runs whose pods' inputs changed
        result = pipeline.run_pass(spec, cluster, state, now, render=False, journal=swaps)
    except pipeline.InvariantViolation as err:
        raise _noted(err, warnings) from None
    say(f"planned: {_n(len(result.events), 'lease event')}")
    for _, problem in result.node_problems:
        say(f"node left out: {problem}")
    # 5. next tree: only what changed is rendered; files changed by hand are written back; what
    # was observed of configured clusters is committed with the decisions made from it
    at_head = {path: _held(head, path) for path in start.files}
    tree = nexttree.next_tree(
        result, memo, lambda oid: gitread.read_blob(repo, oid), at_head, seen, spec.origins
    )
    if tree.problems:
        raise _noted(pipeline.InvariantViolation(tree.problems), warnings)
    say(
        f"rendered {_files(len(tree.blobs))}, {len(tree.contents)} written anew, "
        f"{len(tree.meaningful)} with changed decisions"
        + (f", {_files(len(tree.restored))} changed by hand written back" if tree.restored else "")
    )
    listed = cluster.listed if isinstance(cluster, clusters.Configured) else {}
    return Planned(
        head, spec, tree, result, source, parsed, start, now, tuple(warnings), lines, folded, listed
    )


Observer = Callable[
    [validated.Spec, FleetState, dict[str, bytes], int], "EmbeddedCluster | clusters.Configured"
]


def _observe_now(
    spec: validated.Spec, state: FleetState, recorded: dict[str, bytes], now: int
) -> EmbeddedCluster | clusters.Configured:
    """The cluster a reconcile pass observes: the configured clusters now, else the embedded one."""
    return clusters.cluster_for(spec, state, recorded, now, live=True)


def _memo(repo: gitread.Repository, commit: gitread.Commit, memos: Memos) -> tuple[passmemo.Memo, str]:
    """The decoded owned files of `commit`: held in this process, cached on disk, or decoded from Git."""
    memo = memos.get(gitread.owned_trees(repo, commit))
    if memo is not None:
        return memo, "in memory"
    memo = passmemo.cached(repo, commit)
    if memo is not None:
        return memo, "cached"
    return passmemo.read(repo, commit), "decoded"


def _held(head: gitread.Commit, path: str) -> tuple[str, int] | None:
    """What the head holds at `path` (blob id and file mode), for a file changed by hand."""
    entry = gitread.entry_at(head.tree, path)
    return (str(entry[0]), entry[1]) if entry is not None else None


def _not_before_last_pass(
    now: int, state: FleetState, start: ownership.Start, now_given: bool | None
) -> tuple[int, list[str]]:
    """`now`, or the last pass's `asOf` when that is later (leases it closed would end before they
    started), with the warning that says so (none when `now_given` is None)."""
    if state.as_of is None or now >= state.as_of:
        return now, []
    if now_given is None:
        return state.as_of, []
    was, then = format_time(now), format_time(state.as_of)
    where = f"asOf {then} in state/fleet.yaml at {str(start.commit.id)[:12]}"
    asked = f"--now {was}" if now_given else f"the clock ({was})"
    far = (
        " (more than a clock's drift: a pass pushed with a future --now, or this clock is wrong; "
        "reservations and windows fall due only as of that time)"
        if not now_given and state.as_of - now > MAX_CLOCK_SKEW
        else ""
    )
    return state.as_of, [
        f"jobtree: {asked} is before the last pass ({where}){far}: a pass never goes back in "
        f"time, so this one plans as of {then}"
    ]


def _no_branch(repo: gitread.Repository, branch: str, named: bool, remote: str | None) -> str:
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


def _spec_commit(head: gitread.Commit, email: str) -> str:
    """The commit the spec was read from: the head, or what the reconciler's own head names."""
    if head.author.email == email:
        named = ownership.spec_commit_of(head.message)
        if named is not None:
            return named
    return str(head.id)


def _files(n: int) -> str:
    return _n(n, "file")


def _n(count: int, word: str) -> str:
    """`1 lease event`, `2 lease events`: a count for the progress lines."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _noted(err: BaseException, warnings: list[str] | tuple[str, ...]) -> BaseException:
    """`err` carrying the warnings of the pass it stopped (PEP 678 notes), for the caller to show."""
    for warning in warnings:
        err.add_note(warning)
    return err


def _repair(repo: gitread.Repository, branch: str, say: Say) -> list[str]:
    """Phase 1: files a killed pass left half written (those its checkout journal names, then owned
    ones) are put back before anything moves the branch, so they never read as local edits; the
    warning for owned files someone changed in the work tree."""
    checking = time.monotonic()
    rewound = set(checkoutjournal.recover(repo))
    put_back, copies = worktree.restore_owned(repo, branch)
    owned = sorted(set(put_back) - rewound)
    if rewound:
        say(f"restored {_files(len(rewound))} a killed pass left half written")
    warnings = []
    if owned:  # jobtree owns these folders: whatever changed them, the commit is what holds
        named = messages.listed(owned)
        copied = f"; a copy of each as it was is in {copies}" if copies else ""
        warnings.append(  # a person's file may be among them
            f"jobtree: put back {_files(len(owned))} under state/ and rendered/ as {branch} "
            f"has them (jobtree writes these folders; keep notes elsewhere): {named}{copied}"
        )
    has_branch = repo.references.get(f"refs/heads/{branch}") is not None
    if not (rewound or owned) and has_branch and worktree.checked_out(repo, branch):
        say(f"checked out files of {branch} are as committed ({time.monotonic() - checking:.2f} s)")
    return warnings


def _commit(
    repo: gitread.Repository, branch: str, planned: Planned, pending: list[worktree.Pending]
) -> tuple[str | None, list[str]]:
    """Phase 6: the state commit, when a decision changed; its id (None: nothing to commit) and lines."""
    tree, author = planned.tree, planned.spec.fleet.git.author
    lines = message.lines(planned.plan, tree.meaningful, planned.start, tree.restored, planned.observed)
    text = message.format_message(lines, _spec_commit(planned.head, author.email))
    # the head's owned files exactly as jobtree last committed them: only the changed directories are built
    known = tree.kept.blobs if planned.start.own else None
    oid = gitwrite.commit_tree(
        repo, branch, str(planned.head.id), tree.blobs, tree.contents, message=text,
        author_name=author.name, author_email=author.email, now=planned.now, pending=pending,
        parent_blobs=known,
    )  # fmt: skip
    return (str(oid) if oid is not None else None), lines


def reconcile_once(
    repo_path: str | os.PathLike[str],
    *,
    now: int | None = None,
    push: bool = False,
    apply: bool = False,
    remote: str = "origin",
    branch: str | None = None,
    attempts: int = 5,
    say: Say | None = None,
    early: specprefetch.Prefetch | None = None,
    lock_wait: float = 0.0,
    observer: Observer | None = None,
    kept: Kept | None = None,
    allow_mass_prune: bool = False,
    prune_share: float | None = None,
) -> Outcome:
    """One reconcile pass; raises GitStoreError (temporary or permanent) with a message for people.

    `say`: progress lines (none when None). `lock_wait`: seconds to wait for another writer's pass
    on the same clone (`writer_lock`). `observer`: the cluster the pass observes (`plan_once`; by
    default the configured clusters, observed now). `kept`: what this process kept from its last
    pass (`Kept`, updated here; None: nothing beyond this pass; its `watches`, when set, are what
    the configured clusters are observed through). With `apply`: `prune_share`, the
    largest share of a cluster's running pods pruned at once (None: apply's default), unless
    `allow_mass_prune`."""
    say = say or _silent
    if observer is None and kept is not None and kept.watches is not None:
        watches = kept.watches

        def observer(
            spec: validated.Spec, state: FleetState, recorded: dict[str, bytes], now: int
        ) -> EmbeddedCluster | clusters.Configured:
            return clusters.cluster_for(spec, state, recorded, now, live=True, watches=watches)

    repo = gitread.open_repo(repo_path)
    token = os.environ.get(TOKEN_ENV)
    outcome = Outcome(attempts=0)
    memos: Memos = kept.memos if kept is not None else {}
    listed: dict[str, Listed] = {}  # what the last attempt observed (nodes, pods): apply compares with it
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
            # 1. repair the work tree before anything moves the branch
            outcome.warnings += _repair(repo, want_branch, say)
            # 2. sync: fetch and fast-forward; the remote head is what the push must still find
            expected = None
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
            # 3-5. read, plan, next tree
            planned = plan_once(
                repo, want_branch, moment, say, memos, early, now_given=now is not None, observer=observer,
                kept=kept.spec if kept is not None else None,
            )  # fmt: skip
            outcome.warnings += planned.warnings
            tree = planned.tree
            outcome.state_from, outcome.spec_parsed = planned.state_from, planned.spec_parsed
            outcome.diagnostics = list(planned.spec.diagnostics)
            outcome.next_due = next((t for t in planned.plan.due if t > planned.now), None)
            outcome.head = str(planned.head.id)
            outcome.folded, outcome.now = dict(planned.folded), planned.now
            listed.clear()  # an attempt is a closure: it fills what the function applies after
            listed.update(planned.listed)
            memo = tree.kept
            later: list[worktree.Pending] = []
            try:
                # 6. commit, only when a decision changed (or a hand-edited file is written back)
                if tree.meaningful:
                    started = time.monotonic()
                    committed, lines = _commit(repo, want_branch, planned, later)
                    outcome.commit, outcome.summary, outcome.changed = committed, lines, tree.meaningful
                    outcome.head = committed or outcome.head
                    if committed is not None:
                        at = gitread.owned_trees(repo, gitread.resolve(repo, committed))
                        memo = dataclasses.replace(tree.memo, trees=at)
                    say(
                        f"committed {outcome.head[:12]} in {time.monotonic() - started:.2f} s "
                        f"({_files(tree.changed_files())} changed, "
                        f"{len(tree.meaningful)} with changed decisions"
                        + (", work tree updating meanwhile)" if later else ")")
                    )
                if kept is not None:  # the next pass starts from this one's commit: nothing older is kept
                    memos.clear()
                memos[memo.trees] = memo
                where, saved = gitread.cache_directory(repo), memo

                def keep() -> None:
                    passmemo.save(where, saved)

                later.append(worktree.Pending(keep, "saving the pass cache"))
                if not push:
                    return gitremote.PushResult(
                        PushStatus.UP_TO_DATE, remote, want_branch, outcome.head, None
                    )
                # 7. push: compare-and-swap against what phase 2 fetched; STALE runs phases 2-7 again
                pushing = time.monotonic()
                pushed = gitremote.push(repo, remote, want_branch, expected, token=token)
                say(f"push to {remote}: {pushed.status.value} in {time.monotonic() - pushing:.2f} s")
                return pushed
            finally:
                waited = time.monotonic()
                for work in later:
                    work.wait()
                if later:
                    say(f"work tree and pass cache written ({time.monotonic() - waited:.2f} s waited)")

        try:
            result = gitremote.run_with_retry(attempt, attempts=attempts)
            if push:
                if result.status == PushStatus.REFUSED:
                    raise PermanentGitError(f"{remote} refused the state commit: {result.message}")
                if result.status == PushStatus.STALE:
                    why = result.message if result.locked else f"{remote}/{want_branch} kept moving"
                    raise TemporaryGitError(f"{why} during {attempts} attempts; the next pass retries")
                outcome.pushed = result.status == PushStatus.PUSHED
        except BaseException as err:  # the pass failed: what it had to say rides on the error
            _noted(err, [w for w in outcome.warnings if w not in getattr(err, "__notes__", ())])
            raise
    # 8. apply (with --apply): what the branch head holds, once pushed, to every configured cluster
    if apply:
        from reconciler.passes import apply as applying  # the kubernetes client: only when applying

        # the swaps folded in are in the record only once pushed: then they are marked Folded
        fold = applying.Fold(outcome.folded, outcome.now) if push and outcome.now is not None else None
        try:
            share = applying.prune_limit(allow_mass_prune, prune_share)
            outcome.applied = applying.apply_commit(
                repo, outcome.head or want_branch, say=say, fold=fold, prune_share=share, listed=listed
            )
        except applying.NoCluster:
            outcome.summary.append("apply: the embedded cluster has nothing to apply")
    return outcome


def configured_branch(repo: gitread.Repository) -> str:
    """The `git.branch` of jobtree.yaml at the current HEAD, else `main`."""
    try:
        spec = validated.read_spec(fleet_file(repo))
        return spec.fleet.git.branch
    except GitStoreError:
        return "main"


def fleet_file(repo: gitread.Repository, rev: str = "HEAD") -> dict[str, bytes]:
    """`{"jobtree.yaml": bytes}` at `rev` (empty when absent): all `read_spec` needs for the settings."""
    data = gitread.read_file(repo, rev, "jobtree.yaml")
    return {"jobtree.yaml": data} if data is not None else {}


def _fleet_author(repo: gitread.Repository, branch: str) -> str | None:
    """The `git.author` email of jobtree.yaml at the local branch head: the author of the state commits
    this clone may hold unpushed (they change only state/ and rendered/, so not jobtree.yaml itself)."""
    if repo.references.get(f"refs/heads/{branch}") is None:
        return None
    return validated.read_spec(fleet_file(repo, f"refs/heads/{branch}")).fleet.git.author.email
