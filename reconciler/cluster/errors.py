"""One error tree for everything a Kubernetes API can say (observe, apply, the agent), split the kopf way.

`TemporaryClusterError`: a later attempt can help (409 Conflict, 429 with its `Retry-After`, a 5xx
other than a rejected field, a connection cut or refused, a timeout); `retry` retries these with
backoff, and what is still temporary after the last attempt reaches the caller. `Unreachable`: the
server never answered (refused, no route, TLS, no credentials to load): the cluster is named and
the next pass tries again. `PermanentClusterError`: retrying cannot help (403, 404 where an object
must exist, 422, an apply naming a field the CRD does not declare, a delete whose object was
replaced since it was listed). Every module of
`reconciler.cluster` raises these, never the client's own exceptions (`api` translates them at the
one call that raised them). `LostLead` stands apart on purpose: an agent replica that lost the lead
is stopped by it before a write, and no handler of cluster errors may retry or swallow it. Raises
nothing itself.
"""

from __future__ import annotations


class ClusterError(Exception):
    """Base of every error `reconciler.cluster` raises; `temporary` says whether a retry can help."""

    temporary = False

    def __init__(
        self, message: str, *, code: int | None = None, reason: str = "", delay: float = 0.0
    ) -> None:
        super().__init__(message)
        self.code = code  # the HTTP status, when the server answered
        self.reason = reason  # the Status reason (Conflict, TooManyRequests, ...), when it gave one
        self.delay = delay  # seconds the server asked to wait (Retry-After), 0 when it did not


class TemporaryClusterError(ClusterError):
    temporary = True


class PermanentClusterError(ClusterError):
    temporary = False


class Unreachable(TemporaryClusterError):
    """The API server could not be reached or authenticated against: no answer at all."""


class NotFound(PermanentClusterError):
    """The object (or its kind: a CRD not yet established) does not exist."""


class Gone(PermanentClusterError):
    """A watch or list continuation is too old (410): start again from a fresh list."""


class AlreadyExists(PermanentClusterError):
    """A create found the name taken (409 AlreadyExists): the object was created before."""


class Replaced(PermanentClusterError):
    """A delete of the object as it was listed found another of its name (409: its uid
    precondition failed): it was deleted and made again since the list, and is left alone."""


class LostLead(Exception):
    """This replica's lead ran out (its renew deadline passed) before a write: it must not write
    again, and its process ends (§7.6). Not a `ClusterError`: nothing retries it."""
