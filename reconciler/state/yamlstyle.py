"""One canonical YAML style for machine-written files (`state/`, `rendered/`), fast enough for 100k GPUs.

Block style, keys sorted, two-space indent, sequences under a key at the key's indent (as PyYAML
writes them). Strings are plain only when nothing could read them as another type; otherwise
JSON double-quoted (valid YAML). Handles the plain data `state.codec` builds (dicts with string
keys, lists, str, int, float, bool, None) and nothing else. `load_all` reads exactly this style
back (and nothing else: any other YAML is PyYAML's to read).

A 100k-GPU pass writes ~2 million scalars drawn from a few thousand distinct strings (names,
labels, timestamps), so string scalars are memoised; everything else is formatted directly.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from typing import Any

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*\Z")
_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})
# Characters YAML will not read literally inside a double-quoted scalar (outside YAML's printable set).
_UNPRINTABLE = "[^\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
_MEMO_LIMIT = 200_000
_memo: dict[str, str] = {}


def scalar(value: Any) -> str:
    if type(value) is str:
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent if exponent[0] in '+-' else '+' + exponent}"
        return text
    if isinstance(value, str):
        return _string(str(value))
    raise TypeError(f"cannot write {type(value).__name__} as YAML: {value!r}")


def _string(value: str) -> str:
    text = _memo.get(value)
    if text is None:
        if _PLAIN.match(value) and value.lower() not in _WORDS:
            text = value
        else:
            text = _quoted(value)
        if len(_memo) >= _MEMO_LIMIT:
            _memo.clear()
        _memo[value] = text
    return text


def _quoted(value: str) -> str:
    """JSON's double-quoted string, with anything YAML will not read literally escaped YAML's way."""
    text = json.dumps(value, ensure_ascii=False)
    if text.isascii() and text.isprintable():
        return text  # all of it in \x20-\x7e: nothing to escape
    unprintable = _unprintable()
    if unprintable.search(text) is None:
        return text
    return unprintable.sub(_escape, text)


@cache
def _unprintable() -> re.Pattern[str]:
    """`_UNPRINTABLE`, compiled when first needed (~10 ms: most processes only write ASCII)."""
    return re.compile(_UNPRINTABLE)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


_ORDERS: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}  # a dict's keys -> (key, written)


def _order(value: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The keys sorted, each with its written form; files repeat a few shapes thousands of times."""
    keys = tuple(value)
    hit = _ORDERS.get(keys)
    if hit is None:
        if len(_ORDERS) >= _MEMO_LIMIT:
            _ORDERS.clear()
        hit = _ORDERS[keys] = tuple((key, scalar(key)) for key in sorted(value))
    return hit


def _block(value: Any, pad: str, out: list[str]) -> None:
    append = out.append
    if isinstance(value, dict):
        inner = pad + "  "
        for key, name in _order(value):
            item = value[key]
            kind = type(item)
            if kind is str:
                append(f"{pad}{name}: {_memo.get(item) or _string(item)}")
            elif kind is int:
                append(f"{pad}{name}: {item}")
            elif kind is dict or kind is list:
                if item:
                    append(f"{pad}{name}:")
                    _block(item, inner if kind is dict else pad, out)
                else:
                    append(f"{pad}{name}: {'{}' if kind is dict else '[]'}")
            elif isinstance(item, (dict, list)):
                if item:
                    append(f"{pad}{name}:")
                    _block(item, inner if isinstance(item, dict) else pad, out)
                else:
                    append(f"{pad}{name}: {_inline(item)}")
            else:
                append(f"{pad}{name}: {scalar(item)}")
    else:
        dash = pad + "- "
        inner = pad + "  "
        cut = len(inner)
        for item in value:
            kind = type(item)
            if kind is str:
                append(dash + (_memo.get(item) or _string(item)))
            elif isinstance(item, (dict, list)) and item:
                start = len(out)
                _block(item, inner, out)
                out[start] = dash + out[start][cut:]
            else:
                append(dash + _inline(item))


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return scalar(value)


def dumps(value: Any) -> str:
    """One document. A scalar or empty collection at the top is written on one line."""
    if isinstance(value, (dict, list)) and value:
        out: list[str] = []
        _block(value, "", out)
        out.append("")
        return "\n".join(out)
    return _inline(value) + "\n"


def dumps_all(values: list[Any]) -> str:
    return "---\n".join(dumps(v) for v in values)


# ---------------------------------------------------------------------------------------- reading
#
# State files are read back on every pass that has no cache (a fresh clone, a CI runner): 10,000
# files through PyYAML's constructor take ten seconds at 100k GPUs. `load_all` reads exactly the
# style `dumps` writes, ~20 times faster, and gives up (None) on anything else — a comment, another
# indentation, flow style, an escape it does not know — so callers fall back to PyYAML and get its
# result, or its error, unchanged.

_INT = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]*(?:e[-+][0-9]+)?\Z")
_SPECIAL = {"null": None, "true": True, "false": False, ".nan": math.nan}
_SPECIAL_FLOATS = {".inf": math.inf, "-.inf": -math.inf}
# \U and surrogate \u escapes (not a doubled backslash before a U): YAML and JSON read them differently.
_UNSAFE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\(?:U|u[dD][89a-fA-F])")


class _NotCanonical(Exception):
    pass


_READ_MEMO: dict[str, Any] = {}  # token -> its (immutable) value: names and instants repeat a lot


def _value(token: str) -> Any:
    if token == "{}":
        return {}
    if token == "[]":
        return []
    found = _READ_MEMO.get(token, _READ_MEMO)
    if found is _READ_MEMO:
        found = _scalar_value(token)
        if len(_READ_MEMO) >= _MEMO_LIMIT:
            _READ_MEMO.clear()
        _READ_MEMO[token] = found
    return found


def _scalar_value(token: str) -> Any:
    if token in _SPECIAL:
        return _SPECIAL[token]
    if token in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[token]
    if token[:1] == '"':
        return _quoted_value(token)
    if _INT.match(token):
        return int(token)
    if _FLOAT.match(token):
        return float(token)
    if _PLAIN.match(token) and token.lower() not in _WORDS:
        return token
    raise _NotCanonical(token)


def _quoted_value(token: str) -> str:
    inner = token[1:-1]
    plain = inner.isascii() and inner.isprintable() and '"' not in inner and "\\" not in inner
    if plain and len(token) >= 2 and token[-1] == '"':
        return inner  # printable ASCII, nothing escaped: what JSON reads and what `_quoted` writes back
    if len(token) < 2 or token[-1] != '"' or _UNSAFE_ESCAPE.search(token):
        raise _NotCanonical(token)
    try:
        text = json.loads(token)
    except ValueError:
        raise _NotCanonical(token) from None
    if not isinstance(text, str) or _quoted(text) != token:
        raise _NotCanonical(token)  # not how `dumps` would have written it: let PyYAML judge
    return text


def _split_key(text: str) -> tuple[str, str] | None:
    """`key: rest` -> (key, rest); `key:` -> (key, ""); None when `text` is not a mapping entry."""
    if text.startswith('"'):
        end = 1
        while True:
            end = text.find('"', end)
            if end < 0:
                return None
            backslashes = len(text[:end]) - len(text[:end].rstrip("\\"))
            if backslashes % 2 == 0:
                break
            end += 1
        key, rest = text[: end + 1], text[end + 1 :]
        if not rest.startswith(":"):
            return None
        name = _value(key)
    else:
        key, colon, rest = text.partition(":")
        if not colon:
            return None
        rest = ":" + rest
        name = _value(key)
        if type(name) is not str:
            raise _NotCanonical(text)
    if rest == ":":
        return name, ""
    if rest.startswith(": ") and len(rest) > 2:
        return name, rest[2:]
    raise _NotCanonical(text)


def _read_block(lines: list[str], pos: int, pad: str) -> tuple[Any, int]:
    """The block collection starting at `lines[pos]`, indented by `pad`; and the next position."""
    if lines[pos].startswith(pad + "- ") or lines[pos] == pad + "-":
        return _read_sequence(lines, pos, pad)
    return _read_mapping(lines, pos, pad)


_NESTED, _EMPTY_DICT, _EMPTY_LIST = object(), object(), object()
_ENTRIES: dict[str, tuple[str, Any]] = {}  # "key: value" text -> (key, value or a marker)


def _entry(text: str) -> tuple[str, Any] | None:
    """A mapping line without its indentation, memoised: whole lines repeat across state files."""
    found = _ENTRIES.get(text)
    if found is None:
        split = _split_key(text)
        if split is None:
            return None
        key, rest = split
        value = (
            _NESTED
            if not rest
            else _EMPTY_DICT
            if rest == "{}"
            else _EMPTY_LIST
            if rest == "[]"
            else _value(rest)
        )
        if len(_ENTRIES) >= _MEMO_LIMIT:
            _ENTRIES.clear()
        found = _ENTRIES[text] = (key, value)
    return found


def _read_mapping(lines: list[str], pos: int, pad: str) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    width = len(pad)
    inner = pad + "  "
    dash = pad + "- "
    total = len(lines)
    while pos < total:
        line = lines[pos]
        if not line.startswith(pad) or line[width : width + 1] in (" ", "-", ""):
            break
        entry = _entry(line[width:])
        if entry is None:
            raise _NotCanonical(line)
        key, value = entry
        if key in out:
            raise _NotCanonical(line)
        pos += 1
        if value is _NESTED:
            if pos >= total:
                raise _NotCanonical(line)
            nxt = lines[pos]
            if nxt.startswith(dash):
                value, pos = _read_sequence(lines, pos, pad)
            elif nxt.startswith(inner) and nxt[width + 2 : width + 3] not in (" ", "-", ""):
                value, pos = _read_mapping(lines, pos, inner)
            else:
                raise _NotCanonical(nxt)
            if not value:
                raise _NotCanonical(line)
        elif value is _EMPTY_DICT:
            value = {}
        elif value is _EMPTY_LIST:
            value = []
        out[key] = value
    return out, pos


def _read_sequence(lines: list[str], pos: int, pad: str) -> tuple[list[Any], int]:
    out: list[Any] = []
    dash = pad + "- "
    inner = pad + "  "
    while pos < len(lines) and lines[pos].startswith(dash):
        item = lines[pos][len(dash) :]
        known = _READ_MEMO.get(item, _READ_MEMO)
        if known is not _READ_MEMO:  # a scalar read before: no entry is ever one (`_scalar_value`)
            out.append(known)
            pos += 1
        elif item.startswith("- ") or _is_entry(item):
            lines[pos] = inner + item  # the writer put the nested block's first line after the dash
            value, pos = _read_block(lines, pos, inner)
            out.append(value)
        else:
            out.append(_value(item))
            pos += 1
    return out, pos


def _is_entry(item: str) -> bool:
    if item.startswith('"'):
        return _split_key(item) is not None
    return ":" in item


def load_all(text: str) -> list[Any] | None:
    """The documents of `text` if `dumps_all` wrote it, else None (read it with PyYAML instead)."""
    if not text:
        return []
    if not text.endswith("\n") or "\t" in text or "\r" in text:
        return None
    lines = text.split("\n")[:-1]
    docs: list[Any] = []
    start = 0
    try:
        for end in [i for i, line in enumerate(lines) if line == "---"] + [len(lines)]:
            part = lines[start:end]
            start = end + 1
            if not part:
                return None
            if len(part) == 1 and not _starts_block(part[0]):
                docs.append(_value(part[0]))
                continue
            value, pos = _read_block(part, 0, "")
            if pos != len(part) or not value:
                return None
            docs.append(value)
    except (_NotCanonical, RecursionError):
        return None
    return docs


def _starts_block(line: str) -> bool:
    return line.startswith("- ") or line == "-" or _is_entry(line)
