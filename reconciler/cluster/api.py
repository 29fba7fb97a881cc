"""The REST calls jobtree makes to one cluster, over the official client's `ApiClient`: plain dicts in and out.

get, list (paged, by label selector; each page's objects decoded into the fields the caller
reads when it names them), server-side apply (as the Api's field manager: `jobtree` for
reconcile, `jobtree-agent` for the agent, so neither takes the other's fields; force on the fields
it owns; status through `/status`), a merge patch (the cordon flag), delete, and a watch for
objects to go. An Api made with `dry_run` sends every write with `dryRun=All`: the server
validates and answers it as it would, and stores nothing (`rehearsing`). An Api with a `fence`
(the agent's: its lead's time left) asks it before every write, every retry included, and sends
none once it says the lead ran out (`LostLead`), each with a timeout that ends with the lead. Every call goes through `retry` with the cluster's backoff, and every
failure becomes a `reconciler.cluster.errors` error: the client's exceptions stop here. Counts the
requests it sent (reads, writes) for reports and the benchmark. Decides nothing about what to send.
"""

from __future__ import annotations

import functools
import json
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec
import orjson
import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from reconciler.cluster import retry
from reconciler.cluster.errors import (
    AlreadyExists,
    ClusterError,
    Gone,
    LostLead,
    NotFound,
    PermanentClusterError,
    Replaced,
    TemporaryClusterError,
    Unreachable,
)
from reconciler.cluster.kinds import Kind

FIELD_MANAGER = "jobtree"  # reconcile's
AGENT_FIELD_MANAGER = "jobtree-agent"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
PAGE = 500  # objects per list page (`limit`), as kubectl asks
TEMPORARY_CODES = frozenset({409, 429, 500, 502, 503, 504})
# A 500 that no retry changes: a server-side apply naming a field the schema does not declare
# (kube-apiserver answers "failed to create typed patch object ... field not declared in schema").
_REJECTED_FIELD = "field not declared in schema"
Obj = dict[str, Any]
DEFAULT_POLICY = retry.Backoff()
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list (`items`), or the list's end (`version`: the snapshot's resourceVersion)."""

    items: list[Obj]
    version: str | None = None


@dataclass(slots=True)
class Counts:
    """Requests sent to one cluster, by kind of request (every retry counted)."""

    reads: int = 0
    writes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, method: str) -> None:
        with self._lock:
            if method == "GET":
                self.reads += 1
            else:
                self.writes += 1


class Api:
    """One cluster's API: `cluster` names it in every error."""

    def __init__(
        self,
        client: ApiClient,
        cluster: str,
        policy: retry.Backoff = DEFAULT_POLICY,
        timeout: float = 30.0,
        manager: str = FIELD_MANAGER,
        dry_run: bool = False,
        fence: Callable[[], float] | None = None,
    ) -> None:
        self.client, self.cluster, self.policy, self.timeout = client, cluster, policy, timeout
        self.manager, self.dry_run = manager, dry_run
        # seconds this process may still write (an agent replica's lead left); asked before every write
        self.fence = fence
        self.counts = Counts()

    # --------------------------------------------------------------------------------- reads

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj | None:
        """The object, or None when it does not exist."""
        try:
            return self._json("GET", kind.path(name, namespace))
        except NotFound:
            return None

    def list_all(
        self, kind: Kind, selector: str | None = None, namespace: str | None = None,
        keep: Callable[[Obj], T | None] | None = None, since: str | None = None, shape: Any = None,
    ) -> tuple[list[Any], str]:  # fmt: skip
        """Every object of `kind` (matching the label `selector`), page by page from one snapshot, and
        that snapshot's resourceVersion. A continuation that expired (410) starts the list again.
        `keep` turns each object into what the caller holds (None: nothing) as its page arrives,
        so a list of large objects never holds more than one page of them whole. `since`: a
        snapshot not older than that resourceVersion, from the API server's watch cache (no read
        of etcd; answered whole, in one page). `shape`: the fields of each object the caller reads
        (`pages`)."""
        for _ in range(3):
            items: list[Any] = []
            try:
                for page in self.pages(kind, selector, namespace, since=since, shape=shape):
                    if page.version is not None:
                        return items, page.version
                    if keep is None:
                        items += page.items
                    else:
                        items += [x for x in map(keep, page.items) if x is not None]
            except Gone:
                continue
        raise TemporaryClusterError(f"{self.cluster}: listing {kind.plural} kept expiring mid-way; try again")

    def pages(
        self, kind: Kind, selector: str | None = None, namespace: str | None = None, limit: int = PAGE,
        since: str | None = None, shape: Any = None,
    ) -> Iterator[Page]:  # fmt: skip
        """One consistent list as its pages of objects (at most `limit` each), then a last `Page`
        with no objects and the snapshot's resourceVersion. `Gone` when a continuation expired (the
        caller lists again). `since`: from the watch cache, not older than it (`list_all`).
        `shape`: a `TypedDict` (total=False) of the fields the caller reads of each object: the
        page is decoded into dicts of those alone, every other field skipped while decoding, never
        built (a node's images, annotations and managedFields are most of its 19 KB); a page that
        does not fit the shape is decoded whole, as without one."""
        token = ""
        while True:
            query: list[tuple[str, Any]] = [] if since and not token else [("limit", limit)]
            if selector:
                query.append(("labelSelector", selector))
            if token:
                query.append(("continue", token))
            elif since:
                query += [("resourceVersion", since), ("resourceVersionMatch", "NotOlderThan")]
            page = self._json("GET", kind.collection(namespace), query, shape=shape)
            items = page.get("items") or []
            for item in items:
                item.setdefault("apiVersion", kind.api_version)
                item.setdefault("kind", kind.kind)
            yield Page(items)
            del items, page["items"]
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                yield Page([], str(meta.get("resourceVersion", "")))
                return

    def serves(self, kind: Kind) -> bool:
        """Whether the server serves `kind` yet (a CRD's kind, once the CRD is established)."""
        try:
            self._json("GET", kind.collection(), [("limit", 1)])
        except NotFound:
            return False
        return True

    # -------------------------------------------------------------------------------- writes

    def apply(self, kind: Kind, body: Obj, subresource: str = "") -> Obj:
        """Server-side apply of `body` as field manager `jobtree`, forcing its fields over others'."""
        meta = body["metadata"]
        path = kind.path(meta["name"], meta.get("namespace"), subresource)
        query = [("fieldManager", self.manager), ("force", "true")]
        return self._json("PATCH", path, query, _encoded(body), APPLY)

    def create(self, kind: Kind, body: Obj) -> Obj:
        """Create `body` (POST); `AlreadyExists` when its name is taken, so a second attempt of the
        same step changes nothing."""
        meta = body["metadata"]
        query = [("fieldManager", self.manager)]
        return self._json("POST", kind.collection(meta.get("namespace")), query, body)

    def merge_patch(
        self, kind: Kind, name: str, patch: Obj, namespace: str | None = None, subresource: str = ""
    ) -> Obj:
        return self._json(
            "PATCH", kind.path(name, namespace, subresource), [("fieldManager", self.manager)], patch, MERGE
        )

    def delete(
        self, kind: Kind, name: str, namespace: str | None = None, grace: int | None = None,
        uid: str | None = None,
    ) -> bool:  # fmt: skip
        """Delete the object (True), or find it already gone (False); with `uid`, only the object of
        that uid (`Replaced` when its name now holds another: a 409 no retry changes). The options
        go in the body (DeleteOptions): a server reading a body ignores the same options given in
        the query."""
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if uid:
            options["preconditions"] = {"uid": uid}
        if self.dry_run:
            options["dryRun"] = ["All"]
        try:
            self._json("DELETE", kind.path(name, namespace), [], options, replaced=bool(uid))
        except NotFound:
            return False
        return True

    # --------------------------------------------------------------------------------- watch

    def watch(
        self, kind: Kind, selector: str, since: str, seconds: int,
        opened: Callable[[Callable[[], None]], None] | None = None,
    ) -> Iterator[Obj]:  # fmt: skip
        """Watch events of `kind` matching `selector` after resourceVersion `since`, for at most
        `seconds`; the stream may end early (a server timeout, a dropped connection): the caller
        lists again. A `since` too old raises `Gone`. `opened` is handed, once the stream is open,
        a function that ends it from another thread (the stream then ends as a dropped one)."""
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("labelSelector", selector),
            ("resourceVersion", since),
            ("timeoutSeconds", seconds),
            ("allowWatchBookmarks", "true"),
        ]
        response = self._send("GET", kind.collection(), query, None, None, stream=True)
        if opened is not None:
            opened(functools.partial(_interrupt, response.response))
        try:
            buffer = b""
            for chunk in response.response.stream(4096):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        if status.get("code") == 410:
                            raise Gone(f"{self.cluster}: watch from {since} expired", code=410)
                        return
                    yield event
        except (urllib3.exceptions.HTTPError, OSError, ValueError):  # orjson's JSONDecodeError is one
            return  # a dropped watch: the caller lists again
        finally:
            response.response.release_conn()

    # ----------------------------------------------------------------------------- transport

    def _json(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]] | None = None,
        body: Obj | bytes | None = None,
        content_type: str | None = None,
        replaced: bool = False,
        shape: Any = None,
    ) -> Obj:
        """The answer decoded, retried with the backoff; `replaced`: a 409 is a uid precondition
        that failed (a delete sends no other), raised at once as `Replaced`; `shape`: a list's
        items decoded as that (`pages`)."""

        def once() -> Obj:
            try:
                response = self._send(method, path, query or [], body, content_type)
            except TemporaryClusterError as err:
                if replaced and err.code == 409:
                    raise Replaced(str(err), code=409, reason=err.reason) from None
                raise
            data = self._read(response, method, path)
            if shape is not None and data:
                return decoded_list(data, shape)
            return orjson.loads(data) if data else {}

        return retry.call(once, self.policy)

    def _send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]],
        body: Obj | bytes | None,
        content_type: str | None,
        stream: bool = False,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        if self.dry_run and method not in ("GET", "DELETE"):  # a DELETE says it in its body
            query = [*query, ("dryRun", "All")]
        timeout = self.timeout
        if self.fence is not None and method != "GET":
            left = self.fence()
            if left <= 0:
                raise LostLead(f"{self.cluster}: {method} {path} not sent: this replica's lead has run out")
            timeout = min(timeout, left)  # an answer later than the lead's end is no answer to act on
        self.counts.add(method)
        try:
            request = self.client.param_serialize(
                method=method, resource_path=path, query_params=query, header_params=headers,
                body=body, auth_settings=["BearerToken"],
            )  # fmt: skip
            wait = (timeout, timeout + _seconds(query)) if stream else timeout
            response = self.client.call_api(*request, _request_timeout=wait)
        except ApiException as err:  # raised before any answer: TLS, a request the client refused
            raise Unreachable(f"{self.cluster}: {err.reason or err}", code=err.status or None) from None
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise _transport_error(self.cluster, self.client.configuration.host, method, path, err) from None
        if 200 <= response.status < 300:
            return response
        data = self._read(response, method, path)
        raise _status_error(self.cluster, method, path, response.status, data, response.headers)

    def _read(self, response: Any, method: str, path: str) -> bytes:
        """The body of an answer: the headers came, but the body can still time out or be cut
        (a `ClusterError` then, as for a request that got no answer at all)."""
        try:
            return bytes(response.read())
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise _transport_error(self.cluster, self.client.configuration.host, method, path, err) from None


class _Listing(msgspec.Struct, Generic[T]):
    """A list answer: its metadata (continue, resourceVersion) and its items in a caller's shape."""

    metadata: Any = None
    items: list[T] | None = None


@functools.cache
def _decoder(shape: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(_Listing[shape])


def decoded_list(data: bytes, shape: Any) -> Obj:
    """A list answer with its items decoded into `shape` alone (`Api.pages`); one that does not
    fit the shape (or is no JSON) decoded whole, as without one."""
    try:
        listing = _decoder(shape).decode(data)
    except msgspec.MsgspecError:
        whole: Obj = orjson.loads(data)
        return whole
    return {"metadata": listing.metadata, "items": listing.items}


def _interrupt(raw: Any) -> None:
    """End a streamed answer being read on another thread: its socket shut down, so the blocked
    read returns (urllib3's own `shutdown` where it has one)."""
    try:
        shutdown = getattr(raw, "shutdown", None)
        if shutdown is not None:
            shutdown()
            return
        sock = getattr(getattr(getattr(raw, "_fp", None), "fp", None), "raw", None)
        sock = getattr(sock, "_sock", None)
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def rehearsing(api: Api) -> Api:
    """`api` sending every write with `dryRun=All` (reads as they are), counted with it."""
    out = Api(api.client, api.cluster, api.policy, api.timeout, api.manager, dry_run=True)
    out.counts = api.counts
    return out


def _encoded(body: Obj) -> Obj | bytes:
    """An apply's body as the JSON it is sent as, encoded by orjson (the client's own encoding walks
    every body twice in Python: 10 of the 28 s of CPU of a profiled 1,500-node first apply); a body
    orjson cannot encode (a key that is not text) is left to the client."""
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        return body


def _seconds(query: list[tuple[str, Any]]) -> float:
    """A watch's own timeoutSeconds: how long its stream may stay quiet at most."""
    return float(next((v for k, v in query if k == "timeoutSeconds"), 0))


def _transport_error(cluster: str, host: str, method: str, path: str, err: Exception) -> ClusterError:
    """A request that got no answer: never connected (unreachable), or cut or timed out mid-way."""
    cause = (
        err.reason if isinstance(err, urllib3.exceptions.MaxRetryError) and err.reason is not None else err
    )
    text = " ".join(str(cause).split())
    text = text.split("Failed to establish a new connection: ", 1)[-1][:200]
    if isinstance(
        cause, urllib3.exceptions.NewConnectionError | urllib3.exceptions.SSLError | ConnectionRefusedError
    ):
        return Unreachable(f"{cluster}: the API server at {host} cannot be reached ({text})")
    return TemporaryClusterError(f"{cluster}: {method} {path} got no answer ({type(cause).__name__}: {text})")


def _status_error(
    cluster: str, method: str, path: str, code: int, data: bytes, headers: Mapping[str, str]
) -> ClusterError:
    """The error for a Status answer: its code, reason and message, and Retry-After when given."""
    try:
        status = json.loads(data) if data else {}
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    reason = str(status.get("reason") or "")
    message = " ".join(str(status.get("message") or data[:200].decode("utf-8", "replace")).split())
    text = f"{cluster}: {method} {path}: {code} {reason or 'error'}: {message}"[:600]
    try:
        delay = float(headers.get("Retry-After") or 0)
    except ValueError:
        delay = 0.0
    if code == 404:
        return NotFound(text, code=code, reason=reason)
    if code == 410:
        return Gone(text, code=code, reason=reason)
    if code == 409 and reason == "AlreadyExists":
        return AlreadyExists(text, code=code, reason=reason)
    if code in TEMPORARY_CODES and _REJECTED_FIELD not in message:
        return TemporaryClusterError(text, code=code, reason=reason, delay=delay)
    return PermanentClusterError(text, code=code, reason=reason)
