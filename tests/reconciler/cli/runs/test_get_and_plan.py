"""`kubectl runs get`, `plan` and `leases` on the lottery example, as a researcher reads them.

The fleet (examples/04 at its last pass, 09:55): one domain A of 72 GPUs. a1 (team-a, 16 in
groups of 8), fill (team-a, 8), c1 (team-c, elastic 8..16, shrunk to 8 for c2), c2 (team-c, 16)
run: 48 GPUs, 24 free. b1 (team-b, 32 in groups of 8) was cut whole by c2's lottery and waits: it
needs 32, 24 are free, so it is short by 8, and only the lottery can free them (no unfunded work,
no spares, c1 is at its minimum). Its ETA is the notice period after its reservation was made:
09:55 + 15m = 10:10. Its conflict set is every running run in A; by hand, draw 0 picks owner team-a
or team-c (1/2 each), then one of that owner's 3 groups (1/3): each group 1/6, so a1 (2 groups,
fixed width: loses all) 0.33, fill 0.17, c1 0.17, c2 0.33.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Golden
from tests.support.fleets import pass_at, runs

NOW = "2026-03-02T09:56:00Z"  # a minute after the last pass: b1's ETA is 14 minutes away


def test_get_lists_every_run_with_its_phase_width_why_it_waits_and_when_it_starts(
    lottery: Path, golden: Golden
) -> None:
    shown = runs("get", "-A", "--now", NOW, repo=lottery)
    assert shown.code == 0, shown.err
    golden.check("runs/get-lottery.txt", shown.shown)
    rows = {r["name"]: r for r in runs("get", "--now", NOW, "--format", "json", repo=lottery).json()["runs"]}
    assert sorted(rows) == ["a1", "b1", "c1", "c2", "fill"]
    assert rows["b1"] | {"message": ""} == {
        "namespace": "team-b",
        "name": "b1",
        "phase": "Pending",
        "allocatedGPUs": 0,
        "desiredGPUs": 32,
        "pendingReason": "cluster short by 8 GPUs in scope",
        "earliestStart": "2026-03-02T10:10:00Z",
        "countdownSeconds": 14 * 60,
        "message": "",
        "owner": "org:team-b",
        "startedAt": None,
        "inLine": {"position": 1, "of": 1, "ahead": 0},  # the only run holding a reservation
    }
    assert (rows["c1"]["phase"], rows["c1"]["allocatedGPUs"], rows["c1"]["desiredGPUs"]) == ("Running", 8, 16)
    assert rows["c1"]["pendingReason"] == "Grow to 16"  # it grows back once GPUs free up
    assert rows["c2"]["pendingReason"] is None and rows["c2"]["earliestStart"] is None


def test_get_narrows_to_a_namespace_or_to_named_runs(lottery: Path) -> None:
    team_a = runs("get", "-n", "team-a", "--format", "json", repo=lottery).json()["runs"]
    assert [r["name"] for r in team_a] == ["a1", "fill"]
    named = runs("get", "b1", "team-c/c2", "--format", "json", repo=lottery).json()["runs"]
    assert [(r["namespace"], r["name"]) for r in named] == [("team-b", "b1"), ("team-c", "c2")]
    assert runs("get", "-A", "-n", "team-a", repo=lottery).code == 2


def test_plan_of_a_waiting_run_gives_its_eta_deficit_scope_conflict_set_and_remedies(
    lottery: Path, golden: Golden
) -> None:
    shown = runs("plan", "b1", "--now", NOW, repo=lottery)
    assert shown.code == 0, shown.err
    golden.check("runs/plan-waiting.txt", shown.shown)
    assert "earliestStart: 2026-03-02T10:10:00Z (in 14m); confidence conservative" in shown.out
    doc = runs("plan", "team-b/b1", "--now", NOW, "--format", "json", repo=lottery).json()
    assert (doc["version"], doc["kind"], doc["run"], doc["phase"]) == (1, "RunPlan", "team-b/b1", "Pending")
    res = doc["reservation"]
    assert res["earliestStart"] == "2026-03-02T10:10:00Z" and res["countdownSeconds"] == 840
    assert (res["deficitGPUs"], res["scope"], res["confidence"]) == (8, ["us-west/gpu-a/A"], "conservative")
    want_odds = {"team-a/a1": 0.33, "team-a/fill": 0.17, "team-c/c1": 0.17, "team-c/c2": 0.33}
    assert {c["run"]: c["probability"] for c in res["conflictSet"]} == want_odds
    assert res["remedies"] == [{"remedy": "Run fair lottery if deficit remains", "gpus": 8}]
    assert res["payingEnvelope"] == {"owner": "org:team-b", "budget": "team-b", "envelope": "west-h100"}
    assert doc["holds"] == []


def test_plan_of_a_running_run_shows_what_it_holds_and_who_may_cut_it(lottery: Path) -> None:
    doc = runs("plan", "c2", "--now", NOW, "--format", "json", repo=lottery).json()
    assert doc["reservation"] is None
    held = [(g["group"], g["role"], g["gpus"], g["nodes"], g["payers"]) for g in doc["holds"]]
    team_c = {"owner": "org:team-c", "budget": "team-c", "envelope": "west-h100", "gpus": 8, "funding": "own"}
    assert held == [(0, "Active", 8, {"A-n03": 8}, [team_c]), (1, "Active", 8, {"A-n04": 8}, [team_c])]
    assert doc["conflicts"] == [
        {
            "reservation": "team-b/b1",
            "probability": 0.33,
            "earliestStart": "2026-03-02T10:10:00Z",
            "countdownSeconds": 840,
        }
    ]
    text = runs("plan", "c2", "--now", NOW, repo=lottery).out
    assert "may be cut when team-b/b1 activates at 2026-03-02T10:10:00Z (in 14m): probability 0.33" in text


def test_a_run_no_known_event_makes_fundable_has_an_unknown_eta(lottery: Path) -> None:
    # at 09:25 j1 was reclaimed for j4 and requeued (j3 too, not restarted by the pass that cut it);
    # team-a's envelope (24) funds 24 of j1's 32, so it is short of headroom with no window coming:
    # no earliestStart
    at = pass_at(lottery, "2026-03-02T09:25:00Z")
    doc = runs(
        "plan", "j1", "--rev", at, "--now", "2026-03-02T09:26:00Z", "--format", "json", repo=lottery
    ).json()
    res = doc["reservation"]
    assert (res["earliestStart"], res["countdownSeconds"], res["confidence"]) == (None, None, "unknown")
    assert res["reason"] == "budget headroom short by 8 GPUs"
    assert res["remedies"] == [
        {"remedy": "Wait for budget headroom, add sponsors, or shrink the run", "gpus": None}
    ]
    text = runs("plan", "j1", "--rev", at, repo=lottery).out
    assert "earliestStart: unknown: nothing known (a window opening, a run ending) makes it startable" in text
    assert "unknown (unknown)" not in text and "confidence unknown" not in text
    row = runs("get", "j1", "--rev", at, "--format", "json", repo=lottery).json()["runs"][0]
    assert (row["pendingReason"], row["earliestStart"]) == ("budget headroom short by 8 GPUs", None)


def test_a_window_aligned_reservation_says_when_the_window_opens(window: Path) -> None:
    at = pass_at(window, "2026-03-02T15:00:00Z")
    run = runs("get", "--rev", at, "--format", "json", repo=window).json()["runs"][0]["name"]
    res = runs(
        "plan", run, "--rev", at, "--now", "2026-03-02T15:00:00Z", "--format", "json", repo=window
    ).json()
    r = res["reservation"]
    assert (r["confidence"], r["earliestStart"], r["windowOpens"]) == (
        "window-aligned",
        "2026-03-03T00:00:10Z",
        "2026-03-03T00:00:00Z",
    )
    assert r["countdownSeconds"] == 9 * 3600 + 10  # 15:00 to 00:00:10 the next day


def test_leases_show_group_role_slots_payer_interval_and_closure(lottery: Path, golden: Golden) -> None:
    shown = runs("leases", "b1", repo=lottery)
    assert shown.code == 0, shown.err
    golden.check("runs/leases-cut.txt", shown.shown)
    doc = runs("leases", "b1", "--format", "json", repo=lottery).json()
    want = [
        (g, "Active", f"A-n0{3 + g}", list(range(8)), "2026-03-02T09:31:00Z", "2026-03-02T09:55:00Z")
        for g in range(4)
    ]
    got = [(x["group"], x["role"], x["node"], x["slots"], x["start"], x["end"]) for x in doc["leases"]]
    assert got == want
    assert {x["closureReason"] for x in doc["leases"]} == {"RandomPreempt(0x8d72a19d5040e04f)"}
    assert {x["payer"]["envelope"] for x in doc["leases"]} == {"west-h100"}


def test_an_unknown_run_exits_2_naming_the_closest_runs(lottery: Path) -> None:
    shown = runs("plan", "b2", repo=lottery)
    assert shown.code == 2
    assert "no run 'b2'" in shown.err and "team-b/b1" in shown.err
    assert runs("explain", "team-a/b1", repo=lottery).code == 2
    assert runs("leases", "nothing-like-it", repo=lottery).code == 2


def test_a_namespace_other_than_the_runs_is_a_usage_error(lottery: Path) -> None:
    shown = runs("plan", "team-b/b1", "-n", "team-a", repo=lottery)
    assert shown.code == 2 and "not -n team-a" in shown.err
    assert runs("plan", "b1", "-n", "team-b", "--format", "json", repo=lottery).json()["run"] == "team-b/b1"


def test_a_folder_outside_any_repository_is_a_usage_error(tmp_path: Path) -> None:
    shown = runs("get", repo=tmp_path)
    assert shown.code == 2 and "not in a Git repository" in shown.err


def test_the_repository_comes_from_jobtree_repo_when_not_given(lottery: Path) -> None:
    shown = runs("get", "b1", "--format", "json", env={"JOBTREE_REPO": str(lottery)})
    assert shown.json()["runs"][0]["phase"] == "Pending"


def test_on_a_terminal_phases_are_coloured_and_the_columns_still_line_up(lottery: Path) -> None:
    from click import unstyle
    from click.testing import CliRunner

    from reconciler.cli.runs import command as runs_group

    argv = ["get", "--now", NOW, "--repo", str(lottery)]
    terminal = CliRunner().invoke(runs_group, argv, color=True).stdout
    assert "\x1b[33mPending\x1b[0m" in terminal and "\x1b[32mRunning\x1b[0m" in terminal
    piped = runs("get", "--now", NOW, repo=lottery).out
    assert "\x1b[" not in piped and unstyle(terminal) == piped
    assert "\x1b[" not in CliRunner().invoke(runs_group, argv, color=True, env={"NO_COLOR": "1"}).stdout


def test_sponsors_lists_each_lending_envelope_with_what_is_left(cofunded: Path, golden: Golden) -> None:
    shown = runs("sponsors", "--rev", pass_at(cofunded, "2026-03-02T09:00:00Z"), repo=cofunded)
    assert shown.code == 0, shown.err
    golden.check("runs/sponsors-cofunded.txt", shown.shown)
    assert "mm-vision/west-h100  org:ai:mm:vision  org:ai:*" in shown.out and "32 of 64" in shown.out


def test_a_run_no_pass_has_planned_yet_says_so(lottery: Path, tmp_path: Path) -> None:
    import pygit2

    from tests.support.git import commit_by_hand

    work = pygit2.clone_repository(str(lottery), str(tmp_path / "work"), checkout_branch="main")
    run = "apiVersion: rq.davidlangworthy.io/v1\nkind: Run\nmetadata: {name: new, namespace: team-a}\nspec:\n  owner: org:team-a\n  resources: {gpuType: H100-80GB, totalGPUs: 8}\n"
    commit_by_hand(work, {"runs/team-a/new.yaml": run.encode()}, "a new run\n")
    row = runs("get", "new", "--format", "json", repo=tmp_path / "work").json()["runs"][0]
    assert (row["phase"], row["pendingReason"]) == (
        None,
        "not planned yet: no reconcile pass has read its file since it was submitted",
    )
    assert "not planned yet" in runs("explain", "new", repo=tmp_path / "work").out
