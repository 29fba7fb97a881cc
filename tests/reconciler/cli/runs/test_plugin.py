"""Installed as the kubectl plugin `kubectl-runs`, the runs verbs are the top level (`kubectl runs get`),
and `jobtree runs ...` is the same group."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

from tests.support import REPO

BIN = Path(sys.executable).parent


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    found = shutil.which(script, path=str(BIN))
    assert found is not None, f"the {script} console script is installed beside this Python"
    return subprocess.run([found, *args], capture_output=True, text=True, check=False)


def test_kubectl_runs_and_jobtree_runs_print_the_same_table(lottery: Path) -> None:
    plugin = run("kubectl-runs", "get", "-A", "--now", "2026-03-02T09:56:00Z", "--repo", str(lottery))
    verb = run("jobtree", "runs", "get", "-A", "--now", "2026-03-02T09:56:00Z", "--repo", str(lottery))
    assert plugin.returncode == verb.returncode == 0, plugin.stderr + verb.stderr
    assert plugin.stdout == verb.stdout
    assert "team-b     b1    Pending" in plugin.stdout


def test_the_plugin_names_itself_as_kubectl_runs_and_keeps_usage_errors_at_2(lottery: Path) -> None:
    helped = run("kubectl-runs", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: kubectl runs [OPTIONS] COMMAND")
    for verb in (
        "submit",
        "plan",
        "watch",
        "explain",
        "leases",
        "budgets",
        "sponsors",
        "shrink",
        "grow",
        "get",
    ):
        assert f"  {verb} " in helped.stdout
    unknown = run("kubectl-runs", "plan", "nope", "--repo", str(lottery))
    assert unknown.returncode == 2 and "no run 'nope'" in unknown.stderr and "Traceback" not in unknown.stderr


# -- krew ------------------------------------------------------------------------------------------

KREW = REPO / "deploy" / "krew"


def _archive() -> bytes:
    spec = importlib.util.spec_from_file_location("krew_archive", KREW / "archive.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data: bytes = module.build()
    return data


def test_the_krew_manifest_names_the_archive_this_tree_builds() -> None:
    manifest = yaml.safe_load((KREW / "runs.yaml").read_text())
    assert (manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"]) == (
        "krew.googlecontainertools.github.com/v1alpha2",
        "Plugin",
        "runs",  # krew installs it as kubectl-runs: `kubectl runs`
    )
    (platform,) = manifest["spec"]["platforms"]
    assert platform["bin"] == "kubectl-runs" and manifest["spec"]["version"] == "v0.1.0"
    assert platform["sha256"] == hashlib.sha256(_archive()).hexdigest(), (
        "run `make krew` and commit the manifest"
    )
    assert _archive() == _archive()  # byte for byte, whoever builds it


def test_the_plugin_krew_installs_runs_the_verbs_of_the_installed_jobtree(
    lottery: Path, tmp_path: Path
) -> None:
    manifest = yaml.safe_load((KREW / "runs.yaml").read_text())
    (platform,) = manifest["spec"]["platforms"]
    with tarfile.open(fileobj=io.BytesIO(_archive())) as tar:  # as krew unpacks it, then copies `files`
        tar.extractall(tmp_path / "unpacked", filter="data")
    home = tmp_path / "krew" / "store" / "runs"
    home.mkdir(parents=True)
    for entry in platform["files"]:
        shutil.copy2(tmp_path / "unpacked" / entry["from"], home / Path(entry["from"]).name)
    plugin = home / platform["bin"]
    args = ["get", "-A", "--now", "2026-03-02T09:56:00Z", "--repo", str(lottery)]
    env = {"PATH": f"{BIN}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path)}
    through_krew = subprocess.run([plugin, *args], capture_output=True, text=True, env=env, check=False)
    assert through_krew.returncode == 0, through_krew.stderr
    assert through_krew.stdout == run("kubectl-runs", *args).stdout
    # no Python with jobtree: it says what to install, exit 127 (command not found, as a shell says)
    bare = subprocess.run(
        [plugin, "get"], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "JOBTREE_PYTHON": "nowhere"},
        cwd=tmp_path, check=False,
    )  # fmt: skip
    assert bare.returncode == 127 and "pip install jobtree" in bare.stderr
