"""Server-side printing: `meta.k8s.io/v1 Table` for `Accept: application/json;as=Table;...`.

Read by the HTTP handler for get and list. Custom resources get NAME plus the CRD's
`additionalPrinterColumns` (or AGE when it declares none), with simple JSONPaths (`.a.b`, `.a[0]`,
`.a['k.x']`) and the real cell typing (dates become ages). Pods, nodes, namespaces, ConfigMaps,
Leases and CRDs get their usual kubectl columns in a simplified form; other kinds NAME and AGE.
Watch events are one-row Tables, the first carrying the column definitions (`kubectl get -w`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from tests.support.kubeapi import objectmeta
from tests.support.kubeapi.resources import PrinterColumn, ResourceType

Obj = dict[str, Any]
NAME_DESCRIPTION = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
_PATH_PART = re.compile(r"\.([A-Za-z0-9_\-]+)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def age(created: str | None, now: datetime) -> str:
    moment = objectmeta.parse_time(created or "", micro=False)
    if moment is None:
        return "<unknown>"
    return human_duration((now - moment).total_seconds())


def human_duration(seconds: float) -> str:
    """kubectl's HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def json_path(obj: Any, path: str) -> Any:
    """Evaluate a simple JSONPath like `.status.phase` or `.spec.items[0].name`; None when missing."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    node = obj
    position = 0
    while position < len(text):
        found = _PATH_PART.match(text, position)
        if not found:
            return None
        field, index, quoted, double = found.groups()
        key = field or quoted or double
        if key is not None:
            node = node.get(key) if isinstance(node, dict) else None
        else:
            number = int(index)
            node = node[number] if isinstance(node, list) and number < len(node) else None
        if node is None:
            return None
        position = found.end()
    return node


def _cell(column: PrinterColumn, value: Any, now: datetime) -> Any:
    if value is None:
        return None
    if column.type == "integer":
        if isinstance(value, bool):
            return None
        return int(value) if isinstance(value, (int, float)) else None
    if column.type == "number":
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if column.type == "boolean":
        return value if isinstance(value, bool) else None
    if column.type == "string":
        return value if isinstance(value, str) else None
    if column.type == "date":
        return age(value, now) if isinstance(value, str) else None
    return None


Column = tuple[str, str, str, Callable[[Obj, datetime], Any], int]


def _name(obj: Obj, now: datetime) -> Any:
    return obj["metadata"]["name"]


def _age(obj: Obj, now: datetime) -> Any:
    return age(obj["metadata"].get("creationTimestamp"), now)


def _pod_ready(obj: Obj, now: datetime) -> Any:
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    total = len((obj.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_status(obj: Obj, now: datetime) -> Any:
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    status = obj.get("status") or {}
    return status.get("reason") or status.get("phase") or "Unknown"


def _node_status(obj: Obj, now: datetime) -> Any:
    conditions = (obj.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    text = "Ready" if ready and ready.get("status") == "True" else ("NotReady" if ready else "Unknown")
    if (obj.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


BUILTIN_COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        ("Name", "string", "name", _name, 0),
        ("Ready", "string", "", _pod_ready, 0),
        ("Status", "string", "", _pod_status, 0),
        (
            "Restarts",
            "string",
            "",
            lambda o, n: str(
                sum(s.get("restartCount", 0) for s in (o.get("status") or {}).get("containerStatuses") or [])
            ),
            0,
        ),
        ("Age", "string", "", _age, 0),
        ("IP", "string", "", lambda o, n: (o.get("status") or {}).get("podIP") or "<none>", 1),
        ("Node", "string", "", lambda o, n: (o.get("spec") or {}).get("nodeName") or "<none>", 1),
    ],
    "Node": [
        ("Name", "string", "name", _name, 0),
        ("Status", "string", "", _node_status, 0),
        ("Roles", "string", "", lambda o, n: "<none>", 0),
        ("Age", "string", "", _age, 0),
        (
            "Version",
            "string",
            "",
            lambda o, n: ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""),
            0,
        ),
    ],
    "Namespace": [
        ("Name", "string", "name", _name, 0),
        ("Status", "string", "", lambda o, n: (o.get("status") or {}).get("phase", ""), 0),
        ("Age", "string", "", _age, 0),
    ],
    "ConfigMap": [
        ("Name", "string", "name", _name, 0),
        ("Data", "integer", "", lambda o, n: len(o.get("data") or {}) + len(o.get("binaryData") or {}), 0),
        ("Age", "string", "", _age, 0),
    ],
    "Lease": [
        ("Name", "string", "name", _name, 0),
        ("Holder", "string", "", lambda o, n: (o.get("spec") or {}).get("holderIdentity", ""), 0),
        ("Age", "string", "", _age, 0),
    ],
    "CustomResourceDefinition": [
        ("Name", "string", "name", _name, 0),
        ("Created At", "date", "", lambda o, n: o["metadata"].get("creationTimestamp"), 0),
    ],
}
DEFAULT_COLUMNS: list[Column] = [("Name", "string", "name", _name, 0), ("Age", "string", "", _age, 0)]


def table(
    rt: ResourceType, items: list[Obj], list_meta: Obj, now: datetime, include: str = "Metadata"
) -> Obj:
    if rt.custom:
        definitions = [_definition("Name", "string", "name", NAME_DESCRIPTION, 0)] + [
            _definition(c.name, c.type, c.format, c.description, c.priority) for c in rt.printer_columns
        ]
        rows = [
            [obj["metadata"]["name"]]
            + [_cell(c, json_path(obj, c.json_path), now) for c in rt.printer_columns]
            for obj in items
        ]
    else:
        columns = BUILTIN_COLUMNS.get(rt.kind, DEFAULT_COLUMNS)
        definitions = [
            _definition(n, t, f, NAME_DESCRIPTION if f == "name" else "", p) for n, t, f, _, p in columns
        ]
        rows = [[read(obj, now) for _, _, _, read, _ in columns] for obj in items]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {
            k: v for k, v in list_meta.items() if k in ("resourceVersion", "continue", "remainingItemCount")
        },
        "columnDefinitions": definitions,
        "rows": [
            {"cells": cells, "object": _row_object(rt, obj, include)}
            for cells, obj in zip(rows, items, strict=True)
        ],
    }


def watch_table(rt: ResourceType, obj: Obj, now: datetime, include: str, first: bool) -> Obj:
    """One watch event's object as a one-row Table; only the first event carries the columns."""
    out = table(rt, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, now, include)
    if not first:
        out["columnDefinitions"] = []
    return out


def _definition(name: str, kind: str, fmt: str, description: str, priority: int) -> Obj:
    return {"name": name, "type": kind, "format": fmt, "description": description, "priority": priority}


def _row_object(rt: ResourceType, obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return {**obj, "apiVersion": rt.api_version, "kind": rt.kind}
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
