"""A run change proposed as a pull request (`kubectl runs submit`, `shrink`, `grow`): validate, branch, push, plan.

The run file is checked by the validator against the fleet at the base commit (any problem the
change brings refuses it: `Invalid`, exit 3), committed on top of the base as the person on a new
branch (`runs/<namespace>/<name>` unless named; one a merged pull request left behind, holding
nothing the base lacks, is reused), pushed to the remote, and planned
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

    def as_json(self) -> dict[str, object]:
        return {
            "run": self.run,
            "file": self.path,
            "branch": self.branch,
            "base": {"branch": self.base_branch, "commit": self.base},
            "commit": self.commit,
            "remote": self.remote,
            "pushed": self.pushed,
            "compareURL": self.compare_url,
            "pullRequest": self.pull_request,
            "notes": self.notes,
            "plan": self.report,
        }


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
    left: str | None = None  # the remote's tip of a branch a merged pull request left behind
    if branch is not None:
        if gitbranch.exists(repo, branch):
            if not gitbranch.merged(repo, f"refs/heads/{branch}", base):
                raise BranchTaken(
                    f"a local branch {branch!r} exists already, with commits the base does not have"
                )
            gitbranch.delete(repo, branch)  # merged already: nothing on it is lost
        left = gitremote.fetch(repo, remote, branch, token=token) if url is not None else None
        if left is not None and not gitbranch.merged(repo, left, base):
            raise BranchTaken(
                f"{remote} has a branch {branch!r} already, with commits the base does not have (an open "
                "pull request, or one merged by squashing: delete that branch on the host)"
            )
    commit = gitbranch.commit_change(
        repo, base, {path: data}, message=message, author=author, when=now, branch=branch
    )
    report = pr.plan(repo, gitread.commit(repo, base), gitread.commit(repo, commit), now, now_given)
    out = Proposal(run, path, branch, base, base_branch, commit, report)
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
