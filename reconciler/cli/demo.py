"""`make demo`: a fleet repository from the template, validated, committed and reconciled with no cluster.

Runs `jobtree reconcile` passes at fixed instants (so the output is the same every time) on a new
Git repository in a temporary directory, then prints who pays and the state tree jobtree wrote.
Decides nothing itself. Exit 0 when the template is valid, 3 when it is not, 4 on any other failure.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import yaml

from reconciler.cli import exitcodes
from reconciler.git import read as gitread
from reconciler.git import write as gitwrite
from reconciler.passes import reconcile as reconciliation
from schemas.common import format_time, parse_time
from schemas.diagnostics import Diagnostic
from schemas.load import load_fleet
from schemas.yamldoc import parse

TEMPLATE = Path(__file__).resolve().parents[2] / "fleet-repo-template"
SKIPPED_DIRS = {".git", "state", "rendered"}  # machine-written or not part of the spec
DEMO_START = parse_time("2026-03-02T09:00:00Z")


def read_tree(root: Path) -> dict[str, bytes]:
    """The repository's files as path -> bytes, with POSIX paths relative to root."""
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and not SKIPPED_DIRS.intersection(rel.parts[:1]):
            files[rel.as_posix()] = path.read_bytes()
    return files


def diagnostics(files: dict[str, bytes]) -> list[Diagnostic]:
    """What `jobtree validate` reports (cross-object rules included when that checker is present)."""
    if importlib.util.find_spec("schemas.fleetcheck") is not None:
        return list(importlib.import_module("schemas.fleetcheck").check_fleet(files).diagnostics)
    return list(load_fleet(files).diagnostics)  # per-document checks only


def summary(files: dict[str, bytes]) -> str:
    fleet = load_fleet(files)
    tenants = len(fleet.config.model.spec.tenants) if fleet.config else 0
    gpus: dict[str, int] = {}
    nodes = 0
    if fleet.inventory is not None:
        for block in fleet.inventory.domains:
            nodes += block.nodes
            gpus[block.flavor] = gpus.get(block.flavor, 0) + block.nodes * block.gpusPerNode
        for node in fleet.inventory.nodes:
            nodes += 1
            flavor = node.labels.get("gpu.flavor", "unlabelled")
            gpus[flavor] = gpus.get(flavor, 0) + node.gpus
    by_flavor = ", ".join(f"{n} {flavor}" for flavor, n in sorted(gpus.items())) or "none"
    requested = sum(r.model.spec.resources.totalGPUs for r in fleet.runs)
    return (
        f"{tenants} tenants, {len(fleet.budgets)} budgets, {len(fleet.runs)} runs "
        f"({requested} GPUs requested), {nodes} nodes with {sum(gpus.values())} GPUs ({by_flavor})"
    )


def scenario(files: dict[str, bytes], start: datetime) -> dict[str, Any]:
    """The template as a Scenario: its settings and inventory, every Budget and Run applied at +0m."""
    docs = {
        path: [d.data for d in parse(text, path)] for path, text in files.items() if path.endswith(".yaml")
    }
    objects = [d for path in sorted(docs) if path.startswith(("budgets/", "runs/")) for d in docs[path] if d]
    fleet = docs.get("jobtree.yaml", [{}])[0] or {}
    return {
        "apiVersion": "rq.davidlangworthy.io/v1",
        "kind": "Scenario",
        "metadata": {"name": "fleet-repo-template"},
        "spec": {
            "start": start.strftime("%Y-%m-%dT%H:%M:00Z"),
            "fleet": fleet.get("spec") or {},
            "inventory": docs.get("inventory/nodes.yaml", [{}])[0] or {},
            "steps": [
                {"at": "+0m", "apply": objects},
                {"at": "+1m", "checkpoint": "admitted"},
                {"at": "+30m", "checkpoint": "after-30m"},
            ],
            "until": "+30m",
            "tick": "5m",
        },
    }


def commit_spec(repo_dir: Path, files: dict[str, bytes]) -> gitread.Repository:
    """A new repository holding the template as the platform team's first commit."""
    repo = gitwrite.init_repository(repo_dir)
    gitwrite.commit_snapshot(
        repo, files, author_name="Platform team", author_email="platform@acme.example",
        when=DEMO_START - 3600, message="fleet from the template\n", stage=True,
    )  # fmt: skip
    return repo


def report(repo: gitread.Repository) -> None:
    """Who pays, what waits, and the tree jobtree wrote: read back from the committed state."""
    status = gitread.read_files(repo, "main", ["state/status/"])
    click.echo("who pays (owned by the run's owner, borrowed from family or sponsors):")
    for path, data in sorted(status.items()):
        if not path.startswith("state/status/runs/"):
            continue
        doc = yaml.safe_load(data)
        funding = doc["status"].get("funding") or {}
        lenders = ", ".join(f"{s['owner']} {s['gpus']}" for s in funding.get("sponsors", []))
        click.echo(
            f"  {doc['run']:<32} {doc['status']['phase']:<8} owned {funding.get('ownedGPUs', 0):>3}  "
            f"borrowed {funding.get('borrowedGPUs', 0):>3}" + (f"  ({lenders})" if lenders else "")
        )
    click.echo("budget headroom (GPUs an envelope can still fund):")
    for path, data in sorted(status.items()):
        if path.startswith("state/status/budgets/"):
            doc = yaml.safe_load(data)
            envelopes = ", ".join(f"{e['name']} {e['headroom']}" for e in doc["status"]["envelopes"])
            click.echo(f"  {doc['budget']:<14} {envelopes}")
    state = gitread.list_blobs(repo, "main", ["state/"])
    rendered = gitread.read_files(repo, "main", ["rendered/"])
    click.echo(
        f"state tree at {str(repo.head.target)[:12]} ({len(state) + len(rendered)} files written by jobtree):"
    )
    for path in state:
        click.echo(f"  {path}")
    for path, data in sorted(rendered.items()):
        pods = sum(1 for doc in yaml.safe_load_all(data) if doc and doc.get("kind") == "Pod")
        click.echo(f"  {path:<52} {pods} pod{'s' * (pods != 1)} and the run's headless Service")


def play(repo_dir: Path) -> int:
    """Reconcile the committed template at a few instants, as the schedule would; print each pass."""
    repo = gitread.open_repo(repo_dir)
    for minutes in (0, 5, 10, 10):
        now = DEMO_START + minutes * 60
        outcome = reconciliation.reconcile_once(repo_dir, now=now)
        click.echo(f"  reconcile at {format_time(now)}: {outcome}")
    report(repo)
    click.echo(
        f"the fleet repository is {repo_dir}; try `git -C {repo_dir} log --stat`, "
        f"`.venv/bin/jobtree runs get --repo {repo_dir}`, `.venv/bin/jobtree runs explain train-cofunded "
        f"--repo {repo_dir}` or `.venv/bin/jobtree map {repo_dir} -o fleet.svg`"
    )
    return exitcodes.OK


def main() -> int:
    if not (TEMPLATE / "jobtree.yaml").is_file():
        click.echo(f"demo: no fleet template at {TEMPLATE}", err=True)
        return exitcodes.OTHER
    workdir = Path(tempfile.mkdtemp(prefix="jobtree-demo-"))
    repo = workdir / "fleet"
    shutil.copytree(TEMPLATE, repo)
    files = read_tree(repo)
    click.echo(f"copied {TEMPLATE.name}/ to {repo}")
    click.echo(f"fleet: {summary(files)}")
    problems = diagnostics(files)
    for problem in sorted(problems):
        click.echo(f"  {problem}")
    if problems:
        click.echo(f"template is INVALID: {len(problems)} problem(s)")
        return exitcodes.INVALID
    click.echo("template is valid: no diagnostics")
    shutil.rmtree(repo)
    commit_spec(repo, files)
    click.echo("committed it to a new Git repository; reconciling with the embedded cluster:")
    return play(repo)


if __name__ == "__main__":
    sys.exit(main())
