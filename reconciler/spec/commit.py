"""The spec at a commit, validated (steps 1-2 of a pass): listed, parsed once per blob, checked, last valid Budgets kept.

The one path from a commit to a `validated.Spec`, for `reconcile`, `plan` and `provenance`:
`files.list_commit` (which files), `parsed.documents` (their documents, from the parse cache where
it has them), `validated.read_spec` (every per-document check and every cross-object rule, over
the whole fleet each pass: re-checking a model measured cheaper than loading one back from disk),
then `lastvalid.keep_budgets` (a Budget rejected now plans as its last valid version). Reads Git,
writes only the parse cache.
"""

from __future__ import annotations

from typing import Any

from reconciler.git import read as gitread
from reconciler.spec import files, lastvalid, parsed, validated


def read_spec(
    repo: gitread.Repository, commit: gitread.Commit, early: parsed.Prefetch | None = None
) -> tuple[validated.Spec, int, int]:
    """The validated spec at `commit` (with the last valid version of each Budget rejected there:
    `lastvalid`), the number of spec files, and how many were not in the cache (parsed here, or by
    `early`: files a head start (`parsed.start`) parsed before the engine was imported)."""
    cache = parsed.Cache.load(repo)
    known_trees = cache.trees.keys()
    listed = files.list_commit(repo, commit.tree, cache.trees)
    raw = files.read_listed(repo, listed, files=False)
    documents, unparsed, fresh = parsed.documents(repo, listed, cache, early)
    raw.update(unparsed)  # validation reports them, with their own line and column
    memo: dict[str, Any] = {}
    spec = lastvalid.keep_budgets(
        repo, commit, validated.read_spec(raw, documents, memo), raw, documents, memo
    )
    if fresh or listed.trees.keys() != known_trees:
        cache.trees = listed.trees
        cache.save(repo)
    return spec, len(listed.files) + len(listed.links), fresh
