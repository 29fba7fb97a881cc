"""The one Git helper: `git daemon` on 127.0.0.1 (so pushes run server hooks), trees and clones, and the
template fleet (fleet-repo-template/) as a bare remote and a reconciled clone.

The template's numbers: two NVL72 GB200 domains of 18×4 = 72 GPUs and one 8×8 H100 domain. Every
run fits at once: GB200 asks 64 (pretrain-64) + 32 + 2 groups × 4 spares (moe-spares) + 32
(train-cofunded) = 136 ≤ 144; H100 asks 8 (whisper-finetune) + 16 (vit-elastic at totalGPUs, also
its desired width) = 24 ≤ 64. Active GPUs: 64+32+32+8+16 = 152. Without its desired width
(`growing_files`), vit-elastic (step 8, max 32) grows one step per pass: 24, then 32.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pygit2
import pytest

from reconciler.git import read as gitread
from reconciler.passes.reconcile import reconcile_once
from reconciler.state import codec as statefiles
from reconciler.state import message
from schemas.common import parse_time
from tests.support import REPO


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_tree(repo: pygit2.Repository, files: dict[str, bytes]) -> pygit2.Oid:
    index = pygit2.Index()
    for path, data in sorted(files.items()):
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB))
    return index.write_tree(repo)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """`git daemon` with receive-pack on 127.0.0.1, so pushes run the remote's checks and hooks."""
    base = tmp_path_factory.mktemp("daemon")
    for _ in range(3):
        port = free_port()
        proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}", f"--base-path={base}"]
            + ["--export-all", "--enable=receive-pack", str(base)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.02)
        else:
            proc.kill()
            proc.wait(timeout=5)
            continue
        try:
            yield base, f"git://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        return
    pytest.fail("git daemon did not start on 127.0.0.1")


def lose_the_race_after_the_fetch(
    monkeypatch: pytest.MonkeyPatch, winner: pygit2.Repository, base: str
) -> None:
    """The next `gitremote.fetch` answers, then `winner` pushes its branch past `base` before the
    caller's push goes out: the remote moved between the fetch and the compare-and-swap."""
    from reconciler.git import (
        remote as gitremote,  # imported here: the other helpers need no reconciler module
    )
    from reconciler.git.remote import PushStatus

    real_fetch = gitremote.fetch

    def fetch_then_lose_the_race(*args, **kwargs):  # type: ignore[no-untyped-def]  # stands in for fetch, any signature
        head = real_fetch(*args, **kwargs)
        monkeypatch.setattr(gitremote, "fetch", real_fetch)
        assert gitremote.push(winner, "origin", "main", base).status is PushStatus.PUSHED
        return head

    monkeypatch.setattr(gitremote, "fetch", fetch_then_lose_the_race)


_HOLD_LOCK = """
import sys, time
from reconciler.git.lock import writer_lock
with writer_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@contextmanager
def lock_held_elsewhere(repo_path: str | Path, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """The clone's writer lock held by another process (a scheduled `reconcile`, say) for `seconds`
    from when this yields: the holder has said it holds it. Waits for the holder on the way out."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(repo_path), str(seconds)],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.wait(timeout=seconds + 10)


def commit_files(
    repo: pygit2.Repository,
    branch: str,
    parent_rev: str | None,
    files: dict[str, bytes],
    *,
    message: str,
    author_name: str,
    author_email: str,
    now: int,
    owned_prefixes: tuple[str, ...] = ("state/", "rendered/"),
) -> pygit2.Oid | None:
    """`gitwrite.commit_tree` given the owned files' bytes: parent's tree with everything under
    `owned_prefixes` replaced by exactly `files` (None when nothing would change)."""
    from reconciler.git import packs, write

    blobs = {path: packs.object_id("blob", data).hex() for path, data in files.items()}
    contents = {blobs[path]: data for path, data in files.items()}
    return write.commit_tree(
        repo, branch, parent_rev, blobs, contents, message=message, author_name=author_name,
        author_email=author_email, now=now, owned_prefixes=owned_prefixes,
    )  # fmt: skip


# -- the template fleet ----------------------------------------------------------------------------

TEMPLATE = REPO / "fleet-repo-template"


T0 = parse_time("2026-03-02T09:00:00Z")


HUMAN = pygit2.Signature("Ada", "ada@example.com", T0 - 3600, 0)


BOT_EMAIL = "jobtree@acme.example"  # git.author in the template's jobtree.yaml


# the researcher guide's quick-start run: 8 H100 GPUs in rai-sys, which has no H100 envelope of its
# own (family pays: org:acme:media's)
RESNET_SMALL = b"""apiVersion: rq.davidlangworthy.io/v1
kind: Run
metadata: {name: resnet-small, namespace: rai-sys}
spec:
  owner: "org:acme:rai:sys"
  resources: {gpuType: H100-80GB, totalGPUs: 8}
"""


def template_files() -> dict[str, bytes]:
    return {
        str(p.relative_to(TEMPLATE)): p.read_bytes()
        for p in sorted(TEMPLATE.rglob("*"))
        if p.is_file() and ".github" not in p.parts
    }


def steady_files() -> dict[str, bytes]:
    """The template as it is: vit-elastic's desired width is its admitted 16, so a fleet that has
    been reconciled once has nothing left to do at the same instant."""
    files = template_files()
    assert b"    desiredTotalGPUs: 16\n" in files["runs/media-vision/vit-elastic.yaml"]
    return files


def growing_files() -> dict[str, bytes]:
    """The template with vit-elastic's desired width removed: it aims for its maximum, 32."""
    files = template_files()
    path = "runs/media-vision/vit-elastic.yaml"
    files[path] = files[path].replace(b"    desiredTotalGPUs: 16\n", b"")
    assert b"    desiredTotalGPUs:" not in files[path]
    return files


def bare_remote(root: Path, files: dict[str, bytes] | None = None, name: str = "fleet.git") -> Path:
    path = root / name
    bare = pygit2.init_repository(str(path), bare=True, initial_head="main")
    tree = write_tree(bare, files if files is not None else template_files())
    bare.create_commit("refs/heads/main", HUMAN, HUMAN, "fleet from the template\n", tree, [])
    return path


RECONCILE_CLI = [sys.executable, "-m", "reconciler.cli", "reconcile"]


def cli_env() -> dict[str, str]:
    """The environment for running the CLI from this checkout in a subprocess."""
    return {**os.environ, "PYTHONPATH": str(REPO)}


def clone(url: str | Path, dest: Path) -> pygit2.Repository:
    return pygit2.clone_repository(str(url), str(dest), checkout_branch="main")


def reconciled(tmp_path: Path) -> tuple[Path, pygit2.Repository]:
    """A clone (`work`) of the steady template fleet (bare remote `fleet.git`) after its first pass."""
    bare_remote(tmp_path, steady_files())
    path = tmp_path / "work"
    repo = clone(tmp_path / "fleet.git", path)
    assert reconcile_once(path, now=T0).commit is not None
    return path, repo


def state_at(repo: pygit2.Repository, rev: str = "main") -> statefiles.FleetState:
    files = gitread.read_files(repo, rev, ["state/"])
    return statefiles.decode({p: b for p, b in files.items() if not p.startswith("state/ledger/")})


def active_gpus(state: statefiles.FleetState) -> int:
    return sum(x.gpus for x in state.leases if x.open and x.role == "Active")


# -- a small repository for Git-level tests (a seed commit, state commits by jobtree's author) ---------

NOW = 1_767_600_000  # 2026-01-05T08:00:00Z


SPEC_SHA = "a" * 40


BOT = ("jobtree", "jobtree@fleet.example")


PERSON = pygit2.Signature("Ada", "ada@example.com", NOW, 0)


SEED_FILES = {
    "jobtree.yaml": b"kind: FleetConfig\n",
    "runs/team-a/r1.yaml": b"kind: Run\n",
    "runs/team-a2/r9.yaml": b"kind: Run\n",
    "state/leases/team-a/r1.yaml": b"old lease\n",
    "state/status/runs/team-a/r1.yaml": b"phase: Pending\n",
    "rendered/gpu-a/team-a/r1-g0.yaml": b"kind: Pod\n",
}


def person_commit(repo: pygit2.Repository, files: dict[str, bytes], message: str = "edit by hand\n") -> str:
    """A commit on main that sets `files` (on top of the current tree) the way a person would."""
    parent = repo.references["refs/heads/main"].peel(pygit2.Commit)
    current = gitread.read_files(repo, "refs/heads/main")
    tree = write_tree(repo, {**current, **files})
    return str(repo.create_commit("refs/heads/main", PERSON, PERSON, message, tree, [parent.id]))


def make_remote(root: Path, name: str = "fleet.git") -> Path:
    path = root / name
    bare = pygit2.init_repository(str(path), bare=True, initial_head="main")
    bare.create_commit("refs/heads/main", PERSON, PERSON, "seed\n", write_tree(bare, SEED_FILES), [])
    return path


def clone_of(url: str, dest: Path, bare: bool = True) -> pygit2.Repository:
    return pygit2.clone_repository(url, str(dest), bare=bare, checkout_branch="main")


def bot_commit(
    repo: pygit2.Repository, files: dict[str, bytes], *, parent: str | None = None, now: int = NOW
):
    parent = parent or str(repo.references["refs/heads/main"].target)
    return commit_files(
        repo,
        "main",
        parent,
        files,
        message=message.format_message(["started team-a/r1 (8 GPUs)"], SPEC_SHA),
        author_name=BOT[0],
        author_email=BOT[1],
        now=now,
    )


NEW_STATE = {
    "state/leases/team-a/r1.yaml": b"new lease\n",
    "state/ledger/2026-01-05.jsonl": b'{"event":"Start"}\n',
    "rendered/gpu-a/team-a/r1-g1.yaml": b"kind: Pod\n",
}


def remote_head(repo: pygit2.Repository) -> str:
    return str(repo.references["refs/remotes/origin/main"].target)


# -- caches and commits by hand on a fleet clone ------------------------------------------------------


def commit_by_hand(repo: pygit2.Repository, files: dict[str, bytes | None], message: str) -> str:
    """The same commit (same id) in any clone at the same head: files set (bytes) or removed (None)."""
    current = gitread.read_files(repo, "refs/heads/main")
    for path, data in files.items():
        if data is None:
            current.pop(path, None)
        else:
            current[path] = data
    index = pygit2.Index()
    for path, data in sorted(current.items()):
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB))
    parent = repo.references["refs/heads/main"].target
    oid = repo.create_commit("refs/heads/main", HUMAN, HUMAN, message, index.write_tree(repo), [parent])
    repo.checkout_head(strategy=pygit2.GIT_CHECKOUT_FORCE)
    return str(oid)


def forget_caches(repo: pygit2.Repository) -> None:
    shutil.rmtree(gitread.cache_directory(repo), ignore_errors=True)
