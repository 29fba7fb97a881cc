"""A running Run whose file turns invalid is frozen: its leases and status stay as they were.

DESIGN §1 step 2: an invalid object is left out of planning, and nothing already running is
touched. The status keeps its width and says which file to fix; a frozen run starts no lease.
"""

from __future__ import annotations

from typing import Any

from tests.builders import a_budget, a_run, scenario
from tests.contract_support import A32, at, open_leases, play, starts

# ---------------------------------------------------------------------------------- simulator

TEMPLATE = {"image": "ghcr.io/t/train:1", "command": ["python", "train.py"]}


def with_template(run: dict[str, Any]) -> dict[str, Any]:
    run["spec"]["template"] = TEMPLATE
    return run


def typo(minutes: int) -> dict[str, Any]:
    return at(minutes, patch={"kind": "Run", "namespace": "t", "name": "r",
                              "merge": {"spec": {"resources": {"colour": "blue"}}}})  # fmt: skip


def fixed(minutes: int) -> dict[str, Any]:
    return at(minutes, patch={"kind": "Run", "namespace": "t", "name": "r",
                              "merge": {"spec": {"resources": {"colour": None}}}})  # fmt: skip


def frozen_doc(run: dict[str, Any], *more: dict[str, Any], until: str = "+11m") -> dict[str, Any]:
    return scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), with_template(run)]),
         at(4, checkpoint="valid"), typo(5), at(6, checkpoint="invalid"), *more],
        until=until,
    )  # fmt: skip


def test_the_simulator_keeps_a_frozen_runs_width_and_names_its_file() -> None:
    out = play(frozen_doc(a_run("t/r", "org:t").gpus(16).malleable(8, 32, 8, 16).build(), fixed(10)))
    before = out["checkpoints"]["valid"]["runs"]["t/r"]
    frozen = out["checkpoints"]["invalid"]["runs"]["t/r"]
    assert frozen["phase"] == "Running" and frozen["width"] == before["width"]
    assert frozen["message"] == "spec invalid: fix runs/t/r.yaml"
    after = out["final"]["runs"]["t/r"]
    assert after["width"] == before["width"] and "invalid" not in after["message"]


def test_a_frozen_run_is_never_swapped_onto_its_spare() -> None:
    # t/r runs 8 on one node with an 8-GPU spare on another; its file turns invalid at +5 and its
    # active node fails at +7. A swap would start a pod from no spec: instead the run is requeued,
    # and starts again once its file is fixed at +10.
    doc = frozen_doc(
        a_run("t/r", "org:t").gpus(8).groups(8).spares(8).build(),
        at(7, node={"name": "A-n00", "event": "Fail"}), at(8, checkpoint="failed"), fixed(10),
    )  # fmt: skip
    out = play(doc)
    active = open_leases(out["checkpoints"]["valid"], "t/r", "Active")
    assert [x["spec"]["slice"]["nodes"][0] for x in active] == ["A-n00#0"]
    assert [e for e in starts(out, "t/r") if e["reason"] == "Swap"] == []
    failed = out["checkpoints"]["failed"]
    assert open_leases(failed, "t/r") == [] and failed["runs"]["t/r"]["phase"] == "Pending"
    assert out["final"]["runs"]["t/r"]["phase"] == "Running"
