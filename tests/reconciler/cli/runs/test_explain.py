"""`kubectl runs explain`: the decision trail a researcher reads to learn what happened to a run and why.

Worked out from the examples' own expectations (each file's comment block):
- examples/04: j1 (32 GPUs, team-a) and j3 (2 GPUs) ran; team-a's envelope was cut to 24, so j1's
  highest group and j3 went unfunded; j4 (team-b, 32) reserved at 09:10 and activated at 09:25,
  reclaiming the unfunded work (j3, then j1's group, which takes fixed-width j1 whole). At 09:55
  c2's activation shrank c1 16 -> 8, then its lottery (seed 0x8d72a19d5040e04f, the SHA-256 of
  "team-c/c2|2026-03-02T09:55:00Z") drew owner org:team-b and its group team-b/b1#3: all of b1 ended.
- examples/03: A-n03 failed at 09:05 under j1's group 0: the spare on A-n16 took over (Swap), the
  fill lease j2 had on it ended ReclaimedBySpare.
- examples/01: train-128 (owner org:ai:rai:sys) runs groups 0-2 on its own envelope in domain A
  and group 3 on the sponsor org:ai:mm:vision's lending envelope in domain B.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from reconciler.passes.reconcile import reconcile_once
from tests.conftest import Golden
from tests.support import REPO
from tests.support.fleets import pass_at, runs
from tests.support.git import RESNET_SMALL, T0, bare_remote, clone, template_files

NOW = "2026-03-02T09:56:00Z"


def test_a_lottery_cut_names_the_reservation_the_seed_and_replays_the_draw(
    lottery: Path, golden: Golden
) -> None:
    shown = runs("explain", "b1", "--now", NOW, repo=lottery)
    assert shown.code == 0, shown.err
    golden.check("runs/explain-lottery.txt", shown.shown)
    doc = runs("explain", "b1", "--now", NOW, "--format", "json", repo=lottery).json()
    kinds = [(e["at"], e["kind"]) for e in doc["trail"]]
    assert kinds == [
        ("2026-03-02T09:31:00Z", "Submitted"),
        ("2026-03-02T09:31:00Z", "Start"),
        ("2026-03-02T09:55:00Z", "Cut"),
        ("2026-03-02T09:55:00Z", "Reserved"),
    ]
    cut = doc["trail"][2]
    assert (cut["reservation"], cut["seed"]) == ("team-c/c2", "0x8d72a19d5040e04f")
    (lottery_doc,) = doc["lotteries"]
    assert lottery_doc["reproduced"] and lottery_doc["cut"] == {"team-b/b1": [0, 1, 2, 3]}
    (draw,) = lottery_doc["draws"]
    assert draw["picked"] == "team-b/b1#3"
    # the candidates: every Active group in A of the runs warned for the notice period, after c1's shrink
    want = [
        ["org:team-a", "team-a/a1", 0],
        ["org:team-a", "team-a/a1", 1],
        ["org:team-a", "team-a/fill", 0],
        ["org:team-b", "team-b/b1", 0],
        ["org:team-b", "team-b/b1", 1],
        ["org:team-b", "team-b/b1", 2],
        ["org:team-b", "team-b/b1", 3],
        ["org:team-c", "team-c/c1", 0],
    ]
    assert draw["candidates"] == want


def test_the_replay_explain_prints_runs_and_gives_the_published_pick(lottery: Path, tmp_path: Path) -> None:
    doc = runs("explain", "b1", "--format", "json", repo=lottery).json()
    code = doc["lotteries"][0]["replay"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['team-b/b1#3']"


def test_reclaimed_unfunded_work_names_the_reservation_it_made_room_for(lottery: Path) -> None:
    at = pass_at(lottery, "2026-03-02T09:25:00Z")
    doc = runs("explain", "team-a/j1", "--rev", at, "--format", "json", repo=lottery).json()
    cut = [e for e in doc["trail"] if e["kind"] == "Cut"]
    assert [(e["at"], e["reservation"], e["closure"]) for e in cut] == [
        ("2026-03-02T09:25:00Z", "team-b/j4", "ReclaimUnfunded")
    ]
    assert "reclaimed as unfunded for reservation team-b/j4" in cut[0]["text"]
    # j3, cut at 09:25 too, is not restarted by the pass that cut it: team-a's 24 fund 24 of j1's 32
    assert doc["waiting"]["reason"] == "budget headroom short by 8 GPUs"
    assert doc["waiting"]["wouldChange"] == ["Wait for budget headroom, add sponsors, or shrink the run"]
    j4 = runs("explain", "j4", "--rev", at, "--format", "json", repo=lottery).json()
    assert [e["kind"] for e in j4["trail"]] == ["Submitted", "Reserved", "Activated", "Start"]


def test_a_resolver_shrink_is_told_apart_from_a_desired_width(lottery: Path) -> None:
    doc = runs("explain", "c1", "--format", "json", repo=lottery).json()
    (shrink,) = [e for e in doc["trail"] if e["at"] == "2026-03-02T09:55:00Z"]
    assert (shrink["kind"], shrink["reservation"], shrink["closure"]) == ("Cut", "team-c/c2", "Shrink")
    assert "group 1 on A-n08 (8)" in shrink["text"]


def test_a_swap_after_a_node_failure_is_told_with_where_the_group_moved(spares: Path, golden: Golden) -> None:
    at = pass_at(spares, "2026-03-02T09:05:00Z")
    shown = runs("explain", "alpha/j1", "--rev", at, "--now", "2026-03-02T09:06:00Z", repo=spares)
    assert shown.code == 0, shown.err
    golden.check("runs/explain-swap.txt", shown.shown)
    doc = runs("explain", "j1", "--rev", at, "--format", "json", repo=spares).json()
    at_failure = [e for e in doc["trail"] if e["at"] == "2026-03-02T09:05:00Z"]
    assert [(e["kind"], e.get("closure")) for e in at_failure] == [("End", "NodeFailure"), ("Swap", None)]
    assert "on A-n16 (4)" in at_failure[1]["text"]
    (moved,) = [p for p in doc["placement"] if p["group"] == 0 and p["role"] == "Active"]
    assert "hot spare" in moved["why"]
    fill = runs("explain", "beta/j2", "--rev", at, "--format", "json", repo=spares).json()
    reclaimed = [e for e in fill["trail"] if e.get("closure") == "ReclaimedBySpare"]
    assert reclaimed and "the spare it ran on was needed" in reclaimed[0]["text"]


def test_who_pays_tells_the_owners_envelope_from_a_sponsors(cofunded: Path, golden: Golden) -> None:
    at = pass_at(cofunded, "2026-03-02T09:00:00Z")
    shown = runs("explain", "train-128", "--rev", at, "--now", "2026-03-02T09:01:00Z", repo=cofunded)
    assert shown.code == 0, shown.err
    golden.check("runs/explain-cofunded.txt", shown.shown)
    doc = runs("explain", "train-128", "--rev", at, "--format", "json", repo=cofunded).json()
    sources = {f["group"]: f["sources"] for f in doc["funding"]}
    assert sources == {0: ["own"], 1: ["own"], 2: ["own"], 3: ["sponsor"]}
    assert "org:ai:mm:vision" in doc["funding"][3]["why"]
    domains = {p["group"]: p["domain"].rsplit("/", 1)[1] for p in doc["placement"]}
    assert domains == {0: "A", 1: "A", 2: "A", 3: "B"}


def test_explain_of_a_run_waiting_on_a_reservation_says_what_would_change_that(lottery: Path) -> None:
    doc = runs("explain", "b1", "--now", NOW, "--format", "json", repo=lottery).json()
    assert doc["waiting"]["reason"] == "cluster short by 8 GPUs in scope"
    # what activation will do (only the lottery can free 8 GPUs here) is not advice to the reader
    assert doc["waiting"]["atActivation"] == ["the fair lottery for what is still short (8 GPUs)"]
    assert doc["waiting"]["wouldChange"] == [
        "capacity freeing up in us-west/gpu-a/A (runs there ending)",
        "a smaller run: it is short by 8 GPUs there",  # b1 is not malleable: no minTotalGPUs to lower
    ]
    assert doc["waiting"]["reservation"]["countdownSeconds"] == 14 * 60
    c2 = runs("explain", "c2", "--now", NOW, "--format", "json", repo=lottery).json()
    assert c2["waiting"] is None
    assert [c["reservation"] for c in c2["conflicts"]] == ["team-b/b1"]


def test_a_run_that_waited_says_why_and_what_its_activation_ended(lottery: Path) -> None:
    doc = runs("explain", "c2", "--format", "json", repo=lottery).json()
    (activated,) = [e for e in doc["trail"] if e["kind"] == "Activated"]
    assert (activated["at"], activated["reason"]) == (
        "2026-03-02T09:55:00Z",
        "cluster short by 16 GPUs in scope",
    )
    assert activated["text"] == (
        "its reservation activated after 15m in line; it had waited because: cluster short by 16 GPUs in "
        "scope; to make room it ended groups of team-b/b1 (RandomPreempt(0x8d72a19d5040e04f)), team-c/c1 (Shrink)"
    )


# -- the template fleet: own, family and sponsors told apart -----------------------------------------


def test_who_pays_says_whether_the_owner_had_no_envelope_there_or_a_full_one(tmp_path: Path) -> None:
    # rai-sys has no H100 envelope at all: family (org:acme:media, through org:acme) pays resnet-small.
    # train-cofunded's group 0 is half rai-sys's own (its GB200 envelope, then full) and half its
    # parent's; group 1 is its sponsor's (family envelopes full by then)
    files = template_files() | {"runs/rai-sys/resnet-small.yaml": RESNET_SMALL}
    path = tmp_path / "work"
    clone(bare_remote(tmp_path, files), path)
    assert reconcile_once(path, now=T0).commit is not None
    resnet = runs("explain", "resnet-small", "-o", "json", repo=path).json()["funding"]
    assert [(f["group"], f["sources"]) for f in resnet] == [(0, ["family"])]
    assert resnet[0]["why"].endswith(
        "the owner has no envelope of its own for H100-80GB in us-east/h100-east/h100-east-a, so family "
        "headroom (envelopes that share) paid"
    )
    cofunded = runs("explain", "train-cofunded", "-o", "json", repo=path).json()["funding"]
    assert [(f["group"], f["sources"]) for f in cofunded] == [(0, ["own", "family"]), (1, ["sponsor"])]
    assert cofunded[0]["why"].endswith(
        "the owner's own envelope there (rai-sys/west-gb200) had no headroom left, so family headroom "
        "(envelopes that share) paid the rest"
    )
    assert (
        "family envelopes there were full; the run allows borrowing and names this sponsor"
        in cofunded[1]["why"]
    )


def test_explain_of_a_run_whose_file_does_not_validate_quotes_the_first_problem(tmp_path: Path) -> None:
    files = template_files() | {
        "runs/rai-sys/resnet-small.yaml": RESNET_SMALL.replace(b"totalGPUs", b"totalGPUz")
    }
    path = tmp_path / "work"
    clone(bare_remote(tmp_path, files), path)
    reconcile_once(path, now=T0)
    doc = runs("explain", "resnet-small", "-o", "json", repo=path).json()
    assert doc["problems"] == [  # in the file's order, as `jobtree validate` prints them
        "runs/rai-sys/resnet-small.yaml:6:3: JT010 spec.resources.totalGPUs is required; add it",
        "runs/rai-sys/resnet-small.yaml:6:35: JT010 unknown field spec.resources.totalGPUz; did you mean "
        "totalGPUs? rename it (or remove it)",
    ]
    text = runs("explain", "resnet-small", repo=path).out.splitlines()
    assert text[1:3] == [
        "  its file does not validate (1 more problem: jobtree validate):",
        f"  {doc['problems'][0]}",
    ]
    assert runs("explain", "train-cofunded", "-o", "json", repo=path).json()["problems"] == []
