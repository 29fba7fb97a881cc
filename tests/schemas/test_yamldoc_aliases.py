"""The YAML guard bounds what `*alias` references expand to, not how many values a file writes out:
a million-GPU scenario loads, a billion-laughs file is refused at its line with what to do."""

from __future__ import annotations

from schemas import yamldoc

LAUGHS = "lol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 10)
)  # ten levels of ten: 10^10 values from 600 bytes


def test_a_file_writing_out_far_more_values_than_the_old_caps_loads_whole() -> None:
    want_values = 450_000  # past the old 200,000 per document and 400,000 per file
    text = "items:\n" + "".join(f"- {i}\n" for i in range(want_values))
    docs, bad = yamldoc.parse_all(text, "big.yaml", positions=False)
    assert bad == []
    assert len(docs[0].data["items"]) == want_values
    assert docs[0].data["items"][-1] == want_values - 1


def test_a_billion_laughs_is_refused_at_the_alias_that_passes_the_budget() -> None:
    docs, bad = yamldoc.parse_all(LAUGHS, "laughs.yaml")
    assert docs == []
    assert len(bad) == 1
    err = bad[0].error
    assert "repeat more than 100000 values" in err.message
    assert "write the values out or remove the repetition" in err.message
    assert err.line > 1  # an alias's line, not the file's first


def test_a_billion_laughs_without_positions_is_refused_alike() -> None:
    _, bad = yamldoc.parse_all(LAUGHS, "laughs.yaml", positions=False)
    assert len(bad) == 1 and "repeat more than 100000 values" in bad[0].error.message


def test_aliases_that_repeat_a_little_still_read_as_their_anchor_values() -> None:
    text = "env: &env [{name: A, value: '1'}, {name: B, value: '2'}]\nfirst: *env\nsecond: *env\n"
    docs, bad = yamldoc.parse_all(text, "ok.yaml")
    assert bad == []
    want_env = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert docs[0].data == {"env": want_env, "first": want_env, "second": want_env}


def test_the_alias_budget_is_the_files_not_each_documents() -> None:
    # per document, b repeats a (11 values) 10 times: 110; c repeats b (111) 10 times: 1,110; d
    # repeats c (1,111) 10 times: 11,110; 12,330 in all. 8 documents repeat 98,640 values (within
    # the 100,000), 9 repeat 110,970.
    one = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    one += "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    one += "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    one += "d: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    eight = ("---\n" + one) * 8
    docs, bad = yamldoc.parse_all(eight, "eight.yaml")
    assert bad == [] and len(docs) == 8
    _, bad = yamldoc.parse_all(eight + "---\n" + one, "nine.yaml")
    assert len(bad) == 1 and "repeat more than 100000 values" in bad[0].error.message
