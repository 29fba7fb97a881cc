"""YAML text to plain data with the line and column of every field, via PyYAML's C parser.

Knows nothing of kinds; `schemas.load` turns documents into models. YAML 1.2-style scalars: only
true/false are booleans and timestamps stay text; duplicate keys, custom tags and alias bombs are
errors rather than silent surprises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

try:  # the C parser is ~10x faster; fall back only where libyaml is missing
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

Path = tuple[str | int, ...]
MAX_NODES = 200_000
MAX_DEPTH = 64  # no fleet object nests anywhere near this; deeper input is hostile or broken


class YamlError(Exception):
    def __init__(self, line: int, col: int, message: str) -> None:
        super().__init__(message)
        self.line, self.col, self.message = line, col, message


@dataclass(slots=True)
class Document:
    """One YAML document of a file: its data, and where each field sits (1-based line, col)."""

    path: str
    index: int
    data: Any
    line: int
    col: int
    positions: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def where(self, loc: Path) -> tuple[int, int]:
        """The position of `loc`, or of its nearest present ancestor (for a missing field)."""
        for n in range(len(loc), -1, -1):
            pos = self.positions.get(loc[:n])
            if pos is not None:
                return pos
        return self.line, self.col


_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}


def _scalar(node: yaml.ScalarNode) -> Any:
    tag, value = node.tag, node.value
    if tag == "tag:yaml.org,2002:null":
        return None
    if tag == "tag:yaml.org,2002:bool":
        return _BOOL.get(value, value)
    if tag == "tag:yaml.org,2002:int":
        try:
            return int(value.replace("_", ""), 0)
        except ValueError:
            return value
    if tag == "tag:yaml.org,2002:float":
        try:
            return float(value.replace("_", ""))
        except ValueError:
            return value
    if tag in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:timestamp"):
        return value
    raise YamlError(
        node.start_mark.line + 1, node.start_mark.column + 1, f"unsupported YAML tag {tag}; use plain values"
    )


class _Builder:
    def __init__(self) -> None:
        self.positions: dict[Path, tuple[int, int]] = {}
        self.count = 0

    def build(self, node: yaml.Node, path: Path) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise YamlError(
                node.start_mark.line + 1, 1, f"document expands to more than {MAX_NODES} values (alias bomb?)"
            )
        if len(path) > MAX_DEPTH:
            raise YamlError(
                node.start_mark.line + 1,
                node.start_mark.column + 1,
                f"YAML nests deeper than {MAX_DEPTH} levels; flatten it",
            )
        self.positions.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.ScalarNode):
            return _scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise YamlError(
                        key_node.start_mark.line + 1,
                        key_node.start_mark.column + 1,
                        "merge keys (<<) are not supported; write the fields out",
                    )
                key = self.build(key_node, (*path, "<key>"))
                if not isinstance(key, str):
                    key = str(key).lower() if isinstance(key, bool) else str(key)
                if key in out:
                    raise YamlError(
                        key_node.start_mark.line + 1,
                        key_node.start_mark.column + 1,
                        f"duplicate key {key!r}; keep one",
                    )
                self.positions[(*path, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                out[key] = self.build(value_node, (*path, key))
            return out
        raise YamlError(node.start_mark.line + 1, 1, "unsupported YAML node")  # pragma: no cover


def _may_nest_past(text: bytes, limit: int) -> bool:
    """A cheap upper bound on nesting: indentation, `-`/`?` indicators and open brackets per line.

    Quoted brackets and dashes only overestimate, which costs the exact event scan, never a miss.
    """
    open_brackets = 0
    for line in text.splitlines():
        body = line.lstrip(b" ")
        opened = body.count(b"[") + body.count(b"{")
        bound = len(line) - len(body) + body.count(b"-") + body.count(b"?") + open_brackets + opened
        if bound >= limit:
            return True
        open_brackets += opened - body.count(b"]") - body.count(b"}")
    return False


def check_depth(text: bytes) -> None:
    """Refuse nesting past MAX_DEPTH before the composer recurses (it would crash the process)."""
    if not _may_nest_past(text, MAX_DEPTH):
        return
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    mark = event.start_mark
                    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
                    raise YamlError(line, col, f"YAML nests deeper than {MAX_DEPTH} levels; flatten it")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return  # the composer reports syntax errors with their position


def parse(text: str | bytes, path: str) -> list[Document]:
    """Every document of a file. Raises YamlError (with line and column) on the first bad one."""
    check_depth(text.encode() if isinstance(text, str) else text)
    loader = _Loader(text)
    docs: list[Document] = []
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # pragma: no cover
                break
            builder = _Builder()
            data = builder.build(node, ())
            docs.append(
                Document(
                    path, index, data, node.start_mark.line + 1, node.start_mark.column + 1, builder.positions
                )
            )
            index += 1
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise YamlError(line, col, f"YAML syntax error: {err.problem or err}") from None
    except yaml.YAMLError as err:
        raise YamlError(1, 1, f"YAML error: {err}") from None
    finally:
        loader.dispose()
    return [d for d in docs if d.data is not None]


def fast_load_all(text: str | bytes) -> list[Any]:
    """Machine-written state: plain data, no positions (the C loader end to end)."""
    return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
