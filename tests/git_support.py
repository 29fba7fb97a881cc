"""Real Git for tests: `git daemon` on 127.0.0.1 (so pushes run server hooks), trees and clones."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pygit2
import pytest


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
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1],
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
