"""`jobtree reconcile` against real repositories: the template fleet, bare remotes, races and crashes.

Expected numbers come from the template (fleet-repo-template/): two NVL72 GB200 domains of
18×4 = 72 GPUs and one 8×8 H100 domain. Every run fits at once: GB200 asks 64 (pretrain-64) +
32 + 2 groups × 4 spares (moe-spares) + 32 (train-cofunded) = 136 ≤ 144; H100 asks 8
(whisper-finetune) + 16 (vit-elastic at totalGPUs, also its desired width) = 24 ≤ 64. Active GPUs:
64+32+32+8+16 = 152. Without its desired width (`growing_files`), vit-elastic (step 8, max 32)
grows one step per pass: 24, then 32.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pygit2
import pytest
import yaml
from click.testing import CliRunner

from planner import manifests
from reconciler.cli.reconcile import command
from reconciler.git import errors, localpath
from reconciler.git import read as gitread
from reconciler.git import remote as gitremote
from reconciler.git.checkout import files as workfiles
from reconciler.passes.reconcile import reconcile_once
from reconciler.state import codec as statefiles
from tests.support import REPO
from tests.support.git import (
    BOT_EMAIL,
    HUMAN,
    RECONCILE_CLI,
    T0,
    active_gpus,
    bare_remote,
    cli_env,
    clone,
    daemon,
    free_port,
    growing_files,
    lock_held_elsewhere,
    state_at,
    steady_files,
    template_files,
    write_tree,
)

__all__ = ["daemon"]  # a fixture: imported for pytest, used by name

WANT_ACTIVE_GPUS = 152


def slots(state: statefiles.FleetState) -> list[str]:
    return [f"{x.node}#{s}" for x in state.leases if x.open and x.role != "Borrowed" for s in x.slots]


def vit_width(state: statefiles.FleetState) -> int:
    return sum(x.gpus for x in state.leases if x.open and x.run == "media-vision/vit-elastic")


# -------------------------------------------------------------------------------------- one pass


def test_the_template_fleet_is_reconciled_and_pushed_to_a_bare_remote(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    work = clone(remote, tmp_path / "work")
    spec_sha = str(work.head.target)
    outcome = reconcile_once(tmp_path / "work", now=T0, push=True)
    assert outcome.pushed and outcome.commit is not None
    served = pygit2.Repository(str(remote))
    head = served.references["refs/heads/main"].peel(pygit2.Commit)
    assert str(head.id) == outcome.commit and [str(p) for p in head.parent_ids] == [spec_sha]
    assert head.message.rstrip().endswith(f"Spec-Commit: {spec_sha}")
    assert "started 5 runs (152 GPUs)" in head.message
    state = state_at(served)
    assert active_gpus(state) == WANT_ACTIVE_GPUS
    assert {x.run for x in state.leases if x.open} == {
        "media-audio/whisper-finetune", "media-vision/vit-elastic", "rai-llm/pretrain-64",
        "rai-sys/moe-spares", "rai-sys/train-cofunded",
    }  # fmt: skip
    assert sum(x.gpus for x in state.leases if x.role == "Spare") == 8
    rendered = gitread.read_files(served, "main", ["rendered/gb-west/rai-llm/"])
    assert list(rendered) == ["rendered/gb-west/rai-llm/pretrain-64.yaml"]  # one file per run and cluster
    docs = list(yaml.safe_load_all(rendered["rendered/gb-west/rai-llm/pretrain-64.yaml"]))
    # 64 GB200 GPUs in groups of 32 on 4-GPU nodes: 16 pods, then the run's headless Service
    assert [d["kind"] for d in docs] == ["Pod"] * 16 + ["Service"] and docs[16]["spec"]["clusterIP"] == "None"
    assert sum(manifests.pod_gpus(d) for d in docs[:16]) == 64
    ledger = gitread.read_files(served, "main", ["state/ledger/"])
    assert list(ledger) == ["state/ledger/2026-03-02.jsonl"]
    # the checkout a person looks at shows the same files
    assert (tmp_path / "work" / "state" / "fleet.yaml").read_bytes() == gitread.read_files(
        served, "main", ["state/fleet.yaml"]
    )["state/fleet.yaml"]


def test_reconciling_again_with_nothing_due_makes_no_commit(tmp_path: Path) -> None:
    bare_remote(tmp_path, growing_files())
    path = tmp_path / "work"
    repo = clone(tmp_path / "fleet.git", path)
    first = reconcile_once(path, now=T0)
    assert first.commit is not None and vit_width(state_at(repo)) == 16
    # a pass is a fixed point (§4.5): again at the same instant, nothing; growth is one step per
    # later pass (§4.7): the next two add 8 GPUs each
    assert reconcile_once(path, now=T0).commit is None
    assert reconcile_once(path, now=T0 + 60).commit is not None and vit_width(state_at(repo)) == 24
    assert reconcile_once(path, now=T0 + 300).commit is not None and vit_width(state_at(repo)) == 32
    head = str(repo.head.target)
    for later in (T0 + 300, T0 + 900, T0 + 3600, T0 + 86400):  # GPU-hours accrue, nothing else
        assert reconcile_once(path, now=later).commit is None
    assert str(repo.head.target) == head


def test_the_ledger_appends_each_passes_events_to_its_day(tmp_path: Path) -> None:
    bare_remote(tmp_path, growing_files())
    path = tmp_path / "work"
    repo = clone(tmp_path / "fleet.git", path)
    reconcile_once(path, now=T0)
    day = gitread.read_files(repo, "main", ["state/ledger/"])["state/ledger/2026-03-02.jsonl"]
    first = day.decode().splitlines()
    reconcile_once(path, now=T0 + 300)
    after = gitread.read_files(repo, "main", ["state/ledger/"])["state/ledger/2026-03-02.jsonl"]
    lines = after.decode().splitlines()
    assert lines[: len(first)] == first and len(lines) == len(first) + 1
    assert '"reason": "Grow"' in lines[-1] and '"run": "media-vision/vit-elastic"' in lines[-1]


def test_metered_gpu_hours_land_with_the_next_meaningful_commit(tmp_path: Path) -> None:
    bare_remote(tmp_path, steady_files())
    path = tmp_path / "work"
    repo = clone(tmp_path / "fleet.git", path)
    reconcile_once(path, now=T0)
    assert reconcile_once(path, now=T0 + 3600).commit is None
    # a new run is a meaningful change; the hour since the last commit is metered with it
    files = gitread.read_files(repo, "main")
    run = files["runs/media-audio/whisper-finetune.yaml"].replace(b"whisper-finetune", b"whisper-more")
    parent = repo.head.peel(pygit2.Commit)
    tree = write_tree(repo, {**files, "runs/media-audio/whisper-more.yaml": run})
    repo.create_commit("refs/heads/main", HUMAN, HUMAN, "another run\n", tree, [parent.id])
    repo.checkout_head(strategy=pygit2.GIT_CHECKOUT_FORCE)
    assert reconcile_once(path, now=T0 + 3600).commit is not None
    state = state_at(repo)
    whisper = state.runs["media-audio/whisper-finetune"]
    assert whisper.owned_hours == pytest.approx(8.0)  # 8 GPUs for exactly one hour


# ------------------------------------------------------------------------------------- remotes


def test_two_reconcilers_racing_on_one_remote_never_double_book_a_slot(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, growing_files())
    paths = [tmp_path / "one", tmp_path / "two"]
    for p in paths:
        clone(remote, p)
    errors: list[BaseException] = []

    def run(path: Path, offset: int) -> None:
        try:
            for step in range(3):
                reconcile_once(path, now=T0 + offset + step * 300, push=True, attempts=8)
        except BaseException as err:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(p, i * 60)) for i, p in enumerate(paths)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    served = pygit2.Repository(str(remote))
    walker = served.walk(served.references["refs/heads/main"].target)
    assert all(len(c.parent_ids) <= 1 for c in walker)  # linear history
    state = state_at(served)
    taken = slots(state)
    assert len(taken) == len(set(taken))
    assert active_gpus(state) == WANT_ACTIVE_GPUS + 16  # vit-elastic grew twice, to 32


def test_an_unreachable_remote_is_one_clear_error_and_exit_four(tmp_path: Path) -> None:
    bare_remote(tmp_path)
    repo = clone(tmp_path / "fleet.git", tmp_path / "work")
    url = f"git://127.0.0.1:{free_port()}/fleet.git"
    repo.remotes.set_url("origin", url)
    result = CliRunner().invoke(
        command, [str(tmp_path / "work"), "--push", "--now", "2026-03-02T09:00:00Z", "--quiet"]
    )
    assert result.exit_code == 4
    assert url in result.output and "Traceback" not in result.output


def test_a_remote_that_never_answers_times_out_and_frees_the_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare_remote(tmp_path)
    repo = clone(tmp_path / "fleet.git", tmp_path / "work")
    silent = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel's backlog), never answers
    url = f"git://127.0.0.1:{silent.getsockname()[1]}/fleet.git"
    repo.remotes.set_url("origin", url)
    monkeypatch.setenv("JOBTREE_GIT_TIMEOUT", "2")
    try:
        for _ in range(2):  # the first pass let go of the writer lock: the next one gets as far
            started = time.monotonic()
            result = CliRunner().invoke(command, [str(tmp_path / "work"), "--push", "--quiet"])
            assert result.exit_code == 4 and time.monotonic() - started < 20
            assert (
                url in result.output and "timed out" in result.output and "next pass retries" in result.output
            )
    finally:
        silent.close()


def commit_spec(repo: pygit2.Repository, files: dict[str, bytes], message: str) -> str:
    """A person's spec commit on main, checked out (as `git commit` leaves it); not pushed."""
    parent = repo.references["refs/heads/main"].peel(pygit2.Commit)
    tree = write_tree(repo, {**gitread.read_files(repo, "main"), **files})
    oid = repo.create_commit("refs/heads/main", HUMAN, HUMAN, message, tree, [parent.id])
    repo.checkout_head(strategy=pygit2.GIT_CHECKOUT_FORCE)
    return str(oid)


def another_run(repo: pygit2.Repository, name: str) -> dict[str, bytes]:
    run = gitread.read_file(repo, "main", "runs/media-audio/whisper-finetune.yaml")
    assert run is not None
    return {f"runs/media-audio/{name}.yaml": run.replace(b"whisper-finetune", name.encode())}


def test_a_persons_unpushed_spec_commit_is_refused_and_kept_intact(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, steady_files())
    mine, theirs = clone(remote, tmp_path / "mine"), tmp_path / "theirs"
    clone(remote, theirs)
    spec = commit_spec(mine, another_run(mine, "b1"), "add b1\n")
    assert reconcile_once(theirs, now=T0, push=True).pushed  # the remote moves on first
    result = CliRunner().invoke(
        command, [str(tmp_path / "mine"), "--push", "--now", "2026-03-02T09:00:00Z", "--quiet"]
    )
    assert result.exit_code == 4, result.output
    assert "main has 1 local commit that origin/main does not have" in result.output
    assert f'{spec[:12]} "add b1"' in result.output and "pull request" in result.output
    assert "Traceback" not in result.output
    assert str(mine.references["refs/heads/main"].target) == spec  # nothing discarded
    assert (tmp_path / "mine" / "runs" / "media-audio" / "b1.yaml").exists()
    assert mine.status() == {}  # the work tree is as the person left it
    assert reconcile_once(tmp_path / "mine", now=T0).commit is not None  # without --push: no sync at all
    assert gitread.read_file(mine, "main", "runs/media-audio/b1.yaml") is not None


def test_a_run_committed_in_the_clone_of_an_unmoved_remote_is_pushed_with_its_state_commit(
    tmp_path: Path,
) -> None:
    # one clone, as an admin (or the benchmark) works: commit a run, reconcile --push, as `git push` would
    remote = bare_remote(tmp_path, steady_files())
    mine = clone(remote, tmp_path / "mine")
    spec = commit_spec(mine, another_run(mine, "b1"), "add b1\n")
    outcome = reconcile_once(tmp_path / "mine", now=T0, push=True)
    assert outcome.pushed
    served = pygit2.Repository(str(remote))
    head = served.references["refs/heads/main"].peel(pygit2.Commit)
    assert [str(p.id) for p in head.parents] == [spec] and head.author.email == BOT_EMAIL
    assert gitread.read_file(served, "main", "state/leases/media-audio/b1.yaml") is not None


def test_the_reconcilers_own_unpushed_commit_is_discarded_and_replanned(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, steady_files())
    mine, theirs = clone(remote, tmp_path / "mine"), clone(remote, tmp_path / "theirs")
    unpushed = reconcile_once(tmp_path / "mine", now=T0).commit  # as a pass killed before its push
    assert unpushed is not None
    spec = commit_spec(theirs, another_run(theirs, "whisper-more"), "another run\n")
    assert gitremote.push(theirs, "origin", "main", str(theirs.head.peel(pygit2.Commit).parent_ids[0])).ok
    outcome = reconcile_once(tmp_path / "mine", now=T0, push=True)
    assert outcome.pushed and outcome.commit is not None
    served = pygit2.Repository(str(remote))
    head = served.references["refs/heads/main"].peel(pygit2.Commit)
    assert str(head.id) == outcome.commit and [str(p) for p in head.parent_ids] == [spec]
    assert unpushed not in served and not mine.descendant_of(head.id, unpushed)  # thrown away
    assert "media-audio/whisper-more" in {x.run for x in state_at(served).leases if x.open}  # re-planned
    assert str(mine.references["refs/heads/main"].target) == outcome.commit


def test_a_relative_remote_url_is_read_from_the_repository_not_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = bare_remote(tmp_path, name="rc.git")
    clone(remote, tmp_path / "rc").remotes.set_url("origin", "../rc.git")
    monkeypatch.chdir(tmp_path)  # `jobtree reconcile rc --push` from the parent directory
    result = CliRunner().invoke(command, ["rc", "--push", "--now", "2026-03-02T09:00:00Z", "--quiet"])
    assert result.exit_code == 0, result.output
    served = pygit2.Repository(str(remote))
    assert served.references["refs/heads/main"].peel(pygit2.Commit).author.email == BOT_EMAIL
    pygit2.Repository(str(tmp_path / "rc")).remotes.set_url("origin", "../gone.git")
    result = CliRunner().invoke(command, ["rc", "--push", "--now", "2026-03-02T09:00:00Z", "--quiet"])
    assert result.exit_code == 4
    assert f"the local path {tmp_path / 'gone.git'} does not exist" in result.output
    assert "unsupported URL protocol" not in result.output


def test_a_server_that_refuses_the_push_is_reported_not_retried(
    daemon: tuple[Path, str], tmp_path: Path
) -> None:
    base, url = daemon
    bare_remote(base, name="refusing.git")
    hook = base / "refusing.git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'state/ is protected on this server' >&2\nexit 1\n")
    hook.chmod(0o755)
    clone(f"{url}/refusing.git", tmp_path / "work")
    result = CliRunner().invoke(
        command, [str(tmp_path / "work"), "--push", "--now", "2026-03-02T09:00:00Z", "--quiet"]
    )
    assert result.exit_code == 4
    assert "refused the state commit" in result.output and "pre-receive hook declined" in result.output


def test_apply_to_a_cluster_that_cannot_be_reached_commits_and_exits_4_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    files = template_files()
    files["jobtree.yaml"] += b"  clusters:\n    - {name: gb-west, context: prod}\n"
    bare_remote(tmp_path, files)
    clone(tmp_path / "fleet.git", tmp_path / "work")
    result = CliRunner().invoke(command, [str(tmp_path / "work"), "--apply", "--quiet"])
    assert result.exit_code == 4
    assert "cluster gb-west not observed" in result.output  # planned with what Git last recorded of it
    assert "cluster gb-west not applied: gb-west: cannot load context prod" in result.output


# --------------------------------------------------------------------------------------- crashes


def test_kill_nine_at_random_points_then_one_clean_pass_converges(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, steady_files())
    reference = tmp_path / "reference"
    clone(remote, reference)
    shutil.copytree(remote, tmp_path / "reference-remote.git")
    pygit2.Repository(str(reference)).remotes.set_url("origin", str(tmp_path / "reference-remote.git"))
    want = reconcile_once(reference, now=T0, push=True)
    assert want.commit is not None
    victim = tmp_path / "victim"
    clone(remote, victim)
    cmd = [*RECONCILE_CLI, str(victim), "--push", "--quiet", "--now", "2026-03-02T09:00:00Z"]
    for delay in (0.05, 0.2, 0.35, 0.5, 0.8):
        proc = subprocess.Popen(cmd, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    lock = remote / "refs" / "heads" / "main.lock"
    if lock.exists():  # a kill as the push moved the ref: a later pass takes it over once stale
        old = time.time() - localpath.REF_LOCK_STALE - 1
        os.utime(lock, (old, old))  # the next scheduled pass comes later than that
    reconcile_once(victim, now=T0, push=True)  # converges, whatever the kills left behind
    assert reconcile_once(victim, now=T0, push=True).commit is None
    got = state_at(pygit2.Repository(str(remote)))
    expected = state_at(pygit2.Repository(str(tmp_path / "reference-remote.git")))
    assert sorted(slots(got)) == sorted(slots(expected))
    assert sorted(x.name for x in got.leases) == sorted(x.name for x in expected.leases)
    ledger = gitread.read_files(pygit2.Repository(str(remote)), "main", ["state/ledger/"])
    starts = [line for line in b"".join(ledger.values()).splitlines() if b'"event": "Start"' in line]
    assert len(starts) == len({line for line in starts})  # no event recorded twice


def test_a_lock_left_by_a_killed_writer_is_taken_over(tmp_path: Path) -> None:
    bare_remote(tmp_path)
    path = tmp_path / "work"
    repo = clone(tmp_path / "fleet.git", path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (Path(repo.path) / "jobtree.lock").write_text(f"pid={dead.pid} host={socket.gethostname()} since=0\n")
    assert reconcile_once(path, now=T0).commit is not None


KILLED_TAKING_THE_LOCK = """
import os, signal, sys
from pathlib import Path
from reconciler.git import lock
os.link = lambda *_: os.kill(os.getpid(), signal.SIGKILL)  # killed after the draft, before the link
lock._place(Path(sys.argv[1]) / "jobtree.lock", "pid=1 host=h since=0\\n")
"""


def test_a_writer_killed_as_it_takes_the_lock_leaves_no_empty_lock_and_its_draft_goes(tmp_path: Path) -> None:
    # the fault: a kill -9 between creating the lock file and writing it left an empty lock, which
    # every later pass took for "a writer that is starting" and waited on
    bare_remote(tmp_path)
    path = tmp_path / "work"
    repo = clone(tmp_path / "fleet.git", path)
    killed = subprocess.run([sys.executable, "-c", KILLED_TAKING_THE_LOCK, repo.path], env=cli_env())
    assert killed.returncode == -signal.SIGKILL
    gitdir = Path(repo.path)
    assert not (gitdir / "jobtree.lock").exists() and list(gitdir.glob("jobtree.lock.*.draft"))
    assert reconcile_once(path, now=T0).commit is not None  # at once, no wait
    assert list(gitdir.glob("jobtree.lock*")) == []


def test_a_reconcile_started_while_another_process_reconciles_the_clone_waits_then_runs(
    tmp_path: Path,
) -> None:
    # a cron's pass and a webhook's on one clone: the second waits for the first instead of exit 4
    remote = bare_remote(tmp_path)
    path = tmp_path / "work"
    repo = clone(remote, path)
    with lock_held_elsewhere(repo.path, 1.5) as holder:
        result = CliRunner().invoke(command, [str(path), "--push", "--now", "2026-03-02T09:00:00Z"])
    assert result.exit_code == 0, result.output
    assert f"waiting up to 60 s: {repo.path}jobtree.lock is held by pid={holder.pid} " in result.output
    served = pygit2.Repository(str(remote)).references["refs/heads/main"].peel(pygit2.Commit)
    assert served.author.email == BOT_EMAIL


def test_remote_history_after_pushes_is_the_spec_commit_then_state_commits(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, growing_files())
    clone(remote, tmp_path / "work")
    reconcile_once(tmp_path / "work", now=T0, push=True)
    reconcile_once(tmp_path / "work", now=T0 + 300, push=True)
    served = pygit2.Repository(str(remote))
    authors = [c.author.email for c in served.walk(served.references["refs/heads/main"].target)]
    assert authors == [BOT_EMAIL, BOT_EMAIL, "ada@example.com"]


def test_state_files_left_half_written_in_the_checkout_are_restored_and_other_edits_kept(
    tmp_path: Path,
) -> None:
    bare_remote(tmp_path, steady_files())
    path = tmp_path / "work"
    clone(tmp_path / "fleet.git", path)
    reconcile_once(path, now=T0)
    (path / "state" / "fleet.yaml").write_text("asOf: half-writ")
    (path / "state" / "leases" / "rai-llm" / "pretrain-64.yaml").unlink()
    (path / "state" / "leases" / "stray.yaml").write_text("kind: Lease\n")
    (path / "runs" / "rai-llm" / "notes.txt").write_text("a person's scratch file\n")
    done = reconcile_once(path, now=T0)
    assert done.commit is None
    repo = pygit2.Repository(str(path))
    assert {p for p in repo.status() if p.startswith("state/")} == set()
    assert (path / "runs" / "rai-llm" / "notes.txt").exists()
    # named, even without progress (a warning the command line prints even with --quiet): a
    # person's stray file under state/ is among them
    said = "\n".join(done.warnings)
    assert "put back 3 files under state/ and rendered/ as main has them" in said
    assert "state/leases/stray.yaml" in said and "state/fleet.yaml" in said
    # nothing a person wrote there is lost: each file as it was waits in the Git dir, named
    (copies,) = (path / ".git" / "jobtree" / "put-back").iterdir()
    assert str(copies) in said
    assert (copies / "state" / "leases" / "stray.yaml").read_text() == "kind: Lease\n"
    assert (copies / "state" / "fleet.yaml").read_text() == "asOf: half-writ"
    assert not (copies / "state" / "leases" / "rai-llm").exists()  # deleted: nothing to keep


def test_a_spec_file_a_killed_pass_left_empty_while_fast_forwarding_is_put_back_by_the_next_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = bare_remote(tmp_path, steady_files())
    clone(remote, tmp_path / "other")
    victim = tmp_path / "victim"
    clone(remote, victim)
    # a person adds a run upstream, and another clone reconciles it and pushes the state
    served = pygit2.Repository(str(remote))
    files = gitread.read_files(served, "main")
    added = "runs/media-audio/whisper-more.yaml"
    files[added] = files["runs/media-audio/whisper-finetune.yaml"].replace(
        b"whisper-finetune", b"whisper-more"
    )
    parent = served.references["refs/heads/main"].target
    served.create_commit(
        "refs/heads/main", HUMAN, HUMAN, "another run\n", write_tree(served, files), [parent]
    )
    assert reconcile_once(tmp_path / "other", now=T0, push=True).pushed
    # this clone's pass dies writing the new spec file while fast-forwarding to the remote head
    real = workfiles.write

    def killed(workdir: str, path: str, data: bytes, mode: int, made: set[str]) -> os.stat_result:
        if path == added:
            real(workdir, path, b"", mode, made)
            raise KeyboardInterrupt  # stands in for kill -9: the write never finishes
        return real(workdir, path, data, mode, made)

    with monkeypatch.context() as patched:
        patched.setattr(workfiles, "write", killed)
        with pytest.raises(KeyboardInterrupt):
            reconcile_once(victim, now=T0, push=True)
    assert (victim / added).read_bytes() == b""
    outcome = reconcile_once(victim, now=T0, push=True)  # no "local edits would be overwritten"
    assert outcome.head == str(served.references["refs/heads/main"].target)
    assert (victim / added).read_bytes() == files[added]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=victim, capture_output=True, text=True)
    assert status.stdout == ""


# ---------------------------------------------------------------------------------- command line


def bad_run(name: str) -> bytes:
    return (
        b"apiVersion: rq.davidlangworthy.io/v1\nkind: Run\nmetadata:\n  name: %s\n"
        b"  namespace: media-audio\nspec:\n  owner: org:acme:media:audio\n  resourcez: 1\n" % name.encode()
    )


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "with progress"])
def test_reconcile_prints_every_spec_problem_as_validate_does_and_still_plans_the_valid_runs(
    tmp_path: Path, quiet: bool
) -> None:
    files = steady_files() | {f"runs/media-audio/bad{i}.yaml": bad_run(f"bad{i}") for i in range(2)}
    bare_remote(tmp_path, files)
    clone(tmp_path / "fleet.git", tmp_path / "work")
    args = [str(tmp_path / "work"), "--now", "2026-03-02T09:00:00Z"] + ["--quiet"] * quiet
    result = CliRunner().invoke(command, args)
    assert (
        result.exit_code == 3
    )  # invalid fleet files (DESIGN §5), though the valid neighbours were committed
    assert "committed" in result.stdout
    want_lines = [
        "runs/media-audio/bad0.yaml:6:1: JT010 spec.resources is required; add it",
        "runs/media-audio/bad0.yaml:8:3: JT010 unknown field spec.resourcez; did you mean resources? "
        "rename it (or remove it)",
    ]
    problems = [line for line in result.stderr.splitlines() if line.startswith("runs/")]
    assert problems[:2] == want_lines and len(problems) == 4
    assert "4 problems in the fleet files" in result.stderr


@pytest.mark.parametrize("path", ["jobtree.yaml", "inventory/nodes.yaml"])
def test_an_invalid_fleet_or_inventory_file_plans_and_commits_nothing_and_exits_three(
    tmp_path: Path, path: str
) -> None:
    # every object depends on these two: with jobtree.yaml broken no run has a tenant, with the
    # inventory broken no node exists, and planning anyway would stop every running run
    remote = bare_remote(tmp_path, steady_files())
    work = clone(remote, tmp_path / "work")
    assert reconcile_once(tmp_path / "work", now=T0, push=True).pushed
    fleet = gitread.read_file(work, "main", path)
    assert fleet is not None
    broken = commit_spec(work, {path: fleet + b"  - {oops: [\n"}, "break a file\n")
    assert gitremote.push(work, "origin", "main", str(work.head.peel(pygit2.Commit).parent_ids[0])).ok
    state_before = state_at(work)
    args = [str(tmp_path / "work"), "--once", "--push", "--now", "2026-03-02T09:10:00Z"]
    result = CliRunner().invoke(command, args)
    assert result.exit_code == 3, result.output
    assert f"{path}:" in result.stderr and "JT001" in result.stderr
    assert f"{path} does not validate, so nothing was planned or committed" in result.stderr
    assert "the valid ones were reconciled" not in result.stderr and "Traceback" not in result.output
    served = pygit2.Repository(str(remote))
    assert str(served.references["refs/heads/main"].target) == broken  # no state commit on top of it
    assert str(work.references["refs/heads/main"].target) == broken
    # fixed: the next pass finds the fleet as the last state commit left it (nothing moved meanwhile)
    commit_spec(work, {path: fleet}, "fix it\n")
    assert gitremote.push(work, "origin", "main", broken).ok
    assert reconcile_once(tmp_path / "work", now=T0 + 600, push=True).commit is None
    assert state_at(work).leases == state_before.leases


def test_a_deleted_inventory_stops_the_pass_instead_of_failing_every_running_run(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path, steady_files())
    work = clone(remote, tmp_path / "work")
    assert reconcile_once(tmp_path / "work", now=T0).commit is not None
    before = state_at(work)
    parent = work.references["refs/heads/main"].peel(pygit2.Commit)
    files = {p: b for p, b in gitread.read_files(work, "main").items() if p != "inventory/nodes.yaml"}
    work.create_commit(
        "refs/heads/main", HUMAN, HUMAN, "drop the inventory\n", write_tree(work, files), [parent.id]
    )
    work.checkout_head(strategy=pygit2.GIT_CHECKOUT_FORCE)
    result = CliRunner().invoke(command, [str(tmp_path / "work"), "--once", "--now", "2026-03-02T09:10:00Z"])
    assert result.exit_code == 3, result.output
    assert (
        f"inventory/nodes.yaml is missing or lists no node while {len([x for x in before.leases if x.open])} "
        "leases are open, so nothing was planned or committed" in result.stderr
    )
    assert (
        state_at(work).leases == before.leases
        and work.head.peel(pygit2.Commit).message == "drop the inventory\n"
    )


def test_reconcile_caps_the_problems_it_prints_and_points_to_validate(tmp_path: Path) -> None:
    files = steady_files() | {f"runs/media-audio/bad{i:02d}.yaml": bad_run(f"bad{i:02d}") for i in range(30)}
    bare_remote(tmp_path, files)
    clone(tmp_path / "fleet.git", tmp_path / "work")
    result = CliRunner().invoke(command, [str(tmp_path / "work"), "--quiet", "--now", "2026-03-02T09:00:00Z"])
    assert result.exit_code == 3
    problems = [line for line in result.stderr.splitlines() if line.startswith("runs/")]
    assert len(problems) == 50
    assert "... and 10 more (run `jobtree validate`)" in result.stderr.splitlines()


def test_a_valid_fleet_prints_no_problem_lines(tmp_path: Path) -> None:
    bare_remote(tmp_path, steady_files())
    clone(tmp_path / "fleet.git", tmp_path / "work")
    result = CliRunner().invoke(command, [str(tmp_path / "work"), "--quiet", "--now", "2026-03-02T09:00:00Z"])
    assert result.exit_code == 0 and result.stderr == ""


@pytest.mark.parametrize("interval", ["300000000000s", "99999999999999h", "9999999999999999999999s", "169h"])
def test_an_interval_too_long_to_keep_a_schedule_is_a_usage_error(tmp_path: Path, interval: str) -> None:
    bare_remote(tmp_path, steady_files())
    clone(tmp_path / "fleet.git", tmp_path / "work")
    result = CliRunner().invoke(command, [str(tmp_path / "work"), "--interval", interval])
    assert (
        result.exit_code == 2
        and f"--interval {interval}" in result.stderr
        and "Traceback" not in result.output
    )
    assert not (tmp_path / "work" / "state").exists()  # refused before any pass


def test_once_with_an_interval_is_a_usage_error_not_an_endless_loop(tmp_path: Path) -> None:
    bare_remote(tmp_path, steady_files())
    clone(tmp_path / "fleet.git", tmp_path / "work")
    result = CliRunner().invoke(command, [str(tmp_path / "work"), "--once", "--interval", "60s"])
    assert result.exit_code == 2
    assert "--once and --interval 60s exclude each other" in result.stderr
    assert not (tmp_path / "work" / "state").exists()  # refused before any pass


def test_a_fixed_now_with_an_interval_is_a_usage_error_not_the_same_pass_over_and_over(
    tmp_path: Path,
) -> None:
    bare_remote(tmp_path, steady_files())
    clone(tmp_path / "fleet.git", tmp_path / "work")
    result = CliRunner().invoke(
        command, [str(tmp_path / "work"), "--interval", "60s", "--now", "2026-03-02T09:00:00Z"]
    )
    assert result.exit_code == 2
    assert "exclude each other: every pass would plan the same instant" in result.stderr
    assert not (tmp_path / "work" / "state").exists()  # refused before any pass


def test_a_path_that_is_not_a_repository_is_a_usage_error_as_for_plan(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "empty", tmp_path / "missing"):
        result = CliRunner().invoke(command, [str(path), "--once"])
        assert result.exit_code == 2, result.output
        assert f"{path} is not a Git repository" in result.stderr


def test_an_interval_keeps_reconciling_on_the_clock_committing_only_what_changed(tmp_path: Path) -> None:
    # the schedule: passes follow the real clock, one every interval; the first commits the state,
    # the next ones find nothing changed (meters moving alone make no commit) and the loop goes on
    remote = bare_remote(tmp_path, steady_files())
    work = tmp_path / "work"
    clone(remote, work)
    cmd = [*RECONCILE_CLI, str(work), "--interval", "1s", "--push", "--quiet"]
    proc = subprocess.Popen(cmd, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(60, proc.kill)  # a stalled loop prints nothing: end it, the asserts say why
    watchdog.start()
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        while len(lines) < 3:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        assert proc.poll() is None, "the loop is still running after three passes"
    finally:
        watchdog.cancel()
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert len(lines) == 3, (lines, err)
    assert lines[0].startswith("pushed ") and all(x.startswith("no change at ") for x in lines[1:]), lines
    assert "next pass at" not in err  # --quiet: no progress, nor the schedule
    assert proc.returncode == 143  # SIGTERM stops the loop as Ctrl-C does, exiting as the signal says
    assert not (work / ".git" / "jobtree.lock").exists()  # let go on the way out: a new pod's pass can run
    served = pygit2.Repository(str(remote))
    subjects = [c.message.splitlines()[0] for c in served.walk(served.head.target)]
    assert subjects[1:] == ["fleet from the template"] and subjects[0].startswith("jobtree: ")  # one commit


def test_a_missing_branch_says_which_setting_names_it_and_what_to_do(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    pygit2.init_repository(str(empty), initial_head="main")
    result = CliRunner().invoke(command, [str(empty), "--once", "--now", "2026-03-02T09:00:00Z"])
    assert (
        result.exit_code == 4 and "has no commits yet: commit the fleet files to main first" in result.output
    )
    # the fleet on `master` while jobtree.yaml's git.branch is unset (main)
    repo = pygit2.init_repository(str(tmp_path / "fleet"), initial_head="master")
    repo.create_commit("HEAD", HUMAN, HUMAN, "fleet\n", write_tree(repo, template_files()), [])
    repo.references.create("refs/tags/v1", repo.head.target)
    result = CliRunner().invoke(command, [str(tmp_path / "fleet"), "--once", "--now", "2026-03-02T09:00:00Z"])
    assert result.exit_code == 4
    assert "there is no branch 'main' here, which jobtree.yaml's git.branch names" in result.output
    assert "or pass --branch master" in result.output and "checked out files" not in result.output
    result = CliRunner().invoke(command, [str(tmp_path / "fleet"), "--once", "--branch", "v1"])
    assert result.exit_code == 4 and "no branch 'v1' here (v1 is a tag" in result.output
    assert "Traceback" not in result.output


def held_by(lock: Path) -> str:
    try:
        return lock.read_text()
    except FileNotFoundError:
        return ""


def test_sigterm_in_the_middle_of_a_pass_lets_go_of_the_clones_lock(tmp_path: Path) -> None:
    bare_remote(tmp_path)
    repo = clone(tmp_path / "fleet.git", tmp_path / "work")
    silent = socket.create_server(("127.0.0.1", 0))  # the pass waits on it, holding the lock
    repo.remotes.set_url("origin", f"git://127.0.0.1:{silent.getsockname()[1]}/fleet.git")
    lock = Path(repo.path) / "jobtree.lock"
    cmd = [*RECONCILE_CLI, str(tmp_path / "work"), "--interval", "60s", "--push", "--quiet"]
    proc = subprocess.Popen(
        cmd, env={**cli_env(), "JOBTREE_GIT_TIMEOUT": "3"}, stderr=subprocess.PIPE, text=True
    )
    try:
        holder = f"pid={proc.pid} "
        deadline = time.monotonic() + 30
        while holder not in held_by(lock) and time.monotonic() < deadline:
            time.sleep(0.02)  # the file appears empty, then holds its writer
        assert holder in held_by(lock)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        silent.close()
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert not lock.exists()


@pytest.mark.parametrize("value", ["0", "-1", "abc", "2.5", "²", "86401"])
def test_a_network_timeout_that_is_not_whole_seconds_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    bare_remote(tmp_path)
    clone(tmp_path / "fleet.git", tmp_path / "work")
    monkeypatch.setenv("JOBTREE_GIT_TIMEOUT", value)
    result = CliRunner().invoke(command, [str(tmp_path / "work"), "--push", "--quiet"])
    assert result.exit_code == 4 and "Traceback" not in result.output
    assert f"JOBTREE_GIT_TIMEOUT={value!r} is not a whole number of seconds from 1 to 86400" in result.output


def test_a_push_url_that_never_answers_is_named_in_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare_remote(tmp_path)
    repo = clone(tmp_path / "fleet.git", tmp_path / "work")
    silent = socket.create_server(("127.0.0.1", 0))
    push_url = f"git://127.0.0.1:{silent.getsockname()[1]}/fleet.git"
    repo.remotes.set_push_url("origin", push_url)  # fetched from the path, pushed over the network
    monkeypatch.setenv("JOBTREE_GIT_TIMEOUT", "2")
    try:
        result = CliRunner().invoke(command, [str(tmp_path / "work"), "--push", "--quiet"])
    finally:
        silent.close()
    assert result.exit_code == 4 and f"cannot push to remote 'origin' at {push_url}" in result.output


def test_a_future_now_pushed_is_warned_of_and_passes_on_the_clock_then_plan_as_of_it(tmp_path: Path) -> None:
    bare_remote(tmp_path)
    repo = clone(tmp_path / "fleet.git", tmp_path / "work")
    future = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400))
    result = CliRunner().invoke(command, [str(tmp_path / "work"), "--push", "--now", future, "--quiet"])
    assert result.exit_code == 0 and "is ahead of this machine's clock: pushed, it moved" in result.stderr
    same = CliRunner().invoke(command, [str(tmp_path / "work"), "--push", "--now", future, "--quiet"])
    assert same.stdout.startswith("no change at ") and "ahead of this machine's clock" not in same.stderr
    again = CliRunner().invoke(command, [str(tmp_path / "work"), "--push", "--quiet"])  # on the clock
    assert again.exit_code == 0 and again.stdout.startswith("no change at ")
    assert f"so this one plans as of {future}" in again.stderr
    assert f'asOf: "{future}"' in (gitread.read_file(repo, "main", "state/fleet.yaml") or b"").decode()


def test_a_git_directory_that_cannot_be_written_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare_remote(tmp_path)
    clone(tmp_path / "fleet.git", tmp_path / "work")
    real_open = os.open

    def read_only(path: object, flags: int, *args: object) -> int:
        if os.path.basename(str(path)).startswith("jobtree.lock"):  # the lock, or its draft
            raise OSError(30, "Read-only file system")
        return real_open(path, flags, *args)  # type: ignore[arg-type]  # os.open's overloads; passed through

    monkeypatch.setattr(os, "open", read_only)
    result = CliRunner().invoke(command, [str(tmp_path / "work"), "--quiet", "--now", "2026-03-02T09:00:00Z"])
    assert result.exit_code == 4 and "Traceback" not in result.output
    assert (
        "jobtree.lock (Read-only file system)" in result.output
        and "a clone you can write to" in result.output
    )


def test_a_signal_python_could_not_raise_still_stops_the_loop_after_its_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SIGTERM that arrived inside a weakref callback (Python prints it and carries on): remembered,
    # so the loop stops at its next safe point instead of sleeping until the next pass
    from reconciler.cli import signals

    bare_remote(tmp_path, steady_files())
    clone(tmp_path / "fleet.git", tmp_path / "work")
    monkeypatch.setattr(signals, "_received", [signal.SIGTERM])
    started = time.monotonic()
    result = CliRunner().invoke(command, [str(tmp_path / "work"), "--interval", "60s", "--quiet"])
    assert result.exit_code == 143 and time.monotonic() - started < 30
    assert result.stdout.startswith("committed ")  # the pass itself ran to its end


def test_a_branch_lock_a_crashed_push_left_on_the_remote_is_named_not_taken_for_a_moving_branch(
    tmp_path: Path,
) -> None:
    remote = bare_remote(tmp_path, steady_files())
    clone(remote, tmp_path / "work")
    lock = remote / "refs" / "heads" / "main.lock"
    lock.write_text("")
    with pytest.raises(errors.TemporaryGitError) as failed:
        reconcile_once(tmp_path / "work", now=T0, push=True, attempts=2)
    assert f"{lock} is held by a push that still runs, or was left by one killed less than" in str(
        failed.value
    )
    assert "kept moving" not in str(failed.value)
    lock.unlink()  # the next pass pushes the commit the failed one made, and says so
    outcome = reconcile_once(tmp_path / "work", now=T0, push=True)
    assert str(outcome).startswith(f"no new change; pushed {outcome.head[:12]}, which an earlier pass")
    served = pygit2.Repository(str(remote))
    assert served.references["refs/heads/main"].peel(pygit2.Commit).author.email == BOT_EMAIL


def test_a_local_remote_whose_hooks_a_push_would_skip_is_refused_and_samples_do_not_count(
    tmp_path: Path,
) -> None:
    remote = bare_remote(tmp_path, steady_files())
    clone(remote, tmp_path / "work")
    hooks = remote / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-receive.sample").write_text("#!/bin/sh\nexit 1\n")
    (hooks / "pre-receive.sample").chmod(0o755)
    before = pygit2.Repository(str(remote)).references["refs/heads/main"].target
    (hooks / "pre-receive").write_text("#!/bin/sh\necho rejected >&2\nexit 1\n")
    (hooks / "pre-receive").chmod(0o755)
    with pytest.raises(errors.PermanentGitError, match="runs pre-receive on pushes.*jobtree will not bypass"):
        reconcile_once(tmp_path / "work", now=T0, push=True)
    assert pygit2.Repository(str(remote)).references["refs/heads/main"].target == before
    (hooks / "pre-receive").chmod(0o644)  # not executable: git would not run it either
    assert reconcile_once(tmp_path / "work", now=T0, push=True).pushed


def test_a_clone_left_on_an_unborn_branch_is_told_which_branch_holds_the_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    remote = bare_remote(tmp_path, steady_files())
    pygit2.Repository(str(remote)).references["HEAD"].set_target("refs/heads/master")  # nothing there
    work = pygit2.clone_repository(str(remote), str(tmp_path / "work"))  # checks out nothing
    assert work.head_is_unborn
    assert reconcile_once(
        tmp_path / "work", now=T0, push=True, say=lambda text: print(text, file=sys.stderr)
    ).pushed
    said = capsys.readouterr().err
    assert "the work tree is on master, which has no commits; jobtree reconciles main" in said


_KILLED_IN_FETCH = """
import os, signal, sys
from pathlib import Path
import pygit2
from reconciler.passes.reconcile import reconcile_once

work = Path(sys.argv[1])

def dies(self, *args, **kwargs):  # libgit2 has taken FETCH_HEAD.lock to write FETCH_HEAD: kill -9 now
    (work / ".git" / "FETCH_HEAD.lock").write_text("")
    os.kill(os.getpid(), signal.SIGKILL)

pygit2.remotes.Remote.fetch = dies
reconcile_once(work, now=int(sys.argv[2]), push=True)
"""


def test_a_fetch_head_lock_left_by_a_pass_killed_while_fetching_is_removed_by_the_next(
    tmp_path: Path,
) -> None:
    # The fault: `.git/FETCH_HEAD.lock` left by a kill during a fetch was never removed, so every
    # `git fetch` in that clone failed ("Unable to create FETCH_HEAD.lock: File exists").
    bare_remote(tmp_path, steady_files())
    work = tmp_path / "work"
    clone(tmp_path / "fleet.git", work)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_IN_FETCH, str(work), str(T0)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    assert (work / ".git" / "FETCH_HEAD.lock").exists() and (work / ".git" / "jobtree.lock").exists()
    assert reconcile_once(
        work, now=T0, push=True
    ).pushed  # takes over the dead writer's lock and its Git locks
    assert not (work / ".git" / "FETCH_HEAD.lock").exists()
    fetched = subprocess.run(
        ["git", "-C", str(work), "fetch", "-q", "origin"], capture_output=True, text=True
    )
    assert fetched.returncode == 0, fetched.stderr
