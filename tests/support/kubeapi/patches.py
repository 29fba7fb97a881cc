"""The three client-side patch formats: JSON merge patch, JSON patch, strategic merge patch.

Each takes the live object (a private copy) and the decoded patch and returns the patched object;
what happens next (validation, ownership, storage) is the registry's. Strategic merge patch is a
subset: merge by the list-map keys in `shapes` (first key, as `patchMergeKey`), union for set
lists, replace for everything else, and the directives `$patch: replace|delete|merge`,
`$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` and `$retainKeys`. It is not
offered for custom resources, as on a real server (415).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.support.kubeapi import status
from tests.support.kubeapi.shapes import Shape


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge, `null` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class JsonPatchFailed(Exception):
    """An operation that cannot apply (missing path, failed `test`): the server answers 422."""


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 over a deep copy of `doc`."""
    if not isinstance(operations, list):
        raise status.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise status.bad_request(f"invalid JSON patch operation: {op!r}")
        doc = _apply_one(doc, op)
    return doc


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchFailed(f"JSON pointer must start with '/': {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise JsonPatchFailed(f"doc is missing path: {path}")
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise JsonPatchFailed(f"doc is missing path: {path}")


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise JsonPatchFailed(f"add operation does not apply: index out of range for {path}")
    else:
        raise JsonPatchFailed(f"doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise JsonPatchFailed("cannot remove the whole document")
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return doc, parent.pop(int(last))
    raise JsonPatchFailed(f"remove operation does not apply: doc is missing path: {path}")


def _apply_one(doc: Any, op: dict[str, Any]) -> Any:
    kind, path = op["op"], op.get("path", "")
    if kind == "add":
        return _add(doc, path, copy.deepcopy(op.get("value")))
    if kind == "remove":
        return _remove(doc, path)[0]
    if kind == "replace":
        _get(doc, path)
        doc, _ = _remove(doc, path) if _pointer(path) else (doc, None)
        return _add(doc, path, copy.deepcopy(op.get("value")))
    if kind == "move":
        doc, value = _remove(doc, op["from"])
        return _add(doc, path, value)
    if kind == "copy":
        return _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
    if kind == "test":
        if _get(doc, path) != op.get("value"):
            raise JsonPatchFailed(f"testing value {path} failed")
        return doc
    raise status.bad_request(f"Unexpected kind: {kind}")


def strategic_merge_patch(original: Any, patch: Any, shape: Shape) -> Any:
    """Kubernetes' strategic merge patch for built-in kinds (see the module docstring for the subset)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    out = dict(original) if isinstance(original, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.partition("/")[2]
            if isinstance(out.get(field), list) and isinstance(value, list):
                out[field] = [item for item in out[field] if item not in value]
            continue
        if value is None:
            out.pop(key, None)
            continue
        sub = shape.child(key)[0]
        if isinstance(value, list):
            out[key] = _merge_list(out.get(key), value, sub)
        else:
            merged = strategic_merge_patch(out.get(key), value, sub)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            field = key.partition("/")[2]
            if isinstance(out.get(field), list) and isinstance(value, list):
                out[field] = _reorder(out[field], value, shape.child(field)[0])
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _merge_list(live: Any, patch: list[Any], shape: Shape) -> list[Any]:
    how = shape.merges_list()
    live_list = list(live) if isinstance(live, list) else []
    if how == "atomic":
        return [item for item in copy.deepcopy(patch) if not _is_directive(item)]
    if how == "set":
        out = list(live_list)
        for item in patch:
            if item not in out:
                out.append(copy.deepcopy(item))
        return out
    key_name = shape.keys[0]
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [item for item in copy.deepcopy(patch) if not _is_directive(item)]
    out = list(live_list)
    for item in patch:
        if not isinstance(item, dict) or key_name not in item:
            raise status.bad_request(f"map: {item!r} does not contain declared merge key: {key_name}")
        index = next(
            (
                i
                for i, have in enumerate(out)
                if isinstance(have, dict) and have.get(key_name) == item[key_name]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
            continue
        if index is None:
            out.append(strategic_merge_patch({}, item, shape.item()))
        else:
            out[index] = strategic_merge_patch(out[index], item, shape.item())
    return out


def _is_directive(item: Any) -> bool:
    return isinstance(item, dict) and "$patch" in item


def _reorder(items: list[Any], order: list[Any], shape: Shape) -> list[Any]:
    if shape.merges_list() == "map":
        key_name = shape.keys[0]
        rank = {entry.get(key_name): i for i, entry in enumerate(order) if isinstance(entry, dict)}
        return sorted(
            items, key=lambda it: rank.get(it.get(key_name) if isinstance(it, dict) else None, len(rank))
        )
    rank = {repr(v): i for i, v in enumerate(order)}
    return sorted(items, key=lambda it: rank.get(repr(it), len(rank)))
