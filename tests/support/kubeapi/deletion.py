"""Deleting: preconditions, finalizers, graceful pods, propagation, and the controllers that finish.

Under the registry's delete verbs. An object with finalizers (or deleted with `Foreground` or
`Orphan` propagation) gets `deletionTimestamp` and stays until its finalizers are gone; without
any it is removed at once. The garbage collector, namespace controller and CRD cleanup are
emulated synchronously, inside the same request: dependents whose owners are all gone are
deleted (background), orphaned, or deleted first (foreground); a terminating namespace empties
and goes; a deleted CRD takes its custom resources and its discovery entry with it. With kubelet
emulation on, a scheduled pod deleted with a non-zero grace period lingers until the test
finishes it. Real controllers do this asynchronously, so this server is never slower than them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tests.support.kubeapi import objectmeta, selectors, status
from tests.support.kubeapi.admission import Call
from tests.support.kubeapi.resources import ResourceType
from tests.support.kubeapi.store import clone

if TYPE_CHECKING:
    from tests.support.kubeapi.registry import Registry, Result

Obj = dict[str, Any]
StorageKey = tuple[str, str]
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"
RETURNS_OBJECT = frozenset({"Pod", "Service"})


def delete(reg: Registry, call: Call, options: dict[str, Any]) -> Result:
    from tests.support.kubeapi.registry import Result

    rt = call.rt
    with reg.store.lock:
        live = reg.store.get(rt.storage_key, call.namespace, call.name)
        if live is None:
            raise status.not_found(rt.resource, call.name)
        _check_preconditions(rt, call.name, live, options.get("preconditions") or {})
        if call.dry_run:
            return Result(200, reg.output(rt, live))
        outcome = _delete(reg, rt, live, options)
        _settle(reg)
    if outcome is None:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": call.name,
                "group": rt.group,
                "kind": rt.plural,
                "uid": live["metadata"]["uid"],
            },
        }
        if not rt.group:
            del body["details"]["group"]
        return Result(200, body)
    return Result(200, reg.output(rt, outcome))


def delete_collection(
    reg: Registry, call: Call, options: dict[str, Any], labels: str | None, fields: str | None
) -> Result:
    from tests.support.kubeapi.registry import Result

    rt = call.rt
    requirements = selectors.parse_labels(labels)
    terms = selectors.parse_fields(fields, rt.field_labels)
    items = []
    with reg.store.lock:
        targets = [
            obj
            for obj in reg.store.objects(
                rt.storage_key, call.namespace if rt.namespaced and call.namespace else None
            )
            if selectors.labels_match(requirements, obj)
            and selectors.fields_match(terms, obj, rt.field_labels)
        ]
        for obj in sorted(targets, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])):
            if not call.dry_run:
                after = _delete(reg, rt, obj, options)
                items.append(reg.output(rt, after if after is not None else obj))
            else:
                items.append(reg.output(rt, obj))
        _settle(reg)
        revision = reg.store.revision
    return Result(
        200,
        {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(revision)},
            "items": items,
        },
    )


def _check_preconditions(rt: ResourceType, name: str, live: Obj, preconditions: dict[str, Any]) -> None:
    uid, version = preconditions.get("uid"), preconditions.get("resourceVersion")
    meta = live["metadata"]
    if uid and uid != meta["uid"]:
        raise status.conflict(
            rt.resource,
            name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta['uid']}",
        )
    if version and version != meta["resourceVersion"]:
        raise status.conflict(
            rt.resource,
            name,
            f"Precondition failed: ResourceVersion in precondition: {version}, ResourceVersion in object meta: {meta['resourceVersion']}",
        )


def _policy(rt: ResourceType, options: dict[str, Any]) -> str:
    policy = options.get("propagationPolicy")
    orphan = options.get("orphanDependents")
    if policy and orphan is not None:
        raise status.ApiError(
            422,
            "Invalid",
            'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: '
            f'"{policy}": orphanDependents and deletionPropagation cannot be both set',
            status.Target(),
        )
    if policy and policy not in ("Background", "Foreground", "Orphan"):
        raise status.ApiError(
            422,
            "Invalid",
            f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "{policy}": '
            'supported values: "Foreground", "Background", "Orphan", "nil"',
            status.Target(),
        )
    if orphan is not None:
        return "Orphan" if orphan else "Background"
    return policy or "Background"


def _delete(reg: Registry, rt: ResourceType, live: Obj, options: dict[str, Any]) -> Obj | None:
    """Delete one object; the object if it lingers (or the kind returns it), None once it is gone."""
    meta = live["metadata"]
    policy = _policy(rt, options)
    grace = options.get("gracePeriodSeconds")
    now = reg.clock()
    if rt.kind == "Pod" and not rt.custom and reg.kubelet_emulation and _runs_on_a_kubelet(live):
        period = (
            grace if grace is not None else (live.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        )
        if period and period > 0:
            current = meta.get("deletionGracePeriodSeconds")
            if current is not None and current <= period:
                return live
            new = clone(live)
            new["metadata"]["deletionTimestamp"] = objectmeta.format_time(now + timedelta(seconds=period))
            new["metadata"]["deletionGracePeriodSeconds"] = period
            _add_policy_finalizer(new, policy)
            return reg.store.write(rt.storage_key, _ns(live), meta["name"], new)
    extra = {"Orphan": ORPHAN, "Foreground": FOREGROUND}.get(policy)
    if rt.kind == "CustomResourceDefinition" and not rt.custom:
        extra = CRD_CLEANUP
    if rt.kind == "Namespace" and not rt.custom:
        return _terminate_namespace(reg, rt, live)
    if meta.get("finalizers") or extra:
        if meta.get("deletionTimestamp") and not extra:
            return live
        new = clone(live)
        new["metadata"].setdefault("deletionTimestamp", objectmeta.format_time(now))
        new["metadata"].setdefault("deletionGracePeriodSeconds", 0)
        if extra and extra not in (new["metadata"].get("finalizers") or []):
            new["metadata"]["finalizers"] = [*(new["metadata"].get("finalizers") or []), extra]
        if new == live:
            return live
        stored = reg.store.write(rt.storage_key, _ns(live), meta["name"], new)
        reg.terminating.add((rt.storage_key, _ns(live), meta["name"]))
        return stored
    final = clone(live)
    if rt.kind == "Pod" and not rt.custom:
        final["metadata"].setdefault("deletionTimestamp", objectmeta.format_time(now))
        final["metadata"]["deletionGracePeriodSeconds"] = 0
    gone = remove(reg, rt, final)
    return gone if rt.kind in RETURNS_OBJECT and not rt.custom else None


def _ns(obj: Obj) -> str:
    return str(obj["metadata"].get("namespace", ""))


def _runs_on_a_kubelet(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def _add_policy_finalizer(obj: Obj, policy: str) -> None:
    extra = {"Orphan": ORPHAN, "Foreground": FOREGROUND}.get(policy)
    if extra and extra not in (obj["metadata"].get("finalizers") or []):
        obj["metadata"]["finalizers"] = [*(obj["metadata"].get("finalizers") or []), extra]


def _terminate_namespace(reg: Registry, rt: ResourceType, live: Obj) -> Obj:
    if live["metadata"].get("deletionTimestamp"):
        return live
    new = clone(live)
    new["metadata"]["deletionTimestamp"] = objectmeta.format_time(reg.clock())
    new["metadata"]["deletionGracePeriodSeconds"] = 0
    new["status"] = {"phase": "Terminating"}
    stored = reg.store.write(rt.storage_key, "", live["metadata"]["name"], new)
    reg.terminating.add((rt.storage_key, "", live["metadata"]["name"]))
    return stored


def ready_to_go(rt: ResourceType, obj: Obj) -> bool:
    """A write that leaves a deleted object without finalizers completes its deletion."""
    meta = obj["metadata"]
    if not meta.get("deletionTimestamp") or meta.get("finalizers"):
        return False
    if rt.kind == "Namespace" and not rt.custom:
        return not (obj.get("spec") or {}).get("finalizers")
    if rt.kind == "Pod" and not rt.custom and meta.get("deletionGracePeriodSeconds"):
        return False
    return True


def remove(reg: Registry, rt: ResourceType, final: Obj) -> Obj:
    """Take the object out of storage (DELETED), then let the emulated controllers react."""
    ns, name = _ns(final), final["metadata"]["name"]
    gone = reg.store.delete(rt.storage_key, ns, name, final)
    reg.terminating.discard((rt.storage_key, ns, name))
    if rt.kind == "CustomResourceDefinition" and not rt.custom:
        reg.catalog.withdraw_custom(name)
    _collect_dependents(reg, final["metadata"]["uid"])
    return gone


def finish(reg: Registry, rt: ResourceType, final: Obj) -> Obj:
    """A write removed the last finalizer: the object goes, and whatever waited on it moves on."""
    gone = remove(reg, rt, final)
    _settle(reg)
    return gone


def after_write(reg: Registry, rt: ResourceType, old: Obj, new: Obj) -> None:
    if new["metadata"].get("deletionTimestamp"):
        reg.terminating.add((rt.storage_key, _ns(new), new["metadata"]["name"]))
        _settle(reg)


def _collect_dependents(reg: Registry, owner_uid: str) -> None:
    """Background garbage collection: a dependent goes when none of its owners remain."""
    for key, ns, name in reg.store.dependents(owner_uid):
        dependent = reg.store.get(key, ns, name)
        rt = reg.catalog.by_storage_key(key)
        if dependent is None or rt is None or dependent["metadata"].get("deletionTimestamp"):
            continue
        owners = [ref.get("uid") for ref in dependent["metadata"].get("ownerReferences") or []]
        if all(not _exists(reg, uid) for uid in owners):
            _delete(reg, rt, dependent, {"propagationPolicy": "Background"})


def _exists(reg: Registry, uid: str | None) -> bool:
    return bool(uid) and reg.store.has_uid(str(uid))


def _settle(reg: Registry) -> None:
    """Run the emulated controllers until nothing being deleted can make further progress."""
    progress = True
    while progress:
        progress = False
        for key, ns, name in sorted(reg.terminating):
            obj = reg.store.get(key, ns, name)
            rt = reg.catalog.by_storage_key(key)
            if obj is None or rt is None:
                reg.terminating.discard((key, ns, name))
                continue
            progress = _advance(reg, rt, obj) or progress


def _advance(reg: Registry, rt: ResourceType, obj: Obj) -> bool:
    meta = obj["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    done: list[str] = []
    dependents = reg.store.dependents(meta["uid"])
    if ORPHAN in finalizers:
        for key, ns, name in dependents:
            _drop_owner(reg, key, ns, name, meta["uid"])
        done.append(ORPHAN)
    if FOREGROUND in finalizers:
        for key, ns, name in dependents:
            dependent = reg.store.get(key, ns, name)
            dependent_rt = reg.catalog.by_storage_key(key)
            if (
                dependent is not None
                and dependent_rt is not None
                and not dependent["metadata"].get("deletionTimestamp")
            ):
                _delete(reg, dependent_rt, dependent, {"propagationPolicy": "Foreground"})
        if not reg.store.dependents(meta["uid"]):
            done.append(FOREGROUND)
    if CRD_CLEANUP in finalizers:
        done.extend(_clean_custom_resources(reg, obj))
    if rt.kind == "Namespace" and not rt.custom:
        return _empty_namespace(reg, rt, obj)
    if not done:
        return False
    new = clone(obj)
    new["metadata"]["finalizers"] = [f for f in finalizers if f not in done]
    if not new["metadata"]["finalizers"]:
        del new["metadata"]["finalizers"]
    if ready_to_go(rt, new):
        remove(reg, rt, new)
    else:
        reg.store.write(rt.storage_key, _ns(obj), meta["name"], new)
    return True


def _drop_owner(reg: Registry, key: StorageKey, ns: str, name: str, owner_uid: str) -> None:
    dependent = reg.store.get(key, ns, name)
    if dependent is None:
        return
    new = clone(dependent)
    refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
    if refs:
        new["metadata"]["ownerReferences"] = refs
    else:
        new["metadata"].pop("ownerReferences", None)
    reg.store.write(key, ns, name, new)


def _clean_custom_resources(reg: Registry, crd: Obj) -> list[str]:
    served = reg.catalog.custom_for(crd["metadata"]["name"])
    if not served:
        return [CRD_CLEANUP]
    rt = next((t for t in served if t.version == t.storage_version), served[0])
    for obj in list(reg.store.objects(rt.storage_key)):
        if not obj["metadata"].get("deletionTimestamp"):
            _delete(reg, rt, obj, {})
    return [] if any(True for _ in reg.store.objects(rt.storage_key)) else [CRD_CLEANUP]


def _empty_namespace(reg: Registry, rt: ResourceType, namespace: Obj) -> bool:
    name = namespace["metadata"]["name"]
    for key, obj in list(reg.store.namespaces_in_use(name)):
        member_rt = reg.catalog.by_storage_key(key)
        if member_rt is not None and not obj["metadata"].get("deletionTimestamp"):
            _delete(reg, member_rt, obj, {})
    if any(True for _ in reg.store.namespaces_in_use(name)):
        return False
    spec_finalizers = (namespace.get("spec") or {}).get("finalizers") or []
    new = clone(namespace)
    new.setdefault("spec", {})["finalizers"] = [f for f in spec_finalizers if f != "kubernetes"]
    if ready_to_go(rt, new):
        remove(reg, rt, new)
        return True
    if new != namespace:
        reg.store.write(rt.storage_key, "", name, new)
        return True
    return False
