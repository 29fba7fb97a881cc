"""Time jobtree against one control plane of 10,000 realistic GPU nodes: `python -m bench.cluster10k [--scale 0.8]`.

The generated fleet (`bench.generate`, seed 7; scale 0.8 is 200 fabric domains × 50 nodes × 8
GPUs: 10,000 nodes, 80,000 GPUs, 4,000 runs) laid out as the template repository lays a fleet out
(jobtree.yaml, budgets/, runs/<namespace>/), every run's pods from the template's full pod template
(`fleet-repo-template/runs/rai-llm/pretrain-64.yaml`: an NCCL-style container with requests,
/dev/shm, tolerations, a securityContext), all on one cluster: one control plane on 127.0.0.1
(kube-apiserver, etcd and kwok, `tests.support.controlplane`) whose nodes are `bench.gpunodes`'s
(~20 KB each: GFD and NFD labels, annotations, conditions, 50 images), created in parallel through
the official client, read through `topologyLabels` as a real cluster's are. Envelopes select their
region only (the generator's eight cluster labels are one cluster here). Every jobtree command runs
as a subprocess, its peak RSS its own (`wait4`):

1. the nodes created (timed);
2. `jobtree reconcile --once --now T0`: observe the 10,000 nodes, plan, commit (timed for information);
3. first apply: `jobtree apply` onto the empty cluster (pods/s: pods created over its wall time);
4. `jobtree reconcile --once --now T0 --apply` once, to take in what the cluster now shows (pods
   Running), then the steady-state pass, timed: the same command again, nothing changed (observe +
   plan + apply, 0 writes expected; the nodes and pods listed once, by observe, apply comparing with
   that list);
5. the long-lived reconciler (`bench.longlived`: `reconcile --interval`'s `Kept` and watches, at
   the same instant): one process, `LONG_LIVED` passes one after the other; the first lists and
   starts the watches (sync), the later ones read the nodes and pods from the caches. Each pass's
   wall and CPU, and the process's peak RSS; the row is the median of the passes after the first.

Prints one JSON object with the load average before and after (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from bench import generate, gpunodes
from bench.apply import changed_objects, committed
from reconciler.cluster import kinds
from tests.support.controlplane import started, write_kubeconfig
from tests.support.controlplane.nodes import TOPOLOGY_LABELS

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_RUN = ROOT / "fleet-repo-template" / "runs" / "rai-llm" / "pretrain-64.yaml"
CLUSTER = "fleet"
NOW = generate.START
LONG_LIVED = 4  # passes of the long-lived reconciler: the first syncs its caches


def repo_files(fleet: generate.Fleet, cluster: str = CLUSTER) -> dict[str, str]:
    """The generated fleet's repository on one cluster read through GFD's labels: no inventory,
    envelopes selecting their region alone, every run's pods from the template's pod template."""
    files = generate.repo_files(fleet)
    files.pop("inventory/nodes.yaml")
    fleet_config = yaml.safe_load(files["jobtree.yaml"])
    fleet_config["spec"]["clusters"] = [
        {"name": cluster, "context": cluster, "topologyLabels": TOPOLOGY_LABELS}
    ]
    files["jobtree.yaml"] = generate.dump(fleet_config)
    template = yaml.safe_load(TEMPLATE_RUN.read_text())["spec"]["template"]
    for path, text in sorted(files.items()):
        doc = yaml.safe_load(text)
        if path.startswith("budgets/"):
            for envelope in doc["spec"].get("envelopes") or []:
                (envelope.get("selector") or {}).pop("cluster", None)
        elif path.startswith("runs/"):
            doc["spec"]["template"] = template
        else:
            continue
        files[path] = generate.dump(doc)
    return files


def measured(env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run a jobtree verb: its wall seconds, CPU seconds, peak RSS (MB) and stdout; raises on a failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli", *args], env=env, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(f"jobtree {' '.join(args)} exited {proc.returncode}: {stderr[-2000:]}")
    return {
        "seconds": round(seconds, 2),
        "cpu": round(usage.ru_utime + usage.ru_stime, 2),
        "rssMB": round(usage.ru_maxrss / 1024, 1),
        "stdout": stdout,
    }


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def one_round(fleet: generate.Fleet, workers: int) -> dict[str, Any]:
    out: dict[str, Any] = {"loadBefore": load(), "gpus": fleet.gpus, "runs": len(fleet.runs)}
    nodes = gpunodes.fleet(fleet.domains, CLUSTER)
    out["nodes"] = len(nodes)
    out["nodeKB"] = round(sum(len(json.dumps(n)) for n in nodes) / len(nodes) / 1024, 1)
    with tempfile.TemporaryDirectory(prefix="bench-10k-") as tmp, started(CLUSTER) as servers:
        root = Path(tmp)
        server = servers[CLUSTER]
        began = time.perf_counter()
        api = gpunodes.create_on(server, root / "admin", nodes, workers)
        out["createNodes"] = round(time.perf_counter() - began, 2)
        env = {**os.environ, "KUBECONFIG": str(write_kubeconfig(root / "kubeconfig", servers))}
        repo = committed(root / "fleet", repo_files(fleet))

        def step(key: str, *args: str) -> dict[str, Any]:
            mark = server.requests.mark()
            result = measured(env, *args)
            sent = server.requests.since(mark)
            writes = sum(1 for r in sent if r.is_write)
            stdout = result.pop("stdout")
            pages = [r.path for r in sent if r.method == "GET" and not r.watch]
            out[key] = result | {
                "writes": writes,
                "reads": len(sent) - writes,
                "changed": changed_objects(stdout),
                # list pages of every node and every pod (observe's; apply's in a pass with no observe)
                "nodePages": pages.count("/api/v1/nodes"),
                "podPages": pages.count("/api/v1/pods"),
            }
            return out[key]

        step("reconcile", "reconcile", str(repo), "--once", "--now", NOW, "--quiet")
        step("first", "apply", str(repo), "--quiet")
        out["pods"] = sum(1 for _ in _pods(api))
        out["podsPerSecond"] = round(out["pods"] / out["first"]["seconds"], 1)
        step("settle", "reconcile", str(repo), "--once", "--now", NOW, "--apply", "--quiet")
        step("unchanged", "reconcile", str(repo), "--once", "--now", NOW, "--apply", "--quiet")
        out["longLived"] = long_lived(env, server, repo)
    out["loadAfter"] = load()
    out["benchRssMB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def long_lived(env: dict[str, str], server: Any, repo: Path) -> dict[str, Any]:
    """`LONG_LIVED` passes of one long-lived reconciler (`bench.longlived`), each with the requests
    the server received during it; the process's CPU and peak RSS over all of them (`wait4`)."""
    passes: list[dict[str, Any]] = []
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.longlived", str(repo), "--now", NOW, "--apply"],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    for _ in range(LONG_LIVED):
        mark = server.requests.mark()
        proc.stdin.write("\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("bench.longlived ended before its passes did")
        sent = server.requests.since(mark)
        pages = [r.path for r in sent if r.method == "GET" and not r.watch]
        passes.append(json.loads(line) | {
            "reads": sum(1 for r in sent if not r.is_write),
            "nodePages": pages.count("/api/v1/nodes"), "podPages": pages.count("/api/v1/pods"),
            "mirrorPages": sum(1 for p in pages if _owned_list(p)),
        })  # fmt: skip
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"bench.longlived exited {os.waitstatus_to_exitcode(status)}")
    return {"passes": passes, "cpu": round(usage.ru_utime + usage.ru_stime, 2),
            "rssMB": round(usage.ru_maxrss / 1024, 1)}  # fmt: skip


def _owned_list(path: str) -> bool:
    """Whether `path` lists one of jobtree's mirror kinds or the Services (apply's owned kinds
    besides pods; the journal is not one)."""
    group = f"/apis/{kinds.API_VERSION}/"
    return (path.startswith(group) and not path.endswith("/journalentries")) or path.endswith("/services")


def _pods(api: client.CoreV1Api) -> Any:
    token = None
    while True:
        page = api.list_pod_for_all_namespaces(limit=2000, _continue=token)
        yield from page.items
        token = page.metadata._continue if page.metadata else None
        if not token:
            return


def rows(result: dict[str, Any]) -> list[dict[str, str]]:
    """The `make bench` table rows of a result (`bench.run.Row` fields)."""
    where = (f"{result['nodes']:,} nodes of {result['nodeKB']:.1f} KB, {result['gpus']:,} GPUs, "
             f"{result['runs']:,} runs, one control plane; load average {_loads(result)}")  # fmt: skip
    first, unchanged, reconcile = result["first"], result["unchanged"], result["reconcile"]
    return [
        {"name": "10k nodes: created (parallel, official client)", "target": "-",
         "wall": f"{result['createNodes']:.1f} s", "throughput": f"{result['nodes'] / result['createNodes']:,.0f} nodes/s",
         "verdict": "measured (no target)", "note": where},
        {"name": "10k nodes: reconcile, first pass (no apply)", "target": "-",
         "wall": f"{reconcile['seconds']:.2f} s", "rss": f"{reconcile['rssMB']:.0f} MB",
         "verdict": "measured (no target)",
         "note": f"observe 10,000 nodes, plan, commit; CPU {reconcile['cpu']:.1f} s; {reconcile['reads']} reads"},
        {"name": "10k nodes: apply, first (empty cluster)", "target": "≥ 200 pods/s",
         "wall": f"{first['seconds']:.2f} s", "rss": f"{first['rssMB']:.0f} MB",
         "throughput": f"{result['podsPerSecond']:,.0f} pods/s ({result['pods']:,} pods), {first['writes']:,} writes",
         "verdict": "meets target" if result["podsPerSecond"] >= 200 else "MISSES target",
         "note": f"CPU {first['cpu']:.1f} s; {first['changed']:,} objects changed, {first['reads']:,} reads"},
        {"name": "10k nodes: reconcile --apply, nothing changed", "target": "≤ 10 s",
         "wall": f"{unchanged['seconds']:.2f} s", "rss": f"{unchanged['rssMB']:.0f} MB",
         "throughput": f"{unchanged['writes']} writes",
         "verdict": "meets target" if unchanged["seconds"] <= 10 else "MISSES target",
         "note": f"observe + plan + apply, CPU {unchanged['cpu']:.1f} s, {unchanged['reads']} reads "
                 f"(nodes listed in {unchanged['nodePages']} pages, pods in {unchanged['podPages']}); "
                 f"the pass before it (taking in the pods' Running) {result['settle']['seconds']:.2f} s, "
                 f"{result['settle']['writes']} writes"},
        *_long_lived_rows(result),
    ]  # fmt: skip


def _long_lived_rows(result: dict[str, Any]) -> list[dict[str, str]]:
    """The long-lived reconciler's row (absent from results measured before it existed)."""
    if "longLived" not in result:
        return []
    run = result["longLived"]
    first, later = run["passes"][0], run["passes"][1:]
    walls = sorted(p["seconds"] for p in later)
    median = walls[len(walls) // 2]
    listed = sum(p["nodePages"] + p["podPages"] for p in later)
    mirrored = sum(p.get("mirrorPages", 0) for p in later)
    cpus, reads = ", ".join(f"{p['cpu']:.1f}" for p in later), ", ".join(str(p["reads"]) for p in later)
    return [
        {"name": "10k nodes: reconcile --apply, nothing changed, long-lived reconciler (`reconcile --interval`)",
         "target": "≤ 10 s", "wall": f"{median:.2f} s ({walls[0]:.2f}–{walls[-1]:.2f})",
         "rss": f"{run['rssMB']:.0f} MB", "throughput": f"{sum(p['writes'] for p in later)} writes",
         "verdict": "meets target" if median <= 10 else "MISSES target",
         "note": f"passes 2–{len(run['passes'])} of one process (its first, which lists and starts the watches, "
                 f"{first['seconds']:.2f} s); CPU {cpus} s; {reads} reads, {listed} node or pod list pages, "
                 f"{mirrored} mirror or Service list pages; "
                 f"nodes and pods from the watch: {'yes' if all(p['watched'] for p in later) else 'NO'}"},
    ]  # fmt: skip


def _loads(result: dict[str, Any]) -> str:
    before, after = result["loadBefore"], result["loadAfter"]
    return f"{before[0]:.1f} before, {after[0]:.1f} after (1-minute)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster10k", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", type=float, default=0.8, help="fleet scale (0.8: 10,000 nodes, 80,000 GPUs)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=16, help="node creations in flight")
    args = parser.parse_args(argv)
    print(json.dumps(one_round(generate.build(args.seed, args.scale), args.workers), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
