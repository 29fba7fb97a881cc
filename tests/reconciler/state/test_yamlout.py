"""The machine-written YAML style: whatever `statefiles` writes, PyYAML reads back unchanged."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.state import yamlstyle as yamlout

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
)
TREES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)  # fmt: skip


@settings(max_examples=500, deadline=None, derandomize=True)
@given(TREES)
def test_every_value_reads_back_exactly(value: Any) -> None:
    assert yaml.load(yamlout.dumps(value), Loader=yaml.CSafeLoader) == value


def test_words_numbers_and_times_that_yaml_would_retype_are_quoted() -> None:
    for text in ("yes", "No", "null", "1.5", "0x1f", "2026-03-02T09:00:00Z", "a: b", "#x", "", " lead"):
        assert yamlout.scalar(text).startswith('"'), text
    assert yamlout.scalar("team-a/j1") == "team-a/j1"
    assert yamlout.dumps({"b": [1, {"c": None}], "a": {}}) == "a: {}\nb:\n- 1\n- c: null\n"


def test_documents_are_separated_like_yaml_dump_all() -> None:
    text = yamlout.dumps_all([{"a": 1}, {"b": 2}])
    assert list(yaml.safe_load_all(text)) == [{"a": 1}, {"b": 2}]


def _reference(value: Any) -> str:
    """The writer's specification, written for clarity, not speed (the style as first built)."""

    def scalar(v: Any) -> str:
        if v is None or isinstance(v, bool):
            return {None: "null", True: "true", False: "false"}[v]
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                return ".nan" if v != v else (".inf" if v > 0 else "-.inf")
            mantissa, _, exponent = repr(v).partition("e")
            if not exponent:
                return mantissa
            mantissa = mantissa if "." in mantissa else mantissa + ".0"
            return f"{mantissa}e{exponent if exponent[0] in '+-' else '+' + exponent}"
        plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_./-]*", v) and v.lower() not in yamlout._WORDS
        if plain:
            return v
        text = json.dumps(v, ensure_ascii=False)

        def printable(c: str) -> bool:
            code = ord(c)
            return (
                0x20 <= code <= 0x7E or 0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000
            )

        return "".join(
            c if printable(c) else (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
            for c in text
        )

    def inline(v: Any) -> str:
        return "{}" if isinstance(v, dict) else "[]" if isinstance(v, list) else scalar(v)

    def block(v: Any, pad: str) -> list[str]:
        out: list[str] = []
        if isinstance(v, dict):
            for key in sorted(v):
                item = v[key]
                if isinstance(item, (dict, list)) and item:
                    out.append(f"{pad}{scalar(key)}:")
                    out += block(item, pad + "  " if isinstance(item, dict) else pad)
                else:
                    out.append(f"{pad}{scalar(key)}: {inline(item)}")
            return out
        for item in v:
            if isinstance(item, (dict, list)) and item:
                lines = block(item, pad + "  ")
                out += [f"{pad}- {lines[0][len(pad) + 2 :]}", *lines[1:]]
            else:
                out.append(f"{pad}- {inline(item)}")
        return out

    if isinstance(value, (dict, list)) and value:
        return "\n".join(block(value, "")) + "\n"
    return inline(value) + "\n"


@settings(max_examples=500, deadline=None, derandomize=True)
@given(TREES)
def test_the_fast_writer_writes_exactly_what_the_reference_writer_does(value: Any) -> None:
    assert yamlout.dumps(value) == _reference(value)
    assert yamlout.dumps(value) == yamlout.dumps(value)  # the string memo gives the same answer twice


def test_control_characters_and_astral_text_are_escaped_yaml_s_way() -> None:
    for text in (
        "tab\there",
        "bell\x07",
        "nul\x00",
        "del\x7f",
        "\x85next line",
        "\ufeffbom",
        "emoji \U0001f600",
    ):
        assert yaml.load(yamlout.dumps({"k": text}), Loader=yaml.CSafeLoader) == {"k": text}
        assert yamlout.dumps({"k": text}) == _reference({"k": text})


@settings(max_examples=500, deadline=None, derandomize=True)
@given(st.lists(TREES, max_size=3))
def test_the_quick_reader_reads_back_what_the_writer_wrote_exactly_as_pyyaml_does(values: list[Any]) -> None:
    text = yamlout.dumps_all(values)
    assert yamlout.load_all(text) == list(yaml.load_all(text, Loader=yaml.CSafeLoader)) == values


_EDITS = st.sampled_from(
    [
        " ",
        "  ",
        "-",
        "- ",
        ":",
        ": ",
        "#",
        "\n",
        '"',
        "'",
        "!",
        "&a ",
        "*a",
        "{",
        "[",
        "a",
        "1",
        "\\",
        "---\n",
        "\t",
        ".",
        "e",
    ]
)


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(TREES.filter(lambda v: isinstance(v, (dict, list)) and v), st.data())
def test_anything_the_writer_would_not_write_is_left_to_pyyaml(value: Any, data: st.DataObject) -> None:
    text = yamlout.dumps(value)
    at = data.draw(st.integers(0, len(text)))
    if data.draw(st.booleans()):
        edited = text[:at] + data.draw(_EDITS) + text[at:]
    else:
        edited = text[:at] + text[at + data.draw(st.integers(1, 3)) :]
    quick = yamlout.load_all(edited)
    if quick is None:
        return  # PyYAML reads it, or reports it
    try:
        want = list(yaml.load_all(edited, Loader=yaml.CSafeLoader))
    except yaml.YAMLError:
        raise AssertionError(f"read {edited!r}, which PyYAML refuses") from None
    assert quick == want, edited


def test_comments_anchors_tags_flow_style_and_other_indents_are_left_to_pyyaml() -> None:
    for text in (
        "a: 1 # why\n",
        "a: &x 1\nb: *x\n",
        "a: !!str 5\n",
        "a: {b: 1}\n",
        "a:\n    b: 1\n",
        "a:\n  - 1\n",
    ):
        assert yamlout.load_all(text) is None, text
    assert yamlout.load_all("") == [] and yamlout.load_all("a: 1\n---\nb: [x]\n") is None


def test_quoted_scalars_read_quickly_are_the_ones_pyyaml_reads() -> None:
    # printable ASCII with nothing escaped is read straight from between the quotes; anything else
    # (DEL, an escape, a quote inside, non-ASCII) goes through JSON and the writer's own check
    texts = ("a#1", "", "x: y", "- z", "1", "null", "a\x7fb", 'say "hi"', "back\\slash", "é", "\U0001f600")
    for text in texts:
        for written in (yamlout.dumps({"k": text}), yamlout.dumps({"k": [text, {text: text}]})):
            assert yamlout.load_all(written) == list(yaml.load_all(written, Loader=yaml.CSafeLoader)), written
    # not how the writer writes these: PyYAML's to read
    for token in ('"', '"a"b"', '"a\x7fb"', '"a\\u0041"', '"tab\tx"'):
        assert yamlout.load_all(f"k: {token}\n") is None, token


def test_a_sequence_item_read_before_as_a_scalar_is_never_taken_for_an_entry() -> None:
    # `- "n#1"` is a scalar and `- "n#1": 1` a one-entry mapping, however often either was read before
    text = yamlout.dumps({"a": ["n#1", {"n#1": 1}, "n#1", {"n#1": 2}], "b": ["n#1"]})
    for _ in range(2):
        assert yamlout.load_all(text) == [{"a": ["n#1", {"n#1": 1}, "n#1", {"n#1": 2}], "b": ["n#1"]}]
