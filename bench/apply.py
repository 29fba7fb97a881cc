"""Time applying a generated fleet to real Kubernetes control planes: `python -m bench.apply [--scale 0.1]`.

The generated fleet (`bench.generate`, seed 7; scale 0.1 is 10,000 GPUs, 500 runs) is driven
against one control plane per cluster label (kube-apiserver, etcd and kwok on 127.0.0.1:
`tests.support.controlplane`), its nodes seeded as the inventory lists them, jobtree.yaml naming
each one's context, requests counted by each one's fault proxy (no fault armed). Every jobtree command runs as a subprocess over real HTTP, through the official client:

1. `jobtree reconcile --once --now T0` (observe, plan, commit; not applied): setup, timed for information;
2. first apply: `jobtree apply` onto the empty clusters (CRDs, namespaces, mirrors, pods, Services);
3. a second `jobtree apply` of the same commit (should send no write);
4. one run changed: a running run's template gets a new environment variable (its pods must be
   replaced), committed; the run is the first by name holding at most a quarter of the pods on each
   of its clusters, so step 5 deletes an ordinary run and not a cluster's only one (the mass-prune
   guard would rightly hold that until `--allow-mass-prune`), then `jobtree reconcile --once --now T0+5m --apply`;
5. one run deleted, then `jobtree reconcile --once --now T0+10m --apply` (its pods and mirrors pruned).

Requests are counted by the proxies' request logs (every retry included), and objects changed from
the verb's own report (create, change, status, replace, prune, cordon). Prints one JSON object;
each step is the median of `--repeat` rounds, each round on fresh control planes and a fresh repository.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench import generate
from tests.support.controlplane import started, write_kubeconfig

NOW, CHANGED_NOW, DELETED_NOW = generate.START, "2026-03-02T09:05:00Z", "2026-03-02T09:10:00Z"
_COUNTS = re.compile(r"(\d+) (create|change|status|replace|prune|cordon)\b")


def nodes(fleet: generate.Fleet) -> dict[str, list[dict[str, Any]]]:
    """Per cluster label, its nodes as Kubernetes shows them (named as the inventory names them)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for d in fleet.domains:
        for i in range(d["nodes"]):
            labels = {"region": d["region"], "fabric.domain": d["name"], "gpu.flavor": d["flavor"]}
            out.setdefault(d["cluster"], []).append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"{d['name']}-n{i:02d}", "labels": labels},
                    "status": {
                        "capacity": {"nvidia.com/gpu": str(d["gpusPerNode"])},
                        "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-02T08:00:00Z"}
                        ],
                    },
                }
            )
    return out


def repository(root: Path, fleet: generate.Fleet, clusters: list[str]) -> Path:
    """The generated fleet repository, its jobtree.yaml naming each cluster's context, committed."""
    files = generate.repo_files(fleet)
    files.pop("inventory/nodes.yaml")
    config = yaml.safe_load(files["jobtree.yaml"])
    config["spec"]["clusters"] = [{"name": c, "context": c} for c in clusters]
    files["jobtree.yaml"] = generate.dump(config)
    return committed(root / "fleet", files)


def committed(repo: Path, files: dict[str, str]) -> Path:
    """`files` written into a new repository at `repo` (branch `main`), in one commit."""
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "the fleet")
    return repo


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}  # fmt: skip
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def jobtree(env: dict[str, str], *args: str) -> tuple[float, str]:
    """Run a jobtree verb; its wall seconds and stdout (raises on a failure, with its stderr)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args], env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"jobtree {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, done.stdout


def changed_objects(stdout: str) -> int:
    """Objects the verb reports it changed (every cluster line: `N create, M prune, ...`)."""
    return sum(int(n) for line in stdout.splitlines() for n, _ in _COUNTS.findall(line.split("(")[0]))


def a_running_run(repo: Path) -> tuple[str, Path]:
    """A run that holds pods after the first pass and its spec file: the first by name whose pods are
    at most a quarter of the pods on every cluster it runs on, so deleting it is an ordinary deletion
    and not one that empties a cluster (which `massprune` holds until `--allow-mass-prune`)."""
    pods: dict[str, dict[str, int]] = {}  # cluster -> run -> its pods there
    for path in sorted((repo / "rendered").rglob("*.yaml")):
        count = sum(1 for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Pod")
        cluster = path.relative_to(repo / "rendered").parts[0]
        pods.setdefault(cluster, {})[f"{path.parent.name}/{path.stem}"] = count
    total = {cluster: sum(runs.values()) for cluster, runs in pods.items()}
    for run in sorted({r for runs in pods.values() for r in runs}):
        if all(runs[run] <= total[c] / 4 for c, runs in pods.items() if runs.get(run)):
            namespace, name = run.split("/")
            return run, repo / "runs" / namespace / f"{name}.yaml"
    raise RuntimeError("no running run holds at most a quarter of the pods on each of its clusters")


def one_round(fleet: generate.Fleet) -> dict[str, Any]:
    by_cluster = nodes(fleet)
    with tempfile.TemporaryDirectory(prefix="bench-apply-") as tmp:
        root = Path(tmp)
        with started(*sorted(by_cluster)) as servers:
            for name, server in servers.items():
                server.seed(*by_cluster[name])
            env = {**os.environ, "KUBECONFIG": str(write_kubeconfig(root / "kubeconfig", servers, None))}
            repo = repository(root, fleet, sorted(servers))
            out: dict[str, Any] = {"clusters": len(servers)}

            def step(key: str, *args: str) -> None:
                marks = {n: s.requests.mark() for n, s in servers.items()}
                seconds, stdout = jobtree(env, *args)
                sent = [r for n, s in servers.items() for r in s.requests.since(marks[n])]
                writes = sum(1 for r in sent if r.is_write)
                changed = changed_objects(stdout)
                out[key] = {
                    "seconds": round(seconds, 2),
                    "writes": writes,
                    "reads": len(sent) - writes,
                    "changed": changed,
                    "writesPerChanged": round(writes / changed, 2) if changed else None,
                }

            step("reconcile", "reconcile", str(repo), "--once", "--now", NOW, "--quiet")
            step("first", "apply", str(repo), "--quiet")
            out["objects"] = sum(len(s.list("v1", "Pod")) for s in servers.values())
            step("again", "apply", str(repo), "--quiet")
            run, path = a_running_run(repo)
            doc = yaml.safe_load(path.read_text())
            template = doc["spec"].setdefault("template", {})
            template["env"] = [*template.get("env", []), {"name": "BENCH_CHANGED", "value": "1"}]
            path.write_text(generate.dump(doc))
            git(repo, "commit", "-q", "-am", f"{run}: one more env var")
            step("changed", "reconcile", str(repo), "--once", "--now", CHANGED_NOW, "--apply", "--quiet")
            out["changedRun"] = run
            path.unlink()
            git(repo, "commit", "-q", "-am", f"{run}: deleted")
            step("deleted", "reconcile", str(repo), "--once", "--now", DELETED_NOW, "--apply", "--quiet")
            return out


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per step, the round with the median wall time, with the range of all rounds."""
    out: dict[str, Any] = {"clusters": rounds[0]["clusters"], "pods": rounds[0]["objects"],
                           "changedRun": rounds[0]["changedRun"]}  # fmt: skip
    for key in ("reconcile", "first", "again", "changed", "deleted"):
        ranked = sorted((r[key] for r in rounds), key=lambda s: s["seconds"])
        pick = dict(ranked[(len(ranked) - 1) // 2])
        pick["range"] = [ranked[0]["seconds"], ranked[-1]["seconds"]]
        pick["writesSpread"] = sorted({s["writes"] for s in ranked})
        out[key] = pick
    out["rounds"] = len(rounds)
    return out


STEPS = (
    ("first", "apply, first (empty clusters)", "-"),
    ("again", "apply, again (same commit)", "0 writes"),
    ("changed", "reconcile --apply, one run changed", "<= 2 writes per changed object"),
    ("deleted", "reconcile --apply, one run deleted", "<= 2 writes per changed object"),
)


def rows(result: dict[str, Any]) -> list[dict[str, str]]:
    """The `make bench` table rows of a result (`bench.run.Row` fields)."""
    out = []
    where = f"{result['gpus']:,} GPUs, {result['runs']} runs, {result['clusters']} control planes"
    for key, name, target in STEPS:
        step = result[key]
        low, high = step["range"]
        spread = f" ({low:.2f}–{high:.2f})" if result["rounds"] > 1 else ""
        per = step["writesPerChanged"]
        if key == "again":
            verdict = "meets target" if step["writes"] == 0 else "MISSES target"
        elif key == "first":
            verdict = "measured (no target)"
        else:
            verdict = "meets target" if per is not None and per <= 2 else "MISSES target"
        note = f"{where}; {step['changed']:,} objects changed, {step['reads']:,} reads"
        if key == "changed":
            note += f"; the run changed: {result['changedRun']} (its pods replaced)"
        out.append(
            {
                "name": name,
                "target": target,
                "wall": f"{step['seconds']:.2f} s{spread}",
                "throughput": f"{step['writes']:,} writes" + (f", {per} per changed object" if per else ""),
                "verdict": verdict,
                "note": note,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.apply", description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    fleet = generate.build(args.seed, args.scale)
    rounds = [one_round(fleet) for _ in range(max(1, args.repeat))]
    result = median_of(rounds) | {"gpus": fleet.gpus, "runs": len(fleet.runs), "scale": args.scale}
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
