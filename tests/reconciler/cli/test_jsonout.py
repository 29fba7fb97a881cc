"""The JSON writer: the standard library's compact sorted form, floats in shortest decimal form."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from reconciler.cli import jsonout

ascii_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=8)
scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | ascii_text


def nested(leaves: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ascii_text, inner, max_size=4),
        max_leaves=20,
    )


@given(nested(scalars))
def test_data_without_floats_is_written_byte_for_byte_as_the_standard_library_writes_it(
    value: object,
) -> None:
    assert jsonout.dumps(value) == (json.dumps(value, sort_keys=True, separators=(",", ":")) + "\n").encode()


@given(nested(scalars | st.floats(allow_nan=False, allow_infinity=False)))
def test_any_plain_data_reads_back_equal_and_is_written_the_same_twice(value: object) -> None:
    out = jsonout.dumps(value)
    assert json.loads(out) == value
    assert jsonout.dumps(json.loads(out)) == out


def test_other_characters_are_utf8_and_read_back_the_same() -> None:
    value = {"message": "earliestStart — 09:15", "b": [1, 2.5]}
    out = jsonout.dumps(value)
    assert "—".encode() in out
    assert json.loads(out) == value
