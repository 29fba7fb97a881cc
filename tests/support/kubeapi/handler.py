"""HTTP: one request in, one response (or a chunked watch stream) out; faults and the log around it.

The outermost layer of the server, on `http.server` with HTTP/1.1 keep-alive and Nagle's
algorithm off (without that every call waits ~40 ms for a delayed ACK). Decodes the URL, query,
headers and body, consults the fault plan, calls discovery or the registry, negotiates JSON, YAML
or Table output, writes `Warning` headers, and records the request. Authentication,
authorization, protobuf/CBOR bodies and HTTP/2 are not implemented.
"""

from __future__ import annotations

import dataclasses
import socket
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson
import yaml

from tests.support.kubeapi import deletion, discovery, listing, openapi, routing, status, tables
from tests.support.kubeapi.admission import Call
from tests.support.kubeapi.faults import Fault, FaultPlan
from tests.support.kubeapi.registry import APPLY_PATCH, Registry, Result
from tests.support.kubeapi.requestlog import Request, RequestLog
from tests.support.kubeapi.watch import TRUE, Watch

Obj = dict[str, Any]
BODY_TYPES = ("application/json", "application/yaml", "")
FALSE = ("0", "f", "F", "false", "FALSE", "False")


@dataclass(slots=True)
class Services:
    """What the handler serves from; one per server."""

    registry: Registry
    faults: FaultPlan
    log: RequestLog
    bookmark_interval: float
    minor_version: int
    address: str = ""
    errors: list[str] = field(default_factory=list)


class ApiHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], services: Services) -> None:
        super().__init__(address, Handler)
        self.services = services
        self.connections: set[socket.socket] = set()

    def cut_all_connections(self) -> None:
        for connection in list(self.connections):
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "kubeapi-test"
    sys_version = ""
    server: ApiHTTPServer
    _entry: Request

    def setup(self) -> None:
        super().setup()
        self.server.connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's parameter name
        return

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self, method: str) -> None:
        """Serve one request; it is logged just before its response goes out, so a client that has
        its answer always finds the request in the log."""
        services = self.server.services
        url = urlsplit(self.path)
        path, query = url.path, dict(parse_qsl(url.query, keep_blank_values=True))
        raw = self._read_body()
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        accept = self.headers.get("Accept") or ""
        is_watch = method == "GET" and query.get("watch") in TRUE
        self._entry = Request(
            method, path, query, content_type, 0, self.headers.get("User-Agent") or "", is_watch
        )
        fault = services.faults.take(method, path, is_watch)
        if fault is not None:
            self._entry = _with(self._entry, fault=_describe(fault))
            if fault.delay:
                time.sleep(fault.delay)
            if fault.disconnect:
                services.log.record(_with(self._entry, at=time.monotonic()))
                self._cut()
                return
            if fault.code is not None:
                error = status.canned(fault.code, fault.message, fault.retry_after)
                self._send(error.code, error.status(), [], accept, error.retry_after)
                return
        try:
            if accept and not any(kind in accept for kind in ("json", "yaml", "*/*")):
                routing.route(path, services.registry.catalog)
                raise status.not_acceptable()
            if is_watch:
                self._watch(path, query, accept, fault)
                return
            result = self._dispatch(method, path, query, raw, content_type, accept)
            self._send(result.code, result.body, result.warnings, accept)
        except status.ApiError as error:
            self._send(error.code, error.status(), [], accept, error.retry_after)
        except Exception:  # noqa: BLE001 - any bug becomes a 500 the test can see, as on a real server
            services.errors.append(traceback.format_exc())
            failure = status.ApiError(
                500, "InternalError", "Internal error occurred: kubeapi test server failure", status.Target()
            )
            self._send(500, failure.status(), [], accept)

    def _cut(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send(
        self, code: int, body: Any, warnings: list[str], accept: str, retry_after: int | None = None
    ) -> None:
        if isinstance(body, (bytes, str)):
            payload, kind = (body.encode() if isinstance(body, str) else body), "text/plain; charset=utf-8"
        elif "json" not in accept and "*/*" not in accept and "application/yaml" in accept:
            payload, kind = yaml.safe_dump(body, sort_keys=False).encode(), "application/yaml"
        else:
            payload, kind = orjson.dumps(body), "application/json"
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Length", str(len(payload)))
        for warning in warnings:
            self.send_header("Warning", '299 - "' + warning.replace('"', '\\"') + '"')
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.server.services.log.record(_with(self._entry, code=code, at=time.monotonic()))
        try:
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            self.close_connection = True

    def _call(self, target: routing.Resource, query: Mapping[str, str], manager: str) -> Call:
        dry_run = query.get("dryRun")
        if dry_run not in (None, "", "All"):
            raise status.bad_request(f'Invalid value: "{dry_run}": valid values are: "All"')
        validation = query.get("fieldValidation") or "Warn"
        if validation not in ("Ignore", "Warn", "Strict"):
            raise status.bad_request(f'fieldValidation: Unsupported value: "{validation}"')
        if len(manager) > 128:
            raise status.ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes',
                status.Target(),
            )
        return Call(
            target.rt,
            target.namespace,
            target.name,
            target.subresource,
            manager,
            dry_run == "All",
            validation,
        )

    def _dispatch(
        self, method: str, path: str, query: Mapping[str, str], raw: bytes, content_type: str, accept: str
    ) -> Result:
        services = self.server.services
        registry = services.registry
        target = routing.route(path, registry.catalog)
        if isinstance(target, routing.Discovery):
            if method != "GET":
                raise status.method_not_allowed()
            return Result(200, self._discovery(target))
        verb = _verb(method, target)
        if verb not in target.rt.verbs and not (target.subresource and verb in ("get", "update", "patch")):
            raise status.method_not_allowed()
        agent = (self.headers.get("User-Agent") or "").split("/")[0]
        is_apply = method == "PATCH" and content_type == APPLY_PATCH
        call = self._call(target, query, query.get("fieldManager") or ("" if is_apply else agent))
        if verb == "get":
            obj = registry.get(call)
            if tables.wants_table(accept):
                meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
                return Result(
                    200,
                    tables.table(
                        call.rt, [obj], meta, registry.clock(), query.get("includeObject") or "Metadata"
                    ),
                )
            return Result(200, obj)
        if verb == "list":
            _, items, meta = listing.list_objects(registry.store, call, query)
            if tables.wants_table(accept):
                return Result(
                    200,
                    tables.table(
                        call.rt, items, meta, registry.clock(), query.get("includeObject") or "Metadata"
                    ),
                )
            return Result(200, listing.list_body(call, meta, items))
        if verb in ("create", "update"):
            body = _decode_body(raw, content_type)
            return registry.create(call, body) if verb == "create" else registry.update(call, body)
        if verb == "patch":
            force = query.get("force")
            return registry.patch(call, content_type, raw, None if force is None else _bool(force, "force"))
        options = _delete_options(query, raw)
        if verb == "delete":
            return deletion.delete(registry, call, options)
        return deletion.delete_collection(
            registry, call, options, query.get("labelSelector"), query.get("fieldSelector")
        )

    def _discovery(self, target: routing.Discovery) -> Any:
        services = self.server.services
        catalog = services.registry.catalog
        found: Any
        if target.document == "version":
            found = discovery.version_info(services.minor_version)
        elif target.document == "health":
            found = "ok"
        elif target.document == "api":
            found = discovery.api_versions(services.address)
        elif target.document == "apis":
            found = discovery.group_list(catalog)
        elif target.document == "group":
            found = discovery.group(catalog, target.group)
        elif target.document == "openapi":
            found = openapi.root(catalog)
        elif target.document == "openapi_group_version":
            found = openapi.group_version_document(catalog, target.group, target.version)
        else:
            found = discovery.resource_list(catalog, target.group, target.version)
        if found is None:
            raise status.path_not_found()
        return found

    def _watch(self, path: str, query: Mapping[str, str], accept: str, fault: Fault | None) -> None:
        registry = self.server.services.registry
        target = routing.route(path, registry.catalog)
        if not isinstance(target, routing.Resource) or "watch" not in target.rt.verbs or target.subresource:
            raise (
                status.method_not_allowed()
                if isinstance(target, routing.Resource)
                else status.path_not_found()
            )
        call = Call(target.rt, target.namespace, target.name)
        events = Watch(registry.store, call, query, registry.output, self.server.services.bookmark_interval)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.server.services.log.record(_with(self._entry, code=200, at=time.monotonic()))
        self.end_headers()
        limit = fault.drop_after_events if fault is not None else None
        as_table = tables.wants_table(accept)
        sent = 0
        try:
            for event in events:
                if limit is not None and sent >= limit:
                    break
                if as_table and event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    event = {
                        "type": event["type"],
                        "object": tables.watch_table(
                            call.rt,
                            event["object"],
                            registry.clock(),
                            query.get("includeObject") or "Metadata",
                            sent == 0,
                        ),
                    }
                data = orjson.dumps(event) + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                sent += 1
            if limit is not None and sent >= limit and fault is not None and not fault.clean_close:
                self._cut()
                return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True


def _verb(method: str, target: routing.Resource) -> str:
    if method in ("POST", "DELETE") and target.rt.namespaced and not target.namespace:
        raise status.method_not_allowed()
    if method == "GET":
        return "get" if target.name else "list"
    if method == "POST" and not target.name:
        return "create"
    if method == "PUT" and target.name:
        return "update"
    if method == "PATCH" and target.name:
        return "patch"
    if method == "DELETE":
        return "delete" if target.name else "deletecollection"
    raise status.method_not_allowed()


def _decode_body(raw: bytes, content_type: str) -> Obj:
    if content_type not in BODY_TYPES:
        raise status.unsupported_media_type(content_type, ("application/json", "application/yaml"))
    try:
        doc = orjson.loads(raw) if content_type != "application/yaml" else yaml.safe_load(raw)
    except (orjson.JSONDecodeError, yaml.YAMLError) as failure:
        raise status.bad_request(f"couldn't get version/kind; json parse error: {failure}") from failure
    if not isinstance(doc, dict):
        raise status.bad_request("couldn't get version/kind; json parse error: the body is not an object")
    return doc


def _bool(text: str, name: str) -> bool:
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise status.bad_request(f'invalid {name}: "{text}"')


def _delete_options(query: Mapping[str, str], raw: bytes) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if query.get("gracePeriodSeconds") not in (None, ""):
        try:
            options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
        except ValueError as failure:
            raise status.bad_request(
                f"invalid gracePeriodSeconds: {query['gracePeriodSeconds']!r}"
            ) from failure
    if query.get("propagationPolicy"):
        options["propagationPolicy"] = query["propagationPolicy"]
    if query.get("orphanDependents") not in (None, ""):
        options["orphanDependents"] = _bool(query["orphanDependents"], "orphanDependents")
    if raw.strip():
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as failure:
            raise status.bad_request(f"invalid DeleteOptions: {failure}") from failure
        if isinstance(body, dict):
            options.update(
                {k: v for k, v in body.items() if k not in ("kind", "apiVersion") and v is not None}
            )
    return options


def _with(entry: Request, **changes: Any) -> Request:
    return dataclasses.replace(entry, **changes)


def _describe(fault: Fault) -> str:
    if fault.disconnect:
        return "disconnect"
    if fault.code is not None:
        return f"respond {fault.code}"
    if fault.drop_after_events is not None:
        return f"drop watch after {fault.drop_after_events}"
    return f"delay {fault.delay}s"
