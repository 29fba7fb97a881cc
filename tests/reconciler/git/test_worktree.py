"""A checked-out branch follows jobtree's commits path by path, and never at the cost of a person's edits."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pygit2
import pytest

from reconciler.git import errors
from reconciler.git import packs as gitpack
from reconciler.git import remote as gitremote
from reconciler.git import write as gitwrite
from reconciler.git.checkout import files as workfiles
from reconciler.git.checkout import journal as checkoutjournal
from reconciler.git.checkout import worktree
from reconciler.perf import forkmap
from reconciler.state import message
from tests.support.git import NEW_STATE, NOW, bot_commit, make_remote
from tests.support.git import clone_of as clone
from tests.support.git import person_commit as human_commit


@pytest.fixture
def work(tmp_path: Path) -> pygit2.Repository:
    return clone(str(make_remote(tmp_path)), tmp_path / "work", bare=False)


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime) of every file in the work tree outside .git: what a rewrite would change."""
    out = {}
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.relative_to(root).parts:
            info = path.stat()
            out[path.relative_to(root).as_posix()] = (info.st_ino, info.st_mtime_ns)
    return out


def git_status(root: Path) -> list[str]:
    """`git status --porcelain` by real git: the index jobtree wrote must be one git agrees with."""
    out = subprocess.run(
        ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True
    )
    return sorted(out.stdout.splitlines())


def test_only_the_paths_a_commit_changes_are_rewritten(work: pygit2.Repository) -> None:
    root = Path(work.workdir)
    many = {f"rendered/gpu-a/team-a/pod-{i}.yaml": f"kind: Pod # {i}\n".encode() for i in range(50)}
    assert bot_commit(work, NEW_STATE | many) is not None
    before = stamps(root)
    changed = {"rendered/gpu-a/team-a/pod-7.yaml": b"kind: Pod # changed\n"}
    gone = "rendered/gpu-a/team-a/pod-8.yaml"
    files = {p: d for p, d in (NEW_STATE | many | changed).items() if p != gone}
    assert bot_commit(work, files, now=NOW + 60) is not None
    after = stamps(root)
    touched = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert touched == {"rendered/gpu-a/team-a/pod-7.yaml", gone}
    assert (root / "rendered/gpu-a/team-a/pod-7.yaml").read_bytes() == b"kind: Pod # changed\n"
    assert work.status() == {} and git_status(root) == []
    assert not os.path.exists(checkoutjournal.path_of(work.path))  # settled once the move was whole


def test_edits_outside_owned_paths_are_left_exactly_as_they_are(work: pygit2.Repository) -> None:
    root = Path(work.workdir)
    (root / "runs/team-a/r1.yaml").write_bytes(b"kind: Run # being edited\n")
    (root / "runs/team-a/draft.yaml").write_bytes(b"kind: Run # not added yet\n")
    (root / "notes.txt").write_text("a person's scratch file\n")
    before = {p: s for p, s in stamps(root).items() if not p.startswith(("state/", "rendered/"))}
    assert bot_commit(work, NEW_STATE) is not None
    after = {p: s for p, s in stamps(root).items() if not p.startswith(("state/", "rendered/"))}
    assert after == before
    assert git_status(root) == [" M runs/team-a/r1.yaml", "?? notes.txt", "?? runs/team-a/draft.yaml"]


@pytest.mark.parametrize(
    "edit",
    ["modified", "modified, same size", "deleted", "staged", "untracked in the way", "directory in the way"],
)
def test_a_conflicting_local_edit_refuses_the_move_and_nothing_is_written(
    work: pygit2.Repository, edit: str
) -> None:
    root = Path(work.workdir)
    assert bot_commit(work, NEW_STATE) is not None
    lease = "state/leases/team-a/r1.yaml"
    target = "rendered/gpu-a/team-a/r1-g2.yaml" if "way" in edit else lease
    if edit == "modified":
        (root / lease).write_bytes(b"edited by hand\n")
    elif edit == "modified, same size":  # written long after the index: only its stat data tell
        (root / lease).write_bytes(b"new LEASE\n")
        os.utime(root / lease, ns=(1_000_000_000, 1_000_000_000))
    elif edit == "deleted":
        (root / lease).unlink()
    elif edit == "staged":
        (root / lease).write_bytes(b"staged by hand\n")
        work.index.add(lease)
        work.index.write()
        (root / lease).write_bytes(b"new lease\n")  # the file itself is back, the index is not
    elif edit == "untracked in the way":
        (root / target).write_bytes(b"a person's own pod\n")
    else:
        (root / target).mkdir()
    before = stamps(root)
    head = work.references["refs/heads/main"].target
    newer = NEW_STATE | {lease: b"newer lease\n", "rendered/gpu-a/team-a/r1-g2.yaml": b"kind: Pod\n"}
    with pytest.raises(errors.DirtyCheckout, match=target):
        bot_commit(work, newer, now=NOW + 60)
    assert work.references["refs/heads/main"].target == head
    assert stamps(root) == before


def test_a_file_already_holding_the_new_content_is_not_a_conflict(work: pygit2.Repository) -> None:
    root = Path(work.workdir)
    assert bot_commit(work, NEW_STATE) is not None
    (root / "state/leases/team-a/r1.yaml").write_bytes(b"newer lease\n")  # e.g. a killed pass got this far
    assert bot_commit(work, NEW_STATE | {"state/leases/team-a/r1.yaml": b"newer lease\n"}, now=NOW + 60)
    assert git_status(root) == []


def test_a_fast_forward_brings_a_persons_spec_commit_into_the_checkout(tmp_path: Path) -> None:
    url = str(make_remote(tmp_path))
    other, work = clone(url, tmp_path / "other.git"), clone(url, tmp_path / "work", bare=False)
    root = Path(work.workdir)
    bot_commit(other, NEW_STATE, now=NOW)
    tree = other.references["refs/heads/main"].peel(pygit2.Commit).tree
    index = pygit2.Index()
    index.read_tree(tree)
    index.add(
        pygit2.IndexEntry(
            "runs/team-a/r2.yaml", other.create_blob(b"kind: Run # r2\n"), pygit2.GIT_FILEMODE_BLOB
        )
    )
    index.remove("runs/team-a2/r9.yaml")
    parent = other.references["refs/heads/main"].target
    sig = pygit2.Signature("Ada", "ada@example.com", NOW, 0)
    other.create_commit("refs/heads/main", sig, sig, "a person's change\n", index.write_tree(other), [parent])
    assert gitremote.push(other, "origin", "main", str(work.references["refs/heads/main"].target)).ok
    (root / "notes.txt").write_text("scratch\n")
    assert gitremote.sync_with_remote(work) is gitremote.SyncOutcome.FAST_FORWARDED
    assert (root / "runs/team-a/r2.yaml").read_bytes() == b"kind: Run # r2\n"
    assert not (root / "runs/team-a2").exists()  # the emptied directory goes too
    assert (root / "state/leases/team-a/r1.yaml").read_bytes() == b"new lease\n"
    assert git_status(root) == ["?? notes.txt"]


def test_an_executable_file_keeps_its_mode_and_links_go_through_libgit2(work: pygit2.Repository) -> None:
    root = Path(work.workdir)
    repo = work
    parent = repo.references["refs/heads/main"].peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(parent.tree)
    index.add(
        pygit2.IndexEntry(
            "tools/run.sh", repo.create_blob(b"#!/bin/sh\n"), pygit2.GIT_FILEMODE_BLOB_EXECUTABLE
        )
    )
    sig = pygit2.Signature("Ada", "ada@example.com", NOW, 0)
    tree = index.write_tree(repo)
    oid = repo.create_commit(None, sig, sig, "a tool\n", tree, [parent.id])
    worktree.move_branch(repo, "main", oid)
    assert os.access(root / "tools/run.sh", os.X_OK)
    index.add(pygit2.IndexEntry("tools/latest", repo.create_blob(b"run.sh"), pygit2.GIT_FILEMODE_LINK))
    oid = repo.create_commit(None, sig, sig, "a link\n", index.write_tree(repo), [oid])
    worktree.move_branch(repo, "main", oid)
    assert os.readlink(root / "tools/latest") == "run.sh"
    assert git_status(root) == []


def test_with_line_ending_conversion_configured_libgit2_writes_the_files(work: pygit2.Repository) -> None:
    root = Path(work.workdir)
    work.config["core.autocrlf"] = "true"
    assert bot_commit(work, NEW_STATE | {"state/multi.yaml": b"a: 1\nb: 2\n"}) is not None
    assert (root / "state/multi.yaml").read_bytes() == b"a: 1\r\nb: 2\r\n"  # converted, as git would
    assert git_status(root) == []


def commit_during_the_pass(repo: pygit2.Repository, files: dict[str, bytes], now: int) -> pygit2.Oid | None:
    """A commit as `reconcile` makes it: the work tree written in the background, waited for after."""
    later: list[worktree.Pending] = []
    try:
        return gitwrite.commit_tree(
            repo, "main", str(repo.references["refs/heads/main"].target),
            {path: pygit2.hash(data).raw.hex() for path, data in files.items()},
            {pygit2.hash(data).raw.hex(): data for data in files.values()},
            message=message.format_message([], "a" * 40), author_name="jobtree",
            author_email="jobtree@fleet.example", now=now, pending=later,
        )  # fmt: skip
    finally:
        for work in later:
            work.wait()


def test_in_a_pass_the_files_are_written_alongside_the_objects_and_git_agrees_with_the_index(
    work: pygit2.Repository,
) -> None:
    root = Path(work.workdir)
    many = {f"rendered/gpu-a/team-a/pod-{i}.yaml": f"kind: Pod # {i}\n".encode() for i in range(600)}
    assert commit_during_the_pass(work, NEW_STATE | many, NOW) is not None
    assert (root / "rendered/gpu-a/team-a/pod-599.yaml").read_bytes() == b"kind: Pod # 599\n"
    assert git_status(root) == [] and work.status() == {}
    before = stamps(root)
    files = {p: d for p, d in (NEW_STATE | many).items() if p != "rendered/gpu-a/team-a/pod-8.yaml"}
    assert commit_during_the_pass(work, files | {"state/new.yaml": b"n\n"}, NOW + 60) is not None
    after = stamps(root)
    touched = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert touched == {"rendered/gpu-a/team-a/pod-8.yaml", "state/new.yaml"}
    assert git_status(root) == []


def test_in_a_pass_a_big_batch_of_files_is_written_by_a_forked_writer_and_git_agrees_with_the_index(
    work: pygit2.Repository, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = Path(work.workdir)
    started: list[int] = []
    real = forkmap.start
    writer_pid = tmp_path / "writer.pid"

    def counted(work: Any, items: Any, least: int) -> forkmap.Running:
        started.append(len(items))

        def marked(chunk: Any) -> Any:  # says which process wrote the files
            writer_pid.write_text(str(os.getpid()))
            return work(chunk)

        return real(marked, items, least)

    monkeypatch.setattr(forkmap, "start", counted)
    monkeypatch.setattr(forkmap, "workers", lambda: 2)  # as on the 2-CPU machines it runs on
    monkeypatch.setattr(workfiles, "FORK_FROM", forkmap.MIN_ITEMS)
    many = {
        f"rendered/gpu-{i % 7}/team-a/pod-{i}.yaml": b"kind: Pod # %d\n" % i for i in range(forkmap.MIN_ITEMS)
    }
    assert commit_during_the_pass(work, NEW_STATE | many, NOW) is not None
    assert started[-1] >= forkmap.MIN_ITEMS
    assert int(writer_pid.read_text()) != os.getpid(), "written by a forked child"
    assert (root / "rendered/gpu-3/team-a/pod-1998.yaml").read_bytes() == b"kind: Pod # 1998\n"
    assert git_status(root) == [] and work.status() == {}
    assert not os.path.exists(checkoutjournal.path_of(work.path))


def test_a_commit_that_fails_after_its_files_were_written_leaves_the_index_and_restore_repairs(
    work: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(work.workdir)
    assert bot_commit(work, NEW_STATE) is not None
    head = work.references["refs/heads/main"].target

    def disk_full(*args: object, **kwargs: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gitpack, "write", disk_full)
    with pytest.raises(OSError, match="No space"):
        commit_during_the_pass(work, NEW_STATE | {"state/leases/team-a/r1.yaml": b"newer\n"}, NOW + 60)
    assert work.references["refs/heads/main"].target == head
    assert git_status(root) == [" M state/leases/team-a/r1.yaml"]  # the file moved on, the index did not
    put_back, copies = worktree.restore_owned(work, "main")
    assert put_back == ["state/leases/team-a/r1.yaml"]
    assert copies is not None and Path(copies, "state/leases/team-a/r1.yaml").read_bytes() == b"newer\n"
    assert (root / "state/leases/team-a/r1.yaml").read_bytes() == b"new lease\n"
    assert git_status(root) == []
    assert checkoutjournal.recover(work) == []  # the journal it left names nothing still astray
    assert not os.path.exists(checkoutjournal.path_of(work.path))


def test_in_a_pass_a_conflicting_edit_refuses_before_any_object_or_file_is_written(
    work: pygit2.Repository,
) -> None:
    root = Path(work.workdir)
    assert bot_commit(work, NEW_STATE) is not None
    (root / "state/leases/team-a/r1.yaml").write_bytes(b"edited by hand\n")
    before, objects = stamps(root), sorted(p.name for p in Path(work.path, "objects").rglob("*"))
    many = {f"rendered/gpu-a/team-a/pod-{i}.yaml": b"kind: Pod # %d\n" % i for i in range(600)}
    with pytest.raises(errors.DirtyCheckout, match="state/leases/team-a/r1.yaml"):
        commit_during_the_pass(work, NEW_STATE | many | {"state/leases/team-a/r1.yaml": b"x\n"}, NOW + 60)
    assert stamps(root) == before
    assert sorted(p.name for p in Path(work.path, "objects").rglob("*")) == objects


# ------------------------------------------------------------------------- a writer killed mid-move


class Killed(BaseException):
    """kill -9 in the middle of writing a file: nothing after it runs (no except, no cleanup)."""


def dies_writing(monkeypatch: pytest.MonkeyPatch, victim: str) -> None:
    """The writer dies having opened `victim` (truncated) and written none of it."""
    real = workfiles.write

    def write(workdir: str, path: str, data: bytes, mode: int, made: set[str]) -> os.stat_result:
        if path == victim:
            real(workdir, path, b"", mode, made)
            raise Killed
        return real(workdir, path, data, mode, made)

    monkeypatch.setattr(workfiles, "write", write)


def upstream_spec_change(tmp_path: Path) -> tuple[pygit2.Repository, pygit2.Repository, pygit2.Oid]:
    """A person's commit on the remote adding r2 and editing r1; (work, other, the seed commit)."""
    url = str(make_remote(tmp_path))
    other, work = clone(url, tmp_path / "other.git"), clone(url, tmp_path / "work", bare=False)
    seed = work.references["refs/heads/main"].target
    human_commit(
        other, {"runs/team-a/r1.yaml": b"kind: Run # r1 v2\n", "runs/team-a/r2.yaml": b"kind: Run # r2\n"}
    )
    assert gitremote.push(other, "origin", "main", str(seed)).ok
    return work, other, seed


def test_a_spec_file_a_killed_fast_forward_left_empty_is_put_back_and_the_next_move_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, _, seed = upstream_spec_change(tmp_path)
    root = Path(work.workdir)
    (root / "runs/team-a2/r9.yaml").write_bytes(b"kind: Run # a person's edit\n")
    (root / "notes.txt").write_text("scratch\n")
    with monkeypatch.context() as patched:
        dies_writing(patched, "runs/team-a/r2.yaml")
        with pytest.raises(Killed):
            gitremote.sync_with_remote(work)
    assert work.references["refs/heads/main"].target == seed  # files first: the branch never moved
    assert (root / "runs/team-a/r1.yaml").read_bytes() == b"kind: Run # r1 v2\n"  # written before
    assert (root / "runs/team-a/r2.yaml").read_bytes() == b""  # cut short: neither old nor new
    # the pass after: the journal puts both back to the branch head, then the fast-forward goes through
    assert checkoutjournal.recover(work) == ["runs/team-a/r1.yaml", "runs/team-a/r2.yaml"]
    assert not (root / "runs/team-a/r2.yaml").exists()
    assert git_status(root) == [" M runs/team-a2/r9.yaml", "?? notes.txt"]
    assert gitremote.sync_with_remote(work) is gitremote.SyncOutcome.FAST_FORWARDED
    assert (root / "runs/team-a/r2.yaml").read_bytes() == b"kind: Run # r2\n"
    assert (root / "runs/team-a2/r9.yaml").read_bytes() == b"kind: Run # a person's edit\n"
    assert git_status(root) == [" M runs/team-a2/r9.yaml", "?? notes.txt"]
    assert not os.path.exists(checkoutjournal.path_of(work.path))


def test_a_journal_left_behind_is_settled_by_the_next_move_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, _, _ = upstream_spec_change(tmp_path)
    with monkeypatch.context() as patched:
        dies_writing(patched, "runs/team-a/r2.yaml")
        with pytest.raises(Killed):
            gitremote.sync_with_remote(work)
    assert gitremote.sync_with_remote(work) is gitremote.SyncOutcome.FAST_FORWARDED  # no DirtyCheckout
    assert git_status(Path(work.workdir)) == []


def test_a_writer_killed_after_the_branch_moved_is_finished_by_the_next_pass(
    work: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(work.workdir)
    assert bot_commit(work, NEW_STATE) is not None
    parent = work.references["refs/heads/main"].peel(pygit2.Commit)
    files = NEW_STATE | {"state/leases/team-a/r1.yaml": b"newer lease\n", "state/new.yaml": b"n\n"}
    tree = pygit2.Index()
    tree.read_tree(parent.tree)
    for path, data in files.items():
        tree.add(pygit2.IndexEntry(path, work.create_blob(data), pygit2.GIT_FILEMODE_BLOB))
    sig = pygit2.Signature("jobtree", "jobtree@fleet.example", NOW, 0)
    oid = work.create_commit(None, sig, sig, "state\n", tree.write_tree(work), [parent.id])
    with monkeypatch.context() as patched:
        dies_writing(patched, "state/new.yaml")
        pending = worktree.move_branch(work, "main", oid, background=True)
        assert pending is not None
        with pytest.raises(errors.TemporaryGitError):
            pending.wait()
    assert work.references["refs/heads/main"].target == oid
    assert (root / "state/new.yaml").read_bytes() == b""
    assert checkoutjournal.recover(work) == ["state/leases/team-a/r1.yaml", "state/new.yaml"]
    assert (root / "state/new.yaml").read_bytes() == b"n\n"
    assert (root / "state/leases/team-a/r1.yaml").read_bytes() == b"newer lease\n"
    assert git_status(root) == []


def test_a_journal_is_dropped_untouched_once_a_person_checked_out_another_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, _, _ = upstream_spec_change(tmp_path)
    root = Path(work.workdir)
    with monkeypatch.context() as patched:
        dies_writing(patched, "runs/team-a/r2.yaml")
        with pytest.raises(Killed):
            gitremote.sync_with_remote(work)
    work.references.create("refs/heads/mine", work.references["refs/heads/main"].target)
    work.set_head("refs/heads/mine")
    assert checkoutjournal.recover(work) == []
    assert (root / "runs/team-a/r2.yaml").read_bytes() == b""  # the person's checkout now: theirs
    assert not os.path.exists(checkoutjournal.path_of(work.path))


def test_a_journal_a_killed_writer_never_renamed_into_place_is_removed(tmp_path: Path) -> None:
    work, _, _ = upstream_spec_change(tmp_path)
    where = checkoutjournal.path_of(work.path)
    os.makedirs(os.path.dirname(where), exist_ok=True)
    partial = f"{where}.4242.tmp"  # killed while writing its journal: no work-tree file written yet
    with open(partial, "wb") as fh:
        fh.write(b'{"branch": "ma')
    assert checkoutjournal.recover(work) == []
    assert not os.path.exists(partial)


def test_a_new_file_whose_directory_is_missing_still_conflicts_with_a_staged_entry(
    work: pygit2.Repository,
) -> None:
    """The work tree is not looked at below a missing directory; the index still is."""
    root = Path(work.workdir)
    assert bot_commit(work, NEW_STATE) is not None
    (root / "rendered/gpu-z/team-q").mkdir(parents=True)
    (root / "rendered/gpu-z/team-q/pod-1.yaml").write_bytes(b"staged by hand\n")
    work.index.read()
    work.index.add("rendered/gpu-z/team-q/pod-1.yaml")
    work.index.write()
    (root / "rendered/gpu-z/team-q/pod-1.yaml").unlink()
    (root / "rendered/gpu-z/team-q").rmdir()
    (root / "rendered/gpu-z").rmdir()
    with pytest.raises(errors.DirtyCheckout, match="rendered/gpu-z/team-q/pod-1.yaml"):
        commit_during_the_pass(work, NEW_STATE | {"rendered/gpu-z/team-q/pod-1.yaml": b"x\n"}, NOW + 60)
    assert not (root / "rendered/gpu-z").exists()
