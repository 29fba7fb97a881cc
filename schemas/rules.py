"""Cross-object rules over loaded fleet files: tenancy, family graph, envelopes, elasticity, `after`.

Runs after `schemas.load` has checked each document alone; parses nothing and never rejects an
object because a different object is broken (each finding names the object it rejects).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from schemas import diagnostics as codes
from schemas import podtemplate
from schemas.budget import Budget
from schemas.common import format_time
from schemas.cycles import cyclic_edges
from schemas.diagnostics import Diagnostic
from schemas.fleet import MAX_INVENTORY_NODES, DomainBlock, FleetConfig, Inventory, Tenant
from schemas.load import Loaded
from schemas.run import Run
from schemas.yamldoc import Document, Path

Locator = tuple[str, int]  # (file path, document index): unique even for duplicate objects


def locator(obj: Loaded) -> Locator:
    return (obj.doc.path, obj.doc.index)


@dataclass(slots=True)
class Findings:
    """Diagnostics per object; an object with any finding is rejected."""

    by_object: dict[Locator, list[Diagnostic]] = field(default_factory=dict)

    def add(self, obj: Loaded | Document, at: Path, code: str, message: str, name: str = "") -> None:
        doc = obj.doc if isinstance(obj, Loaded) else obj
        line, col = doc.where(at)
        key = name or (obj.key if isinstance(obj, Loaded) else "")
        diag = Diagnostic(doc.path, line, col, code, message, key)
        self.by_object.setdefault((doc.path, doc.index), []).append(diag)

    @property
    def rejected(self) -> frozenset[Locator]:
        return frozenset(self.by_object)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return sorted(d for diags in self.by_object.values() for d in diags)


def check(
    config: Loaded | None,
    budgets: Sequence[Loaded],
    runs: Sequence[Loaded],
    *,
    tenants: Sequence[Tenant] | None = None,
    known_owners: Iterable[str] = (),
    tenancy_note: str = "",
) -> Findings:
    """Every cross-object rule. `tenants` overrides the config's table (salvaged from a broken
    jobtree.yaml); `known_owners` adds owners of budgets that failed to load, so their neighbours'
    parents and sponsors still resolve; `tenancy_note` is appended to tenancy messages."""
    found = Findings()
    if config is not None:
        _config_rules(found, config)
    table = list(tenants if tenants is not None else (config.model.spec.tenants if config else []))
    owners = {b.model.spec.owner for b in budgets} | set(known_owners)
    budgets = _unique(found, budgets)
    runs = _unique(found, runs)
    for budget in budgets:
        _links(found, budget, "parents", budget.model.spec.parents, owners)
        budget_rules(found, budget)
    _parent_cycles(found, [b for b in budgets if locator(b) not in found.by_object])
    by_namespace: dict[str, Tenant] = {}
    for tenant in table:
        by_namespace.setdefault(tenant.namespace, tenant)
    for run in runs:
        _tenancy(found, run, by_namespace, tenancy_note)
        _links(found, run, "sponsors", run.model.spec.funding.sponsors, owners)
        run_rules(found, run)
    _after_cycles(found, [r for r in runs if locator(r) not in found.by_object])
    return found


def _config_rules(found: Findings, config: Loaded) -> None:
    model: FleetConfig = config.model
    first: dict[str, int] = {}
    for i, tenant in enumerate(model.spec.tenants):
        if tenant.namespace in first:
            found.add(
                config,
                ("spec", "tenants", i, "namespace"),
                codes.TENANT,
                f"namespace {tenant.namespace} is already bound by tenants[{first[tenant.namespace]}]; "
                "a namespace has exactly one owner, so remove this entry",
            )
        first.setdefault(tenant.namespace, i)
    named: dict[str, int] = {}
    for i, cluster in enumerate(model.spec.clusters):
        if cluster.name in named:
            found.add(
                config,
                ("spec", "clusters", i, "name"),
                codes.CLUSTER_NAME,
                f"cluster {cluster.name} is already clusters[{named[cluster.name]}]; a name is one cluster "
                "(its nodes' cluster value and rendered/<name>/), so merge or rename this entry",
            )
        named.setdefault(cluster.name, i)


def canonical_path(obj: Loaded) -> str:
    """Where the layout says an object lives: runs/<namespace>/<name>.yaml, budgets/<name>.yaml."""
    meta = obj.model.metadata
    return f"runs/{meta.namespace}/{meta.name}" if obj.model.kind == "Run" else f"budgets/{meta.name}"


def _unique(found: Findings, objects: Sequence[Loaded]) -> list[Loaded]:
    """Keep one object per kind/namespace/name and reject the other copies. The keeper is the copy in
    its canonical file (so adding a same-named file elsewhere never displaces a run's own), else the
    first in path order."""
    seen: dict[str, Loaded] = {}
    kept: list[Loaded] = []
    at_home = {id(o) for o in objects if o.doc.path.rsplit(".", 1)[0] == canonical_path(o)}
    for obj in sorted(objects, key=lambda o: (id(o) not in at_home, o.doc.path, o.doc.index)):
        first = seen.get(obj.key)
        if first is None:
            seen[obj.key] = obj
            kept.append(obj)
            continue
        line, _ = first.doc.where(("metadata", "name"))
        found.add(
            obj,
            ("metadata", "name"),
            codes.DUPLICATE_OBJECT,
            f"{obj.key} is already defined at {first.doc.path}:{line}; rename or remove this copy",
        )
    return kept


def owner_pattern_ok(pattern: str) -> bool:
    """An exact owner, a prefix ending in `*`, or `*` alone."""
    body = pattern[:-1] if pattern.endswith("*") else pattern
    if pattern == "*":
        return True
    return bool(body) and "*" not in body and not any(c.isspace() for c in body)


def _links(found: Findings, obj: Loaded, field: str, owners: Sequence[str], known: set[str]) -> None:
    """Parents and sponsors name owners that have a Budget (a broken one still counts)."""
    at = ("spec", "parents") if field == "parents" else ("spec", "funding", "sponsors")
    role = "parent" if field == "parents" else "sponsor"
    for i, owner in enumerate(owners):
        if owner not in known:
            found.add(
                obj,
                (*at, i),
                codes.UNKNOWN_OWNER,
                f"{role} {owner} has no Budget; fix the name or add a Budget with owner {owner}",
            )


def budget_rules(found: Findings, obj: Loaded) -> None:
    """Envelope names unique, windows forward, lending ACLs are owner patterns, caps name envelopes."""
    spec = obj.model.spec
    names: dict[str, int] = {}
    for j, env in enumerate(spec.envelopes):
        at = ("spec", "envelopes", j)
        if env.name in names:
            found.add(
                obj,
                (*at, "name"),
                codes.ENVELOPE_NAME,
                f"envelope name {env.name} is already used by envelopes[{names[env.name]}]; rename one",
            )
        names.setdefault(env.name, j)
        if env.start is not None and env.end is not None and env.end <= env.start:
            found.add(
                obj,
                (*at, "end"),
                codes.WINDOW,
                f"window end {format_time(env.end)} is not after start {format_time(env.start)}; "
                "move end later than start (the window is [start, end))",
            )
        for k, pattern in enumerate(env.lending.to if env.lending else []):
            if not owner_pattern_ok(pattern):
                found.add(
                    obj,
                    (*at, "lending", "to", k),
                    codes.LENDING,
                    f"lending.to entry {pattern!r} is not an owner pattern; use an exact owner, "
                    "a prefix ending in * (like org:example:*), or * for every owner",
                )
    caps: dict[str, int] = {}
    for i, cap in enumerate(spec.aggregateCaps):
        if cap.name in caps:
            found.add(
                obj,
                ("spec", "aggregateCaps", i, "name"),
                codes.AGGREGATE,
                f"aggregate cap name {cap.name} is already used by aggregateCaps[{caps[cap.name]}]; rename one",
            )
        caps.setdefault(cap.name, i)
        for k, env_name in enumerate(cap.envelopes):
            if env_name not in names:
                have = ", ".join(sorted(names)) or "none"
                found.add(
                    obj,
                    ("spec", "aggregateCaps", i, "envelopes", k),
                    codes.AGGREGATE,
                    f"aggregate cap {cap.name} names envelope {env_name}, which this budget does not "
                    f"have; use one of its envelopes ({have})",
                )


def _tenancy(found: Findings, obj: Loaded, tenants: Mapping[str, Tenant], note: str) -> None:
    run: Run = obj.model
    ns = run.metadata.namespace
    path = obj.doc.path
    if not path.startswith(f"runs/{ns}/"):
        found.add(
            obj,
            ("metadata", "namespace"),
            codes.LOCATION,
            f"a Run in namespace {ns} lives under runs/{ns}/; move this file there "
            "(the folder decides who may approve it)",
        )
    tenant = tenants.get(ns)
    if tenant is None:
        found.add(
            obj,
            ("metadata", "namespace"),
            codes.TENANT,
            f"namespace {ns} is not a tenant in jobtree.yaml; add it to spec.tenants with its owner, "
            f"or use a tenant's namespace{note}",
        )
    elif run.spec.owner != tenant.owner:
        found.add(
            obj,
            ("spec", "owner"),
            codes.OWNER_MISMATCH,
            f"namespace {ns} belongs to {tenant.owner}, not {run.spec.owner}; set spec.owner: {tenant.owner} "
            "(a run spends only its own namespace owner's budget)",
        )


def run_rules(found: Findings, obj: Loaded) -> None:
    """`after` never names the run itself; groups fit the run; malleable widths are ordered and
    step-aligned; the pod template's fields agree with each other (`podtemplate.findings`)."""
    run: Run = obj.model
    spec = run.spec
    for i, name in enumerate(spec.after):
        if name == run.metadata.name:
            found.add(
                obj,
                ("spec", "after", i),
                codes.AFTER,
                f"run {name} cannot wait for itself; remove {name} from after",
            )
    group = spec.locality.groupGPUs
    if group is not None and group > spec.resources.totalGPUs:
        found.add(
            obj,
            ("spec", "locality", "groupGPUs"),
            codes.GROUP_SIZE,
            f"groupGPUs {group} is larger than totalGPUs {spec.resources.totalGPUs}, so no whole group fits the run; "
            f"set groupGPUs to {spec.resources.totalGPUs} or a divisor of it",
        )
    if spec.malleable is not None:
        _malleable_rules(found, obj)
    for finding in podtemplate.findings(spec.template):
        if finding.severity == "error":
            found.add(obj, ("spec", "template", *finding.at), codes.POD_TEMPLATE, finding.message)


def _malleable_rules(found: Findings, obj: Loaded) -> None:
    spec = obj.model.spec
    m, total, group = spec.malleable, spec.resources.totalGPUs, spec.locality.groupGPUs
    lo, hi, step = m.minTotalGPUs, m.maxTotalGPUs, m.stepGPUs
    mall = ("spec", "malleable")
    if lo > hi:
        found.add(
            obj,
            (*mall, "minTotalGPUs"),
            codes.MALLEABLE,
            f"minTotalGPUs {lo} is above maxTotalGPUs {hi}; lower the minimum or raise the maximum",
        )
    elif not lo <= total <= hi:
        found.add(
            obj,
            ("spec", "resources", "totalGPUs"),
            codes.MALLEABLE,
            f"totalGPUs {total} is outside the malleable range {lo}..{hi}; set it within that range",
        )
    desired = m.desiredTotalGPUs
    if desired is not None and lo <= hi and not lo <= desired <= hi:
        found.add(
            obj,
            (*mall, "desiredTotalGPUs"),
            codes.MALLEABLE,
            f"desiredTotalGPUs {desired} is outside the malleable range {lo}..{hi}; set it within that range",
        )
    if total % step:
        found.add(
            obj,
            ("spec", "resources", "totalGPUs"),
            codes.ALIGNMENT,
            f"totalGPUs {total} is not a multiple of stepGPUs {step}; use {_nearest(total, step, lo, hi)}",
        )
    if desired is not None and desired % step:
        found.add(
            obj,
            (*mall, "desiredTotalGPUs"),
            codes.ALIGNMENT,
            f"desiredTotalGPUs {desired} is not a multiple of stepGPUs {step}; use {_nearest(desired, step, lo, hi)}",
        )
    elif desired is None and hi % step:
        found.add(
            obj,
            (*mall, "maxTotalGPUs"),
            codes.ALIGNMENT,
            f"maxTotalGPUs {hi} (the default desiredTotalGPUs) is not a multiple of stepGPUs {step}; "
            f"use {_nearest(hi, step, lo)} or set desiredTotalGPUs",
        )
    if group is not None and step % group:
        found.add(
            obj,
            ("spec", "locality", "groupGPUs"),
            codes.ALIGNMENT,
            f"groupGPUs {group} does not divide stepGPUs {step}; growth adds whole groups, "
            "so pick a groupGPUs that divides stepGPUs",
        )


def _nearest(value: int, step: int, lo: int = 1, hi: int | None = None) -> str:
    """The step multiples either side of `value`, kept inside [lo, hi] when any multiple is."""
    below, above = value // step * step, (value // step + 1) * step
    inside = [v for v in (below, above) if v >= max(lo, 1) and (hi is None or v <= hi)]
    if not inside and hi is not None:
        inside = [v for v in (hi // step * step, -(-lo // step) * step) if lo <= v <= hi][:1]
    return " or ".join(str(v) for v in inside or [v for v in (below, above) if v > 0])


def _parent_cycles(found: Findings, budgets: Sequence[Loaded]) -> None:
    graph: dict[str, set[str]] = {}
    for b in budgets:
        spec: Budget = b.model
        graph.setdefault(spec.spec.owner, set()).update(spec.spec.parents)
    cycles = cyclic_edges(graph)
    for b in budgets:
        owner = b.model.spec.owner
        for i, parent in enumerate(b.model.spec.parents):
            cycle = cycles.get((owner, parent))
            if cycle:
                found.add(
                    b,
                    ("spec", "parents", i),
                    codes.PARENT_CYCLE,
                    f"parents form a cycle {' -> '.join(cycle)}; remove {parent} from parents "
                    "or break the cycle at another link",
                )


def _after_cycles(found: Findings, runs: Sequence[Loaded]) -> None:
    graph: dict[str, set[str]] = {}
    for r in runs:
        ns, name = r.model.metadata.namespace, r.model.metadata.name
        graph.setdefault(f"{ns}/{name}", set()).update(f"{ns}/{a}" for a in r.model.spec.after if a != name)
    cycles = cyclic_edges(graph)
    for r in runs:
        ns, name = r.model.metadata.namespace, r.model.metadata.name
        for i, other in enumerate(r.model.spec.after):
            cycle = cycles.get((f"{ns}/{name}", f"{ns}/{other}"))
            if cycle:
                found.add(
                    r,
                    ("spec", "after", i),
                    codes.AFTER,
                    f"after forms a cycle {' -> '.join(c.split('/', 1)[1] for c in cycle)}, so none "
                    f"of them would ever start; remove {other} from after or break the cycle elsewhere",
                )


def inventory_rules(found: Findings, inventory: Inventory, doc: Document) -> None:
    """At most MAX_INVENTORY_NODES nodes, and node names unique across domain blocks and explicit nodes
    (one finding per clashing block or node, however many names clash)."""
    total = sum(block.nodes for block in inventory.domains) + len(inventory.nodes)
    if total > MAX_INVENTORY_NODES:
        found.add(
            doc,
            ("domains",) if inventory.domains else ("nodes",),
            codes.INVENTORY,
            f"the inventory describes {total} nodes, more than {MAX_INVENTORY_NODES}; check the `nodes:` "
            "counts of the domain blocks (each is a number of machines, not of GPUs)",
            name="inventory",
        )
        return
    seen: dict[str, str] = {}
    for i, block in enumerate(inventory.domains):
        _marked_nodes(found, doc, i, block)
        clash: tuple[str, str] | None = None
        for n in range(block.nodes):
            name = f"{block.name}-n{n:02d}"
            if clash is None and name in seen:
                clash = (name, seen[name])
            seen.setdefault(name, f"domains[{i}]")
        if clash is not None:
            _dup_node(found, doc, ("domains", i, "name"), *clash)
    for i, node in enumerate(inventory.nodes):
        if node.name in seen:
            _dup_node(found, doc, ("nodes", i, "name"), node.name, seen[node.name])
        seen.setdefault(node.name, f"nodes[{i}]")


def _marked_nodes(found: Findings, doc: Document, i: int, block: DomainBlock) -> None:
    """Every node a block's `states` or `cordoned` names is one of its own nodes."""
    own = {f"{block.name}-n{n:02d}" for n in range(block.nodes)}
    last = f"{block.name}-n{block.nodes - 1:02d}"
    marked = [("states", name, name) for name in block.states] + [
        ("cordoned", j, name) for j, name in enumerate(block.cordoned)
    ]
    for key, at, name in marked:
        if name not in own:
            found.add(
                doc,
                ("domains", i, key, at),
                codes.INVENTORY,
                f"{name} is not a node of domain block {block.name} (its nodes are {block.name}-n00 to "
                f"{last}); name one of them",
                name="inventory",
            )


def _dup_node(found: Findings, doc: Document, at: Path, name: str, first: str) -> None:
    found.add(
        doc,
        at,
        codes.INVENTORY,
        f"node {name} is already defined by {first}; rename one so every node name is unique",
        name="inventory",
    )
