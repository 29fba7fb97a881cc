"""Model tests over the corpus: valid manifests load and obey their own rules; each invalid one fails as it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas import rules
from schemas.fleet import Inventory
from schemas.load import KINDS, load_documents, load_object, validate_document
from tests.support.corpus import INVALID, VALID, Expected, expectations, kind_files, model_for, sentence


def diagnose(path: Path) -> set[Expected]:
    """Every problem in one corpus file: YAML, kind, fields, and the rules an object obeys alone."""
    text = path.read_bytes()
    docs, diags = load_documents(path.name, text)
    found = {(d.code, d.line) for d in diags}
    for doc in docs:
        if model_for(path, doc.data) is Inventory:
            _, diags = validate_document(doc, Inventory)
            found |= {(d.code, d.line) for d in diags}
            continue
        loaded, diags = load_object(doc, KINDS)
        found |= {(d.code, d.line) for d in diags}
        if loaded is not None:  # the rules one Budget or Run obeys on its own, whatever its neighbours are
            findings = rules.Findings()
            if loaded.model.kind == "Budget":
                rules.budget_rules(findings, loaded)
            elif loaded.model.kind == "Run":
                rules.run_rules(findings, loaded)
            found |= {(d.code, d.line) for d in findings.diagnostics}
    return {Expected(path.name, code, line) for code, line in found}


@pytest.mark.parametrize("path", kind_files(VALID), ids=sentence)
def test_a_valid_manifest_loads_without_a_single_diagnostic(path: Path) -> None:
    assert diagnose(path) == set()


@pytest.mark.parametrize("path", kind_files(INVALID), ids=sentence)
def test_an_invalid_manifest_reports_exactly_its_expected_codes_and_lines(path: Path) -> None:
    want = expectations(path.read_text(), path.name)
    assert want, f"{path.name} states no `# expect: CODE at line N`"
    assert diagnose(path) == want


def test_every_seed_manifest_is_in_the_valid_corpus() -> None:
    seeds = sorted(p.name for p in VALID.glob("seed-*.yaml"))
    assert seeds == [
        "seed-budget-example-vision.yaml",
        "seed-budget-team-a.yaml",
        "seed-run-j2.yaml",
        "seed-run-resnet-small.yaml",
        "seed-run-train-128-cofunded.yaml",
        "seed-run-train-64-with-spares.yaml",
    ]


def test_the_seeds_spares_alias_means_spares_per_group() -> None:
    docs, _ = load_documents(
        "run.yaml",
        b"""
apiVersion: rq.davidlangworthy.io/v1
kind: Run
metadata: {name: r, namespace: ns}
spec: {owner: o, resources: {gpuType: H100-80GB, totalGPUs: 64}, locality: {groupGPUs: 32}, spares: 2}
""",
    )
    loaded, diags = load_object(docs[0], ("Run",))
    assert diags == [] and loaded is not None
    assert loaded.model.spec.sparesPerGroup == 2


def test_an_integral_float_is_the_integer_it_denotes_and_times_accept_epoch_seconds() -> None:
    docs, _ = load_documents(
        "b.yaml",
        b"""
apiVersion: rq.davidlangworthy.io/v1
kind: Budget
metadata: {name: b}
spec:
  owner: o
  envelopes: [{name: e, flavor: H100-80GB, concurrency: 8.0, start: 1767225600, end: "2027-01-01T00:00:00Z"}]
""",
    )
    loaded, diags = load_object(docs[0], ("Budget",))
    assert diags == [] and loaded is not None
    envelope = loaded.model.spec.envelopes[0]
    want_start, want_end = 1767225600, 1798761600
    assert (envelope.concurrency, envelope.start, envelope.end) == (8, want_start, want_end)
