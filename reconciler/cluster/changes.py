"""What applying a commit to one cluster changes (§7.3): the record stamped, compared with what is live.

Pure. `Record` is what one commit holds for one cluster (the CRDs, tenant namespaces, mirrors,
`rendered/<cluster>/`, the nodes jobtree cordoned); `Live` what the cluster holds (jobtree's
objects of every fleet, namespaces, nodes). `compare` gives the writes that make the cluster hold
the record and nothing more of this fleet's: create what is missing, change what differs (the
content hash, or any field jobtree applies that the live object no longer holds: a hand edit,
restored in the same pass and said as `drifted`; a mirror's status compared as written), replace
a pod whose spec differs (pods are immutable) or that a disruption ended (evicted, refused by its
kubelet: re-created in place, §7.6; a pod that completed or whose workload failed stays as it
ended, for the next pass to observe), apply a CRD only when the cluster's copy carries an
older schema version than this jobtree's (`stamp.SCHEMA_VERSION`; a newer one, another fleet's
newer jobtree, is left alone and said), prune what this fleet labelled and the record no longer holds (a pod on a node that is
gone or out of service at once, with no grace period: no kubelet will finish it), cordon. Never an object
another fleet's label claims, never a namespace or CRD pruned, never a pod created on a node that
is gone, out of service, cordoned or not Ready (it waits for the pass that moves it), never an object the agent's
journal protects while its entry is not Folded (§7.5: `guarded`, the key and its entry id).
Sending is `sync`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from reconciler.cluster import kinds, observations, stamp
from reconciler.cluster.kinds import Key, Kind

Obj = dict[str, Any]
CREATE, CHANGE, STATUS, REPLACE, PRUNE, CORDON = "create", "change", "status", "replace", "prune", "cordon"


@dataclass(frozen=True, slots=True)
class Record:
    """What one commit holds for one cluster, as plain manifests (statuses included)."""

    commit: str
    fleet: Obj  # the FleetConfig mirror
    crds: tuple[Obj, ...] = ()
    namespaces: tuple[str, ...] = ()
    mirrors: tuple[Obj, ...] = ()  # Budgets, Runs, Reservations, open Leases
    rendered: tuple[Obj, ...] = ()  # rendered/<cluster>/: Services and Pods
    kept: frozenset[Key] = frozenset()  # mirrors of objects invalid now: left as they are, never pruned
    cordoned: tuple[str, ...] = ()  # nodes jobtree cordoned after a failure (state/fleet.yaml)


@dataclass(frozen=True, slots=True)
class Desired:
    """One object as apply sends it: stamped body, and its status apart (mirrors only)."""

    kind: Kind
    body: Obj
    status: Obj | None = None

    @property
    def key(self) -> Key:
        return kinds.key(self.body)


@dataclass(frozen=True, slots=True)
class Live:
    """What one cluster holds, as listed."""

    crds: dict[str, Obj] = field(default_factory=dict)  # jobtree's CRDs by name
    namespaces: frozenset[str] = frozenset()
    nodes: dict[str, Obj] = field(default_factory=dict)
    objects: dict[Key, Obj] = field(default_factory=dict)  # every object jobtree applied, of any fleet


def as_listed(obj: Obj) -> Obj:
    """An object as `Live` holds it: without its managedFields (nothing compares them, and they are
    half its size)."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


@dataclass(frozen=True, slots=True)
class Change:
    action: str  # CREATE, CHANGE, STATUS, REPLACE, PRUNE, CORDON
    kind: Kind
    key: Key
    desired: Desired | None = None
    live: Obj | None = field(
        default=None, compare=False, repr=False
    )  # what a prune deletes (by its uid), a replaced pod as listed; a drifted object
    now: bool = False  # delete with no grace period: its node is gone or out of service (no kubelet)
    drifted: bool = False  # the live object was changed by hand (its hash still says jobtree's)

    @property
    def node(self) -> str:
        """The node a pod change is about (the pod's `spec.nodeName`), else ""."""
        obj = self.desired.body if self.desired is not None else self.live or {}
        return str((obj.get("spec") or {}).get("nodeName") or "") if self.kind == kinds.POD else ""

    def __str__(self) -> str:
        return f"{self.action} {kinds.named(self.key)}"


@dataclass(slots=True)
class Changes:
    """Writes in the order they are sent: each list waits for the one before."""

    crds: list[Change] = field(default_factory=list)
    namespaces: list[Change] = field(default_factory=list)
    mirrors: list[Change] = field(default_factory=list)
    rendered: list[Change] = field(default_factory=list)
    prune: list[Change] = field(default_factory=list)
    cordons: list[Change] = field(default_factory=list)
    commit: Change | None = None  # the FleetConfig's status: the commit applied in full, written last
    held: list[str] = field(default_factory=list)  # pods not created, and why
    conflicts: list[str] = field(default_factory=list)  # objects another fleet's label claims
    guarded: list[str] = field(default_factory=list)  # writes held back for an unfolded journal entry
    disrupted: list[str] = field(default_factory=list)  # pods ended by a disruption, re-created in place
    newer: list[str] = field(default_factory=list)  # CRDs the cluster holds in a newer schema version
    unchanged: int = 0

    def all(self) -> list[Change]:
        tail = [self.commit] if self.commit is not None else []
        return [
            *self.crds,
            *self.namespaces,
            *self.mirrors,
            *self.rendered,
            *self.prune,
            *self.cordons,
            *tail,
        ]


def desired(record: Record, fleet: str) -> tuple[list[Desired], list[Desired], list[Desired], list[Desired]]:
    """The record stamped: CRDs (shared by fleets: managed-by only), namespaces, mirrors, rendered."""

    def one(obj: Obj, label: str | None) -> Desired:
        body, status = stamp.stamped(obj, label)
        kind = kinds.of(body)
        return Desired(kind, body, status if kind.status else None)

    crds = [one(c, None) for c in record.crds]
    spaces = [
        one({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}, fleet)
        for n in record.namespaces
    ]
    mirrors = [one(m, fleet) for m in (record.fleet, *record.mirrors)]
    order = {k.kind: i for i, k in enumerate(kinds.MIRRORS)}
    mirrors.sort(key=lambda d: order[d.kind.kind])
    rendered = [one(r, fleet) for r in record.rendered]
    rendered.sort(key=lambda d: d.kind != kinds.SERVICE)
    return crds, spaces, mirrors, rendered


def compare(record: Record, fleet: str, live: Live, guarded: Mapping[Key, str] | None = None) -> Changes:
    """The writes that make `live` hold `record`, and nothing more of `fleet`'s; none to an object
    of `guarded` (key -> the unfolded journal entry that protects it): each is said instead."""
    crds, spaces, mirrors, rendered = desired(record, fleet)
    out = Changes()
    guard = dict(guarded or {})
    for d in crds:
        have = live.crds.get(d.body["metadata"]["name"])
        if have is None:
            out.crds.append(Change(CREATE, d.kind, d.key, d))
            continue
        theirs, ours = stamp.schema_version(have), stamp.schema_version(d.body)
        if theirs > ours:
            out.newer.append(
                f"{kinds.named(d.key)} has schema version {theirs}, newer than this jobtree's {ours}: left alone"
            )
        elif theirs < ours or _hash(have) != _hash(d.body) or not holds(have, d.body):
            out.crds.append(Change(CHANGE, d.kind, d.key, d, have, drifted=theirs == ours))
        else:
            out.unchanged += 1
    for d in spaces:
        if d.body["metadata"]["name"] in live.namespaces:
            out.unchanged += 1
        else:
            out.namespaces.append(Change(CREATE, d.kind, d.key, d))
    wanted: set[Key] = set()
    settings = mirrors[0]  # the FleetConfig: its status names the commit applied in full, so it goes last
    for d in (Desired(settings.kind, settings.body), *mirrors[1:], *rendered):
        wanted.add(d.key)
        have = live.objects.get(d.key)
        owner = stamp.fleet_of(have) if have is not None else None
        if have is not None and owner != fleet:
            out.conflicts.append(f"{kinds.named(d.key)} belongs to fleet {owner}: left alone")
            continue
        target = out.rendered if d.kind in kinds.RENDERED else out.mirrors
        if d.key in guard:
            _guard(out, d, have, guard[d.key])
        elif d.kind == kinds.POD:
            _pod(out, d, have, live.nodes)
        elif have is None:
            target.append(Change(CREATE, d.kind, d.key, d))
        else:
            drifted = _hash(have) == _hash(d.body) and not holds(have, d.body)
            changed = drifted or _hash(have) != _hash(d.body)
            if changed:
                target.append(Change(CHANGE, d.kind, d.key, d, have, drifted=drifted))
            if d.status is not None and not _same_status(have, d.status):
                target.append(Change(STATUS, d.kind, d.key, d))
            elif not changed:
                out.unchanged += 1
    have = live.objects.get(settings.key)
    if have is None or (stamp.fleet_of(have) == fleet and not _same_status(have, settings.status or {})):
        out.commit = Change(STATUS, settings.kind, settings.key, settings)
    for key, have in sorted(live.objects.items()):
        if key not in wanted and key not in record.kept and stamp.fleet_of(have) == fleet:
            if key in guard:
                out.guarded.append(
                    f"{PRUNE} {kinds.named(key)}: journal entry {guard[key]} is not folded yet"
                )
                continue
            kind = kinds.of(have)
            failed = kind == kinds.POD and _node_failed(
                live.nodes, (have.get("spec") or {}).get("nodeName", "")
            )
            out.prune.append(Change(PRUNE, kind, key, live=have, now=failed is not None))
    for name in record.cordoned:
        node = live.nodes.get(name)
        if node is not None and not (node.get("spec") or {}).get("unschedulable"):
            out.cordons.append(Change(CORDON, kinds.NODE, ("Node", "", name)))
    return out


def _same_status(have: Obj, status: Obj) -> bool:
    """Whether the live object's status is `status` as JSON (a number as the server serves it back:
    Go writes a whole float, `1.0`, as `1`). Equal as Python values first (in C, and most are);
    then as JSON text, which tells `true` from `1`."""
    live, want = _served(have.get("status") or {}), _served(status)
    return live == want and _json(live) == _json(want)


def _json(value: Any) -> bytes:
    """`value` as sorted JSON; what orjson does not encode (a key that is not text) as `stamp` digests it."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return stamp.digest(value).encode()


def _served(value: Any) -> Any:
    """`value` as a JSON round trip through the API server gives it back: whole floats as integers."""
    if isinstance(value, dict):
        return {k: _served(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_served(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _guard(out: Changes, d: Desired, have: Obj | None, entry: str) -> None:
    """An object an unfolded journal entry protects: left as the agent made it (said when the
    record differs), so a swap the record does not hold yet is never undone."""
    same = (
        have is not None
        and not (have.get("metadata") or {}).get("deletionTimestamp")
        and _hash(have) == _hash(d.body)
        and (d.status is None or _same_status(have, d.status))
    )
    if same:
        out.unchanged += 1
        return
    action = CREATE if have is None else REPLACE if d.kind == kinds.POD else CHANGE
    out.guarded.append(f"{action} {kinds.named(d.key)}: journal entry {entry} is not folded yet")


def _pod(out: Changes, d: Desired, have: Obj | None, nodes: dict[str, Obj]) -> None:
    """A rendered pod: created, changed in place (labels), replaced (spec, or ended by a disruption:
    re-created in place, §7.6), or held (its node takes no new pod: the next pass moves it). A pod
    that completed or whose workload failed is left as it ended (the next pass's observation)."""
    name = d.body["spec"].get("nodeName", "")
    how, reason = observations.ending(have) if have is not None else ("", "")
    if have is None or how == observations.DISRUPTED:
        why = _node_refuses(nodes, name)
        if why is not None:
            out.held.append(f"{kinds.named(d.key)} not created: node {name} {why} (the next pass moves it)")
            return
        if have is not None:
            out.disrupted.append(f"{kinds.named(d.key)} ({reason})")
        out.rendered.append(Change(CREATE if have is None else REPLACE, d.kind, d.key, d, have))
    elif how:  # Completed, or WorkloadFailed: what the next pass observes, never run again
        out.unchanged += 1
    elif stamp.annotation(have, stamp.SPEC_HASH) != stamp.annotation(d.body, stamp.SPEC_HASH):
        out.rendered.append(Change(REPLACE, d.kind, d.key, d, have))
    elif not holds(have.get("spec") or {}, d.body.get("spec") or {}):  # a live spec edited by hand
        out.rendered.append(Change(REPLACE, d.kind, d.key, d, have, drifted=True))
    # the spec is held (just above): the rest of what was sent, its labels and annotations
    elif _hash(have) != _hash(d.body) or not holds(have, {k: v for k, v in d.body.items() if k != "spec"}):
        out.rendered.append(Change(CHANGE, d.kind, d.key, d, have, drifted=_hash(have) == _hash(d.body)))
    else:
        out.unchanged += 1


def _node_refuses(nodes: dict[str, Obj], name: str) -> str | None:
    """Why node `name` may take no new pod (§7.6: failed, cordoned, not Ready), or None."""
    failed = _node_failed(nodes, name)
    if failed is not None:
        return failed
    node = nodes[name]
    if (node.get("spec") or {}).get("unschedulable"):
        return "is cordoned"
    ready, _ = observations.ready_since(node.get("status") or {})
    return None if ready else "is not Ready"


def _node_failed(nodes: dict[str, Obj], name: str) -> str | None:
    """Why no kubelet runs pods on node `name` (gone, or out of service), or None."""
    node = nodes.get(name)
    if node is None or (node.get("metadata") or {}).get("deletionTimestamp"):
        return "is gone"
    taints = (node.get("spec") or {}).get("taints") or []
    if any(t.get("key") == observations.OUT_OF_SERVICE for t in taints):
        return "is out of service"
    return None


def _hash(obj: Obj) -> str | None:
    return stamp.annotation(obj, stamp.CONTENT_HASH)


_ZERO: tuple[Any, ...] = (
    [],
    {},
    "",
    False,
)  # what Go leaves out of an answer (omitempty): absent is the same


def holds(live: Any, sent: Any) -> bool:
    """Whether `live` still holds every field jobtree sent (`sent`): the same scalars, a dict's keys
    with values `live` holds, a list whose items `live` holds in order. What the server added
    (defaults, a toleration admission appended, metadata it owns) is ignored, and so is an empty
    value the server leaves out."""
    if live == sent:  # the whole subtree as sent (compared in C; most of an unchanged object)
        return True
    if isinstance(sent, dict):
        return isinstance(live, dict) and all(
            holds(live[k], v) if k in live else v in _ZERO for k, v in sent.items()
        )
    if isinstance(sent, list):
        if not isinstance(live, list):
            return False
        rest = iter(live)
        return all(any(holds(item, want) for item in rest) for want in sent)
    return False
