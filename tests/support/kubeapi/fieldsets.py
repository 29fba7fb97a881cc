"""Field paths and sets as `metadata.managedFields` spells them (`f:spec`, `k:{"name":"c"}`, `v:"x"`).

Sits under server-side apply and update tracking: turns an object into the set of fields it sets,
diffs two objects into added/modified/removed paths, reads and removes values by path, and
converts sets to and from the `fieldsV1` tree. It decides nothing about ownership or conflicts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tests.support.kubeapi.shapes import Shape

Path = tuple[str, ...]
MISSING: Any = object()

# Stripped from every tracked set, as the real field manager's stripMeta does.
UNTRACKED_TOP = ("apiVersion", "kind")
UNTRACKED_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
)


def key_element(key: dict[str, Any]) -> str:
    return "k:" + json.dumps(key, sort_keys=True, separators=(",", ":"))


def value_element(value: Any) -> str:
    return "v:" + json.dumps(value, sort_keys=True, separators=(",", ":"))


def tracked_view(obj: dict[str, Any], only: str | None = None, without: str | None = None) -> dict[str, Any]:
    """The part of `obj` field ownership is computed on (shallow copy; never mutate the result)."""
    view = {k: v for k, v in obj.items() if k not in UNTRACKED_TOP}
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        trimmed = {k: v for k, v in meta.items() if k not in UNTRACKED_META}
        if trimmed:
            view["metadata"] = trimmed
        else:
            view.pop("metadata", None)
    if only is not None:
        return {only: view[only]} if only in view else {}
    if without is not None:
        view.pop(without, None)
    return view


def applied_set(value: Any, shape: Shape) -> set[Path]:
    """The fields a configuration sets (SMD's ToFieldSet): leaves, list items, map entries."""
    out: set[Path] = set()
    _walk(value, shape, (), out, as_added=False)
    return out


def _walk(value: Any, shape: Shape, path: Path, out: set[Path], as_added: bool) -> None:
    if isinstance(value, dict):
        how = shape.merges_dict()
        if how == "atomic" or not value:
            if path:
                out.add(path)
            return
        if as_added and how == "map" and path:
            out.add(path)
        for key, child in value.items():
            sub, declared = shape.child(key)
            child_path = (*path, "f:" + key)
            _walk(child, sub, child_path, out, as_added)
            if not declared or child is None:
                out.add(child_path)
        return
    if isinstance(value, list):
        how = shape.merges_list()
        if how == "atomic" or not value:
            if path:
                out.add(path)
            return
        for item in value:
            if how == "set":
                out.add((*path, value_element(item)))
                continue
            key = shape.item_key(item)
            if key is None:
                continue
            item_path = (*path, key_element(key))
            _walk(item, shape.item(), item_path, out, as_added)
            out.add(item_path)
        return
    if path:
        out.add(path)


def compare(old: Any, new: Any, shape: Shape) -> tuple[set[Path], set[Path], set[Path]]:
    """(added, modified, removed) paths between two objects, as SMD's Compare reports them."""
    added: set[Path] = set()
    modified: set[Path] = set()
    removed: set[Path] = set()
    _compare(old, new, shape, (), added, modified, removed)
    return added, modified, removed


def _subtree(value: Any, shape: Shape, path: Path, into: set[Path], is_item: bool = False) -> None:
    _walk(value, shape, path, into, as_added=True)
    if path and (is_item or _is_node(value, shape)):
        into.add(path)


def _is_node(value: Any, shape: Shape) -> bool:
    """Whether a freshly added value is recorded at its own path (maps, scalars, atomics; not structs)."""
    if isinstance(value, dict):
        return shape.merges_dict() != "struct" or not value
    if isinstance(value, list):
        return shape.merges_list() == "atomic" or not value
    return True


def _compare(
    old: Any,
    new: Any,
    shape: Shape,
    path: Path,
    added: set[Path],
    modified: set[Path],
    removed: set[Path],
) -> None:
    if isinstance(old, dict) and isinstance(new, dict) and shape.merges_dict() != "atomic":
        if not old or not new:
            if old != new and path:
                modified.add(path)
        for key in old.keys() | new.keys():
            sub = shape.child(key)[0]
            child_path = (*path, "f:" + key)
            if key not in old:
                _subtree(new[key], sub, child_path, added)
            elif key not in new:
                _subtree(old[key], sub, child_path, removed)
            else:
                _compare(old[key], new[key], sub, child_path, added, modified, removed)
        return
    if isinstance(old, list) and isinstance(new, list) and shape.merges_list() != "atomic":
        how = shape.merges_list()
        if how == "set":
            olds = {value_element(v) for v in old}
            news = {value_element(v) for v in new}
            added.update((*path, e) for e in news - olds)
            removed.update((*path, e) for e in olds - news)
            return
        old_items = _keyed(old, shape)
        new_items = _keyed(new, shape)
        for element in old_items.keys() | new_items.keys():
            item_path = (*path, element)
            if element not in old_items:
                _subtree(new_items[element], shape.item(), item_path, added, is_item=True)
            elif element not in new_items:
                _subtree(old_items[element], shape.item(), item_path, removed, is_item=True)
            else:
                _compare(
                    old_items[element], new_items[element], shape.item(), item_path, added, modified, removed
                )
        return
    if old != new and path:
        modified.add(path)


def _keyed(items: list[Any], shape: Shape) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key = shape.item_key(item)
        if key is not None:
            out.setdefault(key_element(key), item)
    return out


def lookup(obj: Any, path: Path, shape: Shape) -> Any:
    """The value at `path`, or MISSING."""
    node = obj
    for element in path:
        node = _step(node, element, shape)
        if node is MISSING:
            return MISSING
        shape = _descend(shape, element)
    return node


def _step(node: Any, element: str, shape: Shape) -> Any:
    kind, _, rest = element.partition(":")
    if kind == "f":
        return node.get(rest, MISSING) if isinstance(node, dict) else MISSING
    if not isinstance(node, list):
        return MISSING
    if kind == "k":
        for item in node:
            if key_element(shape.item_key(item) or {}) == element:
                return item
        return MISSING
    if kind == "v":
        for item in node:
            if value_element(item) == element:
                return item
    return MISSING


def _descend(shape: Shape, element: str) -> Shape:
    kind, _, rest = element.partition(":")
    if kind == "f":
        return shape.child(rest)[0]
    return shape.item()


def remove(obj: Any, path: Path, shape: Shape) -> bool:
    """Remove the value at `path` in place; True when something was removed."""
    if not path:
        return False
    parent = lookup(obj, path[:-1], shape)
    if parent is MISSING:
        return False
    parent_shape = shape
    for element in path[:-1]:
        parent_shape = _descend(parent_shape, element)
    element = path[-1]
    kind, _, rest = element.partition(":")
    if kind == "f" and isinstance(parent, dict) and rest in parent:
        del parent[rest]
        return True
    if isinstance(parent, list):
        target = _step(parent, element, parent_shape)
        if target is not MISSING:
            parent[:] = [item for item in parent if item is not target]
            return True
    return False


def prefixes(paths: Iterable[Path]) -> set[Path]:
    """Every path and all its ancestors: `p in prefixes(s)` means p or something under it is in s."""
    out: set[Path] = set()
    for path in paths:
        for i in range(1, len(path) + 1):
            out.add(path[:i])
    return out


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    ordered = sorted(paths, key=len)
    for path in ordered:
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    for path in ordered:
        node = tree
        for element in path:
            node = node[element]
        if node and "." not in node:
            node["."] = {}
    return _sorted_tree(tree)


def _sorted_tree(tree: dict[str, Any]) -> dict[str, Any]:
    return {k: _sorted_tree(tree[k]) for k in sorted(tree)}


def from_fields_v1(tree: dict[str, Any]) -> set[Path]:
    out: set[Path] = set()
    _collect(tree, (), out)
    return out


def _collect(node: dict[str, Any], path: Path, out: set[Path]) -> None:
    if not node and path:
        out.add(path)
        return
    for element, child in node.items():
        if element == ".":
            if path:
                out.add(path)
            continue
        _collect(child if isinstance(child, dict) else {}, (*path, element), out)


def render(path: Path) -> str:
    """`.spec.containers[name="c"].image`, the way conflict messages print a path."""
    return "".join(_render_element(e) for e in path)


def _render_element(element: str) -> str:
    kind, _, rest = element.partition(":")
    if kind == "f":
        return "." + rest
    if kind == "k":
        key = json.loads(rest)
        return "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(key.items())) + "]"
    return "[=" + rest + "]"
