"""YAML text to plain data with the line and column of every field, via PyYAML's C parser.

Knows nothing of kinds; `schemas.load` turns documents into models, and `yamlguard` refuses text
that is not YAML before it gets here. YAML 1.2-style scalars: only true/false are booleans and
timestamps stay text; duplicate keys, custom tags and alias bombs are errors rather than silent
surprises. A broken document costs only itself: `parse_all` keeps every other document of the
file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import yaml

from schemas.diagnostics import DUPLICATE_KEY
from schemas.yamlguard import MAX_DEPTH, YamlError, check_depth, check_text, syntax_error

try:  # the C parser is ~10x faster; fall back only where libyaml is missing
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]  # the pure-Python loader where libyaml is missing

# A plain scalar whose first character starts none of YAML 1.1's implicit types (bool, null,
# number, timestamp, merge, value) is a string: say so without running PyYAML's resolver regexes,
# which the C parser calls back into for every scalar. Same tags, several times fewer cycles.
_MAY_BE_NUMBER = frozenset("-+0123456789.<=")  # numbers, timestamps, merge and value keys
_STR = "tag:yaml.org,2002:str"
_WORDS = {
    w: "tag:yaml.org,2002:bool"
    for w in "yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF".split()
} | {  # noqa: E501  # YAML 1.1's word list
    w: "tag:yaml.org,2002:null" for w in ("~", "null", "Null", "NULL")
}


class _FastLoader(_Loader):  # type: ignore[misc,valid-type]  # CSafeLoader is untyped
    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0] and value and value[0] not in _MAY_BE_NUMBER:
            return _WORDS.get(value, _STR)
        return super().resolve(kind, value, implicit)

    # no path resolvers are registered: skip PyYAML's bookkeeping for them at every node
    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass

    def ascend_resolver(self) -> None:
        pass


Path = tuple[str | int, ...]
# Values a file's `*alias` references may repeat (each use of an alias builds its anchor's values
# again), over all its documents so that many small alias bombs cannot add up. Values written out
# are not counted: they cost their own bytes (a 1,000,000-GPU scenario holds millions), where a
# billion-laughs file of a few hundred bytes expands to billions.
MAX_ALIAS_VALUES = 100_000
MAX_DOCUMENTS = 1_000  # per file: fleets keep one object per file, a few share one at most


@dataclass(slots=True)
class BadDocument:
    """A document of a file that could not be read, with its raw text (for salvaging its name)."""

    index: int
    line: int
    error: YamlError
    text: bytes


Positions = Mapping[Path, tuple[int, int]]


@dataclass(slots=True)
class Document:
    """One YAML document of a file: its data, and where each field sits (1-based line, col).

    `marks` is the position map, or a function computing it when a diagnostic first asks (big files
    read without positions, cached documents)."""

    path: str
    index: int
    data: Any
    line: int
    col: int
    marks: Positions | Callable[[], Positions] = field(default_factory=dict)

    @property
    def positions(self) -> Positions:
        if callable(self.marks):
            self.marks = self.marks()
        return self.marks

    def where(self, loc: Path) -> tuple[int, int]:
        """The position of `loc`, or of its nearest present ancestor (for a missing field)."""
        for n in range(len(loc), -1, -1):
            pos = self.positions.get(loc[:n])
            if pos is not None:
                return pos
        return self.line, self.col


_FLOAT_12 = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}


def _scalar(node: yaml.ScalarNode, offset: int) -> Any:
    tag, value = node.tag, node.value
    if tag == _STR and not (value and value[0] in _MAY_BE_NUMBER):
        return value  # most scalars: a word, no number can start so
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
    if tag == "tag:yaml.org,2002:str" and not node.style and _FLOAT_12.fullmatch(value):
        return float(value)  # YAML 1.2 reads 1e3 and 1.5e3 as numbers; PyYAML's 1.1 rules do not
    if tag in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:timestamp"):
        return value
    raise YamlError(
        node.start_mark.line + 1 + offset,
        node.start_mark.column + 1,
        f"unsupported YAML tag {tag}; remove the tag and write a plain value",
    )


class ExpansionError(YamlError):
    """The file's `*alias` references expand past MAX_ALIAS_VALUES: hostile as a whole, never read twice."""


class _Builder:
    """Plain data from a node tree; with `track`, the position of every field. With `aliases` (the
    text may hold an `&anchor`), values an alias builds again are counted against `alias_left`."""

    def __init__(
        self, offset: int = 0, alias_left: int = MAX_ALIAS_VALUES, track: bool = True, aliases: bool = True
    ) -> None:
        self.positions: dict[Path, tuple[int, int]] = {}
        self.track = track
        self.offset = offset  # lines before this document's chunk (see `parse_all`)
        self.alias_left = alias_left  # values the file's aliases may still repeat
        self.repeated = 0  # values built again through an alias in this document
        self._seen: set[int] | None = set() if aliases else None  # nodes built once (by id)
        self._last_new: yaml.Node | None = None  # the last node built for the first time

    def _at(self, node: yaml.Node) -> tuple[int, int]:
        return node.start_mark.line + 1 + self.offset, node.start_mark.column + 1

    def _count(self, node: yaml.Node) -> None:
        """A node the composer shares (an alias's anchor, or inside one) built again counts; past the
        file's budget the whole file is refused where the alias being expanded is used (an alias is
        its anchor's very node, so the place is that of the last node built for the first time: the
        key or the list holding the alias)."""
        seen = self._seen
        if seen is None:
            return
        key = id(node)  # the composer's node graph lives until the document is built: ids are stable
        if key not in seen:
            seen.add(key)
            self._last_new = node
            return
        self.repeated += 1
        if self.repeated > self.alias_left:
            raise ExpansionError(
                *self._at(self._last_new or node),
                f"the file's *alias references repeat more than {MAX_ALIAS_VALUES} values (each use of an "
                "&anchor's *alias builds its values again); write the values out or remove the repetition",
            )

    def build(self, node: yaml.Node, path: Path) -> Any:
        self._count(node)
        if len(path) > MAX_DEPTH:
            raise YamlError(*self._at(node), f"YAML nests deeper than {MAX_DEPTH} levels; flatten it")
        if self.track:
            self.positions.setdefault(path, self._at(node))
        if isinstance(node, yaml.ScalarNode):
            return _scalar(node, self.offset)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                self._refuse_merge(key_node)
                key = self._new_key(node, key_node, self.build(key_node, (*path, "<key>")), out)
                if self.track:
                    self.positions[(*path, key)] = self._at(key_node)
                out[key] = self.build(value_node, (*path, key))
            return out
        raise YamlError(*self._at(node), "unsupported YAML node")  # pragma: no cover

    def build_plain(self, node: yaml.Node, depth: int) -> Any:
        """`build` without positions: the same values and errors, no path tuple per value."""
        if depth > MAX_DEPTH:
            return self.build(node, ("",) * depth)  # raises the error `build` gives here
        self._count(node)
        if isinstance(node, yaml.ScalarNode):
            return _scalar(node, self.offset)
        if isinstance(node, yaml.SequenceNode):
            return [self.build_plain(item, depth + 1) for item in node.value]
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                self._refuse_merge(key_node)
                key = self._new_key(node, key_node, self.build_plain(key_node, depth + 1), out)
                out[key] = self.build_plain(value_node, depth + 1)
            return out
        raise YamlError(*self._at(node), "unsupported YAML node")  # pragma: no cover

    def _refuse_merge(self, key_node: yaml.Node) -> None:
        if key_node.tag == "tag:yaml.org,2002:merge":
            raise YamlError(*self._at(key_node), "merge keys (<<) are not supported; write the fields out")

    def _new_key(self, node: yaml.MappingNode, key_node: yaml.Node, key: Any, out: dict[str, Any]) -> str:
        """A mapping key as text, refused when the mapping already has it."""
        if not isinstance(key, str):
            key = str(key).lower() if isinstance(key, bool) else str(key)
        if key in out:
            first = self._first_key_line(node, key)
            raise YamlError(
                *self._at(key_node),
                f"duplicate key {key!r} (first set at line {first}); keep one of them",
                DUPLICATE_KEY,
            )
        return key

    def _first_key_line(self, node: yaml.MappingNode, key: str) -> int:
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                value = _scalar(key_node, self.offset)
                if (str(value).lower() if isinstance(value, bool) else str(value)) == key:
                    return self._at(key_node)[0]
        return self._at(node)[0]  # pragma: no cover  # the duplicate was met in this very mapping


def _compose(
    data: bytes, path: str, offset: int, first_index: int, spent: list[int], track: bool = True
) -> list[Document]:
    """Every document of one chunk; raises YamlError with file-relative lines on the first bad one.
    `spent` counts the values the whole file's aliases repeated so far, against MAX_ALIAS_VALUES.
    Without `track`, each document's positions are worked out again from `data` when first asked."""
    check_depth(data, offset)
    loader = _FastLoader(data)
    docs: list[Document] = []
    aliases = b"&" in data  # no anchor, no alias (one naming no anchor is the composer's error)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # pragma: no cover
                break
            builder = _Builder(offset, MAX_ALIAS_VALUES - spent[0], track, aliases)
            try:
                value = builder.build(node, ()) if track else builder.build_plain(node, 0)
            finally:
                spent[0] += builder.repeated
            line, col = builder._at(node)
            marks: Positions | Callable[[], Positions] = (
                builder.positions if track else partial(_positions, data, offset, len(docs))
            )
            docs.append(Document(path, first_index + len(docs), value, line, col, marks))
    except yaml.MarkedYAMLError as err:
        raise syntax_error(err, data, offset) from None
    except yaml.YAMLError as err:
        raise YamlError(1 + offset, 1, f"YAML error: {' '.join(str(err).split())}") from None
    except RecursionError:
        raise YamlError(1 + offset, 1, f"YAML nests deeper than {MAX_DEPTH} levels; flatten it") from None
    finally:
        loader.dispose()
    return docs


def _positions(data: bytes, offset: int, nth: int) -> Positions:
    """The field positions of the nth document of a chunk that already parsed once."""
    return _compose(data, "", offset, 0, [0])[nth].positions


_DOC_START = re.compile(rb"^---(?=[ \t\r\n]|$)", re.M)
_NO_CONTENT = re.compile(rb"\A(?:[ \t]*(?:#[^\n]*|%[^\n]*)?\r?\n?)*\Z")


def _chunks(data: bytes) -> list[tuple[int, bytes]]:
    """The file split before every `---` at column 0 (a document marker can appear nowhere else), as
    (lines before the chunk, chunk); comment- or directive-only chunks join the next one."""
    starts = [0, *(m.start() for m in _DOC_START.finditer(data) if m.start() > 0), len(data)]
    out: list[tuple[int, bytes]] = []
    pending = line = 0
    for end in starts[1:]:
        if end < len(data) and _NO_CONTENT.match(data[pending:end]):
            continue  # nothing but comments or directives: keep it with the next document
        chunk = data[pending:end]
        out.append((line, chunk))
        line += chunk.count(b"\n")
        pending = end
    return out


def parse_all(
    text: str | bytes, path: str, positions: bool = True
) -> tuple[list[Document], list[BadDocument]]:
    """Every readable document of a file, and each unreadable one with its error. A file that is not
    UTF-8 text is one bad document; otherwise a broken document never costs its neighbours.
    `positions=False` (big files that are rarely wrong) parses again only when a diagnostic asks."""
    data = text.encode() if isinstance(text, str) else text
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    bad_text = check_text(data)
    if bad_text is None and len(_DOC_START.findall(data)) >= MAX_DOCUMENTS:
        bad_text = YamlError(
            1, 1, f"the file holds more than {MAX_DOCUMENTS} documents; split it into one file per object"
        )
    if bad_text is not None:
        return [], [BadDocument(0, 1, bad_text, data)]
    try:
        return [d for d in _compose(data, path, 0, 0, [0], positions) if d.data is not None], []
    except ExpansionError as err:
        return [], [BadDocument(0, 1, err, data)]  # hostile as a whole: never build it twice
    except YamlError:
        pass  # find which documents are broken, one chunk at a time
    docs: list[Document] = []
    bad: list[BadDocument] = []
    index = 0
    spent = [0]
    for offset, chunk in _chunks(data):
        try:
            found = _compose(chunk, path, offset, index, spent, positions)
        except YamlError as err:
            bad.append(BadDocument(index, offset + _first_content_line(chunk), err, chunk))
            index += 1
            continue
        docs += found
        index += len(found)
    return [d for d in docs if d.data is not None], bad


def _first_content_line(chunk: bytes) -> int:
    for n, line in enumerate(chunk.split(b"\n"), start=1):
        body = line.strip()
        if body and not body.startswith((b"#", b"%")) and body.split(b"#")[0].strip() != b"---":
            return n
    return 1


def parse(text: str | bytes, path: str) -> list[Document]:
    """Every document of a file. Raises YamlError (with line and column) on the first bad one."""
    docs, bad = parse_all(text, path)
    if bad:
        raise bad[0].error
    return docs
