"""`make demo`: copy the fleet-repo template to a fresh directory, validate it, and play it on the embedded cluster.

The play is a simulation (virtual clock, no Git writes): every Budget and Run of the template is
applied at once and reconciled for 30 minutes. It decides nothing itself and writes only inside its
temporary directory. Exit 0 when the template is valid, 3 when it is not, 4 on any other failure.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import yaml

from schemas.diagnostics import Diagnostic
from schemas.load import load_fleet
from schemas.yamldoc import parse

TEMPLATE = Path(__file__).resolve().parent.parent / "fleet-repo-template"
SKIPPED_DIRS = {".git", "state", "rendered"}  # machine-written or not part of the spec
EXIT_VALID, EXIT_INVALID, EXIT_FAILURE = 0, 3, 4


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


def play(files: dict[str, bytes], workdir: Path) -> int:
    """Reconcile the template on the embedded cluster with a virtual clock; print what happened."""
    simulate = importlib.import_module("reconciler.simulate")
    path = workdir / "template.scenario.yaml"
    path.write_text(yaml.safe_dump(scenario(files, datetime.now(UTC)), sort_keys=False))
    loaded, raw, errors = simulate.load_scenario(str(path))
    if loaded is None:
        click.echo("\n".join(errors), err=True)
        return EXIT_FAILURE
    sim = simulate.Simulation(loaded, raw)
    result = sim.play()
    click.echo(simulate.render_text(result, sim.timeline), nl=False)
    click.echo("who pays (owned by the run's owner, borrowed from family or sponsors):")
    for run, status in sorted(result["final"]["runs"].items()):
        funding = status.get("funding") or {}
        lenders = ", ".join(f"{s['owner']} {s['gpus']}" for s in funding.get("sponsors", []))
        click.echo(
            f"  {run:<32} owned {funding.get('ownedGPUs', 0):>3}  borrowed {funding.get('borrowedGPUs', 0):>3}"
            + (f"  ({lenders})" if lenders else "")
        )
    click.echo("budget headroom after 30 minutes (GPUs an envelope can still fund):")
    for name, status in sorted(result["final"]["budgets"].items()):
        envelopes = ", ".join(f"{e['name']} {e['headroom']}" for e in status["envelopes"])
        click.echo(f"  {name:<14} {envelopes}")
    click.echo(f"scenario written to {path}; replay it with `jobtree simulate {path}`")
    return EXIT_VALID


def main() -> int:
    if not (TEMPLATE / "jobtree.yaml").is_file():
        click.echo(f"demo: no fleet template at {TEMPLATE}", err=True)
        return EXIT_FAILURE
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
        return EXIT_INVALID
    click.echo("template is valid: no diagnostics")
    if importlib.util.find_spec("reconciler.simulate") is None:
        return EXIT_VALID
    click.echo("reconciling it on the embedded cluster (virtual clock, 30 minutes):")
    return play(files, workdir)


if __name__ == "__main__":
    sys.exit(main())
