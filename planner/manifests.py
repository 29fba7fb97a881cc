"""Manifests: pod and headless Service dicts for open leases — the one place Kubernetes shapes live.

Pure: builds plain dicts from leases and run specs. Applying them is the reconciler's job. Every
name derived here (pod, `hostname`, Service, `subdomain`) is one Kubernetes accepts whatever the
node and run names are (DESIGN §7.6): a DNS-1123 label (a Service's: DNS-1035), shortened or
cleaned when needed with a stable hash suffix of what it was made from (`dns_label`).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections import defaultdict
from typing import Any

from planner.reasons import Role
from planner.world import Lease
from schemas import GROUP
from schemas.podtemplate import (
    DEFAULT_IMAGE,
    ENV_PREFIX,
    GPU_RESOURCE,
    PodTemplate,
    ShortTemplate,
    gpu_container,
    owned_key,
)
from schemas.run import Run

SPARE_IMAGE = DEFAULT_IMAGE  # a spare pod holds its GPUs' place: pause, on its own entrypoint
FILL_GRACE = 5  # fill.gracePeriodSeconds' default
LABEL_MAX = 63
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def dns_label(text: str, *, letter_first: bool = False) -> str:
    """`text` when it is a DNS-1123 label already (DNS-1035 with `letter_first`: a Service's name),
    else a label made from it: lowercased, every other character run a `-`, a leading `r` where a
    letter must come first, cut to leave room for `-` and 8 hex digits of `text`'s SHA-256, so two
    different texts never make one name and the same text always makes the same one."""
    valid = _DNS1035_LABEL if letter_first else _DNS1123_LABEL
    if len(text) <= LABEL_MAX and valid.fullmatch(text):
        return text
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if letter_first and not base[:1].isalpha():
        base = f"r{base}"
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    base = base[: LABEL_MAX - len(digest) - 1].rstrip("-")
    return f"{base}-{digest}" if base else f"r{digest}"


def pod_name(run: str, group: int, node: str, role: str) -> str:
    """The pod of `run`'s group on `node` (and its `hostname`): `<run>-g<group>-[spare-]<node>`,
    made a DNS-1123 label (a dotted or long node name, `ip-10-0-1-23.ec2.internal`, is shortened)."""
    name = run.split("/", 1)[1]
    tag = "spare-" if role == Role.SPARE else ""
    return dns_label(f"{name}-g{group}-{tag}{node.lower()}")


def service_name(run: str) -> str:
    """The headless Service of `run` (`namespace/name`), and its pods' `subdomain`: a DNS-1035 label."""
    return dns_label(run.split("/", 1)[1], letter_first=True)


def render(
    leases: list[Lease], specs: dict[str, Run], clusters: dict[str, str], fill_grace: int = FILL_GRACE
) -> dict[str, dict[str, Any]]:
    """Path `<cluster>/<namespace>/<kind>-<name>.yaml` -> manifest, for every open lease's pod; a
    filler's (Borrowed) with `fill_grace` as its termination grace (fill.gracePeriodSeconds, §7.6)."""
    pods: dict[tuple[str, int, str, str], list[Lease]] = defaultdict(list)
    for lease in leases:
        if lease.open:
            pods[(lease.run, lease.group, lease.node, str(lease.role))].append(lease)
    by_run: dict[str, list[tuple[int, str, str, list[Lease]]]] = defaultdict(list)
    for (run, group, node, role), ls in pods.items():
        by_run[run].append((group, node, role, ls))
    out: dict[str, dict[str, Any]] = {}
    for run in sorted(by_run):
        ns, name = run.split("/", 1)
        spec = specs.get(run)
        entries = sorted(by_run[run], key=lambda e: (e[0], e[2] == Role.SPARE, e[1]))
        active = [e for e in entries if e[2] != Role.SPARE]
        world = sum(sum(x.gpus for x in e[3]) for e in active)
        rank_base = _rank_bases(active, spec)
        cluster = None
        for group, node, role, ls in entries:
            cluster = clusters.get(node, "default")
            pod = _pod(run, group, node, role, ls, spec, world, rank_base.get((group, node), 0))
            if role == Role.BORROWED:  # its GPUs are a spare's: free once it stopped, within this grace
                pod["spec"]["terminationGracePeriodSeconds"] = fill_grace
            out[f"{cluster}/{ns}/pod-{pod['metadata']['name']}.yaml"] = pod
        if cluster is not None:
            out[f"{cluster}/{ns}/service-{name}.yaml"] = _service(ns, name, service_name(run))
    return out


def _rank_bases(
    active: list[tuple[int, str, str, list[Lease]]], spec: Run | None
) -> dict[tuple[int, str], int]:
    """Stable ranks: group i starts at i × groupGPUs (or after the groups before it), nodes by name."""
    group_size = spec.spec.locality.groupGPUs if spec is not None else None
    if group_size is None and spec is not None and spec.spec.malleable is not None:
        group_size = spec.spec.malleable.stepGPUs
    out: dict[tuple[int, str], int] = {}
    base = 0
    current = None
    offset = 0
    for group, node, _, ls in sorted(active, key=lambda e: (e[0], min(x.start for x in e[3]), e[1])):
        if group != current:
            current, offset = group, 0
            if group_size is not None:
                base = group * group_size
        ranks = [x.rank for x in ls if x.rank is not None]
        out[(group, node)] = min(ranks) if len(ranks) == len(ls) else base + offset  # recorded at bind
        n = sum(x.gpus for x in ls)
        offset += n
        if group_size is None:
            base += n
            offset -= n
    return out


def _pod(
    run: str,
    group: int,
    node: str,
    role: str,
    leases: list[Lease],
    spec: Run | None,
    world: int,
    rank_base: int,
) -> dict[str, Any]:
    ns, name = run.split("/", 1)
    service = service_name(run)  # the headless Service, and the pod's subdomain
    gpus = sum(x.gpus for x in leases)
    template = spec.spec.template if spec is not None else None
    full = template if isinstance(template, PodTemplate) else None
    short = template if isinstance(template, ShortTemplate) else None
    image = short.image if short is not None else DEFAULT_IMAGE
    first = sorted(leases, key=lambda x: x.name)[0]
    env = [
        {"name": "JOBTREE_RUN", "value": run},
        {"name": "JOBTREE_GROUP_INDEX", "value": str(group)},
        {"name": "JOBTREE_RANK_BASE", "value": str(rank_base)},
        {"name": "JOBTREE_LOCAL_GPUS", "value": str(gpus if role != Role.SPARE else 0)},
        {"name": "JOBTREE_SERVICE", "value": f"{service}.{ns}.svc"},
    ]
    if spec is not None and spec.spec.malleable is not None:
        env += [
            {"name": "JOBTREE_MIN_WORLD_SIZE", "value": str(spec.spec.malleable.minTotalGPUs)},
            {"name": "JOBTREE_MAX_WORLD_SIZE", "value": str(spec.spec.malleable.maxTotalGPUs)},
        ]
    else:
        env.append({"name": "JOBTREE_WORLD_SIZE", "value": str(world)})
    if short is not None:  # jobtree's own variables win: a template's JOBTREE_* is dropped (validate warns)
        env += [{"name": e.name, "value": e.value} for e in short.env if not e.name.startswith(ENV_PREFIX)]
    container: dict[str, Any] = {
        "name": "workload" if role != Role.SPARE else "spare",
        "image": image if role != Role.SPARE else SPARE_IMAGE,
        "env": env,
    }
    body: dict[str, Any] = {"containers": [container]}
    if role == Role.SPARE:  # pause's own entrypoint (no command): it starts anywhere and ends at once
        if full is not None and full.spec.get("tolerations"):
            body["tolerations"] = copy.deepcopy(full.spec["tolerations"])  # to start where the workload may
    elif full is not None:
        body = _from_template(full, env, gpus)
    else:
        if short is not None and short.command:
            container["command"] = list(short.command)
        if short is not None and short.args:
            container["args"] = list(short.args)
        container["resources"] = {"limits": {GPU_RESOURCE: gpus}, "requests": {GPU_RESOURCE: gpus}}
    pname = _pod_name(run, group, node, role)
    labels = {
        f"{GROUP}/run": name,
        f"{GROUP}/group-index": str(group),
        f"{GROUP}/role": role,
        f"{GROUP}/lease": first.name[:LABEL_MAX].rstrip("-_."),
        "app.kubernetes.io/managed-by": "jobtree",
    }
    annotations = {f"{GROUP}/leases": ",".join(sorted(x.name for x in leases))}
    if full is not None and role != Role.SPARE:
        labels = {**_theirs(full.metadata.labels), **labels}
        annotations = {**_theirs(full.metadata.annotations), **annotations}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pname, "namespace": ns, "labels": labels, "annotations": annotations},
        "spec": {
            **body,
            "nodeName": node,
            "hostname": pname,
            "subdomain": service,
            "restartPolicy": "Never",
        },
    }


def _theirs(pairs: dict[str, str]) -> dict[str, str]:
    """A template's labels or annotations without the keys jobtree sets (validate warns of those)."""
    return {k: v for k, v in pairs.items() if not owned_key(k)}


def _from_template(template: PodTemplate, env: list[dict[str, str]], gpus: int) -> dict[str, Any]:
    """A full template's pod spec, with jobtree's part set in the GPU container: its JOBTREE_* variables
    first (the template's own after them, minus any JOBTREE_* it set) and its GPUs as request and limit.
    The fields jobtree sets on every pod (`podtemplate.OWNED_SPEC`) are the caller's to overwrite. A copy:
    the parsed template never changes."""
    body = copy.deepcopy(template.spec)
    container = body["containers"][gpu_container(template)]
    theirs = [e for e in container.get("env", []) if not str(e.get("name", "")).startswith(ENV_PREFIX)]
    container["env"] = [*env, *theirs]
    resources = container.setdefault("resources", {})
    for part in ("limits", "requests"):
        resources[part] = {**(resources.get(part) or {}), GPU_RESOURCE: gpus}
    return body


_pod_name = pod_name


def _service(ns: str, name: str, service: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service,
            "namespace": ns,
            "labels": {f"{GROUP}/run": name, "app.kubernetes.io/managed-by": "jobtree"},
        },
        "spec": {"clusterIP": "None", "selector": {f"{GROUP}/run": name}, "publishNotReadyAddresses": True},
    }


def run_of(manifest: dict[str, Any]) -> str:
    """`namespace/name` of the run a rendered pod or Service belongs to."""
    meta = manifest["metadata"]
    return f"{meta['namespace']}/{meta['labels'][f'{GROUP}/run']}"


def keep_frozen(
    rendered: dict[str, dict[str, Any]], frozen: frozenset[str], last: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """`rendered`, but each manifest of a frozen run (spec invalid now, so rendered from none) as it
    was `last` rendered at the same path: the workload keeps running as its last valid spec said.

    A frozen run starts no lease, so its paths are among the last ones; only its closed leases'
    pods are gone.
    """
    if not frozen:
        return rendered
    return {path: last.get(path, m) if run_of(m) in frozen else m for path, m in rendered.items()}


def pod_gpus(manifest: dict[str, Any]) -> int:
    """The GPUs a pod asks for: the GPU limit of its containers (only the GPU container has one)."""
    return sum(
        int(c.get("resources", {}).get("limits", {}).get(GPU_RESOURCE, 0))
        for c in manifest["spec"]["containers"]
    )
