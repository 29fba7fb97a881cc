"""Rendered files by what they are made of (step 5 of a pass): a run's pods are rendered again only when what they come from changed.

A run's files under `rendered/` are a pure function of its open leases, its Run spec, the
cluster of each node those leases hold and, for a run filling spares, the fillers' grace
(`fill.gracePeriodSeconds`; `planner.manifests.render`). `inputs` digests exactly
that per run, naming the spec by the Git blob of the file it was validated from
(`validated.Spec.origins`), so a pass can tell an unchanged run from the digest the last pass kept
(`state.memo`) without rendering, checking or hashing its pods; `render` renders the rest and
checks their pods against their leases (§4.9), as a whole render would. A run with no such blob (a
spec handed over as documents: the simulator; a frozen run, rendered from no spec) has no digest
and is rendered every pass. Decides nothing; writes nothing.
"""

from __future__ import annotations

import hashlib
import marshal
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from planner import invariants, manifests
from planner.plan import Plan
from planner.reasons import Role
from planner.world import Lease
from reconciler.state import codec, layout

_FORMAT = b"rendered inputs 2"  # changes with what `inputs` digests, so an older digest never matches


def open_by_run(plan: Plan) -> dict[str, list[Lease]]:
    """Every open lease of the plan, by run."""
    out: dict[str, list[Lease]] = defaultdict(list)
    for lease in plan.open_leases:
        out[lease.run].append(lease)
    return out


def inputs(
    plan: Plan, leases: Mapping[str, list[Lease]], origins: Mapping[str, str]
) -> dict[str, bytes | None]:
    """Per run with open leases, a digest of what its rendered files are made of: its open leases
    (every field), the blob its spec came from, the cluster of each node, and the fillers' grace
    when it fills; None where the spec has no blob or the run is frozen (then it is rendered every
    pass)."""
    out: dict[str, bytes | None] = {}
    for run, held in leases.items():
        origin = origins.get(run)
        if origin is None or run in plan.frozen:
            out[run] = None
            continue
        rows = sorted(codec.lease_row(x) for x in held)
        nodes = sorted({(x.node, plan.clusters.get(x.node, "default")) for x in held})
        grace = plan.fill_grace if any(x.role == Role.BORROWED for x in held) else None
        data = marshal.dumps(
            (rows, origin, nodes, grace), 0
        )  # format 0: the value alone, the same bytes anywhere
        out[run] = hashlib.blake2b(_FORMAT + data, digest_size=16).digest()
    return out


def files_of(run: str, leases: Iterable[Lease], plan: Plan) -> set[str]:
    """The rendered files a run's open leases make: one per cluster its nodes are in."""
    return {layout.rendered_file(plan.clusters.get(x.node, "default"), run) for x in leases}


def render(
    plan: Plan, leases: Mapping[str, list[Lease]], runs: Iterable[str]
) -> tuple[dict[str, Any], list[str]]:
    """The pods and Services of `runs` (path -> manifest, as `Plan.manifests` gives them), and the
    §4.9 pod problems among them (an empty list: every open Active or Borrowed lease of those runs
    served by exactly one pod requesting its GPUs)."""
    chosen = [x for run in sorted(set(runs)) for x in leases.get(run, ())]
    pods = manifests.render(chosen, plan.specs, plan.clusters, plan.fill_grace)
    return pods, invariants.check_pods(chosen, pods)
