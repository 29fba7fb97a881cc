"""What `jobtree validate` says about `clusters` in jobtree.yaml (§7.1): what a configured fleet no longer reads, and names no node label matches.

`inventory/nodes.yaml` beside configured clusters is not read (JT061, a warning). When the caller
says what the repository's `state/observed/` and `rendered/` hold (`seen`, and the cluster labels
of each observed cluster's nodes), JT081 compares the names with the nodes' `cluster` labels. An
error, because a pass would refuse the fleet or leave nodes out: a cluster that was observed and
none of whose nodes carries its name; a cluster none of whose nodes the repository knows while
`rendered/` holds pods for a cluster `clusters` does not name (a rename or a one-letter typo), and
that folder itself. A warning: a cluster never observed while every cluster with work is named (a
new cluster: its nodes are checked once a pass has observed them). Reads no files; duplicate
names are `rules`' (JT080).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from schemas import diagnostics as codes
from schemas import messages
from schemas.diagnostics import Diagnostic
from schemas.fleet import FleetConfig, Inventory
from schemas.layout import INVENTORY_FILE
from schemas.load import Loaded


def check(
    config: Loaded | None,
    inventory_present: bool,
    inventory: Inventory | None,
    seen: Mapping[str, str] | None,
    labels: Mapping[str, Sequence[str]] | None = None,
) -> list[Diagnostic]:
    """JT061 and JT081 for a valid jobtree.yaml with `clusters`, errors and warnings (`severity`).
    `seen`: cluster name -> where the repository shows it (`rendered/<name>/` when that folder
    holds pods, else `state/observed/<name>.yaml`); None skips JT081. `labels`: observed cluster ->
    the `cluster` label of each of its observed nodes ("" for one labelled as another cluster's)."""
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

    def unmatched(line: int, col: int, message: str, severity: str = "error") -> Diagnostic:
        return Diagnostic(
            config.doc.path, line, col, codes.CLUSTER_UNMATCHED, message, "FleetConfig", severity
        )

    labels = labels or {}
    carried = {label for values in labels.values() for label in values if label}  # node labels known
    carried |= {name for name, where in seen.items() if where.startswith("rendered/")}
    carried |= _inventory_clusters(inventory)
    stranded = sorted(
        name for name, where in seen.items() if where.startswith("rendered/") and name not in names
    )
    for i, name in enumerate(names):
        if name in carried:
            continue
        line, col = config.doc.where(("spec", "clusters", i, "name"))
        others = sorted(carried - set(names))
        hint = _closest(name, others)
        if labels.get(name):
            count = len(labels[name])
            out.append(unmatched(line, col,
                f"cluster {name} matches no node label: none of the {count} nodes observed through its context "
                f"carries cluster={name} (state/observed/{name}.yaml), so every one of them is left out of "
                f"planning; name the cluster as its nodes are labelled{hint}, or label them cluster={name}"))  # fmt: skip
        elif stranded:
            out.append(unmatched(line, col,
                f"cluster {name} matches no node label: no observed or inventory node carries cluster={name}, "
                f"while rendered/ holds pods for {messages.listed(stranded)}, which clusters does not name "
                f"(a renamed or misspelled cluster){hint}"))  # fmt: skip
        elif name not in labels:
            known = f"; the repository knows {messages.listed(others)}" if others else ""
            out.append(unmatched(line, col,
                f"cluster {name} matches no node label yet: no observed or inventory node carries "
                f"cluster={name}{known}; a new cluster's nodes are checked once a pass has observed it, so "
                f"check the spelling{hint}", "warning"))  # fmt: skip
    line, col = config.doc.where(("spec", "clusters"))
    for folder in stranded:
        out.append(unmatched(line, col,
            f"rendered/{folder}/ holds pods on cluster {folder}, which clusters ({messages.listed(names)}) does "
            f"not name: a pass plans nothing (exit 3) while they run, so none is pruned; name the cluster "
            f"{folder} again, and to retire it, end or move its runs while it is still named"))  # fmt: skip
    return out


def _closest(name: str, others: list[str]) -> str:
    """`; did you mean gb-west?` for the known cluster label nearest to `name`, else nothing."""
    match = difflib.get_close_matches(name, others, n=1, cutoff=0.6)
    return f"; did you mean {match[0]}?" if match else ""


def _inventory_clusters(inventory: Inventory | None) -> set[str]:
    if inventory is None:
        return set()
    out = {b.cluster for b in inventory.domains}
    out |= {n.labels["cluster"] for n in inventory.nodes if n.labels.get("cluster")}
    return out
