"""Files read without positions (the simulator's one big scenario) report the same places on demand."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import yamldoc

TEXT = b"""# a leading comment
---
kind: Run
metadata:
  name: a
spec:
  resources: {totalGPUs: 8}
  steps:
    - at: +1m
      apply: [x, y]
---
kind: Budget
metadata: {name: b}
"""


def test_positions_worked_out_later_equal_the_ones_tracked_while_reading() -> None:
    tracked = yamldoc.parse(TEXT, "f.yaml")
    lazy, bad = yamldoc.parse_all(TEXT, "f.yaml", positions=False)
    assert not bad
    assert [d.data for d in lazy] == [d.data for d in tracked]
    for t, lz in zip(tracked, lazy, strict=True):
        assert dict(lz.positions) == dict(t.positions)
    assert lazy[0].where(("spec", "steps", 0, "apply", 1)) == (10, 18)
    assert lazy[1].where(("metadata", "name")) == (13, 12)


def test_a_duplicate_key_names_its_first_line_without_positions_too() -> None:
    text = b"kind: Run\nmetadata:\n  name: a\n  labels: {}\n  name: b\n"
    for positions in (True, False):
        docs, bad = yamldoc.parse_all(text, "f.yaml", positions)
        assert not docs
        assert (bad[0].error.line, bad[0].error.message) == (
            5,
            "duplicate key 'name' (first set at line 3); keep one of them",
        )


@settings(max_examples=60, deadline=None)
@given(
    st.recursive(
        st.one_of(st.integers(), st.text("abc xyz:-", max_size=6), st.booleans(), st.none()),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.text("abkey", min_size=1, max_size=4), inner, max_size=3),
        ),
        max_leaves=12,
    )
)
def test_any_document_reads_the_same_data_and_places_either_way(value: object) -> None:
    import yaml

    text = yaml.safe_dump({"doc": value}, default_flow_style=False).encode()
    tracked = yamldoc.parse(text, "f.yaml")
    lazy, _ = yamldoc.parse_all(text, "f.yaml", positions=False)
    assert [d.data for d in lazy] == [d.data for d in tracked]
    assert [dict(d.positions) for d in lazy] == [dict(d.positions) for d in tracked]
