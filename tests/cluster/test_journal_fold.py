"""Two planes, one record (DESIGN §7.5): the agent's swaps folded into Git, and never undone by apply.

The fleet: tenant `t` (org:t) with a 32-GPU H100 envelope; cluster `east`: fabric domain A of four
8-GPU nodes n1..n4. Run r1 asks one group of 8 GPUs with 8 spare GPUs per group (§4.8: the spare is
held in the group's domain as a Spare lease). Both go to the emptiest nodes by name: the group on
n1 (pod `r1-g0-n1`), its spare on n2 (pod `r1-g0-spare-n2`). At 09:00:30 n1 is tainted out of
service and the agent swaps (`tests.support.agentswap`, the agent's steps without the agent): the
group's lease on n1 closes `NodeFailure`, the spare lease `Swap`, an Active lease opens on n2's
slots (`reason: Swap`) at 09:00:30, pod `r1-g0-n2` replaces `r1-g0-n1`, n1 is cordoned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import main
from reconciler.cluster import folding
from reconciler.passes import apply as applying
from reconciler.passes import provenance
from reconciler.state import layout
from tests.support import agentswap
from tests.support.builders import a_budget, a_run
from tests.support.clusterfleet import API, T0, ClusterFleet, fleet_config, manifest, node, pods, rehearsed
from tests.support.controlplane import Cluster
from tests.support.statefiles import check, kind_of, state_files

SWAP_AT = T0 + 30  # 09:00:30
DAY = "2026-03-02"
RETENTION = 3600


def fleet_files() -> dict[str, bytes]:
    return {
        "jobtree.yaml": fleet_config(
            {"t": "org:t"}, [{"name": "east", "context": "east"}], reservations={"retention": RETENTION}
        ),
        "budgets/t.yaml": manifest(a_budget("t", "org:t").envelope("h100", 32).build()),
        "runs/t/r1.yaml": manifest(a_run("t/r1", "org:t").gpus(8).groups(8).spares(8).build()),
    }


@pytest.fixture
def fleet(server: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClusterFleet:
    server.seed(*(node(f"n{i}") for i in range(1, 5)))
    placed = ClusterFleet(tmp_path, {"east": server}, monkeypatch, fleet_files())
    first = placed.reconcile(T0)
    assert first.applied is not None and first.applied.failed == []
    return placed


def swapped(fleet: ClusterFleet) -> dict[str, Any]:
    """n1 fenced, and the agent's swap carried out: the entry as created."""
    agentswap.out_of_service(fleet, "east", "n1")
    return agentswap.swap(fleet, "east", "n1", SWAP_AT)


def uid(server: Cluster, name: str) -> str | None:
    pod = server.get("v1", "Pod", name, "t")
    return None if pod is None else str(pod["metadata"]["uid"])


def entry_of(server: Cluster, name: str) -> dict[str, Any] | None:
    return server.get(API, "JournalEntry", name)


def test_before_the_failure_the_group_is_on_n1_and_its_spare_on_n2(
    fleet: ClusterFleet, server: Cluster
) -> None:
    want = {("Active", "n1#0"), ("Spare", "n2#0")}
    assert {
        (x["spec"]["slice"]["role"], x["spec"]["slice"]["nodes"][0]) for x in fleet.leases("t/r1")
    } == want
    assert pods(server) == ["r1-g0-n1", "r1-g0-spare-n2"]


def test_the_next_pass_folds_the_swap_at_its_instant_names_the_entry_and_marks_it_folded(
    fleet: ClusterFleet, server: Cluster
) -> None:
    entry = swapped(fleet)
    name = entry["metadata"]["name"]
    assert pods(server) == ["r1-g0-n2"]
    replacement = uid(server, "r1-g0-n2")
    done = fleet.reconcile(T0 + 300)
    assert done.commit is not None and done.applied is not None and done.applied.failed == []
    # the state commit: the leases closed and opened at 09:00:30, as the agent did, not at 09:05
    leases = {x["metadata"]["name"]: x for x in fleet.leases("t/r1")}
    closed = {(x["spec"]["slice"]["role"], x["status"]["closureReason"], x["status"]["ended"])
              for x in leases.values() if x["status"]["closed"]}  # fmt: skip
    assert closed == {
        ("Active", "NodeFailure", "2026-03-02T09:00:30Z"),
        ("Spare", "Swap", "2026-03-02T09:00:30Z"),
    }
    opened = [x for x in leases.values() if not x["status"]["closed"]]
    assert [(x["spec"]["slice"]["role"], x["spec"]["slice"]["nodes"][0], x["spec"]["reason"],
             x["spec"]["interval"]["start"]) for x in opened] == [("Active", "n2#0", "Swap", "2026-03-02T09:00:30Z")]  # fmt: skip
    assert fleet.status("t/r1")["message"] == "group 0 swapped to spare after node failure"
    assert "n1" in fleet.file("state/fleet.yaml")[0]["cordoned"]
    # the ledger names the entry on each fact it folded, and the commit message says what it did
    named = [(row["event"], row["reason"]) for row in fleet.ledger(DAY) if row.get("journal") == name]
    assert sorted(named) == [("End", "NodeFailure"), ("End", "Swap"), ("Start", "Swap")]
    text = fleet.repo[done.commit].message
    assert f"folded journal entry {name}: t/r1 group 0 swapped to n2" in text
    # the replacement pod is the agent's, left as it is; the entry is Folded by that commit
    assert pods(server) == ["r1-g0-n2"] and uid(server, "r1-g0-n2") == replacement
    after = entry_of(server, name)
    assert after is not None
    assert after["status"]["state"] == "Folded" and after["status"]["foldedBy"] == done.commit
    assert after["status"]["folded"] == "2026-03-02T09:05:00Z"


def test_a_commit_that_folded_a_swap_is_recomputed_from_git_alone(
    fleet: ClusterFleet, server: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    swapped(fleet)
    done = fleet.reconcile(T0 + 300)
    assert done.commit is not None
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")  # no credentials, no journal: only what Git holds
    assert provenance.verify(fleet.repo, fleet.repo[done.commit]).proven


def test_a_pass_that_read_everything_before_the_swap_does_not_undo_it_when_it_applies_after(
    fleet: ClusterFleet, server: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the pass reads Git and the cluster (n1 healthy, no journal entry), commits r2's start; then
    # n1 fails and the agent swaps; then the pass applies its commit, which still holds r1 on n1
    fleet.change({"runs/t/r2.yaml": manifest(a_run("t/r2", "org:t").gpus(8).build())}, "r2\n")
    real = applying.apply_commit
    made: list[dict[str, Any]] = []

    def swap_then_apply(*args: Any, **kwargs: Any) -> applying.ApplyOutcome:
        if not made:  # the first pass only
            made.append(swapped(fleet))
        return real(*args, **kwargs)

    monkeypatch.setattr(applying, "apply_commit", swap_then_apply)
    done = fleet.reconcile(T0 + 20)
    assert done.commit is not None and done.applied is not None and done.applied.failed == []
    name = made[0]["metadata"]["name"]
    replacement = pods(server)
    # r2 was applied; of r1, the agent's pod stays, the failed pod and the spare pod stay deleted
    r2 = [p for p in replacement if p.startswith("r2-")]
    assert len(r2) == 1 and "r1-g0-n2" in replacement
    assert "r1-g0-n1" not in replacement and "r1-g0-spare-n2" not in replacement
    (applied,) = done.applied.clusters
    assert applied.guarded and all(f"journal entry {name} is not folded yet" in g for g in applied.guarded)
    # the Lease mirrors stay as the agent left them: the opened one, not the two it closed
    in_git = {x["metadata"]["name"]: x for x in fleet.leases("t/r1")}
    mirrored = {
        x["metadata"]["name"] for x in server.list(API, "Lease", "t") if x["spec"]["runRef"]["name"] == "r1"
    }
    assert mirrored.isdisjoint(in_git) and len(mirrored) == 1
    # the pass did not fold it: the entry stays Applied, and the next pass folds it
    still = entry_of(server, name)
    assert still is not None and still["status"]["state"] == "Applied"
    before = uid(server, "r1-g0-n2")
    nxt = fleet.reconcile(T0 + 300)
    assert nxt.commit is not None and nxt.applied is not None and nxt.applied.failed == []
    assert uid(server, "r1-g0-n2") == before
    folded = entry_of(server, name)
    assert folded is not None and folded["status"]["state"] == "Folded"


def test_dry_run_apply_lists_what_is_held_back_for_an_unfolded_entry(
    fleet: ClusterFleet, server: Cluster
) -> None:
    name = swapped(fleet)["metadata"]["name"]
    mark = server.requests.mark()
    result = CliRunner().invoke(main, ["apply", str(fleet.path), "--dry-run", "--quiet"])
    assert result.exit_code == 0, result.output
    assert rehearsed(server, mark)
    held = [line for line in result.stdout.splitlines() if line.startswith("  held back: ")]
    # the commit still holds r1 on n1 and its spare on n2: what would undo the swap is held back
    want = {
        "prune Pod t/r1-g0-n2",
        "create Pod t/r1-g0-spare-n2",
        "create Pod t/r1-g0-n1",
    }
    got = {line.removeprefix("  held back: ").split(":")[0] for line in held}
    assert want <= got
    assert all(line.endswith(f"journal entry {name} is not folded yet") for line in held)


def test_a_swap_is_committed_once_and_a_pass_that_crashed_before_marking_folds_it_again_without_a_second_record(
    fleet: ClusterFleet, server: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = swapped(fleet)["metadata"]["name"]

    def crash(*args: Any, **kwargs: Any) -> list[str]:
        raise SystemExit("killed after the push, before marking")

    with monkeypatch.context() as patched:
        patched.setattr(folding, "settle", crash)
        with pytest.raises(SystemExit):
            fleet.reconcile(T0 + 300)
    pushed = str(fleet.repo.references["refs/remotes/origin/main"].target)
    entry = entry_of(server, name)
    assert entry is not None and entry["status"]["state"] == "Applied"
    rows = [row for row in fleet.ledger(DAY) if row.get("journal") == name]
    assert len(rows) == 3
    again = fleet.reconcile(T0 + 360)
    assert again.commit is None and again.head == pushed  # nothing new: the fold is in Git already
    assert [row for row in fleet.ledger(DAY) if row.get("journal") == name] == rows
    entry = entry_of(server, name)
    assert (
        entry is not None and entry["status"]["state"] == "Folded" and entry["status"]["foldedBy"] == pushed
    )
    third = fleet.reconcile(T0 + 420)
    assert third.commit is None


def test_an_entry_that_cannot_be_read_stops_the_apply_naming_it_and_nothing_is_written(
    fleet: ClusterFleet, server: Cluster
) -> None:
    entry = swapped(fleet)
    bad = {
        "apiVersion": API,
        "kind": "JournalEntry",
        "metadata": {"name": "swap-bad", "labels": entry["metadata"]["labels"]},
        # the CRD admits it (a lease's closure may be a lottery draw), the fold cannot take it (a swap never draws)
        "spec": dict(
            entry["spec"],
            closed=[{"name": "x", "namespace": "t", "closure": "RandomPreempt(0x0123456789abcdef)"}],
        ),
    }
    server.seed(bad)
    fleet.change({"runs/t/r2.yaml": manifest(a_run("t/r2", "org:t").gpus(8).build())}, "r2\n")
    mark = server.requests.mark()
    result = CliRunner().invoke(
        main,
        [
            "reconcile",
            str(fleet.path),
            "--once",
            "--push",
            "--apply",
            "--quiet",
            "--now",
            "2026-03-02T09:05:00Z",
        ],
    )
    assert result.exit_code == 4, result.output
    assert "cluster east not applied: east: journal entry swap-bad cannot be read" in result.stderr
    assert "jobtree: cluster east not observed: east: journal entry swap-bad cannot be read" in result.stderr
    assert server.requests.writes(since=mark) == []
    assert not any(p.startswith("r2-") for p in pods(server))
    # not observed: the swap it could not read is not planned a second time from the fenced node
    assert [x["spec"]["slice"]["nodes"][0] for x in fleet.leases("t/r1") if not x["status"]["closed"]] == [
        "n1#0",
        "n2#0",
    ]
    same = CliRunner().invoke(main, ["apply", str(fleet.path), "--quiet"])
    assert same.exit_code == 4 and "journal entry swap-bad cannot be read" in same.stderr


def test_a_folded_entry_is_deleted_once_older_than_the_retention(
    fleet: ClusterFleet, server: Cluster
) -> None:
    name = swapped(fleet)["metadata"]["name"]
    fleet.reconcile(T0 + 300)  # folded at 09:05:00
    kept = fleet.reconcile(T0 + 300 + RETENTION - 1)
    assert kept.applied is not None and kept.applied.failed == []
    assert entry_of(server, name) is not None
    gone = fleet.reconcile(T0 + 300 + RETENTION)
    assert gone.applied is not None and gone.applied.failed == []
    assert entry_of(server, name) is None
    assert any(line == f"  journal: delete JournalEntry {name} (Folded 2026-03-02T09:05:00Z, past retention)"
               for line in gone.applied.lines())  # fmt: skip


def test_a_history_with_an_observed_cluster_a_folded_swap_and_a_workload_outcome_matches_the_published_schemas(
    fleet: ClusterFleet, server: Cluster
) -> None:
    name = swapped(fleet)["metadata"]["name"]
    fleet.reconcile(T0 + 300)  # folds the swap
    server.kubelet.set_phase("t", "r1-g0-n2", "Succeeded")
    fleet.reconcile(T0 + 600)  # observes the outcome: r1 completes
    assert fleet.status("t/r1")["phase"] == "Succeeded"
    files = state_files(fleet.repo)
    assert {kind_of(path.split("@")[0]) for path in files} >= {
        layout.OBSERVED,
        layout.LEDGER,
        layout.RUN_STATUS,
    }
    rows = fleet.ledger(DAY)
    assert [r["outcome"] for r in rows if r["event"] == "Workload"] == ["Succeeded"]
    assert any(r.get("journal") == name for r in rows)
    assert check(files) == []
