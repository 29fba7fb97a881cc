"""A Run file as a person writes it, edited the way they would: every byte outside the edited value kept.

`submitted` reads what `kubectl runs submit -f FILE` is given (YAML, or JSON turned into YAML) and
names the run; `with_namespace` adds a missing `metadata.namespace`; `with_desired` sets
`spec.malleable.desiredTotalGPUs` (`shrink`, `grow`). Edits go through a ruamel.yaml round trip
(comments, quoting, flow or block style and indentation are kept), and each result is checked:
it must read back as the same object with only that value changed, and differ from the original
text in that one line only. When the round trip would change anything else (ruamel normalises some
layouts), the value is spliced into the original bytes at the position ruamel reports instead, and
checked the same way; what cannot be edited so is refused (`EditRefused`), never reformatted.
Validates nothing (the validator does) and writes no file or Git.
"""

from __future__ import annotations

import difflib
import io
import json
import re
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError
from ruamel.yaml.util import load_yaml_guess_indent


class EditRefused(Exception):
    """The file cannot be edited without changing more than the one value; the message says what to do."""


class Unreadable(Exception):
    """The file is not one YAML or JSON document holding an object (the validator says more)."""


@dataclass(frozen=True, slots=True)
class Submitted:
    text: bytes  # YAML, as it would be committed
    kind: str | None
    name: str | None
    namespace: str | None
    converted: bool  # the file was JSON, turned into YAML


def _yaml(text: str) -> YAML:
    _, indent, offset = load_yaml_guess_indent(text)
    y = YAML()
    y.preserve_quotes = True
    y.width = 4096  # never fold a long line
    y.indent(mapping=indent or 2, sequence=indent or 2, offset=offset or 0)
    return y


def _load(text: str) -> tuple[YAML, Any]:
    try:
        y = _yaml(text)
        docs = list(y.load_all(text))
    except (YAMLError, ValueError) as err:
        raise Unreadable(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
    docs = [d for d in docs if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise Unreadable(f"expected one object (a Run), found {len(docs)} documents")
    return y, docs[0]


def _dump(y: YAML, data: Any) -> str:
    out = io.StringIO()
    y.dump(data, out)
    return out.getvalue()


def submitted(data: bytes) -> Submitted:
    """What `submit -f` was given, as the YAML to commit, with its kind, name and namespace."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("the file is not UTF-8 text") from None
    converted = False
    if text.lstrip().startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise Unreadable(f"not valid JSON: {err}") from None
        y = YAML()
        y.width = 4096
        text, converted = _dump(y, obj), True
    _, obj = _load(text)
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name, namespace = meta.get("name"), meta.get("namespace")
    return Submitted(
        text.encode("utf-8"),
        obj.get("kind") if isinstance(obj.get("kind"), str) else None,
        name if isinstance(name, str) else None,
        namespace if isinstance(namespace, str) else None,
        converted,
    )


def with_namespace(data: bytes, namespace: str) -> bytes:
    """The file with `metadata.namespace: <namespace>` added after `metadata.name`."""
    text = data.decode("utf-8")
    y, obj = _load(text)
    meta = obj.get("metadata")
    if not isinstance(meta, CommentedMap) or "name" not in meta:
        raise EditRefused("the file has no metadata.name to add the namespace beside: add metadata.namespace")
    where = (*meta.lc.value("name"), meta.lc.key("name")[1], bool(meta.fa.flow_style()))
    meta.insert(list(meta).index("name") + 1, "namespace", namespace)
    path = ("metadata", "namespace")
    try:
        return _checked(text, _dump(y, obj), path, namespace).encode("utf-8")
    except EditRefused:
        pass  # ruamel would lay the file out anew: put the line into the original bytes instead
    return _checked(text, _after(text, where, "namespace", namespace), path, namespace).encode("utf-8")


def desired_of(data: bytes) -> int | None:
    _, obj = _load(data.decode("utf-8"))
    m = (obj.get("spec") or {}).get("malleable") or {}
    value = m.get("desiredTotalGPUs") if isinstance(m, dict) else None
    return value if isinstance(value, int) else None


def with_desired(data: bytes, gpus: int) -> bytes:
    """The file with `spec.malleable.desiredTotalGPUs` set to `gpus`, nothing else changed."""
    text = data.decode("utf-8")
    y, obj = _load(text)
    spec = obj.get("spec")
    m = spec.get("malleable") if isinstance(spec, dict) else None
    if not isinstance(m, CommentedMap) or not m:
        raise EditRefused("the run has no spec.malleable: its width is fixed (edit totalGPUs and re-submit)")
    last = list(m)[-1]
    if "desiredTotalGPUs" in m:
        splice = (_replace, m.lc.value("desiredTotalGPUs"))
    else:
        splice = (_append, (*m.lc.value(last), m.lc.key(list(m)[0])[1], bool(m.fa.flow_style())))
    m["desiredTotalGPUs"] = gpus
    path = ("spec", "malleable", "desiredTotalGPUs")
    try:
        return _checked(text, _dump(y, obj), path, gpus).encode("utf-8")
    except EditRefused:
        pass  # ruamel would lay the file out anew: put the value into the original bytes instead
    edit, where = splice
    return _checked(text, edit(text, where, gpus), path, gpus).encode("utf-8")


_INT = re.compile(r"""(["']?)\d+\1""")


def _replace(text: str, where: tuple[int, ...], gpus: int) -> str:
    """`text` with the integer scalar at (line, column) replaced by `gpus`."""
    lines = text.splitlines(keepends=True)
    line, col = where[0], where[1]
    found = _INT.match(lines[line], col)
    if found is None:
        raise EditRefused("desiredTotalGPUs is not a plain number in the file: set it by hand")
    lines[line] = f"{lines[line][:col]}{gpus}{lines[line][found.end() :]}"
    return "".join(lines)


_SCALAR = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^,}\s#]+(?: +[^,}\s#]+)*""")


def _append(text: str, where: tuple[int, ...], gpus: int) -> str:
    return _after(text, where, "desiredTotalGPUs", gpus)


def _after(text: str, where: tuple[int, ...], key: str, value: object) -> str:
    """`text` with `key: value` after the mapping value at (line, column): a new line at the keys'
    indentation in a block mapping, `, key: value` after that value in a flow one."""
    line, col, indent, flow = where
    lines = text.splitlines(keepends=True)
    if flow:
        found = _SCALAR.match(lines[line], col)
        if found is None:
            raise EditRefused(f"cannot place {key} in the file's flow mapping: set it by hand")
        lines[line] = f"{lines[line][: found.end()]}, {key}: {value}{lines[line][found.end() :]}"
    else:
        ending = "\r\n" if lines[line].endswith("\r\n") else "\n"
        if not lines[line].endswith(("\n", "\r")):
            lines[line] += ending
        lines.insert(line + 1, f"{' ' * int(indent)}{key}: {value}{ending}")
    return "".join(lines)


def _plain(value: Any) -> Any:
    """Round-trip YAML as plain data (comments and styles dropped), for comparing meaning."""
    return json.loads(json.dumps(value, default=str))


def _checked(before: str, after: str, path: tuple[str, ...], value: Any) -> str:
    """`after`, once it reads back as `before` with only `path` set to `value`, and differs from
    `before` in one line (changed, or inserted) that holds the new value."""
    _, old = _load(before)
    _, new = _load(after)
    want = _plain(old)
    target = want
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    if after == before and _plain(new) == want:
        return after  # already so
    if _plain(new) != want:
        raise EditRefused(f"the edit would change more than {'.'.join(path)}: set it by hand")
    ops = [
        op
        for op in difflib.SequenceMatcher(None, before.splitlines(True), after.splitlines(True)).get_opcodes()
        if op[0] != "equal"
    ]
    lines_after = after.splitlines(True)
    if len(ops) == 1:
        tag, i1, i2, j1, j2 = ops[0]
        one = (tag == "replace" and i2 - i1 == 1) or tag == "insert"
        if one and j2 - j1 == 1 and path[-1] in lines_after[j1] and str(value) in lines_after[j1]:
            return after
    raise EditRefused(
        f"the file's layout would change beyond {'.'.join(path)}: set {path[-1]}: {value} by hand"
    )
