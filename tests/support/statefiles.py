"""Every file under `state/` in a fleet repository's history, and its check against the published JSON Schema of its kind.

`state_files(repo)` reads every distinct state file of every commit on main; `check(files)`
validates each document (each line of a ledger day) against its kind's published JSON Schema
(`tests.support.corpus.kind_validator`; the committed `schemas/json/` files equal it, which
tests/schemas checks) and each picture as an SVG document, and returns the problems in words. A path of no known kind
fails the caller's test: a new state file must publish its schema first.
"""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree

import pygit2
import yaml

from reconciler.state import layout
from tests.support.corpus import kind_validator

# state/ kinds and the published schema each document of theirs must validate against
PUBLISHED = {
    layout.LEASES: "Lease",
    layout.RESERVATIONS: "Reservation",
    layout.RUN_STATUS: "RunStatus",
    layout.BUDGET_STATUS: "BudgetStatus",
    layout.FLEET: "FleetState",
    layout.OBSERVED: "ObservedCluster",
    layout.LEDGER: "LedgerLine",  # each line
}
PICTURES = {layout.FLEET_MAP, layout.TIMELINE}  # SVG drawn from the others: checked as SVG documents


def kind_of(path: str) -> str:
    for prefix in (*PUBLISHED, *PICTURES):
        if path == prefix or path.startswith(prefix):
            return prefix
    raise AssertionError(
        f"{path}: a state file of no known kind; publish its schema (schemas.publish) and list it here"
    )


def state_files(repo: pygit2.Repository) -> dict[str, bytes]:
    """Every distinct state file of every commit on main (by path and content)."""
    out: dict[tuple[str, str], bytes] = {}
    for commit in repo.walk(repo.references["refs/heads/main"].target):
        try:
            state = commit.tree["state"]
        except KeyError:
            continue
        stack = [("state/", repo[state.id])]
        while stack:
            base, tree = stack.pop()
            for entry in tree:
                path = f"{base}{entry.name}"
                if entry.type_str == "tree":
                    stack.append((path + "/", repo[entry.id]))
                else:
                    out[(path, str(entry.id))] = repo[entry.id].data
    return {f"{path}@{oid[:12]}": data for (path, oid), data in sorted(out.items())}


def documents(kind: str, data: bytes) -> list[Any]:
    if kind == layout.LEDGER:
        return [json.loads(line) for line in data.splitlines()]
    return list(yaml.safe_load_all(data))


def check(files: dict[str, bytes]) -> list[str]:
    problems = []
    for name, data in files.items():
        path = name.split("@")[0]
        kind = kind_of(path)
        if kind in PICTURES:
            root = ElementTree.fromstring(data)
            if root.tag != "{http://www.w3.org/2000/svg}svg":
                problems.append(f"{name}: not an SVG document ({root.tag})")
            continue
        for doc in documents(kind, data):
            for error in kind_validator(PUBLISHED[kind]).iter_errors(doc):
                problems.append(f"{name}: {'/'.join(map(str, error.absolute_path))}: {error.message}")
    return problems
