"""Git remote side (steps 2 and 7 of a pass): fetch, compare-and-swap push, sync, retry; it never plans or commits.

Every push goes through libgit2, without delta search (`PUSH_PACK_CONFIG`); a remote on a local
path is `localpath`'s to locate and check first. A push the remote refuses is a `PushResult` (STALE: re-plan and retry;
REFUSED: do not), never an exception; an unreachable remote raises `errors.GitUnavailable`
(temporary), a missing remote, branch or remote path `errors.PermanentGitError`. A remote URL that
is a relative path is read as Git reads it: from the clone's top-level directory (bare: its git dir).
"""

from __future__ import annotations

import enum
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pygit2
from pygit2 import C
from pygit2.enums import ConfigLevel, SortMode

from reconciler.git import localpath
from reconciler.git.checkout.worktree import move_branch
from reconciler.git.errors import GitUnavailable, PermanentGitError, UnpushedWork
from reconciler.git.ownership import reconciler_commit

# Threads libgit2's pack builder may use for a push (0: one per CPU; it only helps delta search).
PACK_THREADS = 0
# What libgit2's pack builder reads for a push, on top of the clone's own config: no delta search.
# State files are small and compress well on their own; searching 12,000 of them for deltas took half
# the CPU of a first push (measured alone on 2 cores: 5.7 s CPU and 4.0 s wall with it, 3.1 s and
# 3.1 s without) to send 7.1 MB instead of 11.3 MB. The remote's objects and commit are the same
# either way, `git gc` there still finds deltas, and later passes push a few thousand objects at
# most. libgit2 1.9 reads its "too big to delta" limit from `pack.deltaCacheSize` (a slip for
# `pack.bigFileThreshold`), so both are 1 byte: under either reading every object goes in whole.
PUSH_PACK_CONFIG = "[pack]\n\tbigFileThreshold = 1\n\tdeltaCacheSize = 1\n"


TIMEOUT_ENV = "JOBTREE_GIT_TIMEOUT"  # seconds a network remote may take to connect, or stay silent
DEFAULT_TIMEOUT = 60
MAX_TIMEOUT = 86_400


def network_timeout() -> int:
    """Seconds a remote may take to connect or to answer (`JOBTREE_GIT_TIMEOUT`, default 60), set on
    libgit2 so a remote that accepts a connection but never answers fails the pass (the next one
    retries) instead of holding the clone's writer lock for ever."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        seconds = DEFAULT_TIMEOUT
    elif text.isascii() and text.isdigit() and 0 < int(text) <= MAX_TIMEOUT:  # libgit2 takes ms in a C int
        seconds = int(text)
    else:
        raise PermanentGitError(
            f"{TIMEOUT_ENV}={text!r} is not a whole number of seconds from 1 to {MAX_TIMEOUT}; "
            f"set it so (or unset it for {DEFAULT_TIMEOUT})"
        )
    pygit2.settings.server_connect_timeout = seconds * 1000
    pygit2.settings.server_timeout = seconds * 1000
    return seconds


class PushStatus(enum.Enum):
    PUSHED = "pushed"
    UP_TO_DATE = "up-to-date"
    STALE = "stale"  # the remote moved since the plan was made: fetch, re-read, re-plan, retry
    REFUSED = "refused"  # the remote declined for another reason (a hook, protection): do not retry


@dataclass(frozen=True, slots=True)
class PushResult:
    status: PushStatus
    remote: str
    branch: str
    local_oid: str | None
    remote_oid: str | None  # the remote head after the attempt, as far as we know
    message: str = ""
    locked: bool = False  # STALE because another push held the branch's lock, not because it moved

    @property
    def ok(self) -> bool:
        return self.status in (PushStatus.PUSHED, PushStatus.UP_TO_DATE)

    @property
    def retryable(self) -> bool:
        return self.status is PushStatus.STALE


class _Callbacks(pygit2.RemoteCallbacks):
    def __init__(self, token: str | None) -> None:
        super().__init__()
        self.token = token
        self.refused: dict[str, str] = {}

    def credentials(self, url, username_from_url, allowed_types):  # type: ignore[no-untyped-def]  # pygit2's signature
        if self.token is None or not allowed_types & pygit2.enums.CredentialType.USERPASS_PLAINTEXT:
            raise pygit2.Passthrough  # let libgit2 fall back to its own defaults
        return pygit2.UserPass(username_from_url or "x-access-token", self.token)

    def push_update_reference(self, refname: str, message: str | None) -> None:
        if message is not None:
            self.refused[refname] = message


def _remote(repo: pygit2.Repository, name: str) -> pygit2.remotes.Remote:
    try:
        return repo.remotes[name]
    except KeyError as err:
        raise PermanentGitError(f"no remote named {name!r} in {repo.path} (see `git remote -v`)") from err


def _unavailable(remote: pygit2.remotes.Remote, doing: str, err: Exception) -> GitUnavailable:
    url = (remote.push_url or remote.url) if doing == "push to" else remote.url
    return GitUnavailable(
        f"cannot {doing} remote {remote.name!r} at {url}: {err}. Check the URL (`git remote -v`), "
        "network access and credentials; nothing was lost, the next pass retries"
    )


def _connect(repo: pygit2.Repository, remote: pygit2.remotes.Remote, doing: str) -> pygit2.remotes.Remote:
    """`remote` as Git reaches it: a relative path URL is read from the clone's top-level directory.

    libgit2 reads a relative path from the process's current directory, so such a remote becomes an
    anonymous one with the absolute path. A local path that does not exist is refused by name here
    (libgit2 would call it an "unsupported URL protocol"): retrying cannot help.
    """
    url = (remote.push_url or remote.url) if doing == "push to" else remote.url
    base = localpath.url_base(repo)
    path = localpath.path_of(url, base)
    if path is None:
        return remote
    relative = localpath.path_of(url) is None
    if not os.path.exists(path):
        raise PermanentGitError(
            f"cannot {doing} remote {remote.name!r} at {url}: the local path {path} does not exist"
            + (f" (a relative path is read from {base})" if relative else "")
            + ". Check the URL (`git remote -v`)"
        )
    return repo.remotes.create_anonymous(path) if relative else remote


def fetch(repo: pygit2.Repository, remote: str, branch: str, *, token: str | None = None) -> str | None:
    """Fetch `branch` into `refs/remotes/<remote>/<branch>`; the remote head's sha, None if absent."""
    network_timeout()
    rem = _remote(repo, remote)
    tracking = f"refs/remotes/{remote}/{branch}"
    source = _connect(repo, rem, "fetch from")
    try:
        heads = {h.name: str(h.oid) for h in source.list_heads(callbacks=_Callbacks(token))}
        head = heads.get(f"refs/heads/{branch}")
        if head is not None:
            source.fetch([f"+refs/heads/{branch}:{tracking}"], callbacks=_Callbacks(token))
    except (pygit2.GitError, OSError) as err:
        raise _unavailable(rem, "fetch from", err) from err
    if head is None and repo.references.get(tracking) is not None:
        repo.references.delete(tracking)
    return head


def push(
    repo: pygit2.Repository,
    remote: str = "origin",
    branch: str = "main",
    expected_remote_oid: str | None = None,
    *,
    token: str | None = None,
) -> PushResult:
    """Push the local branch only if the remote head is still `expected_remote_oid` (None: absent).

    Fast-forward only; the server re-checks the old value atomically, so two racing writers cannot both
    win. A remote that moved gives STALE, a server that declines gives REFUSED; unreachable raises.
    Every remote goes through libgit2; a bare repository on a local path is refused when it runs
    receive hooks (no local push runs them), and a ref lock a killed push left in it is taken over
    (`localpath.stale_ref_lock`), so it never wedges later passes.
    """
    local_ref = repo.references.get(f"refs/heads/{branch}")
    if local_ref is None:
        raise PermanentGitError(f"no local branch {branch!r} to push in {repo.path}")
    local = str(local_ref.target)
    head = fetch(repo, remote, branch, token=token)  # sets the network timeout for the push too

    def result(
        status: PushStatus, remote_oid: str | None, message: str = "", locked: bool = False
    ) -> PushResult:
        return PushResult(status, remote, branch, local, remote_oid, message, locked)

    if head == local:
        return result(PushStatus.UP_TO_DATE, head)
    if head != expected_remote_oid:
        return result(PushStatus.STALE, head, f"remote moved from {expected_remote_oid} to {head}")
    rem = _remote(repo, remote)
    path = localpath.local_path(rem.push_url or rem.url, localpath.url_base(repo))
    hooks = localpath.receive_hooks(path) if path is not None else []
    if hooks:
        raise PermanentGitError(
            f"{path} runs {', '.join(hooks)} on pushes, and no push over a local path (a folder or "
            f"file://) runs them: jobtree will not bypass the remote's rules. Push through a server "
            "that runs them (ssh, https, or git daemon), or remove the hooks; nothing was pushed"
        )
    taken = localpath.stale_ref_lock(path, branch) if path is not None else None
    callbacks = _Callbacks(token)
    with _pushing_handle(repo) as pusher:
        rem = _remote(pusher, remote)
        target = _connect(pusher, rem, "push to")
        try:
            target.push(
                [f"refs/heads/{branch}:refs/heads/{branch}"], callbacks=callbacks, threads=PACK_THREADS
            )
        except pygit2.GitError as err:
            text = str(err)
            if "non-fastforward" in text or "not present locally" in text:
                return result(PushStatus.STALE, fetch(repo, remote, branch, token=token), text)
            locked = _locked(path, branch, text)
            if locked is not None:
                return result(PushStatus.STALE, fetch(repo, remote, branch, token=token), locked, locked=True)
            raise _unavailable(rem, "push to", err) from err
    refusal = callbacks.refused.get(f"refs/heads/{branch}")
    if refusal is None:
        repo.references.create(f"refs/remotes/{remote}/{branch}", local_ref.target, force=True)
        return result(PushStatus.PUSHED, local, f"took over {taken}, left by a killed push" if taken else "")
    after = fetch(repo, remote, branch, token=token)
    locked = _locked(path, branch, refusal)
    if locked is not None and after == expected_remote_oid:
        return result(PushStatus.STALE, after, locked, locked=True)
    status = PushStatus.STALE if after != expected_remote_oid else PushStatus.REFUSED
    return result(status, after, f"{rem.url} refused {branch}: {refusal}")


def _locked(path: str | None, branch: str, said: str) -> str | None:
    """Why a push to the remote on the local `path` failed, when another push held `branch` (libgit2
    says it could not lock the ref; the lock may be gone by the time we look): as a server would,
    the push is refused, and the pass re-plans."""
    if path is None:
        return None
    lock = localpath.lock_path(path, branch)
    if "lock" not in said and not os.path.exists(lock):
        return None
    return (
        f"{branch} in {path} was locked ({lock} is held by a push that still runs, or was left by one "
        f"killed less than {localpath.REF_LOCK_STALE} s ago, which a later pass takes over)"
    )


@contextmanager
def _pushing_handle(repo: pygit2.Repository) -> Iterator[pygit2.Repository]:
    """A handle of its own on `repo` whose config also has `PUSH_PACK_CONFIG` (app level, in memory).

    Only this handle's pack builder sees the extra settings; the clone's config files are untouched.
    """
    with tempfile.TemporaryDirectory(prefix="jobtree-push-") as tmp:
        path = os.path.join(tmp, "config")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(PUSH_PACK_CONFIG)
        own = pygit2.Repository(repo.path)
        config = own.config  # the handle's own config object, kept alive until the push is done
        try:
            err = C.git_config_add_file_ondisk(config._c_config, path.encode(), ConfigLevel.APP, own._repo, 1)
        except (AttributeError, TypeError):  # another pygit2: push with libgit2's defaults
            err = -1
        yield own if err == 0 else repo  # libgit2's default pack settings are slower, never wrong


class SyncOutcome(enum.Enum):
    UP_TO_DATE = "up-to-date"
    FAST_FORWARDED = "fast-forwarded"
    AHEAD = "ahead"  # local commits not yet pushed; left alone
    DIVERGED = "diverged"  # local commits the remote does not have, and the remote moved on
    RESET = "reset"  # diverged, and the reconciler's own unpushed commits were discarded (re-planned)
    NO_REMOTE_BRANCH = "no-remote-branch"


def sync_with_remote(
    repo: pygit2.Repository,
    remote: str = "origin",
    branch: str = "main",
    *,
    discard_unpushed: bool = False,
    author_email: str | None = None,
    token: str | None = None,
) -> SyncOutcome:
    """Fetch, then fast-forward the local branch to the remote head.

    With `discard_unpushed`, a diverged local branch (a pass killed before its push, or a push that
    lost a race) is reset to the remote head, but only when every local commit the remote lacks is
    the reconciler's own (see `reconciler_commit`; `author_email` is the fleet's `git.author`, None
    accepts any author): the next plan recomputes them. Any other commit (a person's) raises
    `UnpushedWork` and nothing moves.
    """
    head = fetch(repo, remote, branch, token=token)
    if head is None:
        return SyncOutcome.NO_REMOTE_BRANCH
    remote_oid = pygit2.Oid(hex=head)
    ref = repo.references.get(f"refs/heads/{branch}")
    if ref is None:
        move_branch(repo, branch, remote_oid)
        return SyncOutcome.FAST_FORWARDED
    local = ref.target
    assert isinstance(local, pygit2.Oid)
    if local == remote_oid:
        return SyncOutcome.UP_TO_DATE
    if repo.descendant_of(remote_oid, local):
        move_branch(repo, branch, remote_oid)
        return SyncOutcome.FAST_FORWARDED
    if repo.descendant_of(local, remote_oid):
        return SyncOutcome.AHEAD
    if not discard_unpushed:
        return SyncOutcome.DIVERGED
    walker = repo.walk(local, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    walker.hide(remote_oid)
    unpushed = list(walker)
    foreign = [c for c in unpushed if not reconciler_commit(repo, c, author_email)]
    if foreign:
        first = foreign[0]
        count = len(unpushed)
        theirs = "" if len(foreign) == count else f", {len(foreign)} of them not written by jobtree"
        raise UnpushedWork(
            f"{branch} has {count} local commit{'s' if count != 1 else ''} that {remote}/{branch} does not "
            f'have{theirs} (the first: {str(first.id)[:12]} "{_subject(first)}"), and {remote}/{branch} '
            f"moved on; jobtree discards only its own unpushed state commits, so nothing was changed. "
            f"Push those commits (e.g. through a pull request), or reset {branch} to {remote}/{branch} "
            f"(`git reset --hard {remote}/{branch}` throws them away), then reconcile again"
        )
    move_branch(repo, branch, remote_oid)
    return SyncOutcome.RESET


def _subject(commit: pygit2.Commit) -> str:
    return commit.message.strip().split("\n", 1)[0]


def run_with_retry(
    attempt: Callable[[], PushResult],
    attempts: int = 5,
    backoff: float = 0.2,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    max_delay: float = 10.0,
) -> PushResult:
    """Call `attempt` until it is not STALE, at most `attempts` times, sleeping with jittered backoff.

    `attempt` must fetch, re-read, re-plan, commit and push; exceptions propagate untouched.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    rng = rng if rng is not None else random.Random()
    result = attempt()
    for i in range(1, attempts):
        if not result.retryable:
            return result
        sleep(min(max_delay, backoff * (2 ** (i - 1)) * (0.5 + rng.random())))
        result = attempt()
    return result
