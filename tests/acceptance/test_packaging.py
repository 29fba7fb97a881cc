"""jobtree installed from its wheel, not from this checkout: the wheel builds without a warning,
carries the published JSON Schemas and CRDs, and `jobtree validate` runs from a fresh environment.

Offline: the wheel is built without build isolation (setuptools comes with the test extras), and
installed without dependencies into a new virtual environment that sees the project's installed
dependencies through a path file, never this checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from tests.support import REPO

PACKAGED = ("pyproject.toml", "README.md", "schemas", "planner", "reconciler")
# pip's own notes about this machine's package indexes, not about the build
PIP_CONFIG_NOTE = re.compile(r"^WARNING: Location '.*' is ignored")


def test_the_wheel_builds_cleanly_carries_schemas_and_crds_and_validates_the_template(tmp_path: Path) -> None:
    source = tmp_path / "source"
    for name in PACKAGED:  # a copy: building writes build/ and metadata beside the sources
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(src, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    said = [line for line in (built.stdout + built.stderr).splitlines() if not PIP_CONFIG_NOTE.match(line)]
    assert [line for line in said if "warn" in line.lower()] == []
    (wheel,) = (tmp_path / "dist").glob("jobtree-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    schemas = {p.name for p in (REPO / "schemas" / "json").glob("*.schema.json")}
    crds = {p.name for p in (REPO / "schemas" / "crds").glob("*.yaml")}
    assert schemas and {f"schemas/json/{n}" for n in schemas} <= names
    assert crds and {f"schemas/crds/{n}" for n in crds} <= names
    assert "schemas/vendor/core-v1-podspec.schema.json" in names  # full pod templates are checked against it
    assert not any(n.startswith(("tests/", "bench/")) for n in names)

    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=60)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # the project's dependencies (pydantic, pygit2, ...), as installed: a path line, so that folder's
    # own path files (this checkout's editable install among them) are not read
    Path(purelib, "jobtree-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run(
        [str(python), "-c", "import reconciler, schemas; from importlib.resources import files; "
         "print(reconciler.__file__); print(files('schemas').joinpath('json', 'lease.schema.json').is_file())"],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=True,
    ).stdout.split()  # fmt: skip
    assert where[0].startswith(str(env_dir)) and where[1] == "True"  # the wheel's code, and its schemas
    checked = subprocess.run(
        [str(env_dir / "bin" / "jobtree"), "validate", str(REPO / "fleet-repo-template")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.startswith("fleet valid:")
