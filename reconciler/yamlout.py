"""One canonical YAML style for machine-written files (`state/`, `rendered/`), fast enough for 100k GPUs.

Block style, keys sorted, two-space indent, sequences under a key at the key's indent (as PyYAML
writes them). Strings are plain only when nothing could read them as another type; otherwise
JSON double-quoted (valid YAML). Handles the plain data `statefiles` builds (dicts with string
keys, lists, str, int, float, bool, None) and nothing else; parsing stays with PyYAML.

A 100k-GPU pass writes ~2 million scalars drawn from a few thousand distinct strings (names,
labels, timestamps), so string scalars are memoised; everything else is formatted directly.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*\Z")
_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})
# Characters YAML will not read literally inside a double-quoted scalar (outside YAML's printable set).
_UNPRINTABLE = re.compile("[^\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
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
    if _UNPRINTABLE.search(text) is None:
        return text
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _block(value: Any, pad: str, out: list[str]) -> None:
    append = out.append
    if isinstance(value, dict):
        inner = pad + "  "
        for key in sorted(value):
            item = value[key]
            name = _memo.get(key) or scalar(key)
            kind = type(item)
            if kind is str:
                append(f"{pad}{name}: {_memo.get(item) or _string(item)}")
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
