"""Fleet files where jobtree does not read them (a typo'd folder, `.YAML`, `.json`, a Run at the
top level) are named by `validate`, `plan` and `reconcile` (JT004) instead of being ignored; other
data files (a site config, docs, workflows, jobtree's own output) are left alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2
from click.testing import CliRunner

from reconciler.cli import main
from reconciler.passes.reconcile import reconcile_once
from tests.support.git import HUMAN, T0, template_files, write_tree

RUN = b"""apiVersion: rq.davidlangworthy.io/v1
kind: Run
metadata:
  name: typo
  namespace: media-audio
spec:
  owner: "org:acme:media:audio"
  resources: {gpuType: H100-80GB, totalGPUs: 8}
"""
STRAYS = {
    "run/media-audio/typo.yaml": RUN,  # runs/ misspelt
    "runs/media-audio/upper.YAML": RUN,
    "runs/media-audio/typo.json": b'{"kind": "Run"}',
    "inventory/more-nodes.yaml": b"domains: []\n",
    "typo.yaml": RUN,
    "budget.yml": b"# one more team\nkind: Budget\n",
    "windows/run.yaml": RUN.replace(b"\n", b"\r\n"),  # written on Windows
    "bom.yaml": b"\xef\xbb\xbf" + RUN,
    "runs.json": b'{"apiVersion": "rq.davidlangworthy.io/v1", "kind": "Run", "metadata": {}}',
}
WANT = {  # path -> why, for every stray above
    "run/media-audio/typo.yaml": "holds a Run jobtree does not read from here; move it to runs/<namespace>/<name>.yaml",
    "runs/media-audio/upper.YAML": "is not read: jobtree reads only files ending .yaml or .yml under runs/",
    "runs/media-audio/typo.json": "is not read: jobtree reads only files ending .yaml or .yml under runs/",
    "inventory/more-nodes.yaml": "is not read: the inventory is inventory/nodes.yaml alone",
    "typo.yaml": "holds a Run jobtree does not read from here",
    "budget.yml": "holds a Budget jobtree does not read from here; move it to budgets/<name>.yaml",
    "windows/run.yaml": "holds a Run jobtree does not read from here",
    "bom.yaml": "holds a Run jobtree does not read from here",
    "runs.json": "holds a Run jobtree does not read from here",
}
NOT_STRAYS = {
    "mkdocs.yml": b"site_name: fleet\nnav: []\n",
    "docs/example.yaml": b"kind: Example\n",
    "runs/media-audio/README.md": b"kind: Run\n",
    ".github/workflows/extra.yaml": b"kind: Run\n",
    ".ci/run.yaml": RUN,
    "runs/media-audio/run.schema.json": b'{"$schema": "https://json-schema.org/draft/2020-12/schema"}',
}


def _fleet(root: Path) -> Path:
    for rel, data in {**template_files(), **STRAYS, **NOT_STRAYS}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _jt004(output: str) -> dict[str, str]:
    found = {}
    for line in output.splitlines():
        path, _, _, rest = line.split(":", 3)
        assert rest.startswith(" JT004 the file "), line
        found[path] = rest.removeprefix(" JT004 the file ")
    return found


def test_validate_names_every_stray_file_in_a_folder_and_at_a_commit_alike(tmp_path: Path) -> None:
    root = _fleet(tmp_path / "fleet")
    (root / "vendor" / "lib" / ".git").mkdir(parents=True)  # a nested repository (a submodule's checkout)
    (root / "vendor" / "lib" / "run.yaml").write_bytes(RUN)  # not the fleet's: Git does not hold it here
    pygit2.init_repository(str(root), initial_head="main")
    (root / ".gitignore").write_text("scratch/\n")
    (root / "scratch" / "run.yaml").parent.mkdir()
    (root / "scratch" / "run.yaml").write_bytes(RUN)  # ignored: never committed, so not named
    on_disk = CliRunner().invoke(main, ["validate", str(root)])
    assert on_disk.exit_code == 3
    found = _jt004(on_disk.stdout)
    assert found.keys() == WANT.keys()
    assert all(found[p].startswith(why) for p, why in WANT.items()), found
    assert "budget.yml:2:1: JT004" in on_disk.stdout  # the line that says which kind it is
    shutil.rmtree(root / "vendor")  # as Git holds the fleet: without the nested repository's files
    repo = pygit2.Repository(str(root))
    repo.index.add_all()
    repo.index.write()
    repo.create_commit("HEAD", HUMAN, HUMAN, "fleet\n", repo.index.write_tree(), [])
    committed = CliRunner().invoke(main, ["validate", str(root), "--rev", "main"])
    assert (committed.exit_code, committed.stdout) == (3, on_disk.stdout)


def test_reconcile_names_stray_files_and_still_plans_the_fleet(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "fleet.git"), bare=True, initial_head="main")
    files = {**template_files(), **STRAYS, **NOT_STRAYS}
    repo.create_commit("refs/heads/main", HUMAN, HUMAN, "fleet\n", write_tree(repo, files), [])
    done = reconcile_once(repo.path, now=T0)
    assert {d.path for d in done.diagnostics} == WANT.keys()
    assert done.commit is not None and "started 5 runs (152 GPUs)" in done.summary
