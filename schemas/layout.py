"""Where a fleet repository keeps its spec: the settings files and the directories of Budgets and Runs.

Paths only, no parsing and no models, so the reconciler can list spec files before it imports
anything heavy (`reconciler.spec.parsed`), and what jobtree itself writes (`OWNED_PREFIXES`).
`fleetcheck` decides what the files hold.
"""

from __future__ import annotations

FLEET_FILE = "jobtree.yaml"
INVENTORY_FILE = "inventory/nodes.yaml"
SPEC_FILES = (FLEET_FILE, INVENTORY_FILE)
SPEC_KINDS = (("budgets/", "Budget"), ("runs/", "Run"))
SPEC_DIRS = tuple(prefix.rstrip("/") for prefix, _ in SPEC_KINDS)
# what people write, as path prefixes: the settings file and the spec directories
SPEC_PREFIXES = (FLEET_FILE, *(prefix for prefix, _ in SPEC_KINDS), INVENTORY_FILE.split("/")[0] + "/")
MAX_FILE_BYTES = 8 * 2**20  # a fleet file past this is a mistake or an attack, not a manifest
LINK_BYTES = 4096  # of a symbolic link's blob (its target's name): read only to name it
YAML_SUFFIXES = (".yaml", ".yml")
OWNED_PREFIXES: tuple[str, ...] = ("state/", "rendered/")  # what jobtree writes; people write the rest


def walked(top: str) -> bool:
    """Whether a top-level name may hold spec (or misplaced spec): not hidden, not jobtree's output."""
    return not top.startswith(".") and f"{top}/" not in OWNED_PREFIXES


def spec_kind(path: str) -> str | None:
    """The kind a fleet path holds, or None for files validation ignores (state/, rendered/, docs)."""
    if path == FLEET_FILE:
        return "FleetConfig"
    if path == INVENTORY_FILE:
        return "Inventory"
    for prefix, kind in SPEC_KINDS:
        if path.startswith(prefix) and path.endswith(YAML_SUFFIXES):
            return kind
    return None
