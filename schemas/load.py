"""Fleet files to typed objects: every problem becomes a Diagnostic at the offending line.

Per-document checks only (syntax, kind, field shapes); the cross-object rules are
`schemas.rules`. An invalid document never hides its valid neighbours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from schemas import diagnostics as codes
from schemas import layout, messages
from schemas.budget import Budget
from schemas.diagnostics import Diagnostic
from schemas.fleet import FleetConfig, Inventory
from schemas.layout import FLEET_FILE, INVENTORY_FILE
from schemas.lease import Lease
from schemas.podtemplate import FORM_TAGS
from schemas.reservation import Reservation
from schemas.run import Run
from schemas.scenario import Scenario
from schemas.yamldoc import BadDocument, Document, parse_all

KINDS: dict[str, type[BaseModel]] = {
    "Budget": Budget,
    "Run": Run,
    "Lease": Lease,
    "Reservation": Reservation,
    "FleetConfig": FleetConfig,
    "Scenario": Scenario,
}
MAX_FILE_BYTES = layout.MAX_FILE_BYTES  # re-exported: readers cap what they read at it


class Symlink(bytes):
    """A spec path held as a symbolic link: its bytes are the target's name, never read through.
    Readers hand it over as such, and validation reports the path instead of parsing it."""


@dataclass(slots=True)
class Loaded:
    """A document that parsed into a model, with where it came from."""

    model: Any
    doc: Document

    @property
    def key(self) -> str:
        meta = self.model.metadata
        ns = getattr(meta, "namespace", None)
        return f"{self.model.kind} {ns}/{meta.name}" if ns else f"{self.model.kind} {meta.name}"


@dataclass(slots=True)
class FleetFiles:
    """Everything read from a fleet repository, before cross-object rules."""

    config: Loaded | None = None
    budgets: list[Loaded] = field(default_factory=list)
    runs: list[Loaded] = field(default_factory=list)
    inventory: Inventory | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # object keys (or paths) excluded from planning


def _clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[str | int, ...]:
    """The error's path in the user's document: parts the data has, or the missing field's name;
    union branch tags pydantic adds ("int", "function-before[...]") are dropped."""
    out: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part == "sparesPerGroup" and "spares" in node:
            part = "spares"  # the seeds' alias, renamed before validation
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif isinstance(part, str) and ("[" in part or part.startswith("function-") or part in _BRANCHES):
            continue
        else:
            node = None  # a missing field: nothing below it exists
        out.append(part)
    return tuple(out)


_BRANCHES = {"int", "str", "float", "bool", "list", "dict", "none", "constrained-int", "constrained-str"}
_BRANCHES |= set(FORM_TAGS)  # the pod template's two forms


def validate_document(doc: Document, model: type[BaseModel]) -> tuple[Any | None, list[Diagnostic]]:
    """One document against one kind; a diagnostic per pydantic error, at that field's line."""
    try:
        return model.model_validate(doc.data), []
    except ValidationError as exc:
        out: list[Diagnostic] = []
        obj = _object_name(doc.data)
        seen: set[tuple[int, int, str]] = set()
        for err in exc.errors(include_url=False):
            loc = _clean_loc(err["loc"], doc.data)
            for at, message in _located(err, loc, model):
                line, col = doc.where(at)
                if (line, col, message) in seen:
                    continue
                seen.add((line, col, message))
                out.append(Diagnostic(doc.path, line, col, codes.SCHEMA, message, obj))
        return None, out


def _located(
    err: Any, loc: tuple[str | int, ...], model: type[BaseModel]
) -> list[tuple[tuple[str | int, ...], str]]:
    """One pydantic error as (field path, sentence): a rule that checked a whole mapping (labels, a pod
    spec against core/v1) lists each problem below it, each reported at its own line."""
    problems = (err.get("ctx") or {}).get("problems")
    if not problems:
        return [(loc, messages.describe({**err, "loc": loc}, model))]
    out = []
    for sub, text in problems:
        at = (*loc, *sub)
        where = messages.field_path(at if "{where}" in text else loc)
        out.append((at, text.replace("{where}", where) if "{where}" in text else f"{where}: {text}"))
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _object_name(data: Any) -> str:
    if not isinstance(data, dict):
        return ""
    meta = data.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name, ns = meta.get("name"), meta.get("namespace")
    kind = data.get("kind", "?")
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def load_documents(
    path: str, text: str | bytes, positions: bool = True
) -> tuple[list[Document], list[Diagnostic]]:
    """Every readable document of a file, and one diagnostic per document that could not be read.
    `positions=False`: field positions are worked out only if a diagnostic needs one."""
    docs, bad = parse_all(text, path, positions)
    return docs, [bad_document_diagnostic(path, b) for b in bad]


def bad_document_diagnostic(path: str, bad: BadDocument) -> Diagnostic:
    return Diagnostic(path, bad.error.line, bad.error.col, bad.error.code, bad.error.message)


def load_object(doc: Document, allowed: Iterable[str]) -> tuple[Loaded | None, list[Diagnostic]]:
    """A document as one of the allowed kinds, or the diagnostics explaining why not."""
    data = doc.data
    if not isinstance(data, dict):
        return None, [
            Diagnostic(
                doc.path,
                doc.line,
                doc.col,
                codes.NOT_AN_OBJECT,
                "expected a mapping with apiVersion, kind, metadata and spec",
            )
        ]
    kind = data.get("kind")
    allowed = tuple(allowed)
    if kind not in allowed:
        line, col = doc.where(("kind",))
        hint = " or ".join(allowed)
        return None, [
            Diagnostic(
                doc.path,
                line,
                col,
                codes.UNKNOWN_KIND,
                f"kind is missing; add `kind: {allowed[0]}` (with apiVersion, metadata and spec)"
                if kind is None
                else f"kind {_short(kind)} does not belong here; set kind: {hint}, or move the file to the "
                "folder for its kind",
                _object_name(data),
            )
        ]
    model, diags = validate_document(doc, KINDS[kind])
    return (Loaded(model, doc) if model is not None else None), diags


def _kinds_for(path: str) -> tuple[str, ...] | None:
    if path == FLEET_FILE:
        return ("FleetConfig",)
    if path.startswith("budgets/") and path.endswith((".yaml", ".yml")):
        return ("Budget",)
    if path.startswith("runs/") and path.endswith((".yaml", ".yml")):
        return ("Run",)
    return None


def load_fleet(files: Mapping[str, bytes]) -> FleetFiles:
    """The spec files of a fleet repository (path -> bytes), per-document validation only."""
    fleet = FleetFiles()
    for path in sorted(files):
        if path == INVENTORY_FILE:
            _load_inventory(fleet, path, files[path])
            continue
        kinds = _kinds_for(path)
        if kinds is None:
            continue
        docs, diags = load_documents(path, files[path])
        fleet.diagnostics += diags
        if diags:
            fleet.rejected.append(path)
        for doc in docs:
            loaded, diags = load_object(doc, kinds)
            fleet.diagnostics += diags
            if loaded is None:
                fleet.rejected.append(_object_name(doc.data) or f"{path}#{doc.index}")
                continue
            if loaded.model.kind == "FleetConfig":
                if fleet.config is not None:
                    fleet.diagnostics.append(
                        Diagnostic(
                            path,
                            doc.line,
                            doc.col,
                            codes.DUPLICATE_OBJECT,
                            "only one FleetConfig per fleet; merge them",
                        )
                    )
                    continue
                fleet.config = loaded
            elif loaded.model.kind == "Budget":
                fleet.budgets.append(loaded)
            else:
                fleet.runs.append(loaded)
    return fleet


def _load_inventory(fleet: FleetFiles, path: str, text: bytes) -> None:
    docs, diags = load_documents(path, text)
    fleet.diagnostics += diags
    if not docs:
        return
    model, diags = validate_document(docs[0], Inventory)
    for d in diags:
        fleet.diagnostics.append(Diagnostic(d.path, d.line, d.col, codes.INVENTORY, d.message, "inventory"))
    fleet.inventory = model
