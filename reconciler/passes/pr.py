"""The pull-request plan (`jobtree plan`): what merging head would change against base; returns the report.

Reads both specs and the committed `state/` at base (no checkout), plans both at the same `now`
from that one state with the embedded cluster, or the configured clusters as the base last observed
them (`state/observed/`: no cluster credentials needed), and compares them (`reconciler.report`). Spec files
are read as `reconcile` reads them (`reconciler.spec.commit`: parsed once per blob id, a broken
budget file planned as its last valid version); nothing is written to Git but the parse cache in
the Git dir and, for a head that has not merged the base, the merge commit planned (no ref names
it). A head that edits `state/` or `rendered/` in commits other than the reconciler's own is
refused (`HandEdited`) before anything is planned: its own commits carry the fleet's git author
and a `Spec-Commit` trailer and are reachable from the base or from the fleet's branch (local or
fetched), or, made elsewhere (`reconcile --branch pr`), hold exactly what jobtree computes for them
(`provenance`, at most `MAX_RECOMPUTED` per plan). Prints nothing: `reconciler.cli.plan` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from planner.world import FleetState
from reconciler.git import errors, ownership
from reconciler.git import read as gitread
from reconciler.git import write as gitwrite
from reconciler.passes import clusters, pipeline, provenance, trust
from reconciler.passes.embedded import nodes_from_inventory
from reconciler.perf import forkmap
from reconciler.report import compare as prdiff
from reconciler.report import model
from reconciler.spec import commit as speccache
from reconciler.spec import validated
from reconciler.state import codec as statefiles
from reconciler.state import layout
from reconciler.state import memo as passmemo
from reconciler.state import observed as observedfiles
from schemas import diagnostics as codes
from schemas.common import format_time
from schemas.diagnostics import Diagnostic
from schemas.fleet import GitAuthor
from schemas.layout import FLEET_FILE, INVENTORY_FILE

MAX_RECOMPUTED = 20  # commits off the fleet's branch proven by recomputing a pass each (seconds apiece)


class PlanFailure(Exception):
    """Planning could not finish; the message says what is wrong and what to do (exit 4)."""


class NowBeforeBase(PlanFailure):
    """`--now` is earlier than the base's last pass: a wrong option (exit 2, like click's own)."""


class HandEdited(Exception):
    """Head changed `state/` or `rendered/` by hand (exit 3): `found` is `(commit, path, why)` per
    file, `fork` where head left the base (where to take the files back from)."""

    def __init__(self, found: list[tuple[str, str, str]], fork: str) -> None:
        super().__init__(f"{len(found)} owned files changed by hand")
        self.found, self.fork = found, fork


def _state_at(
    repo: gitread.Repository, commit: gitread.Commit, email: str
) -> tuple[FleetState, passmemo.Memo]:
    """The state `reconcile` would start from at `commit` (jobtree's last own state when files were
    changed by hand since), and the decoded owned files it came from: from the clone's pass cache
    when it describes that commit, else decoded (on every CPU). Both planning passes start from
    it: a pass works on copies."""
    commit = ownership.state_start(repo, commit, email).commit
    try:
        memo = passmemo.cached(repo, commit) or passmemo.read(repo, commit, documents=False)
        return memo.state(), memo
    except Exception as err:  # noqa: BLE001 - damaged machine-written files: name the file, never a traceback
        files = gitread.read_files(repo, str(commit.id), ["state/"])
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


def _domains(spec: validated.Spec, recorded: dict[str, bytes]) -> dict[str, str]:
    nodes = (
        clusters.recorded_nodes(spec, recorded)
        if spec.fleet.clusters
        else nodes_from_inventory(spec.inventory)
    )
    return {name: obs.labels.get("fabric.domain", "?") for name, obs in nodes.items()}


def _unproven(git: gitread.Repository, shas: list[str], email: str) -> dict[str, str | None]:
    """Per commit claiming to be the reconciler's: None when its content proves it (recomputed, see
    `provenance`), else why not. Beyond `MAX_RECOMPUTED` such commits none is recomputed."""
    claimants = [
        sha for sha in dict.fromkeys(shas) if ownership.claims_reconciler(gitread.commit(git, sha), email)
    ]
    if len(claimants) > MAX_RECOMPUTED:
        why = (
            f"jobtree proves at most {MAX_RECOMPUTED} such commits per plan by recomputing them "
            f"(this branch has {len(claimants)})"
        )
        return dict.fromkeys(claimants, why)
    out: dict[str, str | None] = {}
    for sha in claimants:
        verdict = provenance.verify(git, gitread.commit(git, sha))
        out[sha] = None if verdict.proven else verdict.why
    return out


def _refuse_hand_edits(
    git: gitread.Repository,
    base: gitread.Commit,
    head: gitread.Commit,
    fork: gitread.Oid,
    author: GitAuthor,
    branch: str,
) -> None:
    """`HandEdited` naming the owned files head changed by hand since `fork` (where it left base)."""
    # the reconciler commits to `branch`: its commits in head were there, or made elsewhere and proven by content
    edits = ownership.hand_edited(
        git,
        str(base.id),
        str(head.id),
        reconciler_email=author.email,
        reconciler_tips=ownership.branch_tips(git, branch),
    )
    claimed = f"authored as {author.name} <{author.email}> but is not on {branch}"
    off_branch = _unproven(git, [sha for sha, _ in edits], author.email)
    found = [
        (sha, path, f"{claimed}, and {off_branch[sha]}" if sha in off_branch else "")
        for sha, path in edits
        if off_branch.get(sha, "") is not None
    ]
    named = {(sha, path) for sha, path, _ in found}
    found += [
        e
        for e in ownership.disguised_edits(git, str(base.id), str(head.id), author.email)
        if e[:2] not in named
    ]
    # an edit the branch itself put back merges nothing: only what head still differs in
    start = gitread.commit(git, str(fork)).tree
    found = [e for e in found if gitread.entry_at(start, e[1]) != gitread.entry_at(head.tree, e[1])]
    if not found:
        return
    raise HandEdited(found, str(fork))


def plan(
    git: gitread.Repository,
    base_commit: gitread.Commit,
    head_commit: gitread.Commit,
    now: int,
    now_given: bool,
) -> model.Report:
    """What merging `head_commit` into `base_commit` would change, planned at `now` (the base's last
    pass's `asOf` when that is later and `now` was not given); raises `PlanFailure`, `HandEdited`."""
    fork = git.merge_base(base_commit.id, head_commit.id)
    if fork is None:
        unrelated = f"{str(head_commit.id)[:12]} shares no history with the base {str(base_commit.id)[:12]}"
        if git.is_shallow:
            raise PlanFailure(
                f"{unrelated} in this shallow clone: fetch the full history (actions/checkout with "
                "fetch-depth: 0, or git fetch --unshallow) and plan again"
            )
        raise PlanFailure(f"{unrelated}: the branches are unrelated; rebase the change onto the base")
    # head is read after base with what base's read kept (`speccache.Kept`, as a long-lived reconciler
    # reads its next commit): only the files the change touched are parsed and validated again
    kept = speccache.Kept()
    base_spec, _, _ = speccache.read_spec(git, base_commit, kept=kept)
    # who the reconciler is comes from the base branch: a pull request cannot name itself the reconciler
    # and so is the branch it commits to: a reconciler commit in head must have been on that branch
    _refuse_hand_edits(
        git, base_commit, head_commit, fork, base_spec.fleet.git.author, base_spec.fleet.git.branch
    )
    state, start = _state_at(git, base_commit, base_spec.fleet.git.author.email)
    if state.as_of is not None and now < state.as_of:
        if now_given:  # leases the plan ends would end before they started
            raise NowBeforeBase(
                f"--now {format_time(now)} is before the base's last pass (asOf {format_time(state.as_of)}"
                " in state/fleet.yaml): plan at or after it"
            )
        now = state.as_of  # this clock is behind the reconciler's: plan as it would, from its asOf
    merged = _merged(git, base_commit, head_commit, base_spec.fleet.git.author)
    head_spec, _, _ = speccache.read_spec(git, merged, kept=kept)
    # the clusters as the base last observed them (configured ones: no credentials needed here); a
    # base on the embedded cluster observed the clusters its inventory describes
    recorded = gitread.read_files(git, str(base_commit.id), [layout.OBSERVED])
    recorded |= _inventory_observed(base_spec, head_spec, recorded)
    domains = _domains(base_spec, recorded)
    if head_spec.fleet is not base_spec.fleet or head_spec.inventory is not base_spec.inventory:
        domains |= _domains(head_spec, recorded)  # else the same objects, read once (`speccache.Kept`)
    where = trust.placed(state, start.blobs, lambda oid: gitread.read_blob(git, oid))

    def outlines(specs: Sequence[validated.Spec]) -> list[dict[str, Any]]:
        """Each spec planned from the base state, as `report.compare` compares plans."""
        return [
            prdiff.outline(
                pipeline.run_pass(
                    s, clusters.cluster_for(s, state, recorded, now, live=False), state, now, render=False
                ),
                domains,
            )
            for s in specs
        ]

    # reconcile plans nothing while jobtree.yaml or the inventory is invalid (`FleetInvalid`): a side
    # whose one is plans nothing, and a head that breaks one changes nothing but fails the check
    stalled = {
        side: _stalled(spec, state, recorded, where, now)
        for side, spec in (("base", base_spec), ("head", head_spec))
    }
    base_side = forkmap.start(outlines, [] if stalled["base"] else [base_spec], least=1)  # forked meanwhile
    head_side = [] if stalled["head"] else outlines([head_spec])
    before = base_side.wait()[0] if not stalled["base"] else prdiff.NOTHING_PLANNED
    after = head_side[0] if head_side else before
    # a problem the base already has is not this change's: it is shown, but fails nothing
    on_base = {(d.path, d.code, d.message) for d in base_spec.diagnostics}
    diagnostics = [str(d) for d in head_spec.diagnostics if (d.path, d.code, d.message) not in on_base]
    flagged = {d.path for d in head_spec.diagnostics}
    diagnostics += [  # an inventory this change deletes or empties, clusters it renames: no file diagnostic says so
        str(
            Diagnostic(
                path,
                1,
                1,
                codes.INVENTORY if path == INVENTORY_FILE else codes.CLUSTER_UNMATCHED,
                f"{path} {why}: after merge reconcile would plan nothing",
            )  # fmt: skip
        )
        for path, why in stalled["head"].items()
        if path not in stalled["base"] and path not in flagged
    ]
    return prdiff.compare(
        before, after, base=str(base_commit.id), head=str(head_commit.id), now=now,
        merged=str(merged.id) if merged.id not in (head_commit.id, base_commit.id) else None,
        stalled=[
            f"{path} {why} at {side}: reconcile plans nothing there until fixed"
            for side, files in stalled.items()
            for path, why in files.items()
        ],
        diagnostics=diagnostics,
        diagnostics_on_base=[str(d) for d in head_spec.diagnostics if (d.path, d.code, d.message) in on_base],
    )  # fmt: skip


def _stalled(
    spec: validated.Spec, state: FleetState, recorded: dict[str, bytes], where: trust.Placed, now: int
) -> dict[str, str]:
    """`{file: why}` a side plans nothing for: `pipeline.stalled`'s, and work on clusters a pass
    cannot believe (`trust`), said against jobtree.yaml."""
    out = pipeline.stalled(spec, state)
    if out or not spec.fleet.clusters:
        return out
    doubts = trust.unknown(spec, where) + trust.doubted(
        clusters.Recorded([c.name for c in spec.fleet.clusters], recorded), where
    )
    return {FLEET_FILE: f"leaves work on clusters no pass can believe: {'; '.join(doubts)}"} if doubts else {}


def _inventory_observed(
    base: validated.Spec, head: validated.Spec, recorded: dict[str, bytes]
) -> dict[str, bytes]:
    """The observed files of head's clusters the base never observed, as a base planning on the
    embedded cluster saw them: its inventory's nodes labelled with that cluster's name (adopting
    `clusters` plans as the inventory did, until the first pass observes them)."""
    if base.fleet.clusters or base.inventory is None:
        return {}
    nodes = nodes_from_inventory(base.inventory).values()
    return observedfiles.files({
        c.name: [n for n in nodes if n.labels.get("cluster") == c.name]
        for c in head.fleet.clusters
        if layout.observed_file(c.name) not in recorded and any(n.labels.get("cluster") == c.name for n in nodes)
    })  # fmt: skip


def _merged(
    git: gitread.Repository, base: gitread.Commit, head: gitread.Commit, author: GitAuthor
) -> gitread.Commit:
    """The commit merging head into base would make, whose spec is planned: head itself when it
    already contains base (a rebased branch, GitHub's merge ref), base when base already contains
    head, else the merge of the two (`gitwrite.merge_commit`). Planning head's own tree instead
    would read runs added on base since the branch left it as deleted by the change, and report
    them cut. Only its spec is read: `state/` and `rendered/` are taken from base where both sides
    changed them (the branch's own state commits, `reconcile --branch`, against newer ones on base)."""
    if head.id == base.id or git.descendant_of(head.id, base.id):
        return head
    if git.descendant_of(base.id, head.id):
        return base
    try:
        return gitwrite.merge_commit(git, base, head, author.name, author.email)
    except errors.PermanentGitError as err:
        raise PlanFailure(str(err)) from None
