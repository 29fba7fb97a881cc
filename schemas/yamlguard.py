"""Fleet files' hostile and broken YAML, refused with a line, a column and what to do (for `yamldoc`).

Text that is not UTF-8 YAML (binary, another encoding, control characters), nesting deep enough to
crash the composer, and libyaml's syntax errors worded for people. Builds no values: `yamldoc` does.
"""

from __future__ import annotations

import re

import yaml

from schemas.diagnostics import YAML_SYNTAX

try:  # the C parser is ~10x faster; fall back only where libyaml is missing
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]  # the pure-Python loader where libyaml is missing

MAX_DEPTH = 64  # no fleet object nests anywhere near this; deeper input is hostile or broken


class YamlError(Exception):
    """One problem at (line, col); `code` is the diagnostic code it is reported under."""

    def __init__(self, line: int, col: int, message: str, code: str = YAML_SYNTAX) -> None:
        super().__init__(message)
        self.line, self.col, self.message, self.code = line, col, message, code

    def __reduce__(self) -> tuple[type[YamlError], tuple[int, int, str, str]]:
        return YamlError, (self.line, self.col, self.message, self.code)  # picklable (`prefetch`)


_LEADING = re.compile(rb"^[ ?-]*", re.M)


def _may_nest_past(text: bytes, limit: int) -> bool:
    """A cheap upper bound on nesting: indentation, `-`/`?` indicators and open brackets per line.

    Quoted brackets and dashes only overestimate, which costs the exact event scan, never a miss.
    Without any bracket, block nesting needs a space or an indicator per level at the start of a
    line, so the longest run of spaces, `-` and `?` there bounds it (one regex pass, no loop).
    """
    if b"[" not in text and b"{" not in text:
        return max(map(len, _LEADING.findall(text)), default=0) >= limit
    open_brackets = 0
    for line in text.splitlines():
        body = line.lstrip(b" ")
        opened = body.count(b"[") + body.count(b"{")
        bound = len(line) - len(body) + body.count(b"-") + body.count(b"?") + open_brackets + opened
        if bound >= limit:
            return True
        open_brackets += opened - body.count(b"]") - body.count(b"}")
    return False


def check_depth(text: bytes, offset: int = 0) -> None:
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
                    raise YamlError(
                        line + offset, col, f"YAML nests deeper than {MAX_DEPTH} levels; flatten it"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return  # the composer reports syntax errors with their position


# Characters YAML does not allow in a stream (C0/C1 controls other than tab and line breaks, surrogates,
# noncharacters): their presence means binary data, not a text file.
_NOT_YAML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ufffe\uffff]")
_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}


def _line_col(data: bytes, pos: int) -> tuple[int, int]:
    start = data.rfind(b"\n", 0, pos) + 1
    return data.count(b"\n", 0, pos) + 1, len(data[start:pos].decode("utf-8", errors="replace")) + 1


def check_text(data: bytes) -> YamlError | None:
    """Fleet files are UTF-8 text: name the first byte or character that says otherwise."""
    for bom, name in _BOMS.items():
        if data.startswith(bom):
            return YamlError(
                1, 1, f"the file is {name}-encoded; save it as UTF-8 (fleet files are UTF-8 YAML)"
            )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line, col = _line_col(data, err.start)
        return YamlError(
            line,
            col,
            f"not UTF-8 text: byte 0x{data[err.start]:02x} cannot appear here; save the file as UTF-8 "
            "(fleet files are UTF-8 YAML, not binary or Latin-1)",
        )
    bad = _NOT_YAML.search(text)
    if bad is not None:
        line, col = _line_col(data, len(text[: bad.start()].encode()))
        return YamlError(
            line,
            col,
            f"control character U+{ord(bad.group()):04X} is not allowed in YAML (binary data?); "
            "fleet files are UTF-8 text, so remove it",
        )
    return None


def syntax_error(err: yaml.MarkedYAMLError, data: bytes, offset: int) -> YamlError:
    mark, context_mark = err.problem_mark or err.context_mark, err.context_mark
    if mark is not None and context_mark is not None and mark.index >= len(data.rstrip()):
        mark = context_mark  # "unexpected end of the file": point at what was left open
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    lines = data.split(b"\n")
    if mark is not None and mark.index >= len(data.rstrip()):
        filled = [
            n for n, text in enumerate(lines, start=1) if text.strip() and not text.lstrip().startswith(b"#")
        ]
        if filled:  # still the end of the file: the last line with content is where it was left open
            line, col = filled[-1], len(lines[filled[-1] - 1].rstrip().decode(errors="replace")) + 1
    text = lines[line - 1] if 0 < line <= len(lines) else b""
    indent = text[: len(text) - len(text.lstrip(b" \t"))]
    if b"\t" in indent or (b"\t" in text and "cannot start any token" in str(err.problem)):
        return YamlError(
            line + offset,
            text.index(b"\t") + 1,
            "a tab character is used for indentation; YAML indents with spaces only, so replace the tab with spaces",
        )
    problem = " ".join(str(err.problem or err).split())
    if "maximum nesting depth" in problem:  # libyaml's own limit (PyYAML 6.0.4) is far above ours
        return YamlError(line + offset, col, f"YAML nests deeper than {MAX_DEPTH} levels; flatten it")
    context = " ".join(str(err.context or "").split())
    if (
        context
        and context_mark is not None
        and context_mark.line + 1 != line
        and context_mark.index < len(data.rstrip())
    ):
        problem += f" ({context} at line {context_mark.line + 1 + offset})"
    hint = next((h for key, h in _HINTS if key in f"{problem} {context}"), "fix the YAML here")
    return YamlError(line + offset, col, f"YAML syntax error: {problem}; {hint}")


_HINTS = (
    ("quoted scalar", "close the quoted value with its matching quote"),
    ("expected ',' or ']'", "close the [ list with ] (and separate items with commas)"),
    ("expected ',' or '}'", "close the { mapping with } (and separate fields with commas)"),
    ("flow node", "a value is missing: close the [ or { opened above, or remove a stray comma"),
    ("mapping values are not allowed", "check this line's indentation, or quote a value that contains ': '"),
    ("expected key", "indent this line like the other fields of its mapping"),
    ("block sequence", "indent this line like the other items of its list"),
    ("expected <document start>", "start each further document with a --- line"),
)
