"""The fast scalar resolver reads every plain scalar as PyYAML's own resolver does (same tags)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from schemas import yamldoc, yamlguard

WORDS = [
    "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
    "on", "On", "ON", "off", "Off", "OFF", "~", "null", "Null", "NULL", "y", "n", "nope", "onward",
    "org:ai:rai", "H100-80GB", ".inf", "-.Inf", ".nan", "-1", "+7", "0x10", "0o17", "1_000", "1e3",
    "2026-03-02", "2026-03-02T09:00:00Z", "<<", "=", "us-west", "15m",
]  # fmt: skip


def tag(text: str, loader: type) -> str:
    node = yaml.compose(text, Loader=loader)
    assert node is not None
    return str(node.tag)


@pytest.mark.parametrize("word", WORDS)
def test_a_plain_scalar_gets_the_tag_pyyaml_gives_it(word: str) -> None:
    assert tag(word, yamldoc._FastLoader) == tag(word, yaml.CSafeLoader)


@given(st.text(alphabet="abnoyftNOYFT~01.-+:eE_x", min_size=1, max_size=8))
def test_any_short_word_gets_the_tag_pyyaml_gives_it(word: str) -> None:
    try:
        want = tag(word, yaml.CSafeLoader)
    except yaml.YAMLError:
        return  # not a plain scalar on its own (e.g. starts with an indicator)
    assert tag(word, yamldoc._FastLoader) == want


@given(st.lists(st.sampled_from(["map", "seq", "seq-inline"]), min_size=1, max_size=80))
def test_the_bracket_free_nesting_bound_never_misses_a_deep_document(shape: list[str]) -> None:
    # build block YAML nesting one level per entry: a key on its own line, a "- " item on its own
    # line, or a "- " item sharing its line with the next level
    lines, indent, inline = [], 0, ""
    for i, kind in enumerate(shape):
        if kind == "map":
            lines.append(" " * indent + inline + f"k{i}:")
        elif kind == "seq":
            lines.append(" " * indent + inline + "-")
        else:
            inline += "- "
            continue
        indent += len(inline) + 2
        inline = ""
    lines.append(" " * indent + inline + "leaf")
    text = ("\n".join(lines) + "\n").encode()
    depth = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
    assert yamlguard._may_nest_past(text, depth) is True  # a bound: never below the real depth


@pytest.mark.parametrize("positions", [True, False])
def test_scalars_read_as_yaml_1_2_with_or_without_positions(positions: bool) -> None:
    text = "a: 1e3\nb: '1e3'\nc: x1\nd: .5\ne: -2.5e-3\nf: 0x10\ng: true\nh: ~\ni: 15m\nj: ''\nk: +7\n"
    docs, bad = yamldoc.parse_all(text, "f.yaml", positions)
    assert not bad
    assert docs[0].data == {
        "a": 1000.0, "b": "1e3", "c": "x1", "d": 0.5, "e": -0.0025, "f": 16, "g": True, "h": None,
        "i": "15m", "j": "", "k": 7,
    }  # fmt: skip
