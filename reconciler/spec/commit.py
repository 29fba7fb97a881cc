"""The spec at a commit, validated (steps 1-2 of a pass): listed, parsed once per blob, checked, last valid Budgets kept.

The one path from a commit to a `validated.Spec`, for `reconcile`, `plan` and `provenance`:
`files.list_commit` (which files), `parsed.documents` (their documents, from the parse cache where
it has them), `validated.read_spec` (every per-document check and every cross-object rule, over
the whole fleet each pass: re-checking a model measured cheaper than loading one back from disk),
then `lastvalid.keep_budgets` (a Budget rejected now plans as its last valid version). Reads Git,
writes only the parse cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler.git import read as gitread
from reconciler.spec import files, lastvalid, parsed, validated
from schemas.yamldoc import Document


@dataclass(slots=True)
class Kept:
    """What a long-lived reconciler (`reconcile --interval`, the webhook) keeps of the spec it read
    last, in memory: each file's documents by blob id and what validation remembered of them, so
    the next pass hands an unchanged file over as the very same documents and validation skips it
    (`fleetcheck.check_fleet`'s memo); the subtree listings by tree id. Only the current commit's
    files are kept."""

    documents: dict[str, list[Document]] = field(default_factory=dict)
    validated: dict[str, Any] = field(default_factory=dict)  # path -> what validation remembered
    trees: dict[str, files.Listing] = field(default_factory=dict)


def read_spec(
    repo: gitread.Repository,
    commit: gitread.Commit,
    early: parsed.Prefetch | None = None,
    kept: Kept | None = None,
) -> tuple[validated.Spec, int, int]:
    """The validated spec at `commit` (with the last valid version of each Budget rejected there:
    `lastvalid`), the number of spec files, and how many were not in the cache (parsed here, or by
    `early`: files a head start (`parsed.start`) parsed before the engine was imported). `kept`:
    what this process kept from its last read (updated here); the on-disk cache is then loaded only
    for files it does not hold."""
    held = kept.documents if kept is not None else {}
    # the disk cache when this process holds nothing yet; afterwards only what changed is parsed
    cache = parsed.Cache.load(repo) if not held else parsed.Cache({}, {})
    listed = files.list_commit(repo, commit.tree, {**cache.trees, **(kept.trees if kept else {})})
    raw = files.read_listed(repo, listed, files=False)
    documents, unparsed, fresh = parsed.documents(repo, listed, cache, early, held)
    raw.update(unparsed)  # validation reports them, with their own line and column
    memo: dict[str, Any] = kept.validated if kept is not None else {}
    spec = lastvalid.keep_budgets(
        repo, commit, validated.read_spec(raw, documents, memo), raw, documents, memo
    )
    spec.origins = {run: listed.files[path] for run, path in spec.run_files.items() if path in listed.files}
    if not held and (fresh or listed.trees.keys() != cache.trees.keys()):
        cache.trees = listed.trees
        cache.save(repo)
    if kept is not None:
        kept.trees = listed.trees
        kept.documents = {listed.files[path]: docs for path, docs in documents.items()}
        for path in kept.validated.keys() - documents.keys():
            del kept.validated[path]
    return spec, len(listed.files) + len(listed.links), fresh
