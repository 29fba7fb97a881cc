"""List: selectors, `limit`/`continue` pagination on a consistent snapshot, resourceVersion rules.

Beside the registry's verbs. A paginated list reads every page at the revision of its first page
(rolled back through the store's history, as etcd serves a snapshot); a continue token older than
the history window is `410 Expired`. Items are ordered by namespace/name as etcd keys are. Lists
of built-in kinds omit each item's apiVersion/kind, as the real server's typed lists do.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import orjson

from tests.support.kubeapi import selectors, status
from tests.support.kubeapi.admission import Call
from tests.support.kubeapi.store import Store, TooOld

Obj = dict[str, Any]


def encode_continue(revision: int, start: str) -> str:
    token = orjson.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": start + "\x00"})
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        doc = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if doc.get("v") != "meta.k8s.io/v1":
            raise ValueError("unsupported version")
        return int(doc["rv"]), str(doc["start"]).rstrip("\x00")
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError) as failure:
        raise status.bad_request(f"continue key is not valid: {failure}") from failure


def list_objects(store: Store, call: Call, query: Mapping[str, str]) -> tuple[int, list[Obj], Obj]:
    """(revision, items in storage form, list metadata) for one list request."""
    rt = call.rt
    requirements = selectors.parse_labels(query.get("labelSelector"))
    terms = selectors.parse_fields(query.get("fieldSelector"), rt.field_labels)
    limit = _int(query.get("limit"), "limit")
    token = query.get("continue")
    asked = query.get("resourceVersion")
    match = query.get("resourceVersionMatch")
    if match and match not in ("Exact", "NotOlderThan"):
        raise status.bad_request(f'resourceVersionMatch: Unsupported value: "{match}"')
    if match and not asked:
        raise status.bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
    start = ""
    namespace = call.namespace if rt.namespaced and call.namespace else None
    with store.lock:
        if token:
            if asked:
                raise status.bad_request("specifying resource version is not allowed when using continue")
            revision, start = decode_continue(token)
        elif match == "Exact":
            revision = _int(asked, "resourceVersion") or 0
        else:
            revision = store.revision
            wanted = _int(asked, "resourceVersion") if asked else 0
            if wanted and wanted > store.revision:
                raise status.timeout(f"Too large resource version: {wanted}, current: {store.revision}")
        if revision > store.revision:
            raise status.timeout(f"Too large resource version: {revision}, current: {store.revision}")
        try:
            state = store.snapshot(rt.storage_key, namespace, revision)
        except TooOld as old:
            if token:
                fresh = encode_continue(store.revision, start)
                raise status.expired(
                    "The provided continue parameter is too old to display a consistent list result. You can "
                    "start a new list without the continue parameter, or use the continue token in this "
                    "response to retrieve the remainder of the results. Continuing with the provided token "
                    "results in an inconsistent list - objects that were created, modified, or deleted between "
                    "the time the first chunk was returned and now may show up in the list.",
                    {"continue": fresh},
                ) from old
            raise status.expired(str(old)) from old
    ordered = sorted(state.items(), key=lambda item: _sort_key(item[0], rt.namespaced))
    items: list[Obj] = []
    next_start = ""
    remaining = 0
    for ident, obj in ordered:
        key = _sort_key(ident, rt.namespaced)
        if start and key <= start:
            continue
        if not (
            selectors.labels_match(requirements, obj) and selectors.fields_match(terms, obj, rt.field_labels)
        ):
            continue
        if limit and len(items) >= limit:
            remaining += 1
            continue
        items.append(obj)
        next_start = key
    meta: Obj = {"resourceVersion": str(revision)}
    if limit and remaining:
        meta["continue"] = encode_continue(revision, next_start)
        if not requirements and not terms:
            meta["remainingItemCount"] = remaining
    return revision, items, meta


def _sort_key(ident: tuple[str, str], namespaced: bool) -> str:
    return f"{ident[0]}/{ident[1]}" if namespaced else ident[1]


def _int(text: str | None, name: str) -> int | None:
    if text in (None, ""):
        return None
    try:
        value = int(str(text))
    except ValueError as failure:
        raise status.bad_request(f"invalid {name}: {text!r}") from failure
    if value < 0:
        raise status.bad_request(f"invalid {name}: {text!r}")
    return value


def list_body(call: Call, revision_meta: Obj, items: list[Obj]) -> Obj:
    rt = call.rt
    if rt.custom:
        served = [
            item if item.get("apiVersion") == rt.api_version else {**item, "apiVersion": rt.api_version}
            for item in items
        ]
    else:
        served = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in items]
    return {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": revision_meta, "items": served}
