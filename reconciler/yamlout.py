"""One canonical YAML style for machine-written files (`state/`, `rendered/`), fast enough for 100k GPUs.

Block style, keys sorted, two-space indent, sequences under a key at the key's indent (as PyYAML
writes them). Strings are plain only when nothing could read them as another type; otherwise
JSON double-quoted (valid YAML). Handles the plain data `statefiles` builds (dicts with string
keys, lists, str, int, float, bool, None) and nothing else; parsing stays with PyYAML.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*\Z")
_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})


def scalar(value: Any) -> str:
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
        if _PLAIN.match(value) and value.lower() not in _WORDS:
            return value
        return _quoted(value)
    raise TypeError(f"cannot write {type(value).__name__} as YAML: {value!r}")


def _printable(ch: str) -> bool:
    code = ord(ch)
    return (
        0x20 <= code <= 0x7E
        or 0xA0 <= code <= 0xD7FF
        or 0xE000 <= code <= 0xFFFD
        or 0x10000 <= code <= 0x10FFFF
    )


def _quoted(value: str) -> str:
    """JSON's double-quoted string, with anything YAML will not read literally escaped YAML's way."""
    text = json.dumps(value, ensure_ascii=False)
    if all(_printable(ch) for ch in text):
        return text
    out = []
    for ch in text:
        code = ord(ch)
        out.append(ch if _printable(ch) else (f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"))
    return "".join(out)


def _block(value: Any, pad: str, out: list[str]) -> None:
    if isinstance(value, dict):
        for key in sorted(value):
            item = value[key]
            name = scalar(key)
            if isinstance(item, dict) and item:
                out.append(f"{pad}{name}:")
                _block(item, pad + "  ", out)
            elif isinstance(item, list) and item:
                out.append(f"{pad}{name}:")
                _block(item, pad, out)
            else:
                out.append(f"{pad}{name}: {_inline(item)}")
    else:
        for item in value:
            if isinstance(item, (dict, list)) and item:
                start = len(out)
                _block(item, pad + "  ", out)
                out[start] = f"{pad}- {out[start][len(pad) + 2 :]}"
            else:
                out.append(f"{pad}- {_inline(item)}")


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
        return "\n".join(out) + "\n"
    return _inline(value) + "\n"


def dumps_all(values: list[Any]) -> str:
    return "---\n".join(dumps(v) for v in values)
