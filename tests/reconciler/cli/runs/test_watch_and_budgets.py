"""`kubectl runs watch`, `budgets usage` and `sponsors`: a run as it changes, and who pays for what.

examples/01 at its first pass (09:00): train-128 (org:ai:rai:sys, 128 GPUs in groups of 32) runs
96 GPUs on its own envelope rai-sys/west-h100 and 32 on the sponsor's: mm-vision/west-h100 lends
up to 64 GPUs (`maxConcurrency`) to org:ai:*, so after these 32 it has 32 left to lend.
"""

from __future__ import annotations

import time
from pathlib import Path

import pygit2
import pytest

from reconciler.cli.runs import watch
from reconciler.passes.reconcile import reconcile_once
from tests.conftest import Golden
from tests.support.fleets import pass_at, runs
from tests.support.git import RESNET_SMALL, T0, bare_remote, clone, template_files


def test_watch_once_shows_width_leases_funding_and_recent_events(cofunded: Path, golden: Golden) -> None:
    at = pass_at(cofunded, "2026-03-02T09:00:00Z")
    shown = runs("watch", "train-128", "--once", "--rev", at, "--now", "2026-03-02T09:01:00Z", repo=cofunded)
    assert shown.code == 0, shown.err
    golden.check("runs/watch-cofunded.txt", shown.shown)
    doc = runs("watch", "train-128", "--once", "--rev", at, "--format", "json", repo=cofunded).json()
    assert (doc["kind"], doc["phase"], doc["width"]["allocated"], doc["width"]["desired"]) == (
        "RunWatch",
        "Running",
        128,
        128,
    )
    assert [g["group"] for g in doc["leases"]["active"]] == [0, 1, 2, 3] and doc["leases"]["spare"] == []
    f = doc["funding"]
    assert (f["ownedGPUs"], f["familyGPUs"], f["sponsoredGPUs"], f["borrowedGPUs"]) == (96, 0, 32, 32)
    assert (f["family"], f["sponsors"]) == ([], [{"owner": "org:ai:mm:vision", "gpus": 32}])
    assert (
        "funding: 96 own, 0 family, 32 from sponsors (org:ai:mm:vision 32), 0 unfunded, 0 fill" in shown.out
    )
    assert [(e["event"], e["group"], e["gpus"]) for e in doc["events"]] == [
        ("Start", g, 32) for g in range(4)
    ]


def test_watch_shows_the_run_again_when_the_fleet_branch_moves(
    lottery: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a researcher's clone of a fleet whose remote is at 09:10 (j4 reserved); the reconciler then
    # pushes 09:25 (j4 started): the next fetch finds it and watch prints j4 again, now Running
    remote = pygit2.clone_repository(str(lottery), str(tmp_path / "origin.git"), bare=True)
    reserved, started = pass_at(lottery, "2026-03-02T09:10:00Z"), pass_at(lottery, "2026-03-02T09:25:00Z")
    remote.references["refs/heads/main"].set_target(reserved)
    pygit2.clone_repository(str(tmp_path / "origin.git"), str(tmp_path / "work"), checkout_branch="main")
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 1:
            remote.references["refs/heads/main"].set_target(started)  # the reconciler pushed
        elif len(naps) == 3:
            raise KeyboardInterrupt  # Ctrl-C after a quiet round

    monkeypatch.setattr(time, "sleep", nap)
    shown = runs("watch", "j4", "--interval", "30s", "--format", "json", repo=tmp_path / "work")
    assert shown.code == 0, shown.err
    assert naps == [30, 30, 30]
    first, second = (watch_doc for watch_doc in _documents(shown.out))
    assert (first["commit"], first["phase"]) == (reserved, "Pending")
    assert (second["commit"], second["phase"], second["width"]["allocated"]) == (started, "Running", 32)


def _documents(text: str) -> list[dict]:  # type: ignore[type-arg]  # JSON documents printed one after another
    import json

    decoder, out, pos = json.JSONDecoder(), [], 0
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos < len(text):
            doc, pos = decoder.raw_decode(text, pos)
            out.append(doc)
    return out


def test_a_bad_interval_is_a_usage_error(lottery: Path) -> None:
    assert runs("watch", "b1", "--interval", "soon", repo=lottery).code == 2
    assert watch.CLEAR.startswith("\x1b[")


def test_budgets_usage_shows_what_each_envelope_funds_lends_and_has_left(
    cofunded: Path, golden: Golden
) -> None:
    at = pass_at(cofunded, "2026-03-02T09:00:00Z")
    shown = runs("budgets", "usage", "--rev", at, "--now", "2026-03-02T09:01:00Z", repo=cofunded)
    assert shown.code == 0, shown.err
    golden.check("runs/budgets-usage-cofunded.txt", shown.shown)
    doc = runs(
        "budgets", "usage", "--owner", "org:ai:mm:vision", "--rev", at, "--format", "json", repo=cofunded
    ).json()
    (lender,) = [e for e in doc["envelopes"] if e["envelope"] == "west-h100"]
    assert (lender["ownedGPUs"], lender["lentOutGPUs"], lender["lentToSponsoredGPUs"]) == (0, 32, 32)
    sys_doc = runs(
        "budgets", "usage", "--owner", "org:ai:rai:sys", "--rev", at, "--format", "json", repo=cofunded
    )
    (own,) = sys_doc.json()["envelopes"]
    assert (own["ownedGPUs"], own["lentOutGPUs"]) == (96, 0)
    assert sys_doc.json()["borrowing"] == [
        {"borrower": "org:ai:rai:sys", "lender": "org:ai:mm:vision", "budget": "mm-vision",
         "envelope": "west-h100", "funding": "sponsor", "gpus": 32, "runs": ["rai-sys/train-128"]}
    ]  # fmt: skip
    assert runs("budgets", "usage", "--owner", "org:nobody", repo=cofunded).code == 2


def test_budgets_usage_shows_what_an_owner_holds_where_it_has_no_envelope_family_and_sponsors_apart(
    tmp_path: Path,
) -> None:
    # the template plus resnet-small: rai-sys has no H100 envelope, so the media division pays its
    # 8 H100 as family; train-cofunded holds 8 of its parent's GB200 (family) and 16 of its sponsor's
    files = template_files() | {"runs/rai-sys/resnet-small.yaml": RESNET_SMALL}
    path = tmp_path / "work"
    clone(bare_remote(tmp_path, files), path)
    assert reconcile_once(path, now=T0).commit is not None
    doc = runs("budgets", "usage", "--owner", "org:acme:rai:sys", "-o", "json", repo=path).json()
    held = [
        (b["budget"], b["envelope"], b["lender"], b["funding"], b["gpus"], b["runs"])
        for b in doc["borrowing"]
    ]
    assert held == [
        ("media", "east-h100", "org:acme:media", "family", 8, ["rai-sys/resnet-small"]),
        ("rai", "west-gb200", "org:acme:rai", "family", 8, ["rai-sys/train-cofunded"]),
        ("media-vision", "west-gb200", "org:acme:media:vision", "sponsor", 16, ["rai-sys/train-cofunded"]),
    ]
    text = runs("budgets", "usage", "--owner", "org:acme:rai:sys", repo=path).out
    assert (
        "org:acme:rai:sys  media/east-h100          org:acme:media         family   8     rai-sys/resnet-small"
        in text
    )
    # the lenders' side: what media shares with family, and what media-vision lends, apart
    everyone = {
        (e["budget"], e["envelope"]): e
        for e in runs("budgets", "usage", "-o", "json", repo=path).json()["envelopes"]
    }
    media, vision = everyone[("media", "east-h100")], everyone[("media-vision", "west-gb200")]
    assert (media["sharedWithFamilyGPUs"], media["lentToSponsoredGPUs"]) == (8, 0)
    assert (vision["sharedWithFamilyGPUs"], vision["lentToSponsoredGPUs"]) == (0, 16)
    # an owner with runs and no budget at all is known (a tenant), not "no budget is owned by"
    assert runs("budgets", "usage", "--owner", "org:acme:rai:sys", repo=path).code == 0


def test_watch_keeps_family_and_sponsors_apart_so_a_borrow_cap_reads_true(tmp_path: Path) -> None:
    # train-cofunded: maxBorrowGPUs 16. Its parent's 8 are family, not borrowing: 16 from sponsors
    path = tmp_path / "work"
    clone(bare_remote(tmp_path, template_files()), path)
    assert reconcile_once(path, now=T0).commit is not None
    shown = runs("watch", "train-cofunded", "--once", repo=path).out
    assert (
        "funding: 8 own, 8 family (org:acme:rai 8), 16 from sponsors (org:acme:media:vision 16), 0 unfunded, 0 fill"
        in shown
    )
    rows = runs("leases", "train-cofunded", "--format", "json", repo=path).json()["leases"]
    # a group's leases by node, whatever their names' hashes (they read n00, n02, n01, n03 before)
    for group in (0, 1):
        nodes = [x["node"] for x in rows if x["group"] == group]
        assert nodes == sorted(nodes) and len(nodes) == 4
    leases = runs("leases", "train-cofunded", "-o", "json", repo=path).json()
    labels = sorted(
        {
            (x["metadata"]["labels"]["rq.davidlangworthy.io/funding"], x["spec"]["payer"]["owner"])
            for x in leases["items"]
        }
    )
    assert labels == [
        ("family", "org:acme:rai"),
        ("own", "org:acme:rai:sys"),
        ("sponsor", "org:acme:media:vision"),
    ]


def test_sponsors_say_who_may_lend_to_whom_and_what_is_left(cofunded: Path) -> None:
    at = pass_at(cofunded, "2026-03-02T09:00:00Z")
    doc = runs("sponsors", "--owner", "org:ai:rai:sys", "--rev", at, "--format", "json", repo=cofunded).json()
    (lender,) = doc["lenders"]
    assert (lender["lender"], lender["budget"], lender["envelope"]) == (
        "org:ai:mm:vision",
        "mm-vision",
        "west-h100",
    )
    assert (lender["maxConcurrency"], lender["lentGPUs"], lender["leftGPUs"]) == (64, 32, 32)
    assert lender["admitsOwner"] is True
    assert [b["run"] for b in lender["borrowers"]] == ["rai-sys/train-128"]
    assert (
        runs("sponsors", "--owner", "org:elsewhere", "--format", "json", repo=cofunded).json()["lenders"]
        == []
    )
    assert (
        "No envelope lends to or from org:elsewhere."
        in runs("sponsors", "--owner", "org:elsewhere", repo=cofunded).out
    )
