"""Per-kind rules for built-in kinds: defaulting, admission defaults, immutability, validation.

The registry calls `on_create` and `on_update` after decoding and before storing, as the real
server's REST strategies and default admission plugins do. Covered: pod defaults (restartPolicy,
dnsPolicy, container termination-message and pull-policy defaults, requests from limits, port
protocols, the not-ready/unreachable tolerations, service account name, priority) and QoS class,
pod spec immutability, node taints, namespace finalizer/label/phase, service cluster IP and port
defaults, ConfigMap keys and `immutable`, Lease and Event time formats. Not covered: service
account token volumes, LimitRanges, quotas, and schema validation of the rest of each kind.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from tests.support.kubeapi import objectmeta, status
from tests.support.kubeapi.resources import ResourceType
from tests.support.kubeapi.status import Cause

Obj = dict[str, Any]

POD_UPDATE_FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
    "to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
    "previously negative)"
)
DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)
TIME_KEYS = frozenset(
    {
        "lastTransitionTime",
        "lastProbeTime",
        "lastHeartbeatTime",
        "startTime",
        "startedAt",
        "finishedAt",
        "firstTimestamp",
        "lastTimestamp",
        "lastUpdateTime",
    }
)
MICRO_TIME_KEYS = frozenset({"acquireTime", "renewTime", "eventTime", "lastObservedTime"})
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def on_create(rt: ResourceType, obj: Obj, allocate_ip: Callable[[], str]) -> list[Cause]:
    """Default and validate a new built-in object in place; the causes make a 422."""
    if rt.custom:
        return []
    normalize_times(rt, obj)
    if rt.kind == "Pod":
        _default_pod(obj)
        _admit_pod(obj)
        obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj["spec"])}
        return _pod_problems(obj)
    if rt.kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
        _label_namespace(obj)
        return []
    if rt.kind == "Service":
        return _default_service(obj, None, allocate_ip)
    return _common_problems(rt, obj, None)


def on_update(rt: ResourceType, new: Obj, old: Obj, allocate_ip: Callable[[], str]) -> list[Cause]:
    """Default and validate an update of a built-in object in place, against the live `old`."""
    if rt.custom:
        return []
    normalize_times(rt, new)
    if rt.kind == "Pod":
        _default_pod(new)
        return _pod_problems(new) + _pod_update_problems(new.get("spec", {}), old.get("spec", {}))
    if rt.kind == "Namespace":
        _label_namespace(new)
        new.setdefault("spec", {}).setdefault("finalizers", old.get("spec", {}).get("finalizers", []))
        return []
    if rt.kind == "Service":
        return _default_service(new, old, allocate_ip)
    return _common_problems(rt, new, old)


def normalize_times(rt: ResourceType, obj: Obj) -> None:
    """Decode and re-encode metav1.Time and MicroTime fields as Go would; unparseable is a 400."""
    roots = [obj.get("spec"), obj.get("status")]
    if rt.kind == "Event":
        roots.append(obj.get("series"))
        _normalize(obj, rt.kind, "", shallow=True)
    for node in roots:
        if node is not None:
            _normalize(node, rt.kind, "")


def _normalize(node: Any, kind: str, where: str, shallow: bool = False) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and (key in TIME_KEYS or key in MICRO_TIME_KEYS):
                micro = key in MICRO_TIME_KEYS
                moment = objectmeta.parse_time(value, micro)
                if moment is None:
                    maker = objectmeta.micro_time_error if micro else objectmeta.time_error
                    raise status.bad_request(maker(kind, f"{where}{key}", value))
                node[key] = objectmeta.format_micro_time(moment) if micro else objectmeta.format_time(moment)
            elif not shallow and key not in ("data", "binaryData"):
                _normalize(value, kind, f"{where}{key}.")
    elif isinstance(node, list) and not shallow:
        for item in node:
            _normalize(item, kind, where)


def _containers(spec: Obj) -> list[Obj]:
    out: list[Obj] = []
    for field in ("initContainers", "containers"):
        out.extend(c for c in spec.get(field) or [] if isinstance(c, dict))
    return out


def _default_pod(pod: Obj) -> None:
    spec = pod.setdefault("spec", {})
    for container in _containers(spec):
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = str(container.get("image", ""))
        tag = image.rsplit("/", 1)[-1]
        latest = "@" not in image and (":" not in tag or tag.endswith(":latest"))
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        resources = container.setdefault("resources", {})
        limits = resources.get("limits") or {}
        if limits:
            requests = resources.setdefault("requests", {})
            for name, quantity in limits.items():
                requests.setdefault(name, quantity)
        for port in container.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)


def _admit_pod(pod: Obj) -> None:
    """What default admission adds on create: service account, priority, default tolerations."""
    spec = pod["spec"]
    spec.setdefault("serviceAccountName", spec.get("serviceAccount", "default"))
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    for default in DEFAULT_TOLERATIONS:
        if not any(
            t.get("key") == default["key"] and t.get("effect") in (None, "", "NoExecute") for t in tolerations
        ):
            tolerations.append(dict(default))


def _qos_class(spec: Obj) -> str:
    containers = _containers(spec)
    requested = guaranteed = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        requests = {k: v for k, v in (resources.get("requests") or {}).items() if k in ("cpu", "memory")}
        limits = {k: v for k, v in (resources.get("limits") or {}).items() if k in ("cpu", "memory")}
        requested = requested or bool(requests or limits)
        if set(limits) != {"cpu", "memory"} or any(str(requests.get(k)) != str(v) for k, v in limits.items()):
            guaranteed = False
    if not requested:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _pod_problems(pod: Obj) -> list[Cause]:
    spec = pod.get("spec") or {}
    containers = spec.get("containers")
    if not containers:
        return [Cause("FieldValueRequired", "Required value", "spec.containers")]
    out: list[Cause] = []
    seen: set[str] = set()
    for field in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(field) or []):
            where = f"spec.{field}[{i}]"
            name = container.get("name", "") if isinstance(container, dict) else ""
            if not name:
                out.append(Cause("FieldValueRequired", "Required value", f"{where}.name"))
            else:
                out.extend(objectmeta.name_problems(name, "label", f"{where}.name"))
                if name in seen:
                    out.append(Cause("FieldValueDuplicate", f'Duplicate value: "{name}"', f"{where}.name"))
                seen.add(name)
            if field == "containers" and not (container or {}).get("image"):
                out.append(Cause("FieldValueRequired", "Required value", f"{where}.image"))
    policy = spec.get("restartPolicy")
    if policy not in ("Always", "OnFailure", "Never"):
        out.append(
            Cause(
                "FieldValueNotSupported",
                f'Unsupported value: "{policy}": supported values: "Always", "OnFailure", "Never"',
                "spec.restartPolicy",
            )
        )
    if spec.get("nodeName"):
        out.extend(objectmeta.name_problems(spec["nodeName"], "subdomain", "spec.nodeName"))
    return out


def _pod_update_problems(new: Obj, old: Obj) -> list[Cause]:
    def masked(spec: Obj) -> Obj:
        out = copy.deepcopy(spec)
        for field in ("containers", "initContainers"):
            for container in out.get(field) or []:
                if isinstance(container, dict):
                    container.pop("image", None)
        for field in (
            "activeDeadlineSeconds",
            "terminationGracePeriodSeconds",
            "tolerations",
            "schedulingGates",
        ):
            out.pop(field, None)
        return out

    out = []
    if masked(new) != masked(old):
        out.append(Cause("FieldValueForbidden", POD_UPDATE_FORBIDDEN, "spec"))
    old_tolerations = old.get("tolerations") or []
    new_tolerations = new.get("tolerations") or []
    if any(t not in new_tolerations for t in old_tolerations):
        out.append(
            Cause(
                "FieldValueForbidden",
                "Forbidden: existing toleration can not be modified except its tolerationSeconds",
                "spec.tolerations",
            )
        )
    before, after = old.get("activeDeadlineSeconds"), new.get("activeDeadlineSeconds")
    if before is not None and (after is None or after > before):
        out.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {after if after is not None else 'null'}: must be less than or equal to previous value",
                "spec.activeDeadlineSeconds",
            )
        )
    return out


def _label_namespace(namespace: Obj) -> None:
    meta = namespace["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}


def _default_service(service: Obj, old: Obj | None, allocate_ip: Callable[[], str]) -> list[Cause]:
    spec = service.setdefault("spec", {})
    before = (old or {}).get("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    if "clusterIP" not in spec and before.get("clusterIP"):
        spec["clusterIP"] = before["clusterIP"]
    if "clusterIP" not in spec:
        spec["clusterIP"] = allocate_ip()
    if old is not None and before.get("clusterIP") != spec["clusterIP"]:
        return [
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{spec["clusterIP"]}": field is immutable',
                "spec.clusterIPs[0]",
            )
        ]
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    if spec["clusterIP"] != "None":
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    service.setdefault("status", {"loadBalancer": {}})
    if not spec.get("ports") and spec["clusterIP"] != "None":
        return [Cause("FieldValueRequired", "Required value", "spec.ports")]
    return []


def _common_problems(rt: ResourceType, obj: Obj, old: Obj | None) -> list[Cause]:
    if rt.kind == "ConfigMap":
        return _config_map_problems(obj, old)
    if rt.kind == "Node":
        return _node_problems(obj)
    if rt.kind == "Lease":
        spec = obj.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and (not isinstance(duration, int) or duration <= 0):
            return [
                Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {duration}: must be greater than 0",
                    "spec.leaseDurationSeconds",
                )
            ]
    return []


def _config_map_problems(obj: Obj, old: Obj | None) -> list[Cause]:
    out: list[Cause] = []
    for field in ("data", "binaryData"):
        values = obj.get(field) or {}
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise status.bad_request(
                f'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal into Go '
                f"struct field ConfigMap.{field} of type string"
            )
        for key in values:
            if not _CONFIG_KEY.fullmatch(key):
                out.append(
                    Cause(
                        "FieldValueInvalid",
                        f'Invalid value: "{key}": a valid config key must consist of alphanumeric characters, '
                        "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                        "validation is '[-._a-zA-Z0-9]+')",
                        f"{field}[{key}]",
                    )
                )
    if old is not None and old.get("immutable"):
        if any(obj.get(f) != old.get(f) for f in ("data", "binaryData", "immutable")):
            out.append(
                Cause("FieldValueForbidden", "Forbidden: field is immutable when `immutable` is set", "data")
            )
    return out


def _node_problems(node: Obj) -> list[Cause]:
    out: list[Cause] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate((node.get("spec") or {}).get("taints") or []):
        effect = taint.get("effect") if isinstance(taint, dict) else None
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            out.append(
                Cause(
                    "FieldValueNotSupported",
                    f'Unsupported value: "{effect or ""}": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
                    f"spec.taints[{i}].effect",
                )
            )
        key = (taint or {}).get("key", "")
        if not key:
            out.append(Cause("FieldValueRequired", "Required value", f"spec.taints[{i}].key"))
        if (key, effect) in seen:
            out.append(
                Cause(
                    "FieldValueDuplicate",
                    f'Duplicate value: "{key}:{effect}": taints must be unique by key and effect pair',
                    f"spec.taints[{i}]",
                )
            )
        seen.add((key, effect or ""))
    return out
