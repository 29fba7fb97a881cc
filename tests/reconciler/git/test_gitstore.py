"""Git source and sink against real repositories: bare remotes, clones, and `git daemon` for server checks."""

from __future__ import annotations

import os
import random
import re
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pygit2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.git import errors
from reconciler.git import lock as writerlock
from reconciler.git import ownership as authorship
from reconciler.git import packs as gitpack
from reconciler.git import read as gitread
from reconciler.git import remote as gitremote
from reconciler.git.remote import PushStatus, SyncOutcome
from reconciler.state import message
from tests.support import REPO
from tests.support.git import (
    BOT,
    NEW_STATE,
    NOW,
    SEED_FILES,
    SPEC_SHA,
    bot_commit,
    daemon,
    free_port,
    lock_held_elsewhere,
    lose_the_race_after_the_fetch,
    make_remote,
    remote_head,
    write_tree,
)
from tests.support.git import (
    PERSON as HUMAN,
)
from tests.support.git import (
    clone_of as clone,
)
from tests.support.git import (
    person_commit as human_commit,
)

__all__ = ["daemon"]  # a fixture: imported for pytest, used by name


@pytest.fixture
def local(tmp_path: Path) -> pygit2.Repository:
    return clone(str(make_remote(tmp_path)), tmp_path / "clone.git")


@pytest.fixture
def served(daemon: tuple[Path, str], request: pytest.FixtureRequest) -> str:
    """A fresh bare remote served over git://, named after the test."""
    base, url = daemon
    name = f"{request.node.name.replace('[', '-').replace(']', '')}.git"
    make_remote(base, name)
    return f"{url}/{name}"


# ------------------------------------------------------------------------------------------- read


def test_reads_files_at_an_older_revision_without_a_checkout(local: pygit2.Repository) -> None:
    seed = str(local.references["refs/heads/main"].target)
    human_commit(local, {"runs/team-a/r1.yaml": b"kind: Run # edited\n"})
    assert gitread.read_files(local, seed) == SEED_FILES
    assert gitread.read_files(local, "main")["runs/team-a/r1.yaml"] == b"kind: Run # edited\n"


def test_prefixes_select_whole_directories_or_plain_string_prefixes(local: pygit2.Repository) -> None:
    want_runs = {"runs/team-a/r1.yaml", "runs/team-a2/r9.yaml"}
    assert set(gitread.read_files(local, "main", ["runs/"])) == want_runs
    assert set(gitread.read_files(local, "main", ["runs/team-a/"])) == {"runs/team-a/r1.yaml"}
    assert set(gitread.read_files(local, "main", ["runs/team-a"])) == want_runs
    assert set(gitread.read_files(local, "main", ["jobtree.yaml", "nothing/"])) == {"jobtree.yaml"}


def test_blob_ids_come_with_contents_so_callers_can_cache_parses(local: pygit2.Repository) -> None:
    blobs = gitread.read_blobs(local, "main", ["state/"])
    for oid, data in blobs.values():
        assert oid == str(pygit2.hash(data))
    assert gitread.list_blobs(local, "main", ["state/"]) == {p: oid for p, (oid, _) in blobs.items()}


def test_unknown_revisions_and_non_repositories_are_permanent_errors(local, tmp_path: Path) -> None:
    with pytest.raises(errors.RevisionNotFound, match="no-such-branch"):
        gitread.resolve(local, "no-such-branch")
    with pytest.raises(errors.NotARepository):
        gitread.open_repo(tmp_path / "nowhere")
    assert not errors.RevisionNotFound("x").temporary and errors.GitUnavailable("x").temporary


# ----------------------------------------------------------------------------------------- commit


def test_commit_replaces_owned_prefixes_and_keeps_every_other_file(local: pygit2.Repository) -> None:
    oid = bot_commit(local, NEW_STATE)
    assert oid is not None and local.references["refs/heads/main"].target == oid
    want = {k: v for k, v in SEED_FILES.items() if not k.startswith(("state/", "rendered/"))} | NEW_STATE
    assert gitread.read_files(local, "main") == want


def test_reconciling_the_same_files_twice_makes_no_second_commit(local: pygit2.Repository) -> None:
    first = bot_commit(local, NEW_STATE)
    assert first is not None
    assert bot_commit(local, dict(NEW_STATE), now=NOW + 600) is None
    assert local.references["refs/heads/main"].target == first


def test_same_inputs_and_now_give_the_same_commit_id_in_two_clones(tmp_path: Path) -> None:
    url = str(make_remote(tmp_path))
    one, two = clone(url, tmp_path / "one.git"), clone(url, tmp_path / "two.git")
    assert bot_commit(one, NEW_STATE) == bot_commit(two, dict(reversed(list(NEW_STATE.items()))))
    assert bot_commit(one, NEW_STATE | {"state/x.yaml": b"1\n"}, now=NOW + 1) != bot_commit(
        two, NEW_STATE | {"state/x.yaml": b"1\n"}, now=NOW + 2
    )


def test_empty_owned_prefixes_leave_no_empty_directories(local: pygit2.Repository) -> None:
    assert bot_commit(local, {}) is not None
    tree = gitread.resolve(local, "main").tree
    assert "state" not in tree and "rendered" not in tree and "runs" in tree


def test_files_outside_owned_prefixes_are_refused(local: pygit2.Repository) -> None:
    with pytest.raises(ValueError, match="outside the owned prefixes"):
        bot_commit(local, {"runs/team-a/r1.yaml": b"sneaky\n"})
    with pytest.raises(ValueError, match="invalid path"):
        bot_commit(local, {"state/../runs/x.yaml": b"sneaky\n"})


def test_commit_refuses_when_the_branch_is_not_at_the_planned_parent(local: pygit2.Repository) -> None:
    seed = str(local.references["refs/heads/main"].target)
    human_commit(local, {"runs/team-a/r2.yaml": b"kind: Run\n"})
    with pytest.raises(errors.BranchMoved, match="sync_with_remote"):
        bot_commit(local, NEW_STATE, parent=seed)


def test_a_checked_out_branch_follows_the_commit_and_local_edits_are_never_clobbered(tmp_path: Path) -> None:
    work = clone(str(make_remote(tmp_path)), tmp_path / "work", bare=False)
    assert bot_commit(work, NEW_STATE) is not None
    assert (tmp_path / "work/state/leases/team-a/r1.yaml").read_bytes() == b"new lease\n"
    assert not (tmp_path / "work/rendered/gpu-a/team-a/r1-g0.yaml").exists()
    assert work.status() == {}
    (tmp_path / "work/state/leases/team-a/r1.yaml").write_bytes(b"edited by hand\n")
    before = work.references["refs/heads/main"].target
    with pytest.raises(errors.DirtyCheckout, match="state/leases/team-a/r1.yaml"):
        bot_commit(work, NEW_STATE | {"state/leases/team-a/r1.yaml": b"newer lease\n"}, now=NOW + 60)
    assert work.references["refs/heads/main"].target == before
    assert (tmp_path / "work/state/leases/team-a/r1.yaml").read_bytes() == b"edited by hand\n"


def test_message_has_a_summary_a_body_and_the_spec_commit_trailer() -> None:
    text = message.format_message(["started team-a/r1 (8 GPUs)", "reserved team-b/r2"], SPEC_SHA)
    subject, body, trailer = text.rstrip("\n").split("\n\n")
    assert subject == "jobtree: started team-a/r1 (8 GPUs); reserved team-b/r2"
    assert body == "- started team-a/r1 (8 GPUs)\n- reserved team-b/r2"
    assert trailer == f"Spec-Commit: {SPEC_SHA}"
    assert authorship.spec_commit_of(text) == SPEC_SHA
    assert authorship.spec_commit_of("fix state by hand\n\nSpec-Commit: nope\n") is None
    assert len(message.format_message(["x" * 200], SPEC_SHA).splitlines()[0]) <= 72
    long = message.format_message(["started 5 runs (152 GPUs)", "team-a/" + "r" * 40 + " +8 GPUs"], SPEC_SHA)
    assert long.splitlines()[0] == "jobtree: started 5 runs (152 GPUs)"  # the rest is in the body
    with pytest.raises(ValueError):
        message.format_message([], "abc")


# ------------------------------------------------------------------------------------------- push


def test_a_racing_second_push_is_rejected_as_stale_then_wins_after_fetch_and_replan(
    served: str, tmp_path: Path
) -> None:
    one, two = clone(served, tmp_path / "one.git"), clone(served, tmp_path / "two.git")
    base = remote_head(one)
    bot_commit(one, NEW_STATE)
    bot_commit(two, NEW_STATE | {"state/leases/team-a/r1.yaml": b"two's lease\n"})
    assert gitremote.push(one, "origin", "main", base).status is PushStatus.PUSHED
    lost = gitremote.push(two, "origin", "main", base)
    assert lost.status is PushStatus.STALE and lost.retryable and lost.remote_oid == remote_head(one)
    sleeps: list[float] = []

    def attempt() -> gitremote.PushResult:
        gitremote.sync_with_remote(two, "origin", "main", discard_unpushed=True)
        head = remote_head(two)
        bot_commit(two, NEW_STATE | {"state/extra.yaml": b"re-planned\n"}, parent=head, now=NOW + 5)
        return gitremote.push(two, "origin", "main", head)

    won = gitremote.run_with_retry(attempt, sleep=sleeps.append, rng=random.Random(7))
    assert won.status is PushStatus.PUSHED and sleeps == []
    history = list(two.walk(two.references["refs/remotes/origin/main"].target))
    assert [len(c.parents) for c in history] == [1, 1, 0]
    assert gitread.read_files(two, "origin/main")["state/extra.yaml"] == b"re-planned\n"


def test_a_push_is_not_attempted_when_the_remote_is_not_where_the_plan_started(
    served: str, tmp_path: Path
) -> None:
    one = clone(served, tmp_path / "one.git")
    bot_commit(one, NEW_STATE)
    result = gitremote.push(one, "origin", "main", "b" * 40)
    assert result.status is PushStatus.STALE and "remote moved" in result.message
    assert gitremote.push(one, "origin", "main", remote_head(one)).status is PushStatus.PUSHED
    assert gitremote.push(one, "origin", "main", remote_head(one)).status is PushStatus.UP_TO_DATE


def test_a_server_hook_refusal_is_a_clear_result_not_an_exception(
    served: str, daemon: tuple[Path, str], tmp_path: Path
) -> None:
    hook = daemon[0] / served.rsplit("/", 1)[1] / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\nwhile read old new ref; do\n"
        '  if git diff --name-only "$old" "$new" | grep -q "^state/forbidden"; then\n'
        '    echo "state/forbidden is protected" >&2; exit 1\n  fi\ndone\n'
    )
    hook.chmod(0o755)
    one = clone(served, tmp_path / "one.git")
    base = remote_head(one)
    bot_commit(one, NEW_STATE | {"state/forbidden.yaml": b"x\n"})
    refused = gitremote.push(one, "origin", "main", base)
    assert refused.status is PushStatus.REFUSED and not refused.ok and not refused.retryable
    assert "hook declined" in refused.message and refused.remote_oid == base


def test_an_unreachable_remote_raises_git_unavailable_naming_the_url(local: pygit2.Repository) -> None:
    url = f"git://127.0.0.1:{free_port()}/fleet.git"
    local.remotes.set_url("origin", url)
    bot_commit(local, NEW_STATE)
    with pytest.raises(errors.GitUnavailable, match=f"'origin' at {url}.*Check the URL") as err:
        gitremote.push(local, "origin", "main", None)
    assert err.value.temporary
    with pytest.raises(errors.PermanentGitError, match="no remote named 'upstream'"):
        gitremote.sync_with_remote(local, "upstream", "main")


def test_sync_fast_forwards_and_keeps_unpushed_work_unless_told(served: str, tmp_path: Path) -> None:
    one, two = clone(served, tmp_path / "one.git"), clone(served, tmp_path / "two.git")
    bot_commit(one, NEW_STATE)
    gitremote.push(one, "origin", "main", remote_head(one))
    assert gitremote.sync_with_remote(two) is SyncOutcome.FAST_FORWARDED
    assert gitremote.sync_with_remote(two) is SyncOutcome.UP_TO_DATE
    bot_commit(two, {"state/two.yaml": b"2\n"})
    assert gitremote.sync_with_remote(two) is SyncOutcome.AHEAD
    bot_commit(one, {"state/one.yaml": b"1\n"})
    gitremote.push(one, "origin", "main", remote_head(two))
    assert gitremote.sync_with_remote(two) is SyncOutcome.DIVERGED
    assert gitremote.sync_with_remote(two, discard_unpushed=True) is SyncOutcome.RESET
    assert two.references["refs/heads/main"].target == one.references["refs/heads/main"].target


def test_retry_backs_off_with_jitter_and_gives_up_after_the_bound() -> None:
    stale = gitremote.PushResult(PushStatus.STALE, "origin", "main", "1" * 40, "2" * 40, "moved")
    calls: list[int] = []
    sleeps: list[float] = []

    def attempt() -> gitremote.PushResult:
        calls.append(1)
        return stale

    result = gitremote.run_with_retry(
        attempt, attempts=4, backoff=0.2, sleep=sleeps.append, rng=random.Random(1)
    )
    assert result is stale and len(calls) == 4 and len(sleeps) == 3
    for i, delay in enumerate(sleeps):
        assert 0.1 * 2**i <= delay <= 0.3 * 2**i
    again: list[float] = []
    gitremote.run_with_retry(attempt, attempts=4, backoff=0.2, sleep=again.append, rng=random.Random(1))
    assert again == sleeps


# ------------------------------------------------------------------------------------------- lock


def test_a_second_writer_on_the_same_clone_gets_lock_busy_naming_the_holder(local) -> None:
    with writerlock.writer_lock(local.path) as path:
        assert path.name == "jobtree.lock"
        with pytest.raises(errors.LockBusy, match=f"pid={os.getpid()}") as busy:
            with writerlock.writer_lock(local.path):
                pass
        # when it started, as a time people read (the file holds the Unix time)
        assert re.search(r"since=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", str(busy.value)), busy.value
    assert not path.exists()
    with writerlock.writer_lock(local.path):
        pass


def test_a_lock_left_by_a_dead_process_is_taken_over(local: pygit2.Repository) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait(timeout=5)
    lock = Path(local.path) / "jobtree.lock"
    lock.write_text(f"pid={dead.pid} host={socket.gethostname()} since={NOW}\n")
    with writerlock.writer_lock(local.path):
        assert f"pid={os.getpid()} " in lock.read_text()
    assert not lock.exists()


def test_a_lock_from_another_host_is_never_taken_over_and_the_message_says_what_to_do(
    local: pygit2.Repository,
) -> None:
    lock = Path(local.path) / "jobtree.lock"
    lock.write_text(f"pid=1 host=another-pod since={int(time.time()) - 86400}\n")  # its pid cannot be checked
    with pytest.raises(
        errors.LockBusy, match="on another host, so jobtree cannot tell whether it still runs"
    ):
        with writerlock.writer_lock(local.path):
            pass
    assert "another-pod" in lock.read_text()


def test_a_lock_with_this_processs_pid_that_it_does_not_hold_is_a_restarted_containers(
    local: pygit2.Repository,
) -> None:
    """A container restarted in the same pod runs as the same pid (1) on the same host: the lock its
    killed predecessor left names a live pid, ours, yet nobody holds it."""
    lock = Path(local.path) / "jobtree.lock"
    lock.write_text(f"pid={os.getpid()} host={socket.gethostname()} since={NOW}\n")
    with writerlock.writer_lock(local.path):
        with pytest.raises(errors.LockBusy):  # while this process holds it, another thread waits
            with writerlock.writer_lock(local.path):
                pass
    assert not lock.exists()


def test_git_locks_a_dead_writer_left_are_cleared_and_older_ones_kept(local: pygit2.Repository) -> None:
    """kill -9 mid-update leaves e.g. refs/remotes/origin/main.lock; Git would refuse every later
    fetch. Only the dead writer can have made locks since it started, so those go; older ones stay."""
    dead = subprocess.Popen(["true"])
    dead.wait(timeout=5)
    gitdir = Path(local.path)
    started = int(time.time()) - 5
    (gitdir / "jobtree.lock").write_text(f"pid={dead.pid} host={socket.gethostname()} since={started}\n")
    tracking = gitdir / "refs" / "remotes" / "origin" / "main.lock"
    tracking.parent.mkdir(parents=True, exist_ok=True)
    tracking.write_text("half written\n")
    index_lock = gitdir / "index.lock"
    index_lock.write_text("")
    older = gitdir / "refs" / "heads" / "other.lock"
    older.write_text("someone else's, from before\n")
    os.utime(older, (started - 3600, started - 3600))
    with writerlock.writer_lock(local.path):
        assert not tracking.exists() and not index_lock.exists()
        assert older.exists()


def test_a_live_writers_git_locks_are_never_touched(local: pygit2.Repository) -> None:
    gitdir = Path(local.path)
    mine = gitdir / "refs" / "heads" / "main.lock"
    mine.write_text("in use\n")
    with writerlock.writer_lock(local.path):  # no dead writer to take over from
        assert mine.exists()
    mine.unlink()


# ------------------------------------------------------------------------------------ hand edits


def test_hand_edits_to_state_are_found_and_the_reconcilers_own_commits_ignored(local) -> None:
    base = str(local.references["refs/heads/main"].target)
    bot_commit(local, NEW_STATE)
    human_commit(local, {"runs/team-a/r2.yaml": b"kind: Run\n"}, "add a run\n")
    edit = human_commit(local, {"state/leases/team-a/r1.yaml": b"free GPUs please\n"})
    forged = human_commit(
        local, {"rendered/gpu-a/team-a/x.yaml": b"kind: Pod\n"}, f"x\n\nSpec-Commit: {SPEC_SHA}\n"
    )
    found = authorship.hand_edited(local, base, "main", reconciler_email=BOT[1])
    assert found == [(edit, "state/leases/team-a/r1.yaml"), (forged, "rendered/gpu-a/team-a/x.yaml")]


def test_a_merge_that_only_brings_in_reconciler_state_is_not_a_hand_edit(local) -> None:
    base = str(local.references["refs/heads/main"].target)
    human_commit(local, {"runs/team-a/r2.yaml": b"kind: Run\n"}, "add a run\n")
    feature = local.references["refs/heads/main"].target
    local.references.create("refs/heads/main", pygit2.Oid(hex=base), force=True)
    bot_commit(local, NEW_STATE)
    main = local.references["refs/heads/main"].target
    tree = write_tree(local, gitread.read_files(local, str(main)) | {"runs/team-a/r2.yaml": b"kind: Run\n"})
    merge = local.create_commit(None, HUMAN, HUMAN, "merge main\n", tree, [feature, main])
    assert authorship.hand_edited(local, base, str(merge), reconciler_email=BOT[1]) == []


def test_the_server_refuses_a_push_whose_branch_moved_under_it_and_the_result_is_stale(
    served: str, daemon: tuple[Path, str], tmp_path: Path
) -> None:
    """A pre-receive hook moves the branch mid-push: receive-pack's old-value check is the real CAS."""
    hook = daemon[0] / served.rsplit("/", 1)[1] / "hooks" / "pre-receive"
    outside = "env -u GIT_QUARANTINE_PATH -u GIT_OBJECT_DIRECTORY -u GIT_ALTERNATE_OBJECT_DIRECTORIES"
    hook.write_text(
        "#!/bin/sh\nwhile read old new ref; do\n"
        f'  c=$({outside} git commit-tree -p "$old" -m racer "$old^{{tree}}")\n'
        f'  {outside} git update-ref "$ref" "$c" "$old"\ndone\n'
    )
    hook.chmod(0o755)
    one = clone(served, tmp_path / "one.git")
    base = remote_head(one)
    bot_commit(one, NEW_STATE)
    raced = gitremote.push(one, "origin", "main", base)
    assert raced.status is PushStatus.STALE, raced
    assert raced.remote_oid not in (base, raced.local_oid) and "refused main" in raced.message


def test_a_remote_that_moves_between_fetch_and_push_gives_stale(
    served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = clone(served, tmp_path / "one.git"), clone(served, tmp_path / "two.git")
    base = remote_head(one)
    bot_commit(one, NEW_STATE)
    bot_commit(two, {"state/two.yaml": b"2\n"})
    lose_the_race_after_the_fetch(monkeypatch, one, base)
    lost = gitremote.push(two, "origin", "main", base)
    assert lost.status is PushStatus.STALE and lost.remote_oid == str(
        one.references["refs/heads/main"].target
    )


def test_a_push_sends_whole_objects_without_delta_search_and_leaves_the_clone_config_alone(
    served: str, daemon: tuple[Path, str], tmp_path: Path
) -> None:
    one = clone(served, tmp_path / "one.git")
    config_before = Path(one.path, "config").read_text()
    similar = {  # near-copies of each other: exactly what delta search would find
        f"state/status/runs/team-a/r{i}.yaml": (b"phase: Running\nmessage: " + b"x" * 400 + b"%d\n" % i)
        for i in range(150)  # over receive.unpackLimit, so the remote keeps the pack as sent
    }
    base = remote_head(one)
    bot_commit(one, similar)
    assert gitremote.push(one, "origin", "main", base).status is PushStatus.PUSHED
    remote = daemon[0] / served.rsplit("/", 1)[1]
    packs = list((remote / "objects" / "pack").glob("*.idx"))
    assert len(packs) == 1
    for idx in packs:
        listing = subprocess.run(["git", "verify-pack", "-v", str(idx)], capture_output=True, text=True)
        assert listing.returncode == 0, listing.stderr
        objects = [line.split() for line in listing.stdout.splitlines() if line[:1].isalnum() and " " in line]
        assert objects and all(len(row) == 5 for row in objects if row[1] in ("blob", "tree")), listing.stdout
    fsck = subprocess.run(
        ["git", "--git-dir", str(remote), "fsck", "--strict"], capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stderr
    assert gitread.read_files(pygit2.Repository(str(remote)), "main", ["state/status/"]) == similar
    assert Path(one.path, "config").read_text() == config_before


def test_a_writer_in_another_process_holds_the_lock_until_it_exits(local: pygit2.Repository) -> None:
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom reconciler.git import lock as writerlock\n"
         f"with writerlock.writer_lock({local.path!r}):\n    print('held', flush=True)\n    sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(errors.LockBusy, match=f"pid={holder.pid} "):
            with writerlock.writer_lock(local.path):
                pass
    finally:
        holder.communicate("", timeout=10)
    with writerlock.writer_lock(local.path):
        pass


# -------------------------------------------------------------------------------- objects and trees


def test_a_big_commit_is_one_pack_git_can_verify_and_a_small_one_stays_loose(
    local: pygit2.Repository,
) -> None:
    packs = Path(local.path) / "objects" / "pack"
    before = set(packs.glob("*.pack"))
    many = {
        f"rendered/gpu-a/team-a/pod-{i}.yaml": f"kind: Pod # {i}\n".encode() for i in range(gitpack.PACK_FROM)
    }
    assert bot_commit(local, many) is not None
    new = set(packs.glob("*.pack")) - before
    assert len(new) == 1
    verify = subprocess.run(["git", "verify-pack", str(new.pop())], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    fsck = subprocess.run(
        ["git", "--git-dir", local.path, "fsck", "--strict"], capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stderr
    reread = pygit2.Repository(local.path)  # a fresh reader finds every object in the pack
    assert gitread.read_files(reread, "main", ["rendered/"]) == many
    after = set(packs.glob("*.pack"))
    assert bot_commit(local, NEW_STATE, now=NOW + 60) is not None
    assert set(packs.glob("*.pack")) == after  # a handful of objects: loose, no new pack
    blob = local.odb.read(pygit2.hash(b"new lease\n"))
    assert blob[1] == b"new lease\n"


def test_objects_whose_bytes_do_not_match_their_id_are_refused(local: pygit2.Repository) -> None:
    wrong = [(gitpack.object_id("blob", b"x"), "blob", b"y")]
    for batch in (
        wrong,
        wrong * 1
        + [(gitpack.object_id("blob", b"%d" % i), "blob", b"%d" % i) for i in range(gitpack.PACK_FROM)],
    ):
        with pytest.raises(ValueError, match="mismatch"):
            gitpack.write(local, batch)


_NAMES = st.sampled_from(["a", "a-b", "a.b", "a0", "b", "a_b", "Z"])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.sampled_from(["state", "rendered"]), st.lists(_NAMES, min_size=1, max_size=3)),
        max_size=12,
    )
)
def test_commit_trees_are_exactly_the_trees_git_builds_from_an_index(paths) -> None:
    files: dict[str, bytes] = {}
    for top, parts in paths:
        path = "/".join([top, *parts]) + ".yaml"
        if not any(p.startswith(path[:-5] + "/") or path.startswith(p[:-5] + "/") for p in files):
            files[path] = path.encode()
    with tempfile.TemporaryDirectory() as tmp:
        repo = pygit2.init_repository(tmp, bare=True, initial_head="main")
        seed = repo.create_commit("refs/heads/main", HUMAN, HUMAN, "seed\n", write_tree(repo, SEED_FILES), [])
        oid = bot_commit(repo, files, parent=str(seed))
        kept = {p: d for p, d in SEED_FILES.items() if not p.startswith(("state/", "rendered/"))}
        want = write_tree(repo, kept | files)
        got = (
            repo[oid].peel(pygit2.Commit).tree.id
            if oid is not None
            else repo[seed].peel(pygit2.Commit).tree.id
        )
        assert got == want


def test_a_big_batch_is_compressed_in_threads_into_exactly_what_one_thread_gives() -> None:
    items = [("blob", b"kind: Pod # %d\n" % i * (1 + i % 7)) for i in range(3_000)]
    assert gitpack._compressed(items) == gitpack._compress(items)


def test_a_writer_given_time_waits_for_the_holder_and_is_told_who_it_is(local: pygit2.Repository) -> None:
    heard: list[str] = []
    with lock_held_elsewhere(local.path, 1.0) as holder:
        began = time.monotonic()
        with writerlock.writer_lock(local.path, wait=30, waiting=heard.append):
            waited = time.monotonic() - began
    assert 0.5 < waited < 30  # the holder kept it a second after saying so
    assert (
        len(heard) == 1 and heard[0].startswith("waiting up to 30 s: ") and f"pid={holder.pid} " in heard[0]
    )


def test_a_writer_that_waited_its_time_gets_lock_busy(local: pygit2.Repository) -> None:
    with writerlock.writer_lock(local.path):
        began = time.monotonic()
        with pytest.raises(errors.LockBusy, match=f"pid={os.getpid()} "):
            with writerlock.writer_lock(local.path, wait=0.5):
                pass
        assert time.monotonic() - began >= 0.5
