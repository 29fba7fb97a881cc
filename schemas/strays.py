"""Stray fleet files: files a person meant as spec that jobtree does not read, named so a typo in a
path fails review instead of leaving a run that never starts.

Pure and path-first: `candidate` decides from a path alone whether a reader should hand the file
over (and only its first `SNIFF_BYTES`), `misplaced` says why it is not read. It does not parse YAML
(a line `kind: Run` is enough to tell a misplaced Run from a `mkdocs.yml`) and never looks inside
`state/`, `rendered/` or hidden folders such as `.github/`.
"""

from __future__ import annotations

import re

from schemas.layout import FLEET_FILE, INVENTORY_FILE, OWNED_PREFIXES, SPEC_DIRS, spec_kind

SNIFF_BYTES = 4096
_DATA_SUFFIXES = (".yaml", ".yml", ".json")
# `kind: Run` on a line of its own (YAML; CRLF and a BOM too) or `"kind": "Run"` anywhere (JSON, flow)
_KIND = re.compile(
    rb"(?:^(?:\xef\xbb\xbf)?kind:[ \t]*[\"']?(Run|Budget|FleetConfig)[\"']?[ \t]*(?:#[^\r\n]*)?\r?$"
    rb"|[\"']kind[\"'][ \t]*:[ \t]*[\"'](Run|Budget|FleetConfig)[\"'])",
    re.MULTILINE,
)
_HOME = {
    "Run": "runs/<namespace>/<name>.yaml",
    "Budget": "budgets/<name>.yaml",
    "FleetConfig": FLEET_FILE,
}


def candidate(path: str) -> bool:
    """Whether `path` (relative, POSIX) may be a stray fleet file: a data file outside the spec."""
    if spec_kind(path) is not None or path.startswith(OWNED_PREFIXES):
        return False
    if any(part.startswith(".") for part in path.split("/")):
        return False
    return path.lower().endswith(_DATA_SUFFIXES)


def misplaced(path: str, head: bytes) -> tuple[int, str] | None:
    """Where and why the candidate at `path` (whose first bytes are `head`) is a fleet file left
    unread: (line, reason), or None. A JSON file beside the runs that declares no fleet kind (a
    schema for an editor, say) is left alone; a `.YAML` there never is."""
    top = path.split("/", 1)[0]
    found = _KIND.search(head[:SNIFF_BYTES])
    line = head.count(b"\n", 0, found.start()) + 1 if found is not None else 1
    if top in SPEC_DIRS and "/" in path and (found is not None or not path.lower().endswith(".json")):
        return line, (
            f"is not read: jobtree reads only files ending .yaml or .yml under {top}/; rename it "
            "(or move it out of the folder if it is not a fleet object)"
        )
    if found is not None:
        kind = (found.group(1) or found.group(2)).decode()
        return line, (
            f"holds a {kind} jobtree does not read from here; move it to {_HOME[kind]} (an example "
            "or a document: keep it in a .md file, where nobody takes it for the fleet's)"
        )
    if top == INVENTORY_FILE.split("/", 1)[0] and "/" in path:
        return 1, f"is not read: the inventory is {INVENTORY_FILE} alone; rename it, or move its nodes there"
    return None
