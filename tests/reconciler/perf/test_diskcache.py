"""The pass caches are keyed on jobtree's version and `diskcache.FORMAT`: a change to what they hold
must come with a new format number, or an old cache would be read as a new one.

The golden file `tests/golden/cache-format.txt` records the format number with a digest of what
the caches hold for fixed inputs (a spec file's parsed rows, the template's state memo, a rendered
file's documents). Change
what they hold and the digest moves: this test then fails until `FORMAT` is bumped too, and
`pytest --regen-golden` records the new pair for review.
"""

from __future__ import annotations

import hashlib
import json
import marshal
from pathlib import Path
from typing import Any

import pygit2
import pytest

from reconciler.perf import diskcache
from reconciler.spec import parsed
from reconciler.state import filedocs, memo
from tests.conftest import GOLDEN, Golden
from tests.support import REPO
from tests.support.git import reconciled

NAME = "cache-format.txt"


def _plain(value: Any) -> Any:
    """JSON-ready, and the same on every Python: marshal'd positions are read back first."""
    if isinstance(value, bytes):
        return _plain(marshal.loads(value))
    if isinstance(value, dict):
        return sorted([json.dumps(_plain(k), sort_keys=True), _plain(v)] for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, (set, frozenset)) else items
    return value


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(_plain(value), sort_keys=True).encode()).hexdigest()


def test_what_the_caches_hold_changes_only_with_a_new_format_number(tmp_path: Path, golden: Golden) -> None:
    run = (REPO / "fleet-repo-template" / "runs" / "rai-llm" / "pretrain-64.yaml").read_bytes()
    rows = parsed.parse([("runs/rai-llm/pretrain-64.yaml", run)])
    work, repo = reconciled(tmp_path)
    state = memo.read(repo, repo.head.peel(pygit2.Commit))
    rendered = sorted((work / "rendered").rglob("*.yaml"))[0]
    documents = filedocs.parse(rendered.read_bytes())
    text = (
        f"FORMAT {diskcache.FORMAT}\nspec rows {_digest(rows)}\nstate memo {_digest(state.pieces)}\n"
        f"file documents {_digest(documents)}\n"
    )
    recorded = (GOLDEN / NAME).read_text() if (GOLDEN / NAME).exists() else ""
    if not golden.regen and recorded and text.splitlines()[1:] != recorded.splitlines()[1:]:
        assert text.splitlines()[0] != recorded.splitlines()[0], (
            "what the pass caches hold changed: bump reconciler.perf.diskcache.FORMAT (so no old "
            "cache is read as a new one), then record it with `pytest --regen-golden`"
        )
    golden.check(NAME, text)


def test_a_cache_written_under_another_format_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert diskcache.save(tmp_path, "x", {"a": 1})
    assert diskcache.load(tmp_path, "x") == {"a": 1}
    diskcache.format_id.cache_clear()
    monkeypatch.setattr(diskcache, "FORMAT", diskcache.FORMAT + 1)
    try:
        assert diskcache.load(tmp_path, "x") is None  # recomputed, never misread
    finally:
        diskcache.format_id.cache_clear()
