"""Fleet files (path -> bytes) to a ValidatedFleet: every document loaded, every rule applied, a verdict each.

The one entry point for validate, plan, reconcile and simulate. Reads no files (callers pass bytes)
and decides nothing about GPUs; an invalid object is excluded and reported, its neighbours are not.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from schemas import advice, clustercheck, rules, strays
from schemas import diagnostics as codes
from schemas.budget import Budget
from schemas.diagnostics import Diagnostic
from schemas.fleet import FleetSpec, Inventory, Tenant
from schemas.layout import FLEET_FILE, INVENTORY_FILE, spec_kind
from schemas.load import (
    MAX_FILE_BYTES,
    Loaded,
    Symlink,
    bad_document_diagnostic,
    load_object,
    validate_document,
)
from schemas.run import Run
from schemas.yamldoc import Document, parse_all

_OWNER_LINE = re.compile(rb"^[ \t-]*owner:[ \t]*[\"']?([^\s\"'#,}]+)", re.M)


@dataclass(frozen=True, slots=True)
class ObjectVerdict:
    """One document of the fleet and whether it takes part in planning."""

    kind: str
    name: str | None
    namespace: str | None
    path: str
    line: int
    diagnostics: tuple[Diagnostic, ...]

    @property
    def valid(self) -> bool:
        return not self.diagnostics

    @property
    def key(self) -> str:
        ident = f"{self.namespace}/{self.name}" if self.namespace else (self.name or "?")
        return f"{self.kind} {ident}"

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "path": self.path,
            "line": self.line,
            "verdict": "valid" if self.valid else "invalid",
            "diagnostics": [d.as_json() for d in self.diagnostics],
        }


@dataclass(frozen=True, slots=True)
class ValidatedFleet:
    """What planning may use (valid objects only) and what validation found."""

    config: FleetSpec
    budgets: list[Budget]
    runs: list[Run]
    inventory: Inventory | None
    diagnostics: list[Diagnostic]
    rejected: list[str]  # "Kind ns/name" of excluded objects whose key no valid object uses
    objects: list[ObjectVerdict] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)  # worth fixing; nothing is excluded for them
    name: str = ""  # the FleetConfig's metadata.name: the fleet label on every object it applies (§7.1)

    @property
    def valid(self) -> bool:
        return not self.diagnostics


@dataclass(slots=True)
class _Entry:
    kind: str
    path: str
    index: int
    line: int
    data: Any = None
    loaded: Loaded | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)


def check_fleet(
    files: Mapping[str, bytes],
    parsed: Mapping[str, list[Document]] | None = None,
    memo: dict[str, tuple[list[Document], list[_Entry]]] | None = None,
    clusters_seen: Mapping[str, str] | None = None,
    *,
    flavors_seen: Mapping[str, Collection[str]] | None = None,
    cluster_labels: Mapping[str, Sequence[str]] | None = None,
    now: int | None = None,
) -> ValidatedFleet:
    """Validate a fleet repository given as relative POSIX path -> file bytes.

    `parsed` holds files already turned into documents by the caller (the simulator's objects):
    they skip YAML entirely and are checked exactly like the rest. With `memo` (kept by the caller
    between calls), a path handed over as the very same document list is not validated again.
    `clusters_seen`: the cluster names `state/observed/` and `rendered/` hold, and where, and
    `cluster_labels`: the `cluster` label of each observed cluster's nodes (for JT081; `clustercheck`).
    `flavors_seen`: the GPU flavors of each observed cluster, and
    `now`: the instant budget windows are judged at, for the warnings (`advice`; None: not judged).
    """
    entries: list[_Entry] = []
    parsed = parsed or {}
    unread: list[Diagnostic] = []
    for path in sorted({*files, *parsed}):
        kind = spec_kind(path)
        if kind is None:
            stray = strays.misplaced(path, files[path]) if path in files else None
            if stray is not None:
                unread.append(Diagnostic(path, stray[0], 1, codes.NOT_READ, f"the file {stray[1]}"))
            continue
        if path in parsed:
            docs = parsed[path]
            hit = memo.get(path) if memo is not None else None
            if hit is None or hit[0] is not docs:
                hit = (docs, _entries(path, kind, docs))
                if memo is not None:
                    memo[path] = hit
            entries += hit[1]
        else:
            entries += _load_file(path, kind, files[path])
    # entries may be shared with the caches above: never changed in place, replaced when they must change
    configs = [i for i, e in enumerate(entries) if e.loaded is not None and e.kind == "FleetConfig"]
    for i in configs[1:]:
        extra = entries[i]
        duplicate = _at(
            extra, codes.DUPLICATE_OBJECT, "only one FleetConfig per fleet; merge this one into the first"
        )
        entries[i] = replace(extra, loaded=None, diagnostics=[*extra.diagnostics, duplicate])
    config = entries[configs[0]].loaded if configs else None
    tenants, note = _tenancy(entries, config, FLEET_FILE in files or FLEET_FILE in parsed)
    salvaged = _salvaged_owners(entries)
    found = rules.check(
        config,
        [e.loaded for e in entries if e.loaded is not None and e.kind == "Budget"],
        [e.loaded for e in entries if e.loaded is not None and e.kind == "Run"],
        tenants=tenants,
        known_owners=salvaged,
        tenancy_note=note,
    )
    owners = salvaged | {
        e.loaded.model.spec.owner for e in entries if e.loaded is not None and e.kind == "Budget"
    }
    inventory = _inventory(entries, found)
    objects: list[ObjectVerdict] = []
    for e in entries:
        diags = sorted([*e.diagnostics, *found.by_object.get((e.path, e.index), [])])
        meta = _meta(e)
        objects.append(ObjectVerdict(e.kind, meta[0], meta[1], e.path, e.line, tuple(diags)))
    missing = []
    if FLEET_FILE not in files and FLEET_FILE not in parsed:
        missing.append(
            Diagnostic(
                FLEET_FILE,
                1,
                1,
                codes.TENANT,
                "jobtree.yaml is missing; add a FleetConfig whose spec.tenants binds each runs/<namespace>/ "
                "to its owner",
                "FleetConfig",
            )
        )
    valid = {(e.path, e.index) for e, o in zip(entries, objects, strict=True) if o.valid}

    def usable(kind: str) -> list[Any]:
        return [e.loaded.model for e in entries if e.kind == kind and e.loaded and (e.path, e.index) in valid]

    spec = usable("FleetConfig")
    runs = [e.loaded for e in entries if e.kind == "Run" and e.loaded and (e.path, e.index) in valid]
    kept_inventory = inventory if (INVENTORY_FILE, 0) in valid else None
    valid_config = config if config is not None and (config.doc.path, config.doc.index) in valid else None
    present = INVENTORY_FILE in files or INVENTORY_FILE in parsed
    said = clustercheck.check(valid_config, present, inventory, clusters_seen, cluster_labels)
    return ValidatedFleet(
        config=spec[0].spec if spec else _fallback_config(config, tenants),
        budgets=usable("Budget"),
        runs=usable("Run"),
        inventory=kept_inventory,
        diagnostics=sorted(
            [
                *missing,
                *unread,
                *(d for o in objects for d in o.diagnostics),
                *(d for d in said if d.severity != "warning"),
            ]
        ),
        rejected=_rejected_keys(objects),
        objects=objects,
        warnings=sorted(
            [
                *advice.warnings(
                    valid_config,
                    [
                        e.loaded
                        for e in entries
                        if e.kind == "Budget" and e.loaded and (e.path, e.index) in valid
                    ],
                    runs,
                    kept_inventory,
                    owners=owners,
                    flavors_seen=flavors_seen,
                    now=now,
                ),
                *(d for d in said if d.severity == "warning"),
            ]
        ),
        name=spec[0].metadata.name if spec else (config.model.metadata.name if config is not None else ""),
    )


_PARSED: dict[tuple[str, str, bool, bytes], list[_Entry]] = {}
_PARSED_LIMIT = 50_000


def _load_file(path: str, kind: str, text: bytes) -> list[_Entry]:
    """Parse cache by content: an unchanged file (the same Git blob) is parsed once per process."""
    key = (path, kind, isinstance(text, Symlink), text)
    hit = _PARSED.get(key)
    if hit is None:
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()
        hit = _PARSED[key] = _parse_file(path, kind, text)
    return hit


def _parse_file(path: str, kind: str, text: bytes) -> list[_Entry]:
    if isinstance(text, Symlink):
        target = text[:200].decode("utf-8", "replace")
        return [_file_entry(kind, path, b"", f"the file is a symbolic link (to {target}); Git keeps only the "
                            "target's name and jobtree reads no file through it: commit the file itself")]  # fmt: skip
    if len(text) > MAX_FILE_BYTES:
        return [_file_entry(kind, path, text[:4096], f"the file is larger than {MAX_FILE_BYTES // 2**20} MiB; "
                            "a fleet file holds a few objects, so split it or remove what does not belong")]  # fmt: skip
    docs, bad = parse_all(text, path)
    if not docs and not bad:
        return [_file_entry(kind, path, text, _EMPTY.get(kind, _EMPTY["Run"]).format(path=path))]
    entries = _entries(path, kind, docs)
    for b in bad:  # raw text kept for salvage (owners, names)
        entry = _Entry(kind, path, b.index, b.line, b.text)
        name, ns = _meta(entry)
        obj = f"{kind} {ns}/{name}" if ns else f"{kind} {name}" if name else ""
        entry.diagnostics = [replace(bad_document_diagnostic(path, b), obj=obj)]
        entries.append(entry)
    return sorted(entries, key=lambda e: e.index)


_EMPTY = {
    "FleetConfig": "jobtree.yaml holds no FleetConfig; add one (apiVersion, kind: FleetConfig, metadata.name, "
    "spec.tenants)",
    "Inventory": "{path} holds no inventory; add `domains:` or `nodes:`, or delete the file",
    "Run": "{path} holds no object (empty, or only comments); add the manifest or delete the file",
}


def _file_entry(kind: str, path: str, raw: bytes, message: str) -> _Entry:
    code = codes.INVENTORY if kind == "Inventory" else codes.NOT_AN_OBJECT
    return _Entry(kind, path, 0, 1, raw, diagnostics=[Diagnostic(path, 1, 1, code, message, kind)])


def _entries(path: str, kind: str, docs: list[Document]) -> list[_Entry]:
    if kind == "Inventory":
        return _load_inventory(path, docs)
    out = []
    for doc in docs:
        loaded, diags = load_object(doc, (kind,))
        out.append(_Entry(kind, path, doc.index, doc.line, doc.data, loaded, list(diags)))
    return out


def _load_inventory(path: str, docs: list[Document]) -> list[_Entry]:
    out = []
    for doc in docs:
        model, diags = validate_document(doc, Inventory)
        entry = _Entry("Inventory", path, doc.index, doc.line, doc.data)
        entry.loaded = Loaded(model, doc) if model is not None else None
        entry.diagnostics = [
            Diagnostic(d.path, d.line, d.col, codes.INVENTORY, d.message, "inventory") for d in diags
        ]
        if doc.index > 0:
            entry.diagnostics.append(
                _at(
                    entry,
                    codes.INVENTORY,
                    f"{path} holds one inventory document; merge this one into the first",
                )
            )
        out.append(entry)
    return out


def _rejected_keys(objects: list[ObjectVerdict]) -> list[str]:
    """Keys of excluded objects, so running work under them is left alone."""
    used = {o.key for o in objects if o.valid}
    keys = {excluded_key(o) for o in objects if not o.valid}
    return sorted(key for key in keys if key is not None and key not in used)


# A name part a key may hold: one jobtree may have accepted (and written state files under) before.
# Never '/', never '.' or '..' alone: a key names files under state/, so `../x` must never become one.
_KEY_PART = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")


def excluded_key(o: ObjectVerdict) -> str | None:
    """The key an excluded object goes by: its own, or, when it has none a state file can be named
    after (a file that did not parse, a name like `../x`), one named by its path (runs/<ns>/<name>.yaml,
    budgets/<name>.yaml); None when neither is a name: the object is only reported."""
    if o.kind == "Run" and o.name and not o.namespace and o.path.count("/") == 2:
        o = replace(o, namespace=o.path.split("/")[1])  # salvaged name: the folder is the namespace
    parts = [p for p in (o.namespace, o.name) if p is not None]
    if o.name and all(_KEY_PART.match(p) for p in parts):
        return o.key
    key = _key_from_path(o.kind, o.path)
    return key if all(_KEY_PART.match(p) for p in key.split(" ", 1)[1].split("/")) else None


def _key_from_path(kind: str, path: str) -> str:
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    parts = path.split("/")
    if kind == "Run" and len(parts) == 3:
        return f"Run {parts[1]}/{stem}"
    return f"{kind} {stem}"


def _at(entry: _Entry, code: str, message: str) -> Diagnostic:
    return Diagnostic(entry.path, entry.line, 1, code, message, entry.kind)


def _meta(entry: _Entry) -> tuple[str | None, str | None]:
    if entry.kind == "Inventory":
        return "nodes", None
    if isinstance(entry.data, bytes):
        return _salvage_meta(entry.data)
    data = entry.data if isinstance(entry.data, dict) else {}
    meta = data.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name, ns = meta.get("name"), meta.get("namespace")
    return (name if isinstance(name, str) else None), (ns if isinstance(ns, str) else None)


_META_FLOW = re.compile(rb"^metadata:[ \t]*\{([^}\n]*)", re.M)
_META_BLOCK = re.compile(rb"^metadata:[ \t]*(?:#[^\n]*)?\n((?:[ \t]+[^\n]*\n?|[ \t]*\n)*)", re.M)
_META_FIELD = re.compile(rb"(?:^|[{,])[ \t]*(name|namespace):[ \t]*[\"']?([a-z0-9][-a-z0-9.]*)")


def _salvage_meta(raw: bytes) -> tuple[str | None, str | None]:
    """metadata.name and .namespace of a document that is not valid YAML, read line by line, so the
    running work of an object whose file broke is left alone rather than taken for deleted."""
    found: dict[bytes, bytes] = {}
    flow = _META_FLOW.search(raw)
    if flow is not None:
        found.update(_META_FIELD.findall(flow.group(1)))
    block = _META_BLOCK.search(raw)
    if block is not None:
        lines = [line for line in block.group(1).split(b"\n") if line.strip()]
        indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
        for line in lines:
            if len(line) - len(line.lstrip()) == indent:  # metadata's own fields, not labels'
                for key, value in _META_FIELD.findall(line):
                    found.setdefault(key, value)
    name, ns = found.get(b"name"), found.get(b"namespace")
    return (name.decode() if name else None), (ns.decode() if ns else None)


def _tenancy(entries: list[_Entry], config: Loaded | None, present: bool) -> tuple[list[Tenant] | None, str]:
    """The tenancy table to enforce: the config's, or what survives of a broken jobtree.yaml."""
    if config is not None:
        return None, ""
    if not present:
        return [], " (jobtree.yaml is missing)"
    salvaged: list[Tenant] = []
    for e in entries:
        data = e.data if e.kind == "FleetConfig" and isinstance(e.data, dict) else {}
        spec = data.get("spec")
        tenants = spec.get("tenants") if isinstance(spec, dict) else None
        for item in tenants if isinstance(tenants, list) else []:
            try:
                salvaged.append(Tenant.model_validate(item))
            except ValidationError:
                continue
    return salvaged, " (jobtree.yaml is invalid; fix it first)"


def _salvaged_owners(entries: list[_Entry]) -> set[str]:
    """Owners named by budgets that failed to load, so their neighbours' links still resolve."""
    owners: set[str] = set()
    for e in entries:
        if e.kind == "Budget" and isinstance(e.data, bytes):  # did not parse: take any `owner:` line
            owners |= {m.decode(errors="replace") for m in _OWNER_LINE.findall(e.data)}
        elif e.kind == "Budget" and e.loaded is None and isinstance(e.data, dict):
            spec = e.data.get("spec")
            owner = spec.get("owner") if isinstance(spec, dict) else None
            if isinstance(owner, str) and owner:
                owners.add(owner)
    return owners


def _inventory(entries: list[_Entry], found: rules.Findings) -> Inventory | None:
    for e in entries:
        if e.kind == "Inventory" and e.loaded is not None:
            rules.inventory_rules(found, e.loaded.model, e.loaded.doc)
            model: Inventory = e.loaded.model
            return model
    return None


def _fallback_config(config: Loaded | None, tenants: list[Tenant] | None) -> FleetSpec:
    """Defaults plus the salvaged tenancy when jobtree.yaml is missing or broken."""
    if config is not None:  # loaded but rejected by a rule: keep it, minus the duplicate tenants
        spec: FleetSpec = config.model.spec
        first: dict[str, Tenant] = {}
        for t in spec.tenants:
            first.setdefault(t.namespace, t)
        return spec.model_copy(update={"tenants": list(first.values())})
    return FleetSpec(tenants=list(tenants or []))
