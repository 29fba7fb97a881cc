"""Every key a verb prints with `--format json` is named in docs/json.md, and every document says its version and kind.

The documents come from the worked examples' fleets (a reservation, a lottery, a swap, a
co-funded run, a window) and a dry-run submit; a key added without documenting it fails here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.support import REPO
from tests.support.fleets import pass_at, runs

DOCUMENTED = set(re.findall(r"`([A-Za-z]+)(?:\[\])?", (REPO / "docs" / "json.md").read_text()))
DOCUMENTED |= {
    part
    for words in re.findall(r"`([A-Za-z.\[\]]+)`", (REPO / "docs" / "json.md").read_text())
    for part in re.split(r"[.\[\]]+", words)
    if part
}
MAPS = {"nodes", "cut", "selector", "plan"}  # objects keyed by names (node, run, label), and the plan report


def keys(doc: Any, out: set[str]) -> set[str]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(k)
            if k not in MAPS:
                keys(v, out)
    elif isinstance(doc, list):
        for v in doc:
            keys(v, out)
    return out


def test_every_key_printed_is_documented(
    lottery: Path, spares: Path, cofunded: Path, window: Path, tmp_path: Path
) -> None:
    documents = [
        runs("get", "-A", "--format", "json", repo=lottery),
        runs("plan", "b1", "--format", "json", repo=lottery),
        runs("plan", "c2", "--format", "json", repo=lottery),
        runs("watch", "b1", "--once", "--format", "json", repo=lottery),
        runs("leases", "b1", "--format", "json", repo=lottery),
        runs("explain", "b1", "--format", "json", repo=lottery),
        runs("explain", "c1", "--format", "json", repo=lottery),
        runs(
            "explain",
            "j1",
            "--rev",
            pass_at(lottery, "2026-03-02T09:25:00Z"),
            "--format",
            "json",
            repo=lottery,
        ),
        runs(
            "explain",
            "alpha/j1",
            "--rev",
            pass_at(spares, "2026-03-02T09:05:00Z"),
            "--format",
            "json",
            repo=spares,
        ),
        runs(
            "watch",
            "beta/j2",
            "--once",
            "--rev",
            pass_at(spares, "2026-03-02T09:05:00Z"),
            "--format",
            "json",
            repo=spares,
        ),
        runs(
            "budgets",
            "usage",
            "--rev",
            pass_at(cofunded, "2026-03-02T09:00:00Z"),
            "--format",
            "json",
            repo=cofunded,
        ),
        runs("sponsors", "--owner", "org:ai:rai:sys", "--format", "json", repo=cofunded),
        runs(
            "plan", "big", "--rev", pass_at(window, "2026-03-02T15:00:00Z"), "--format", "json", repo=window
        ),
    ]
    run = "apiVersion: rq.davidlangworthy.io/v1\nkind: Run\nmetadata: {name: n1, namespace: team-a}\nspec:\n  owner: org:team-a\n  resources: {gpuType: H100-80GB, totalGPUs: 8}\n"
    (tmp_path / "n1.yaml").write_text(run)
    who = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com"}
    documents.append(
        runs(
            "submit", "-f", str(tmp_path / "n1.yaml"), "--dry-run", "--format", "json", repo=lottery, env=who
        )
    )
    kinds = set()
    for shown in documents:
        doc = shown.json()
        assert doc["version"] == 1 and doc["kind"]
        kinds.add(doc["kind"])
        undocumented = keys(doc, set()) - DOCUMENTED
        assert not undocumented, (
            f"{doc['kind']} prints keys docs/json.md does not name: {sorted(undocumented)}"
        )
    assert kinds == {
        "RunList",
        "RunPlan",
        "RunWatch",
        "RunLeases",
        "RunExplain",
        "BudgetUsage",
        "Sponsors",
        "Proposal",
    }
