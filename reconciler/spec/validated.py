"""Spec files validated (step 2 of a pass): the valid objects to plan, every problem, and what was left out.

Per document and across objects (`schemas.fleetcheck`); an invalid object is excluded and
reported, and its running work is left alone (`rejected`: the key it goes by and its file). A spec
folder committed as a symbolic link (`runs/<ns>` → a copy) holds no file Git gives jobtree: it is
reported like a symlinked file (JT002), and the runs it held keep running (`linked`). Reads no Git
and plans nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.spec.files import spec_folder
from schemas import diagnostics as codes
from schemas import fleetcheck, layout
from schemas.budget import Budget
from schemas.diagnostics import Diagnostic
from schemas.fleet import FleetSpec, Inventory
from schemas.load import Symlink
from schemas.run import Run
from schemas.yamldoc import Document


@dataclass(slots=True)
class Spec:
    """The fleet as the spec files say, after validation: only valid objects are planned."""

    fleet: FleetSpec
    budgets: list[Budget]
    runs: list[Run]
    inventory: Inventory | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # "Kind ns/name" left out -> its file
    kept: list[Budget] = field(default_factory=list)  # last valid versions of rejected Budgets (`lastvalid`)
    linked: dict[str, str] = field(default_factory=dict)  # spec folder committed as a link -> its path
    name: str = ""  # the FleetConfig's metadata.name: the fleet label on what it applies (§7.1)
    run_files: dict[str, str] = field(default_factory=dict)  # each valid Run ("ns/name") -> its file
    origins: dict[str, str] = field(
        default_factory=dict
    )  # each valid Run -> its file's Git blob (read from Git)


def linked_folder(path: str, data: bytes) -> bool:
    """Whether `path` is a spec folder (`runs`, `budgets`, `inventory`, `runs/<namespace>`) committed
    as a symbolic link: `data` is a `Symlink` at a folder's path (`files.spec_folder`)."""
    return isinstance(data, Symlink) and layout.spec_kind(path) is None and spec_folder(path)


def check(files: Mapping[str, bytes], parsed: Mapping[str, list[Document]] | None = None,
          memo: dict[str, Any] | None = None, clusters_seen: Mapping[str, str] | None = None,
          *, flavors_seen: Mapping[str, Collection[str]] | None = None, now: int | None = None,
          cluster_labels: Mapping[str, Sequence[str]] | None = None,
          ) -> fleetcheck.ValidatedFleet:  # fmt: skip
    """`fleetcheck.check_fleet`, with spec folders committed as links reported (JT002), as a link
    in place of a file is: Git holds only the target's name, and jobtree reads nothing through it.
    `clusters_seen`, `flavors_seen`, `cluster_labels`, `now`: see `fleetcheck.check_fleet`."""
    links = {path: data for path, data in files.items() if linked_folder(path, data)}
    fleet = fleetcheck.check_fleet(
        {p: d for p, d in files.items() if p not in links},
        parsed,
        memo,
        clusters_seen,
        flavors_seen=flavors_seen,
        cluster_labels=cluster_labels,
        now=now,
    )
    if not links:
        return fleet
    found = [
        Diagnostic(
            path,
            1,
            1,
            codes.NOT_AN_OBJECT,
            f"the folder is a symbolic link (to {data[:200].decode('utf-8', 'replace')}); Git keeps only "
            "the target's name and jobtree reads no file through it: commit the folder itself "
            "(what runs from it keeps running until then)",
        )  # fmt: skip
        for path, data in sorted(links.items())
    ]
    return dataclasses.replace(fleet, diagnostics=sorted([*fleet.diagnostics, *found]))


def read_spec(
    files: Mapping[str, bytes],
    parsed: Mapping[str, list[Document]] | None = None,
    memo: dict[str, Any] | None = None,
) -> Spec:
    """Validate the spec files (per document and across objects) and keep the valid objects.

    `parsed`: files the caller already holds as documents (the simulator), checked the same way;
    `memo`: the caller's record of documents already validated (see `fleetcheck.check_fleet`).
    """
    v = check(files, parsed, memo)
    where: dict[str, str] = {}
    for o in v.objects:
        key = fleetcheck.excluded_key(o) if not o.valid else None
        if key is not None:
            where.setdefault(key, o.path)
    rejected = {key: where[key] for key in v.rejected}
    linked = {path: path for path, data in files.items() if linked_folder(path, data)}
    run_files = {f"{o.namespace}/{o.name}": o.path for o in v.objects if o.valid and o.kind == "Run"}
    return Spec(
        v.config,
        list(v.budgets),
        list(v.runs),
        v.inventory,
        list(v.diagnostics),
        rejected,
        [],
        linked,
        v.name,
        run_files,
    )
