"""Benchmark fleet generator: a seeded 100,000-GPU fleet written as a Scenario and as a fleet repo.

Outside the pure layers (it uses `random.Random(seed)`); it never plans anything, it only writes
valid Budgets, Runs, tenants and inventory so `jobtree simulate` and `jobtree reconcile` have
something large to chew on. Same seed and scale, same bytes.
"""

from __future__ import annotations

import argparse
import functools
import math
import random
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

try:
    from yaml import CSafeDumper as Dumper
except ImportError:  # pragma: no cover
    from yaml import SafeDumper as Dumper  # type: ignore[assignment]  # the pure-Python dumper where libyaml is missing

API = "rq.davidlangworthy.io/v1"
FLAVOR = "H100-80GB"
START = "2026-03-02T09:00:00Z"
NODES_PER_DOMAIN = 50
GPUS_PER_NODE = 8
FULL_DOMAINS = 250
FULL_TEAMS = 200
FULL_RUNS = 5000
# (region index, region label, clusters in that region)
REGIONS = [(1, "us-west", 3), (2, "us-east", 3), (3, "eu-central", 2)]
DIVISIONS = ["vision", "language", "speech", "robotics", "infra", "research", "safety", "applied"]
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
SCENARIO_FILE = "fleet-100k.scenario.yaml"
CONTENDED_FILE = "fleet-100k-contended.scenario.yaml"
REPO_DIR = "fleet-100k-repo"
SURGE = ("surge", "org:acme:surge")


@dataclass(slots=True)
class Team:
    owner: str
    namespace: str
    level: int  # 0 root, 1 division, 2 group, 3 team
    parents: list[str]
    region: int  # index into the cluster table's regions
    cluster: tuple[str, str]  # (region label, cluster label)
    envelopes: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class Fleet:
    domains: list[dict[str, Any]]
    clusters: list[tuple[str, str]]
    teams: list[Team]
    budgets: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    surge: list[dict[str, Any]]  # the contended variant's +20m batch (a Budget, then Runs)

    @property
    def gpus(self) -> int:
        return sum(d["nodes"] * d["gpusPerNode"] for d in self.domains)


def _scaled(full: int, scale: float, minimum: int) -> int:
    return max(minimum, round(full * scale))


def _domains(scale: float) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    clusters = [(r, label, c) for r, label, n in REGIONS for c in range(1, n + 1)]
    count = _scaled(FULL_DOMAINS, scale, 1)
    out: list[dict[str, Any]] = []
    for i in range(count):
        r, label, c = clusters[i * len(clusters) // count]
        out.append(
            {
                "name": f"r{r}c{c}d{i:03d}",
                "region": label,
                "cluster": f"{label}-c{c}",
                "flavor": FLAVOR,
                "nodes": NODES_PER_DOMAIN,
                "gpusPerNode": GPUS_PER_NODE,
            }
        )
    used: list[tuple[str, str]] = []
    for d in out:
        if (d["region"], d["cluster"]) not in used:
            used.append((d["region"], d["cluster"]))
    return out, used


def _teams(rng: random.Random, scale: float, clusters: list[tuple[str, str]]) -> list[Team]:
    total = _scaled(FULL_TEAMS, scale, 12)
    n_div = min(len(DIVISIONS), _scaled(8, scale, 2))
    n_grp = max(n_div, _scaled(24, scale, 3))
    n_team = total - 1 - n_div - n_grp
    regions = sorted({r for r, _ in clusters}, key=lambda r: [c[0] for c in clusters].index(r))
    root = Team("org:acme", "acme", 0, [], 0, clusters[0])
    teams = [root]
    divs = []
    for i in range(n_div):
        region = regions[i % len(regions)]
        home = [c for c in clusters if c[0] == region]
        div = Team(f"org:acme:{DIVISIONS[i]}", DIVISIONS[i], 1, [root.owner], i % len(regions), home[0])
        divs.append(div)
    teams += divs
    groups = []
    for i in range(n_grp):
        div = divs[i % n_div]
        home = [c for c in clusters if c[0] == div.cluster[0]]
        k = i // n_div + 1
        grp = Team(
            f"{div.owner}:g{k}", f"{div.namespace}-g{k}", 2, [div.owner], div.region, home[k % len(home)]
        )
        groups.append(grp)
    teams += groups
    for i in range(n_team):
        grp = groups[i % n_grp]
        home = [c for c in clusters if c[0] == grp.cluster[0]]
        k = i // n_grp + 1
        parents = [grp.owner]
        if i % 61 == 7 and n_grp > 1:  # a couple of extra DAG parents: a group of another division
            other = groups[(i + 1) % n_grp]
            if other.owner != grp.owner:
                parents.append(other.owner)
        teams.append(
            Team(
                f"{grp.owner}:t{k:02d}",
                f"{grp.namespace}-t{k:02d}",
                3,
                parents,
                grp.region,
                home[(k + rng.randrange(2)) % len(home)],
            )
        )
    return teams


def _round8(x: float) -> int:
    return max(8, int(x) // 8 * 8)


def _budgets(rng: random.Random, teams: list[Team], gpus: int) -> list[dict[str, Any]]:
    """Envelopes summing to about the fleet's supply: leaves 70%, groups 15%, divisions 8%, root 5%."""
    shares = {0: 0.05, 1: 0.08, 2: 0.15, 3: 0.70}
    per_level = {lvl: sum(1 for t in teams if t.level == lvl) for lvl in shares}
    budgets = []
    for idx, t in enumerate(teams):
        base = gpus * shares[t.level] / max(1, per_level[t.level])
        weight = rng.uniform(0.5, 1.5)
        conc = _round8(base * weight)
        region, cluster = t.cluster
        envs: list[dict[str, Any]] = []
        if t.level == 0:
            envs.append(
                {"name": "global-h100", "flavor": FLAVOR, "selector": {"region": "*"}, "concurrency": conc}
            )
        elif t.level == 1:
            envs.append(
                {
                    "name": f"{region}-h100",
                    "flavor": FLAVOR,
                    "selector": {"region": region},
                    "concurrency": conc,
                }
            )
        else:
            main = _round8(conc * 0.75) if t.level == 3 and idx % 3 == 0 else conc
            envs.append(
                {
                    "name": f"{cluster}-h100",
                    "flavor": FLAVOR,
                    "selector": {"region": region, "cluster": cluster},
                    "concurrency": main,
                }
            )
            if main != conc:
                envs.append(
                    {
                        "name": f"{region}-h100",
                        "flavor": FLAVOR,
                        "selector": {"region": region},
                        "concurrency": _round8(conc - main),
                    }
                )
        env = envs[0]
        if t.level >= 2 and idx % 11 == 3:
            env["sharing"] = "none"
        elif t.level >= 1 and idx % 5 == 1:  # lenders
            to = (
                ["org:acme:*"]
                if idx % 2
                else [f"{t.owner.rsplit(':', 1)[0]}:*" if t.level == 3 else f"{t.owner}:*"]
            )
            env["lending"] = {"allow": True, "to": to, "maxConcurrency": _round8(env["concurrency"] * 0.5)}
            if idx % 4 == 1:
                env["lending"]["maxGPUHours"] = float(env["concurrency"] * 24)
        if t.level == 3 and idx % 17 == 5:  # a capped, windowed burst envelope (opens after the bench)
            envs.append(
                {
                    "name": "burst-h100",
                    "flavor": FLAVOR,
                    "selector": {"region": region},
                    "concurrency": _round8(conc * 0.25),
                    "maxGPUHours": float(conc * 12),
                    "start": "2026-03-02T13:00:00Z",
                    "end": "2026-03-09T13:00:00Z",
                }
            )
        elif t.level == 3 and idx % 17 == 9:  # a window that is open for the whole bench
            envs.append(
                {
                    "name": "quarter-h100",
                    "flavor": FLAVOR,
                    "selector": {"region": region, "cluster": cluster},
                    "concurrency": _round8(conc * 0.25),
                    "maxGPUHours": float(conc * 500),
                    "start": "2026-01-01T00:00:00Z",
                    "end": "2026-04-01T00:00:00Z",
                }
            )
        t.envelopes = envs
        spec: dict[str, Any] = {"owner": t.owner}
        if t.parents:
            spec["parents"] = list(t.parents)
        spec["envelopes"] = envs
        budgets.append({"apiVersion": API, "kind": "Budget", "metadata": {"name": t.namespace}, "spec": spec})
    return budgets


def _admits(pattern: str, owner: str) -> bool:
    return pattern == "*" or pattern == owner or (pattern.endswith("*") and owner.startswith(pattern[:-1]))


def _lenders_for(owner: str, teams: list[Team]) -> list[str]:
    out: list[str] = []
    for t in teams:
        if t.owner == owner:
            continue
        for env in t.envelopes:
            lending = env.get("lending")
            if lending and lending["allow"] and any(_admits(p, owner) for p in lending["to"]):
                out.append(t.owner)
                break
    return out


def _grouped(rng: random.Random, limit: int) -> tuple[int, int]:
    sizes = [
        (s, w)
        for s, w in ((16, 24), (32, 26), (64, 20), (128, 15), (256, 10), (512, 5))
        if s <= max(16, limit)
    ]
    total = rng.choices([s for s, _ in sizes], weights=[w for _, w in sizes])[0]
    group = rng.choice([g for g in (8, 16, 32, 64) if g <= total])
    return total, group


def _run(
    rng: random.Random, i: int, team: Team, lenders_of: Callable[[str], list[str]], limit: int
) -> dict[str, Any]:
    """One Run; `limit` keeps single runs to a quarter of a small (scaled-down) fleet; `lenders_of`
    the owners whose envelopes lend to an owner (`_lenders_for`)."""
    shape = rng.choices(["plain", "grouped", "malleable", "opportunistic"], weights=[38, 36, 22, 4])[0]
    spec: dict[str, Any] = {"owner": team.owner}
    prefix = {"plain": "dev", "grouped": "train", "malleable": "elastic", "opportunistic": "scavenge"}[shape]
    if shape in ("plain", "opportunistic"):
        spec["resources"] = {"gpuType": FLAVOR, "totalGPUs": rng.randint(1, 8)}
        if shape == "opportunistic":
            spec["opportunistic"] = True
    else:
        if shape == "grouped":
            total, group = _grouped(rng, limit)
            spec["resources"] = {"gpuType": FLAVOR, "totalGPUs": total}
            spec["locality"] = {"groupGPUs": group}
            if rng.random() < 0.05:
                spec["locality"]["allowCrossGroupSpread"] = False
        else:
            group = rng.choice([8, 16, 32])
            step = group * rng.choice([1, 1, 2])
            hi = rng.choice([3, 4, 6, 8, 12])
            while step * hi > max(2 * step, min(512, limit)):
                hi //= 2
            hi = max(hi, 2)
            lo = rng.randint(1, hi - 1)
            total = step * rng.randint(lo, hi)
            desired = step * rng.randint(total // step, hi)
            spec["resources"] = {"gpuType": FLAVOR, "totalGPUs": total}
            spec["locality"] = {"groupGPUs": group}
            malleable = {"minTotalGPUs": step * lo, "maxTotalGPUs": step * hi, "stepGPUs": step}
            if desired != step * hi:
                malleable["desiredTotalGPUs"] = desired
            spec["malleable"] = malleable
        if rng.random() < 0.15:
            spec["sparesPerGroup"] = rng.randint(1, min(8, spec["locality"]["groupGPUs"]))
        if rng.random() < 0.3:
            spec["runtime"] = {"checkpoint": rng.choice(["15m", "30m", "1h"])}
        lenders = lenders_of(team.owner)
        if lenders and rng.random() < 0.12:
            sponsors = rng.sample(lenders, min(len(lenders), rng.randint(1, 2)))
            borrow = _round8(spec["resources"]["totalGPUs"] * rng.choice([0.25, 0.5, 1.0]))
            spec["funding"] = {"allowBorrow": True, "maxBorrowGPUs": borrow, "sponsors": sponsors}
        if rng.random() < 0.05:
            spec["template"] = {
                "image": IMAGE,
                "command": ["torchrun", "train.py"],
                "env": [{"name": "RUN_INDEX", "value": str(i)}],
            }
    return {
        "apiVersion": API,
        "kind": "Run",
        "metadata": {"name": f"{prefix}-{i:04d}", "namespace": team.namespace},
        "spec": spec,
    }


def _runs(rng: random.Random, scale: float, teams: list[Team], gpus: int) -> list[dict[str, Any]]:
    count = _scaled(FULL_RUNS, scale, 30)
    limit = gpus // 4
    owners = [t for t in teams if t.level == 3] * 9 + [t for t in teams if t.level == 2]
    # an owner's lenders worked out once (a scan of every team per run made the 1M fleet quadratic)
    lenders_of = functools.cache(functools.partial(_lenders_for, teams=teams))
    runs = [_run(rng, i, rng.choice(owners), lenders_of, limit) for i in range(count)]
    by_ns: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_ns.setdefault(run["metadata"]["namespace"], []).append(run)
    # A few `after` chains (a job forest): each link waits for the previous run of its namespace.
    chained = 0
    for ns in sorted(by_ns):
        members = by_ns[ns]
        if len(members) >= 3 and chained < max(2, count // 100):
            for prev, nxt in zip(members[:2], members[1:3], strict=True):
                nxt["spec"]["after"] = [prev["metadata"]["name"]]
            chained += 2
    return runs


def _surge(
    scale: float, clusters: list[tuple[str, str]], domains: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A funded batch aimed at one (full) cluster: it must reserve, and activating it needs the resolver."""
    region, cluster = clusters[0]
    capacity = sum(d["nodes"] * d["gpusPerNode"] for d in domains if d["cluster"] == cluster)
    size = max(64, min(512, capacity // 2 // 64 * 64))
    count = max(1, min(12, round(capacity * 0.5 / size)))
    ns, owner = SURGE
    budget = {
        "apiVersion": API,
        "kind": "Budget",
        "metadata": {"name": ns},
        "spec": {
            "owner": owner,
            "parents": ["org:acme"],
            "envelopes": [
                {
                    "name": f"{cluster}-h100",
                    "flavor": FLAVOR,
                    "selector": {"region": region, "cluster": cluster},
                    "concurrency": size * count,
                    "sharing": "none",
                }
            ],
        },
    }
    runs = [
        {
            "apiVersion": API,
            "kind": "Run",
            "metadata": {"name": f"surge-{i:02d}", "namespace": ns},
            "spec": {
                "owner": owner,
                "resources": {"gpuType": FLAVOR, "totalGPUs": size},
                "locality": {"groupGPUs": 64},
            },
        }
        for i in range(count)
    ]
    return [budget, *runs]


def build(seed: int = 7, scale: float = 1.0) -> Fleet:
    rng = random.Random(seed)
    domains, clusters = _domains(scale)
    gpus = sum(d["nodes"] * d["gpusPerNode"] for d in domains)
    teams = _teams(rng, scale, clusters)
    budgets = _budgets(rng, teams, gpus)
    runs = _runs(rng, scale, teams, gpus)
    return Fleet(domains, clusters, teams, budgets, runs, _surge(scale, clusters, domains))


def tenants(fleet: Fleet) -> list[dict[str, str]]:
    rows = [{"namespace": t.namespace, "owner": t.owner} for t in fleet.teams]
    return [*rows, {"namespace": SURGE[0], "owner": SURGE[1]}]


def demand(fleet: Fleet) -> int:
    total = 0
    for run in fleet.runs:
        spec = run["spec"]
        width = spec["resources"]["totalGPUs"]
        group = spec.get("locality", {}).get("groupGPUs")
        spares = spec.get("sparesPerGroup", 0) * (math.ceil(width / group) if group else 0)
        total += width + spares
    return total


def dump(data: Any) -> str:
    return yaml.dump(
        data, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=1000, allow_unicode=True
    )


def scenario(fleet: Fleet, contended: bool) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"at": "+0m", "apply": [*fleet.budgets, *fleet.runs]}]
    if contended:
        steps.append({"at": "+20m", "apply": fleet.surge})
    return {
        "apiVersion": API,
        "kind": "Scenario",
        "metadata": {"name": "fleet-100k-contended" if contended else "fleet-100k"},
        "spec": {
            "start": START,
            "fleet": {"tenants": tenants(fleet)},
            "inventory": {"domains": fleet.domains},
            "steps": steps,
            "until": "+40m" if contended else "+1m",
        },
    }


def repo_files(fleet: Fleet) -> dict[str, str]:
    """Path -> text of the fleet repository (spec only; `state/` is the reconciler's)."""
    files = {
        "jobtree.yaml": dump(
            {
                "apiVersion": API,
                "kind": "FleetConfig",
                "metadata": {"name": "acme"},
                "spec": {"tenants": tenants(fleet)},
            }
        ),
        "inventory/nodes.yaml": dump({"domains": fleet.domains}),
    }
    for budget in fleet.budgets:
        files[f"budgets/{budget['metadata']['name']}.yaml"] = dump(budget)
    for run in fleet.runs:
        meta = run["metadata"]
        files[f"runs/{meta['namespace']}/{meta['name']}.yaml"] = dump(run)
    return dict(sorted(files.items()))


def write(out: Path, seed: int = 7, scale: float = 1.0, contended: bool = False) -> Fleet:
    fleet = build(seed, scale)
    out.mkdir(parents=True, exist_ok=True)
    (out / SCENARIO_FILE).write_text(dump(scenario(fleet, contended=False)))
    if contended:
        (out / CONTENDED_FILE).write_text(dump(scenario(fleet, contended=True)))
    repo = out / REPO_DIR
    if repo.exists():
        shutil.rmtree(repo)
    for path, text in repo_files(fleet).items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return fleet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument(
        "--scale", type=float, default=1.0, help="shrink everything proportionally (0.02 -> ~2,000 GPUs)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--contended", action="store_true", help=f"also write {CONTENDED_FILE} (+20m surge batch)"
    )
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error("--scale must be positive")
    fleet = write(args.out, args.seed, args.scale, args.contended)
    print(
        f"{fleet.gpus} GPUs in {len(fleet.domains)} domains, {len(fleet.teams)} teams, {len(fleet.runs)} runs, "
        f"demand {demand(fleet)} GPUs ({demand(fleet) / fleet.gpus:.2f}x supply) -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
