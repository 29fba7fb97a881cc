"""Scenario `workloads`: a run's duration of useful work, checkpoints, and the work a cut costs (docs/scenarios.md).

Every expectation is worked out by hand in the comment above it, from the rules: a run needs
`duration` x `totalGPUs` GPU-seconds; it checkpoints every `runtime.checkpoint` of running since it
last (re)started; a cut goes back to the last checkpoint (to nothing without one). The fleet is one
domain A of 4 nodes x 8 GPUs, the scenario starts at 09:00.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from reconciler.passes.workloads import Work
from schemas.scenario import Scenario
from tests.support.builders import a_budget, a_run, scenario
from tests.support.scenarios import A32, at, ends, play, stamp, starts

TEAMS = {"a": "org:a", "b": "org:b"}
BUDGETS = [a_budget("a", "org:a").envelope("h", 32).build(), a_budget("b", "org:b").envelope("h", 32).build()]
TEMPLATE = {
    "reservations": {"minRuntime": "2h"}
}  # notice 15m (the default), minRuntime as the template ships


def with_workloads(doc: dict[str, Any], **durations: str) -> dict[str, Any]:
    doc["spec"]["workloads"] = [
        {"run": run.replace("__", "/"), "duration": d} for run, d in durations.items()
    ]
    return doc


def completed_at(out: dict[str, Any], run: str) -> list[str]:
    return sorted({e["at"] for e in ends(out, run) if e["reason"] == "Completed"})


def test_a_run_succeeds_when_it_has_run_its_duration() -> None:
    # 8 GPUs from 09:00, duration 2h: Completed at 11:00, Succeeded; it needed and did 2h x 8 GPUs
    doc = scenario(TEAMS, A32, [at(0, apply=[*BUDGETS, a_run("a/r", "org:a").gpus(8).build()])], until="+3h")
    out = play(with_workloads(doc, a__r="2h"))
    assert completed_at(out, "a/r") == [stamp(120)]
    assert out["final"]["runs"]["a/r"]["phase"] == "Succeeded"
    assert out["workloads"]["a/r"] == {
        "needGPUSeconds": 7200 * 8,
        "doneGPUSeconds": 7200 * 8,
        "lostGPUSeconds": 0,
        "cuts": 0,
        "finished": stamp(120),
    }


def test_a_workload_ends_at_its_own_instant_between_ticks() -> None:
    # duration 1h0m7s from 09:00 ends at 10:00:07, though passes tick each minute: a pass runs then
    doc = scenario(TEAMS, A32, [at(0, apply=[*BUDGETS, a_run("a/r", "org:a").gpus(8).build()])], until="+2h")
    doc["spec"]["tick"] = "1m"
    out = play(with_workloads(doc, a__r="1h0m7s"))
    assert completed_at(out, "a/r") == [stamp(60, 7)]


def test_a_run_waiting_in_line_does_no_work() -> None:
    # a/x (32 GPUs, 1h) fills the fleet from 09:00; a/y (8 GPUs, 30m) waits behind it (same team:
    # no cut, x is not a victim of its own team... its reservation could only cut x after minRuntime
    # 2h, and x ends first). x completes at 10:00, y starts then and completes at 10:30.
    doc = scenario(
        TEAMS, A32,
        [at(0, apply=[*BUDGETS, a_run("a/x", "org:a").gpus(32).build()]), at(1, apply=[a_run("a/y", "org:a").gpus(8).build()])],
        until="+2h", fleet=TEMPLATE,
    )  # fmt: skip
    out = play(with_workloads(doc, a__x="1h", a__y="30m"))
    assert [e["at"] for e in starts(out, "a/y")] == [stamp(60)]
    assert completed_at(out, "a/y") == [stamp(90)]


def cut_scenario(checkpoint: str | None) -> dict[str, Any]:
    """a/r (32 GPUs, duration 3h) from 09:00; b/s (32 GPUs, duration 1h) arrives at 10:05 with its
    own budget. minRuntime 2h protects r until 11:00, so s's reservation activates then and the
    lottery (r is the only candidate) cuts r."""
    r = a_run("a/r", "org:a").gpus(32)
    if checkpoint is not None:
        r.spec["runtime"] = {"checkpoint": checkpoint}
    doc = scenario(
        TEAMS, A32,
        [at(0, apply=[*BUDGETS, r.build()]), at(65, apply=[a_run("b/s", "org:b").gpus(32).build()])],
        until="+8h", fleet=TEMPLATE,
    )  # fmt: skip
    return with_workloads(doc, a__r="3h", b__s="1h")


def test_a_cut_loses_the_work_since_the_last_checkpoint() -> None:
    # r checkpoints every 45m of running: at 09:45 and 10:30. Cut at 11:00: it keeps 1h30m of work
    # and loses 30m x 32 GPUs. s runs 11:00-12:00; r restarts at 12:00 with 3h - 1h30m left and
    # completes at 13:30.
    out = play(cut_scenario("45m"))
    assert {e["at"] for e in ends(out, "a/r") if e["reason"].startswith("RandomPreempt")} == {stamp(120)}
    assert completed_at(out, "b/s") == [stamp(180)]
    assert [e["at"] for e in starts(out, "a/r")] == [stamp(0)] * 4 + [stamp(180)] * 4
    assert completed_at(out, "a/r") == [stamp(270)]
    work = out["workloads"]["a/r"]
    assert (work["lostGPUSeconds"], work["cuts"]) == (1800 * 32, 1)


def test_a_cut_without_a_checkpoint_loses_all_the_work_and_the_run_redoes_it() -> None:
    # no checkpoint: the cut at 11:00 loses all 2h x 32 GPUs; r restarts at 12:00 with the whole
    # 3h to do and completes at 15:00
    out = play(cut_scenario(None))
    assert completed_at(out, "a/r") == [stamp(360)]
    work = out["workloads"]["a/r"]
    assert (work["lostGPUSeconds"], work["cuts"], work["doneGPUSeconds"]) == (7200 * 32, 1, 3 * 3600 * 32)


def test_a_malleable_run_works_in_proportion_to_its_width() -> None:
    # a/f (16 GPUs, 1h) from 09:00; a/m (total 32, min 16, step 16, 1h at 32 GPUs) arrives at 09:00
    # ranked after it (same instant, by name) and starts at 16. At 10:00 f completes and m grows to
    # 32: m has done 1h x 16 GPUs,
    # half its 1h x 32; the other half at 32 GPUs takes 30m: it completes at 10:30.
    doc = scenario(
        TEAMS, A32,
        [at(0, apply=[*BUDGETS, a_run("a/f", "org:a").gpus(16).build(),
                      a_run("a/m", "org:a").gpus(32).groups(16).malleable(16, 32, 16).build()])],
        until="+2h",
    )  # fmt: skip
    out = play(with_workloads(doc, a__f="1h", a__m="1h"))
    assert [(e["at"], e["gpus"]) for e in starts(out, "a/m")] == [
        (stamp(0), 8),
        (stamp(0), 8),
        (stamp(60), 8),
        (stamp(60), 8),
    ]
    assert completed_at(out, "a/m") == [stamp(90)]


def test_the_output_has_no_workloads_key_without_durations() -> None:
    doc = scenario(TEAMS, A32, [at(0, apply=[*BUDGETS, a_run("a/r", "org:a").gpus(8).build()])])
    assert "workloads" not in play(doc)


@pytest.mark.parametrize(
    ("workloads", "want"),
    [
        ([{"run": "a/r", "duration": "1h"}, {"run": "a/r", "duration": "2h"}], "a/r has two workloads"),
        ([{"run": "a/r", "duration": "0s"}], "greater than or equal to 1"),
        ([{"run": "r", "duration": "1h"}], "String should match pattern"),
    ],
    ids=["one run twice", "no work at all", "a run without its namespace"],
)
def test_a_bad_workload_is_refused_with_what_to_fix(workloads: list[dict[str, Any]], want: str) -> None:
    doc = scenario(TEAMS, A32, [])
    doc["spec"]["workloads"] = workloads
    with pytest.raises(ValidationError, match=want):
        Scenario.model_validate(doc)


# -- the arithmetic alone --------------------------------------------------------------------------


def test_checkpoints_count_from_each_restart() -> None:
    # 10 GPUs from t=0, checkpoint every 100 s: cut at 250 keeps 200 s of work (checkpoint at 200),
    # loses 50 s x 10. Restart at 300: checkpoints at 400, 500; cut at 450 keeps 200 + 100 s.
    w = Work(need=10 * 1000, checkpoint=100)
    w.run_at(0, 10)
    assert w.cut(250) == 500
    w.run_at(250, 0)
    w.run_at(300, 10)
    assert w.cut(450) == 500
    assert (w.done, w.saved, w.lost, w.cuts) == (3000, 3000, 1000, 2)


def test_the_finish_instant_rounds_up_to_whole_seconds() -> None:
    # 7 GPU-seconds left at 2 GPUs: 3.5 s, so the run completes at the 4th second
    w = Work(need=7)
    w.run_at(10, 2)
    assert w.due() == 14
    w.run_at(12, 0)  # stopped after 4 GPU-seconds (no checkpoint, no cut: it waits with its work)
    assert (w.done, w.due()) == (4, None)
