"""A run change proposed as a pull request (`kubectl runs submit`, `shrink`, `grow`): validate, branch, push, plan.

The run file is checked by the validator against the fleet at the base commit (any problem the
change brings refuses it: `Invalid`, exit 3), committed on top of the base as the person on a new
branch (`runs/<namespace>/<name>` unless named; one a merged pull request left behind, holding
nothing the base lacks, is reused; the person's own open branch of that file gets the commit on
top, so its pull request is updated), pushed to the remote, and planned
against the base exactly as `jobtree plan` plans a pull request (`passes.pr`). It then says where
to open the pull request (the host's compare page), or opens it through GitHub's REST API when a
token is given. Returns a `Proposal`; prints nothing and never moves the base branch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.git import branch as gitbranch
from reconciler.git import errors, hosting
from reconciler.git import read as gitread
from reconciler.git import remote as gitremote
from reconciler.passes import pr
from reconciler.report import model
from reconciler.report import render as planreport
from reconciler.spec import files as specfiles
from reconciler.spec import validated


class Invalid(Exception):
    """The change brings validator problems (`problems`, one `path:line:col: CODE message` each)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{len(problems)} problems")
        self.problems = problems


class BranchTaken(Exception):
    """The branch exists already here or on the remote (an open pull request, perhaps)."""


@dataclass(slots=True)
class Proposal:
    run: str
    path: str
    branch: str | None  # None: planned only (a dry run), no branch made
    base: str  # the base commit
    base_branch: str
    commit: str  # the proposed commit
    report: model.Report
    remote: str | None = None  # where the branch was pushed
    pushed: bool = False
    compare_url: str | None = None
    pull_request: str | None = None
    notes: list[str] = field(default_factory=list)  # for people: what did not happen, and what to do
    updated: bool = False  # the commit went on the person's own open branch (its pull request updated)

    def as_json(self) -> dict[str, object]:
        return {
            "run": self.run,
            "file": self.path,
            "branch": self.branch,
            "updated": self.updated,
            "base": {"branch": self.base_branch, "commit": self.base},
            "commit": self.commit,
            "remote": self.remote,
            "pushed": self.pushed,
            "compareURL": self.compare_url,
            "pullRequest": self.pull_request,
            "notes": self.notes,
            "plan": self.report,
        }


def _own_tip(
    repo: gitread.Repository, branch: str, remote: str, local: str | None, there: str | None, base: str,
    email: str, path: str,
) -> str | None:  # fmt: skip
    """The tip of the person's own open branch (`local`, or `there` on the remote, the newer of
    them), which a new commit goes on top of; None when neither is open. `BranchTaken` when the
    branch holds someone else's commits or other files, or the two have diverged."""
    tips = [t for t in (local, there) if t is not None]
    if not tips:
        return None
    tip = tips[-1] if gitbranch.descends(repo, tips[-1], tips[0]) else tips[0]
    if not gitbranch.descends(repo, tip, tips[-1]) or not gitbranch.descends(repo, tip, tips[0]):
        raise BranchTaken(
            f"the branch {branch!r} here and on {remote} have diverged: `git pull` it, or push it "
            "(`git push`) before submitting again"
        )
    if not gitbranch.only_yours(repo, tip, base, email, path):
        where = "here" if tip == local else f"on {remote}"
        raise BranchTaken(
            f"a branch {branch!r} exists {where} with commits that are not yours or change other files than "
            f"{path} (an open pull request, or one merged by squashing: delete that branch on the host)"
        )
    return tip


def problems_brought(repo: gitread.Repository, base: str, path: str, data: bytes) -> list[str]:
    """Validator diagnostics the fleet at `base` does not have once `path` holds `data`."""
    files = specfiles.read_listed(repo, specfiles.list_commit(repo, gitread.commit(repo, base).tree, {}))
    before = {(d.path, d.code, d.message) for d in validated.check(files).diagnostics}
    after = validated.check({**files, path: data})
    return [str(d) for d in after.diagnostics if (d.path, d.code, d.message) not in before]


def propose(
    repo: gitread.Repository,
    *,
    run: str,
    base: str,
    base_branch: str,
    path: str,
    data: bytes,
    message: str,
    title: str,
    branch: str | None,
    now: int,
    now_given: bool,
    remote: str = "origin",
    token: str | None = None,
    github_token: str | None = None,
) -> Proposal:
    """Validate, commit on `branch` (None: no branch, nothing pushed), push, plan, and open the pull
    request when `github_token` is given. Raises `Invalid`, `BranchTaken`, `errors.GitStoreError`,
    `pr.PlanFailure`, `pr.HandEdited`."""
    found = problems_brought(repo, base, path, data)
    if found:
        raise Invalid(found)
    author = gitbranch.identity(repo)
    url = gitbranch.remote_url(repo, remote) if branch is not None else None
    left: str | None = None  # the remote's tip of the branch, when it has one
    prior: str | None = None  # the tip of the person's own open branch, which the commit goes on
    if branch is not None:
        local = (
            str(repo.references[f"refs/heads/{branch}"].target) if gitbranch.exists(repo, branch) else None
        )
        if local is not None and gitbranch.merged(repo, local, base):
            gitbranch.delete(repo, branch)  # merged already: nothing on it is lost
            local = None
        left = gitremote.fetch(repo, remote, branch, token=token) if url is not None else None
        open_there = left if left is not None and not gitbranch.merged(repo, left, base) else None
        prior = _own_tip(repo, branch, remote, local, open_there, base, author[1], path)
    commit = gitbranch.commit_change(
        repo, prior or base, {path: data}, message=message, author=author, when=now, branch=branch,
        forward=prior is not None,
    )  # fmt: skip
    report = pr.plan(repo, gitread.commit(repo, base), gitread.commit(repo, commit), now, now_given)
    out = Proposal(run, path, branch, base, base_branch, commit, report, updated=prior is not None)
    if branch is None:
        return out
    if url is None:
        out.notes.append(
            f"no remote {remote!r}: the branch {branch} is committed here; push it and open a pull request"
        )
        return out
    pushed = gitremote.push(repo, remote, branch, left, token=token)  # compare-and-swap on what was there
    if not pushed.ok:
        raise errors.PermanentGitError(
            f"{remote} did not take {branch} ({pushed.status.value}: {pushed.message}); the branch is "
            f"committed here: `git push {remote} {branch}` when the remote allows it"
        )
    out.remote, out.pushed = remote, True
    host = hosting.Repo.of(url)
    if host is None:
        out.notes.append(f"open a pull request of {branch} into {base_branch} on the host of {url}")
        return out
    out.compare_url = host.compare(base_branch, branch)
    if github_token:
        body = planreport.as_markdown(report, report["diagnostics"])
        try:
            out.pull_request = hosting.open_pull_request(host, base_branch, branch, title, body, github_token)
        except hosting.HostError as err:
            out.notes.append(f"the pull request was not opened ({err}): open it at {out.compare_url}")
    return out
