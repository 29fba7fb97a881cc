"""A state commit patched from its parent's trees (only the changed directories built again) is the
same commit as one built whole from every owned file."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pygit2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.git import packs
from reconciler.git import read as gitread
from reconciler.git import write as gitwrite
from tests.support.git import write_tree

SPEC = {"jobtree.yaml": b"kind: FleetConfig\n", "runs/a/r.yaml": b"kind: Run\n"}
NAMES = st.sampled_from(["a", "b", "c", "team-x", "team-y"])
# owned paths as jobtree lays them out: a few folders deep, names shared between kinds
PATHS = st.builds(
    lambda top, ns, name: f"{top}/{ns}/{name}.yaml",
    st.sampled_from(["state/leases", "state/status/runs", "rendered/east", "rendered/west"]),
    NAMES,
    NAMES,
) | st.sampled_from(["state/fleet.yaml", "state/ledger/2026-03-02.jsonl"])
TREES = st.dictionaries(PATHS, st.binary(max_size=6), max_size=12)


def commit(
    repo: pygit2.Repository, parent: str, files: dict[str, bytes], known: dict[str, str] | None
) -> str:
    blobs = {path: packs.object_id("blob", data).hex() for path, data in files.items()}
    contents = {blobs[path]: data for path, data in files.items()}
    oid = gitwrite.commit_tree(
        repo, "main", parent, blobs, contents, message="state\n", author_name="jobtree",
        author_email="jobtree@fleet.example", now=1_767_600_000, parent_blobs=known,
    )  # fmt: skip
    return str(oid) if oid is not None else parent


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(before=TREES, after=TREES)
def test_a_commit_patched_from_its_parent_is_the_commit_built_whole(
    before: dict[str, bytes], after: dict[str, bytes]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repos = []
        for name in ("whole", "patched"):
            repo = pygit2.init_repository(str(Path(tmp) / name), bare=True, initial_head="main")
            who = pygit2.Signature("Ada", "ada@example.com", 1_767_500_000, 0)
            spec = repo.create_commit("refs/heads/main", who, who, "spec\n", write_tree(repo, SPEC), [])
            repos.append((repo, commit(repo, str(spec), before, None)))
        (whole, parent_a), (patched, parent_b) = repos
        assert parent_a == parent_b
        known = gitread.list_blobs(patched, parent_b, gitread.OWNED_PREFIXES)
        want = commit(whole, parent_a, after, None)
        got = commit(patched, parent_b, after, known)
        assert got == want
        assert gitread.read_files(patched, got) == {**SPEC, **after}
