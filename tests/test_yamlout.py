"""The machine-written YAML style: whatever `statefiles` writes, PyYAML reads back unchanged."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import yamlout

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
