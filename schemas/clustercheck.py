"""Warnings about `clusters` in jobtree.yaml (§7.1): what a configured fleet no longer reads, and names nothing matches.

Warnings only (the fleet stays valid and plans): `inventory/nodes.yaml` beside configured clusters
is not read (JT061); a cluster name that no node and no rendered folder matches, or a rendered
folder no cluster names (JT081), when the caller says which cluster names the repository's
`state/observed/` and `rendered/` hold. Reads no files; duplicate names are `rules`' (JT080).
"""

from __future__ import annotations

from collections.abc import Mapping

from schemas import diagnostics as codes
from schemas import messages
from schemas.diagnostics import Diagnostic
from schemas.fleet import FleetConfig, Inventory
from schemas.layout import INVENTORY_FILE
from schemas.load import Loaded


def warnings(
    config: Loaded | None,
    inventory_present: bool,
    inventory: Inventory | None,
    seen: Mapping[str, str] | None,
) -> list[Diagnostic]:
    """JT061 and JT081 for a valid jobtree.yaml with `clusters`. `seen`: cluster name -> where the
    repository shows it (`rendered/<name>/`, `state/observed/<name>.yaml`); None skips JT081."""
    if config is None:
        return []
    model: FleetConfig = config.model
    clusters = model.spec.clusters
    if not clusters:
        return []
    out: list[Diagnostic] = []
    names = [c.name for c in clusters]
    if inventory_present:
        out.append(
            Diagnostic(
                INVENTORY_FILE,
                1,
                1,
                codes.INVENTORY_NOT_READ,
                f"{INVENTORY_FILE} is not read: jobtree.yaml configures clusters ({messages.listed(names)}), whose "
                "nodes are observed from Kubernetes (state/observed/<cluster>.yaml records them); delete "
                "the file, or remove `clusters` to plan on it again",
                "inventory",
                "warning",
            )  # fmt: skip
        )
    if seen is None:
        return out

    def unmatched(line: int, col: int, message: str) -> Diagnostic:
        return Diagnostic(
            config.doc.path, line, col, codes.CLUSTER_UNMATCHED, message, "FleetConfig", "warning"
        )

    known = dict(seen)
    for cluster in _inventory_clusters(inventory):
        known.setdefault(cluster, INVENTORY_FILE)
    for i, name in enumerate(names):
        if name in known:
            continue
        line, col = config.doc.where(("spec", "clusters", i, "name"))
        others = sorted(known)
        held = f"; the repository knows {messages.listed(others)}" if others else ""
        out.append(unmatched(line, col,
            f"cluster {name} matches no node and no rendered folder: no observed or inventory node "
            f"carries cluster={name}, and there is no rendered/{name}/{held}; check the spelling "
            "(a new cluster matches once a pass has observed it)"))  # fmt: skip
    line, col = config.doc.where(("spec", "clusters"))
    for folder, where in sorted(seen.items()):
        if folder in names or not where.startswith("rendered/"):
            continue
        out.append(unmatched(line, col,
            f"{where} matches no cluster in clusters ({messages.listed(names)}): no pass applies its pods or "
            "prunes them; name the cluster they run on, or let a pass without it remove the folder"))  # fmt: skip
    return out


def _inventory_clusters(inventory: Inventory | None) -> set[str]:
    if inventory is None:
        return set()
    out = {b.cluster for b in inventory.domains}
    out |= {n.labels["cluster"] for n in inventory.nodes if n.labels.get("cluster")}
    return out
