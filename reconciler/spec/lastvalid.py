"""An invalid Budget keeps funding: its last valid version (step 2 of a pass).

A typo in a budget file must not touch what runs: left out of planning, its envelopes would vanish
and every lease they pay for would turn unfunded (the first capacity the resolver reclaims). So for
each Budget rejected at the head, the most recent version of its file on the branch's first-parent
history that validates (with every other spec file as at the head) is planned in its place, frozen
(`World.frozen_budgets`): its claims stay funded, and its status names the file to fix. A budget
rejected only with another file (its untouched partner in a parent cycle typed into that file) is
kept as it validates once the broken files' last valid versions are in place. A budget with no
valid version within `MAX_BACK` commits stays out. Reads Git; never writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from reconciler.git import read as gitread
from reconciler.spec import validated
from schemas.budget import Budget
from schemas.yamldoc import Document

MAX_BACK = 50  # commits looked back for a valid version of a broken budget file


def keep_budgets(
    repo: gitread.Repository,
    head: gitread.Commit,
    spec: validated.Spec,
    files: Mapping[str, bytes],
    parsed: Mapping[str, list[Document]],
    memo: dict[str, Any],
) -> validated.Spec:
    """`spec` with the last valid version of every Budget rejected at `head` in `spec.kept`.

    `files`, `parsed` and `memo` are the head's spec as `spec.commit` validated it (bytes of the files
    that did not parse, documents of the rest, what validation remembered of each document): an
    older version of a budget file is checked with every other file as at the head, and only that
    file is read and validated again.
    """
    broken = {key.split(" ", 1)[1]: path for key, path in spec.rejected.items() if key.startswith("Budget ")}
    if not broken:
        return spec
    kept: dict[str, Budget] = {}
    versions: dict[str, bytes] = {}  # path -> the older version a kept budget came from
    for name, path in sorted(broken.items()):
        found = _last_valid(repo, head, name, path, files, parsed, memo)
        if found is not None:
            kept[name], versions[path] = found
    collateral = {name for name, path in broken.items() if name not in kept and path not in versions}
    if collateral and versions:
        # rejected only with another file (a parent cycle typed into one budget names its untouched
        # partner too): with the broken files' last valid versions in place, the partner validates
        spec_then = validated.read_spec(
            {**{p: d for p, d in files.items() if p not in versions}, **versions},
            {p: d for p, d in parsed.items() if p not in versions},
            memo,
        )
        kept.update((b.metadata.name, b) for b in spec_then.budgets if b.metadata.name in collateral)
    return dataclasses.replace(spec, kept=[kept[name] for name in sorted(kept)])


def _last_valid(
    repo: gitread.Repository,
    head: gitread.Commit,
    name: str,
    path: str,
    files: Mapping[str, bytes],
    parsed: Mapping[str, list[Document]],
    memo: dict[str, Any],
) -> tuple[Budget, bytes] | None:
    """The most recent valid version of Budget `name` in `path` on the first-parent line, and the
    file's bytes then; None when none is within `MAX_BACK` commits."""
    others = {p: d for p, d in files.items() if p != path}
    others_parsed = {p: d for p, d in parsed.items() if p != path}
    tried = {gitread.read_file(repo, str(head.id), path)}
    commit = head
    for _ in range(MAX_BACK):
        if not commit.parents:
            return None
        commit = commit.parents[0]
        data = gitread.read_file(repo, str(commit.id), path)
        if data is None or data in tried:
            continue
        tried.add(data)
        spec = validated.read_spec({**others, path: data}, others_parsed, memo)
        found = [b for b in spec.budgets if b.metadata.name == name]
        if found:
            return found[0], data
    return None
