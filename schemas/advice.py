"""Warnings over valid objects: what plans, but not as its author meant (nothing is excluded for them).

Hot spares that cannot cover a node failing or far exceed it, sponsors a run never borrows from, a
gpuType no node has, a budget window that ended, a tenant with no Budget, and template fields jobtree
overwrites. Each names its line and the fix. Errors (the object left out) are `schemas.rules`'.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence

from schemas import diagnostics as codes
from schemas import messages, podtemplate
from schemas.common import format_time
from schemas.diagnostics import Diagnostic
from schemas.fleet import Inventory
from schemas.load import Loaded
from schemas.yamldoc import parse_all


def warnings(
    config: Loaded | None,
    budgets: Sequence[Loaded],
    runs: Sequence[Loaded],
    inventory: Inventory | None,
    *,
    owners: Collection[str] = (),
    flavors_seen: Mapping[str, Collection[str]] | None = None,
    now: int | None = None,
) -> list[Diagnostic]:
    """Every warning about the valid objects. `owners`: owners with a Budget, valid or not;
    `flavors_seen`: the GPU flavors of each observed cluster (`observed_flavors`); `now`: the instant
    windows are judged at (None: not judged). With `clusters` configured the inventory is not read:
    flavors are known once every configured cluster has been observed."""
    clusters = [c.name for c in config.model.spec.clusters] if config is not None else []
    seen = flavors_seen or {}
    if clusters:
        per_node: dict[str, int] = {}
        known = {f for c in clusters for f in seen.get(c, ())} if all(c in seen for c in clusters) else set()
    else:
        per_node = gpus_per_node(inventory)
        known = set(per_node)
    out = [*spares(runs, per_node), *funding(runs), *templates(runs), *flavors(runs, known)]
    out += tenants(config, {*owners, *(b.model.spec.owner for b in budgets)})
    if now is not None:
        out += windows(budgets, now)
    return sorted(out)


def _warn(obj: Loaded, at: tuple[str | int, ...], code: str, message: str) -> Diagnostic:
    line, col = obj.doc.where(at)
    return Diagnostic(obj.doc.path, line, col, code, message, obj.key, "warning")


def gpus_per_node(inventory: Inventory | None) -> dict[str, int]:
    """The most GPUs one node of each flavor has in the inventory."""
    per_node: dict[str, int] = {}
    for block in inventory.domains if inventory is not None else ():
        per_node[block.flavor] = max(per_node.get(block.flavor, 0), block.gpusPerNode)
    for entry in inventory.nodes if inventory is not None else ():
        flavor = entry.labels.get("gpu.flavor")
        if flavor:
            per_node[flavor] = max(per_node.get(flavor, 0), entry.gpus)
    return per_node


def _spares_field(run: Loaded) -> str:
    data = run.doc.data.get("spec", {}) if isinstance(run.doc.data, dict) else {}
    return "spares" if isinstance(data, dict) and "spares" in data else "sparesPerGroup"


def spares(runs: Sequence[Loaded], per_node: dict[str, int]) -> list[Diagnostic]:
    """Groups whose hot spares cannot cover a node failing: a swap needs the spare's GPUs to cover the
    group's GPUs on the failed node (§4.8), and a group can have min(group size, GPUs per node) of them
    on one node of its flavor. And spares beyond a whole group, which no single failure can use."""
    out = []
    for run in runs:
        spec = run.model.spec
        count = spec.sparesPerGroup
        if count <= 0:
            continue
        group = spec.locality.groupGPUs or (
            spec.malleable.stepGPUs if spec.malleable else spec.resources.totalGPUs
        )
        node = per_node.get(spec.resources.gpuType, 0)
        exposed = min(group, node) if node > 0 else group
        at = ("spec", _spares_field(run))
        if count > group:
            out.append(_warn(run, at, codes.SPARES,
                f"sparesPerGroup {count} holds more idle GPUs than a group has ({group}): a node failing can "
                f"take at most the group's {exposed} GPUs on it, and each group keeps all {count} spares waiting "
                f"(paid at the spare rate); set sparesPerGroup to {exposed} or fewer"))  # fmt: skip
        elif node > 0 and count < exposed:
            out.append(_warn(run, at, codes.SPARES,
                f"sparesPerGroup {count} cannot cover a node failing: a group of {group} GPUs can have "
                f"{exposed} of them on one {node}-GPU {spec.resources.gpuType} node, and a swap needs "
                f"spares for all of them; set sparesPerGroup to {exposed} (or use smaller groups)"))  # fmt: skip
    return out


def funding(runs: Sequence[Loaded]) -> list[Diagnostic]:
    """Sponsors named on a run that may not borrow: they never pay for it."""
    return [
        _warn(
            run,
            ("spec", "funding", "sponsors"),
            codes.SPONSORS,
            f"sponsors ({messages.listed(run.model.spec.funding.sponsors)}) are asked only when the run may "
            "borrow, and funding.allowBorrow is false: set funding.allowBorrow: true, or remove the sponsors",
        )  # fmt: skip
        for run in runs
        if run.model.spec.funding.sponsors and not run.model.spec.funding.allowBorrow
    ]


def flavors(runs: Sequence[Loaded], known: Collection[str]) -> list[Diagnostic]:
    """A gpuType no node of the fleet (inventory, or observed clusters) has, with the closest one."""
    if not known:
        return []  # nothing known of the fleet's nodes yet: nothing to compare with
    names = sorted(known)
    out = []
    for run in runs:
        flavor = run.model.spec.resources.gpuType
        if flavor in known:
            continue
        out.append(_warn(run, ("spec", "resources", "gpuType"), codes.FLAVOR,
            f"no node of the fleet has GPUs of flavor {flavor}, so the run can never start; "
            f"{closest(flavor, names)}"))  # fmt: skip
    return out


def observed_flavors(files: Mapping[str, bytes]) -> dict[str, set[str]]:
    """Per cluster, the GPU flavors (`gpu.flavor`) of the nodes its `state/observed/<cluster>.yaml` records."""
    return {
        cluster: {v for v in values if v} for cluster, values in observed_labels(files, "gpu.flavor").items()
    }


def observed_labels(files: Mapping[str, bytes], key: str) -> dict[str, list[str]]:
    """Per cluster, the value of the topology label `key` on each node its `state/observed/<cluster>.yaml`
    records, "" for a node without it."""
    out: dict[str, list[str]] = {}
    for path, data in sorted(files.items()):
        found = out.setdefault(path.rsplit("/", 1)[-1].removesuffix(".yaml"), [])
        docs, _ = parse_all(data, path, False)
        for doc in docs:
            nodes = doc.data.get("nodes") if isinstance(doc.data, dict) else None
            for node in nodes if isinstance(nodes, list) else []:
                labels = node.get("labels") if isinstance(node, dict) else None
                value = labels.get(key) if isinstance(labels, dict) else None
                found.append(value if isinstance(value, str) else "")
    return out


def closest(flavor: str, names: Sequence[str]) -> str:
    """`did you mean H100-80GB?` for the nearest flavor (ignoring case), else the flavors there are."""
    lowered = {n.lower(): n for n in names}
    match = difflib.get_close_matches(flavor.lower(), sorted(lowered), n=1, cutoff=0.5)
    if match:
        return f"did you mean {lowered[match[0]]}? set gpuType: {lowered[match[0]]}"
    return f"the fleet has {messages.listed(list(names))}; set gpuType to one of them"


def windows(budgets: Sequence[Loaded], now: int) -> list[Diagnostic]:
    """Envelopes whose window ended: they fund nothing any more."""
    out = []
    for budget in budgets:
        for j, env in enumerate(budget.model.spec.envelopes):
            if env.end is not None and env.end <= now:
                out.append(_warn(budget, ("spec", "envelopes", j, "end"), codes.WINDOW,
                    f"envelope {env.name}'s window ended at {format_time(env.end)}, so it funds nothing now; "
                    "move end later to keep funding, or remove the envelope"))  # fmt: skip
    return out


def tenants(config: Loaded | None, owners: Collection[str]) -> list[Diagnostic]:
    """A tenant whose owner has no Budget (`owners` have one): its runs can only borrow from sponsors."""
    if config is None:
        return []
    return [
        _warn(
            config,
            ("spec", "tenants", i, "owner"),
            codes.TENANT_UNFUNDED,
            f"tenant {t.namespace}'s owner {t.owner} has no Budget, so its runs start only on what they may borrow; "
            f"add budgets/<name>.yaml with spec.owner: {t.owner}, or bind the namespace to an owner that has one",
        )  # fmt: skip
        for i, t in enumerate(config.model.spec.tenants)
        if t.owner not in owners
    ]


def templates(runs: Sequence[Loaded]) -> list[Diagnostic]:
    """Template fields jobtree overwrites (`podtemplate.findings` warnings)."""
    return [
        _warn(run, ("spec", "template", *f.at), codes.POD_TEMPLATE, f.message)
        for run in runs
        for f in podtemplate.findings(run.model.spec.template)
        if f.severity == "warning"
    ]
