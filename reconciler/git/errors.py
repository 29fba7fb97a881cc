"""One error tree for everything Git can say (any step of a pass), split the kopf way; raises nothing itself.

`TemporaryGitError`: retry after a delay (remote unreachable, lock busy, a background write that
failed); `PermanentGitError`: retrying cannot help (bad revision, not a repository, dirty
checkout, a refused push). Every module of `reconciler.git` raises these, never pygit2's own
exceptions: `LIBGIT2_ERRORS` is what pygit2 raises, caught at the one call that raised it and
translated there with a message for people. A push the remote refuses is not an error but a
`remote.PushResult`, so the caller can re-plan.
"""

from __future__ import annotations

import pygit2

# What pygit2 raises for a missing object, a bad revision or a failing libgit2 call.
LIBGIT2_ERRORS: tuple[type[Exception], ...] = (pygit2.GitError, KeyError, ValueError, pygit2.InvalidSpecError)


class GitStoreError(Exception):
    """Base of every error `reconciler.git` raises; `temporary` says whether a later retry can help."""

    temporary = False


class TemporaryGitError(GitStoreError):
    temporary = True


class PermanentGitError(GitStoreError):
    temporary = False


class GitUnavailable(TemporaryGitError):
    """The remote could not be reached (network, URL, credentials); the next pass retries."""


class LockBusy(TemporaryGitError):
    """Another writer holds this clone's lock."""


class NotARepository(PermanentGitError):
    pass


class RevisionNotFound(PermanentGitError):
    pass


class BranchMoved(PermanentGitError):
    """The local branch is not where the caller's plan started; sync before committing."""


class DirtyCheckout(PermanentGitError):
    """The branch is checked out and local edits would be overwritten by moving it."""


class UnpushedWork(PermanentGitError):
    """The local branch diverged from the remote with commits jobtree did not write: never discarded."""


class GitReadError(PermanentGitError):
    """A fleet repository's files cannot be read (not a folder, not a repository, no such revision);
    the message says what to fix."""


class MergeConflict(PermanentGitError):
    """Two commits do not merge cleanly outside the owned folders."""
