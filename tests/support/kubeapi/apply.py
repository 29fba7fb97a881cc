"""Server-side apply and managed-fields tracking (`metadata.managedFields`, FieldsV1).

Sits inside every write the registry makes. `track_update` records what a non-apply write changed
(ownership moves to that writer, as for an `Update` operation); `server_side_apply` merges an
applied configuration into the live object, refuses with 409 and per-field causes when another
manager owns a field it would change (unless forced), takes ownership, and removes fields the
applier stopped applying that nobody else owns. Ownership is kept per (manager, operation,
subresource); a main-resource write never tracks `status` when the kind has a status
subresource, and a `/status` write tracks only `status`. Not modelled: version conversion of
field sets and the cap on the number of Update entries.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from tests.support.kubeapi import fieldsets, objectmeta, status
from tests.support.kubeapi.fieldsets import Path
from tests.support.kubeapi.resources import ResourceType
from tests.support.kubeapi.shapes import Shape

Obj = dict[str, Any]


@dataclass(slots=True)
class Manager:
    manager: str
    operation: str  # Apply or Update
    api_version: str
    time: str
    subresource: str = ""
    paths: set[Path] = field(default_factory=set)

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.manager, self.operation, self.subresource)

    def describe(self) -> str:
        """How conflict messages name this manager (no time, and no version for appliers)."""
        text = f'"{self.manager}"'
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def encode(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": fieldsets.to_fields_v1(self.paths),
        }
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


def decode(entries: Any) -> list[Manager]:
    out = []
    for entry in entries or []:
        if not isinstance(entry, dict) or not entry.get("manager"):
            continue
        out.append(
            Manager(
                entry["manager"],
                entry.get("operation", "Update"),
                entry.get("apiVersion", ""),
                _normal_time(entry.get("time", "")),
                entry.get("subresource", ""),
                fieldsets.from_fields_v1(entry.get("fieldsV1") or {}),
            )
        )
    return out


def _normal_time(text: Any) -> str:
    """managedFields times as the server writes them, whatever offset form the client sent."""
    moment = objectmeta.parse_time(text, micro=False) if isinstance(text, str) else None
    return objectmeta.format_time(moment) if moment else str(text or "")


def encode(managers: list[Manager]) -> list[dict[str, Any]]:
    kept = [m for m in managers if m.paths]
    kept.sort(key=lambda m: (m.operation, m.time, m.manager, m.api_version, m.subresource))
    return [m.encode() for m in kept]


def scope(rt: ResourceType, subresource: str) -> dict[str, str | None]:
    """Which part of the object a write at this endpoint may own (the real server's reset fields)."""
    if subresource == "status":
        return {"only": "status", "without": None}
    if rt.has_status:
        return {"only": None, "without": "status"}
    return {"only": None, "without": None}


def managers_for_write(live: Obj | None, requested: Obj) -> list[Manager]:
    """The ownership a write starts from: the live entries, unless the request replaces them."""
    live_entries = (live or {}).get("metadata", {}).get("managedFields") or []
    asked = requested.get("metadata", {}).get("managedFields")
    current = decode(live_entries)
    if live is not None and asked is not None:
        wanted = decode([e for e in asked if e])
        if encode(wanted) != encode(current):
            return wanted
    return current


def track_update(
    rt: ResourceType,
    managers: list[Manager],
    old: Obj | None,
    new: Obj,
    manager: str,
    subresource: str,
    now: str,
) -> list[Manager]:
    """Ownership after a non-apply write by `manager`: it takes what it added or changed."""
    where = scope(rt, subresource)
    before = fieldsets.tracked_view(old or {}, **where)
    after = fieldsets.tracked_view(new, **where)
    added, modified, removed = fieldsets.compare(before, after, rt.shape)
    changed = added | modified
    if not changed and not removed:
        return managers
    ident = (manager, "Update", subresource)
    mine = next((m for m in managers if m.ident == ident), None)
    for other in managers:
        if other is not mine:
            other.paths -= changed
        other.paths -= removed
    if mine is None:
        mine = Manager(manager, "Update", rt.api_version, now, subresource)
        managers.append(mine)
    if changed:
        mine.paths |= changed
        mine.time = now
        mine.api_version = rt.api_version
    return [m for m in managers if m.paths]


def server_side_apply(
    rt: ResourceType,
    live: Obj | None,
    config: Obj,
    manager: str,
    subresource: str,
    force: bool,
    now: str,
) -> tuple[Obj, list[Manager]]:
    """The object after applying `config`, and the new ownership; 409 on conflicts unless forced."""
    where = scope(rt, subresource)
    shape = rt.shape
    base = live or {"apiVersion": config.get("apiVersion"), "kind": config.get("kind"), "metadata": {}}
    applied = fieldsets.tracked_view(config, **where)
    merged = merge(base, applied, shape)
    new_set = fieldsets.applied_set(applied, shape)
    managers = decode(base.get("metadata", {}).get("managedFields"))
    ident = (manager, "Apply", subresource)
    mine = next((m for m in managers if m.ident == ident), None)
    previous = set(mine.paths) if mine else set()
    others = set().union(*(m.paths for m in managers if m is not mine)) if managers else set()
    _prune(merged, previous - new_set, fieldsets.prefixes(others | new_set), shape)
    before = fieldsets.tracked_view(base, **where)
    after = fieldsets.tracked_view(merged, **where)
    added, modified, removed = fieldsets.compare(before, after, shape)
    changed = added | modified
    conflicts = [(m, sorted(m.paths & changed)) for m in managers if m is not mine and m.paths & changed]
    if conflicts and not force:
        raise conflict_error(rt, conflicts)
    for other, paths in conflicts:
        other.paths -= set(paths)
    for m in managers:
        m.paths -= removed
    if mine is None:
        mine = Manager(manager, "Apply", rt.api_version, now, subresource)
        managers.append(mine)
    if changed or removed or previous != new_set:
        mine.time = now
    mine.paths = new_set
    mine.api_version = rt.api_version
    return merged, [m for m in managers if m.paths]


def _prune(obj: Obj, dropped: set[Path], owned: set[Path], shape: Shape) -> None:
    """Remove fields the applier stopped applying, unless someone still owns them or below.

    Shallowest first, so a list item goes whole (its key fields still find it) and what lies
    under a removed path is not visited again.
    """
    removed: list[Path] = []
    for path in sorted(dropped, key=lambda p: (len(p), p)):
        if any(path[: len(r)] == r for r in removed):
            continue
        if path in owned or not fieldsets.remove(obj, path, shape):
            continue
        removed.append(path)
        parent = path[:-1]
        while len(parent) > 1 or (len(parent) == 1 and parent[0] != "f:metadata"):
            if parent in owned or fieldsets.lookup(obj, parent, shape) not in ({}, []):
                break
            fieldsets.remove(obj, parent, shape)
            parent = parent[:-1]


def conflict_error(rt: ResourceType, conflicts: list[tuple[Manager, list[Path]]]) -> status.ApiError:
    ordered = sorted(conflicts, key=lambda c: c[0].describe())
    causes = tuple(
        status.Cause("FieldManagerConflict", f"conflict with {m.describe()}", fieldsets.render(p))
        for m, paths in ordered
        for p in paths
    )
    if len(causes) == 1:
        manager, paths = ordered[0]
        message = (
            f"Apply failed with 1 conflict: conflict with {manager.describe()}: {fieldsets.render(paths[0])}"
        )
    else:
        lines = []
        for manager, paths in ordered:
            lines.append(f"conflicts with {manager.describe()}:")
            lines.extend(f"- {fieldsets.render(p)}" for p in paths)
        message = f"Apply failed with {len(causes)} conflicts: " + "\n".join(lines)
    return status.ApiError(409, "Conflict", message, status.Target(), causes)


def merge(live: Any, config: Any, shape: Shape) -> Any:
    """Structured merge of an applied configuration into the live value (SMD's merge)."""
    if isinstance(live, dict) and isinstance(config, dict) and shape.merges_dict() != "atomic":
        out = dict(live)
        for key, value in config.items():
            sub = shape.child(key)[0]
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = merge(out[key], value, sub)
            else:
                out[key] = copy.deepcopy(value)
        return out
    if isinstance(live, list) and isinstance(config, list):
        how = shape.merges_list()
        if how == "set":
            return _interleave(live, config, fieldsets.value_element, lambda a, b: copy.deepcopy(b))
        if how == "map":
            item_shape = shape.item()

            def key_of(item: Any) -> str:
                return fieldsets.key_element(shape.item_key(item) or {})

            return _interleave(live, config, key_of, lambda a, b: merge(a, b, item_shape))
    return copy.deepcopy(config)


def _interleave(live: list[Any], config: list[Any], key_of: Any, combine: Any) -> list[Any]:
    """Merge two keyed lists keeping live-only items in place and config items in config order."""
    live_keys = [key_of(item) for item in live]
    config_keys = [key_of(item) for item in config]
    live_by_key = dict(zip(live_keys, live, strict=True))
    config_by_key = dict(zip(config_keys, config, strict=True))
    shared = [k for k in config_keys if k in live_by_key]
    out: list[Any] = []
    done: set[str] = set()
    li = ci = 0
    while li < len(live_keys) or ci < len(config_keys):
        if li < len(live_keys) and ci < len(config_keys) and live_keys[li] == config_keys[ci]:
            key = live_keys[li]
            out.append(combine(live_by_key[key], config_by_key[key]))
            done.add(key)
            shared = shared[1:] if shared and shared[0] == key else shared
            li += 1
            ci += 1
            continue
        if li < len(live_keys):
            key = live_keys[li]
            if key not in config_by_key:
                out.append(live[li])
                li += 1
                continue
            if key in done or (shared and shared[0] != key):
                li += 1
                continue
        if ci < len(config_keys):
            key = config_keys[ci]
            if key not in done:
                out.append(combine(live_by_key.get(key), config_by_key[key]))
                done.add(key)
            if shared and shared[0] == key:
                shared = shared[1:]
            ci += 1
        else:
            li += 1
    return out
