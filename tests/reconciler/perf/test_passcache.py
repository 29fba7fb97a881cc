"""The pass caches (spec documents, decoded state, rendered sources): faster passes, never other results.

Two clones of one fleet take the same steps at the same instants; one keeps its caches under
`.git/jobtree/cache/`, the other loses them before every pass. Their commits must be identical,
byte for byte (same commit ids), whatever happens to the caches in between.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pygit2
import pytest

from reconciler.git import read as gitread
from reconciler.passes.reconcile import Outcome, reconcile_once
from reconciler.perf import diskcache as passcache
from reconciler.spec import commit as speccache
from reconciler.spec import parsed as specprefetch
from reconciler.state import memo as passmemo
from tests.support.git import (
    T0,
    bare_remote,
    forget_caches,
    growing_files,
    state_at,
    template_files,
)
from tests.support.git import commit_by_hand as human_commit

WHISPER = "runs/media-audio/whisper-finetune.yaml"
PRETRAIN = "runs/rai-llm/pretrain-64.yaml"


@pytest.fixture
def twins(tmp_path: Path) -> tuple[Path, Path]:
    """Two checked-out clones of one template fleet: `cached` keeps its caches, `fresh` never has any."""
    remote = bare_remote(tmp_path, growing_files())  # vit-elastic grows: passes that commit
    paths = (tmp_path / "cached", tmp_path / "fresh")
    for path in paths:
        pygit2.clone_repository(str(remote), str(path), checkout_branch="main")
    return paths


def step(
    twins: tuple[Path, Path], now: int, change: dict[str, bytes | None] | None = None
) -> tuple[Outcome, Outcome]:
    """One reconcile pass in both clones (after the same spec change, if any)."""
    outcomes = []
    for path in twins:
        repo = pygit2.Repository(str(path))
        if change is not None:
            human_commit(repo, change, "spec change\n")
        if path is twins[1]:
            forget_caches(repo)
        outcomes.append(reconcile_once(path, now=now))
    assert outcomes[1].state_from == "decoded"
    return outcomes[0], outcomes[1]


def test_passes_from_the_cache_make_exactly_the_commits_of_passes_without_one(twins) -> None:
    cached_repo = pygit2.Repository(str(twins[0]))
    run = template_files()[WHISPER]
    image = template_files()[PRETRAIN].replace(b"llm-pretrain:2026.11", b"llm-pretrain:2026.12")
    timeline: list[tuple[int, dict[str, bytes | None] | None]] = [
        (T0, None),  # the first state commit
        (T0 + 60, None),  # vit-elastic grows a step (at most one per instant: a pass is a fixed point)
        (T0 + 300, None),  # and another
        (T0 + 900, None),  # only meters move: no commit
        (
            T0 + 1200,
            {"runs/media-audio/whisper-more.yaml": run.replace(b"whisper-finetune", b"whisper-more")},
        ),
        (T0 + 1500, {WHISPER: None}),  # a run deleted: its leases end, its pods go
        (T0 + 1800, {PRETRAIN: image}),  # the same pods, re-rendered with a new image
        (T0 + 7200, None),  # two hours on, meters only again
    ]
    committed = []
    for i, (now, change) in enumerate(timeline):
        cached, fresh = step(twins, now, change)
        assert cached.head == fresh.head, f"step {i}: the cached clone is at {cached.head}, not {fresh.head}"
        committed.append(cached.commit is not None)
        if i > 0:
            assert cached.state_from == "cached"
            assert cached.spec_parsed == (1 if change and any(change.values()) else 0)
    assert committed == [True, True, True, False, True, True, True, False]
    assert state_at(cached_repo) == state_at(pygit2.Repository(str(twins[1])))


def test_only_new_spec_files_are_parsed_again(twins) -> None:
    first = reconcile_once(twins[0], now=T0)
    assert first.spec_parsed == len([p for p in template_files() if p.endswith(".yaml")])
    repo = pygit2.Repository(str(twins[0]))
    run = template_files()[WHISPER].replace(b"whisper-finetune", b"whisper-more")
    human_commit(repo, {"runs/media-audio/whisper-more.yaml": run}, "another run\n")
    assert reconcile_once(twins[0], now=T0 + 60).spec_parsed == 1


@pytest.mark.parametrize(
    "damage",
    ["truncated", "flipped byte", "other format", "not marshal", "empty", "a directory"],
)
def test_a_damaged_cache_is_ignored_and_rebuilt(twins, damage: str) -> None:
    step(twins, T0)
    repo = pygit2.Repository(str(twins[0]))
    for name in (passmemo.CACHE_NAME, specprefetch.CACHE_NAME):
        target = gitread.cache_directory(repo) / name
        raw = target.read_bytes()
        if damage == "truncated":
            target.write_bytes(raw[: len(raw) // 2])
        elif damage == "flipped byte":
            target.write_bytes(raw[:-10] + bytes([raw[-10] ^ 0xFF]) + raw[-9:])
        elif damage == "other format":
            target.write_bytes(raw[:8] + b"\0" * 32 + raw[40:])
        elif damage == "not marshal":
            target.write_bytes(raw[:72] + b"\xff\xfe not marshal")
        elif damage == "empty":
            target.write_bytes(b"")
        else:
            target.unlink()
            target.mkdir()
    cached, fresh = step(twins, T0)
    assert cached.head == fresh.head and cached.state_from == "decoded"
    assert reconcile_once(twins[0], now=T0 + 300).state_from in ("decoded", "cached")
    if damage != "a directory":
        assert passcache.load(gitread.cache_directory(repo), passmemo.CACHE_NAME) is not None  # rebuilt


def test_a_cache_of_another_commit_is_not_used(twins) -> None:
    step(twins, T0)
    first = str(pygit2.Repository(str(twins[0])).head.target)
    step(twins, T0 + 60)  # growth: a second state commit, now in the cache
    for path in twins:
        repo = pygit2.Repository(str(path))
        repo.references.create("refs/heads/main", pygit2.Oid(hex=first), force=True)
        repo.checkout_head(strategy=pygit2.GIT_CHECKOUT_FORCE)
    cached, fresh = step(twins, T0 + 120)
    assert cached.head == fresh.head and cached.state_from == "decoded"


def test_cached_documents_give_the_same_diagnostics_at_the_same_lines(tmp_path: Path) -> None:
    files = template_files()
    path = "runs/rai-llm/pretrain-64.yaml"
    files[path] = files[path].replace(b'owner: "org:acme:rai:llm"', b'owner: "org:acme:rai:sys"')
    repo = pygit2.clone_repository(str(bare_remote(tmp_path, files)), str(tmp_path / "work"), bare=True)
    head = gitread.resolve(repo, "main")
    fresh, count, parsed = speccache.read_spec(repo, head)
    cached, _, parsed_again = speccache.read_spec(repo, head)
    assert parsed == count and parsed_again == 0
    assert fresh.diagnostics and [str(d) for d in cached.diagnostics] == [str(d) for d in fresh.diagnostics]
    assert any(d.path == path and d.line == 9 for d in cached.diagnostics)  # the spec.owner line
    assert cached.rejected == fresh.rejected and [r.metadata.name for r in cached.runs] == [
        r.metadata.name for r in fresh.runs
    ]


def test_caches_live_in_the_git_dir_never_in_the_work_tree_or_a_commit(twins) -> None:
    step(twins, T0)
    repo = pygit2.Repository(str(twins[0]))
    where = gitread.cache_directory(repo)
    assert where.is_relative_to(Path(repo.path)) and sorted(p.name for p in where.iterdir()) == [
        "spec-documents",
        "state-memo",
    ]
    assert repo.status() == {}
    assert not any("jobtree/cache" in p for p in gitread.list_blobs(repo, "main"))


def test_equal_manifests_get_equal_fingerprints_however_their_objects_are_shared() -> None:
    # A manifest rendered in a worker, or by the next pass, is equal but built of other objects:
    # shared here, separate there; interned strings or not. Only its value may decide its print.
    image = "ghcr.io/acme/whisper-train:2026.11"
    plain, interned = "".join(image), sys.intern("".join(image))
    assert plain is not interned and interned is sys.intern(image)  # a real contrast, not one object
    shared = {"kind": "Pod", "spec": {"containers": [{"image": image}, {"image": image}]}, "tags": [plain]}
    fresh = {
        "kind": "".join(["P", "od"]),
        "spec": {"containers": [{"image": "".join(image)}, {"image": image[:5] + image[5:]}]},
        "tags": [interned],
    }
    assert shared == fresh
    assert passmemo.fingerprint(shared) == passmemo.fingerprint(fresh)
    assert passmemo.fingerprint((shared, fresh)) == passmemo.fingerprint((fresh, shared))
    assert passmemo.fingerprint(shared) != passmemo.fingerprint({**shared, "kind": "Service"})


def test_state_decoded_without_documents_is_the_same_state(twins) -> None:
    # `jobtree plan` decodes the base without keeping the documents: the same rows, the same FleetState
    step(twins, T0)
    step(twins, T0 + 60)
    repo = pygit2.Repository(str(twins[1]))
    head = repo.head.peel(pygit2.Commit)
    whole, rows_only = passmemo.read(repo, head), passmemo.read(repo, head, documents=False)
    assert whole.loaded and not rows_only.loaded
    assert rows_only.pieces == whole.pieces and rows_only.blobs == whole.blobs
    assert rows_only.state() == whole.state() and rows_only.state().leases
