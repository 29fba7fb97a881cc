"""Names, labels and annotations: validate refuses exactly what kube-apiserver refuses, at the line it is on.

The cases are Kubernetes' own (k8s.io/apimachinery pkg/util/validation/validation_test.go: TestIsQualifiedName,
TestIsValidLabelValue, TestIsDNS1123Label, TestIsDNS1123Subdomain), checked through the models and through the
published JSON Schemas, which must agree.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from schemas import diagnostics as codes
from schemas.fleetcheck import check_fleet
from schemas.load import KINDS
from schemas.run import Run
from tests.schemas.test_schema_contract import model_accepts
from tests.support.corpus import kind_validator

QUALIFIED_OK = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "1234",
    "simple/simple",
    "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes",
    "now.with.dots/simple",
    "now-with.dashes-and.dots/simple",
    "1-num.2-num/3-num",
    "1234/5678",
    "1.2.3.4/5678",
    "Uppercase_Is_OK_123",
    "example.com/Uppercase_Is_OK_123",
    "requests.storage-foo",
    "a" * 63,
    "a" * 253 + "/" + "b" * 63,
]
QUALIFIED_BAD = [
    "nospecialchars%^=@",
    "cantendwithadash-",
    "-cantstartwithadash-",
    "only/one/slash",
    "Example.com/abc",
    "example_com/abc",
    "example.com/",
    "/simple",
    "a" * 64,
    "a" * 254 + "/abc",
]
VALUE_OK = ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a" * 63, ""]
VALUE_BAD = [
    "nospecialchars%^=@",
    "Tama-nui-te-rā.is.Māori.sun",
    "\\backslashes\\are\\bad",
    "-starts-with-dash",
    "ends-with-dash-",
    ".starts.with.dot",
    "ends.with.dot.",
    "a" * 64,
]
LABEL_OK = [
    "a",
    "ab",
    "abc",
    "a1",
    "a-1",
    "a--1--2--b",
    "0",
    "01",
    "012",
    "1a",
    "1-a",
    "1--a--b--2",
    "a" * 63,
]
LABEL_BAD = [
    "",
    "A",
    "aBc",
    "1-A",
    "-",
    "a-",
    "-a",
    "a_b",
    ".",
    "a.",
    "a.b",
    " ",
    "a b",
    "a" * 64,
    "../x",
    "..",
]
SUBDOMAIN_OK = ["a", "0", "1-a", "a.a", "a--1--2--b.1", "0.1", "a.b.c.d.e", "1.2.3.4.5", "a" * 253]
SUBDOMAIN_BAD = [
    "",
    "A",
    "a-",
    "-a",
    "a_b",
    ".",
    "a.",
    ".a",
    "a..b",
    "1..2",
    "a b",
    "A.a",
    "ab.A",
    "a@b",
    "a:b",
    "a" * 254,
]


def run(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rq.davidlangworthy.io/v1",
        "kind": "Run",
        "metadata": {"name": "r", "namespace": "team-a", **metadata},
        "spec": {"owner": "org:team-a", "resources": {"gpuType": "H100-80GB", "totalGPUs": 8}},
    }


def budget(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "rq.davidlangworthy.io/v1",
        "kind": "Budget",
        "metadata": {"name": name},
        "spec": {"owner": "org:team-a", "envelopes": []},
    }


def verdicts(doc: dict[str, Any]) -> tuple[bool, bool]:
    """(the model accepts it, the published schema accepts it)."""
    kind = doc["kind"]
    return model_accepts(KINDS[kind], doc), kind_validator(kind).is_valid(doc)


@pytest.mark.parametrize(
    ("key", "want"), [*((k, True) for k in QUALIFIED_OK), *((k, False) for k in QUALIFIED_BAD)]
)
def test_a_label_key_is_taken_exactly_when_kubernetes_takes_it(key: str, want: bool) -> None:
    assert verdicts(run(labels={key: "v"})) == (want, want)
    as_annotation = (
        want or key == "Example.com/abc"
    )  # the API server lowercases an annotation key's prefix first
    assert verdicts(run(annotations={key: "v"})) == (as_annotation, as_annotation)


@pytest.mark.parametrize(
    ("value", "want"), [*((v, True) for v in VALUE_OK), *((v, False) for v in VALUE_BAD)]
)
def test_a_label_value_is_taken_exactly_when_kubernetes_takes_it(value: str, want: bool) -> None:
    assert verdicts(run(labels={"team": value})) == (want, want)
    assert verdicts(run(annotations={"note": value})) == (True, True)  # an annotation holds any text


@pytest.mark.parametrize(("name", "want"), [*((n, True) for n in LABEL_OK), *((n, False) for n in LABEL_BAD)])
def test_a_run_name_and_namespace_are_dns_labels(name: str, want: bool) -> None:
    assert verdicts(run(name=name)) == (want, want)
    assert verdicts(run(namespace=name)) == (want, want)


@pytest.mark.parametrize(
    ("name", "want"), [*((n, True) for n in SUBDOMAIN_OK), *((n, False) for n in SUBDOMAIN_BAD)]
)
def test_a_budget_name_is_a_dns_subdomain(name: str, want: bool) -> None:
    assert verdicts(budget(name)) == (want, want)


def test_annotations_hold_at_most_256_kib_of_keys_and_values_together() -> None:
    limit = 256 * 1024
    fits = run(annotations={"a": "x" * (limit - 1 - 2), "b": "y"})  # 1 + (limit - 3) + 1 + 1 bytes
    assert model_accepts(Run, fits)
    one_more = run(annotations={"a": "x" * (limit - 1 - 2), "b": "yz"})
    assert not model_accepts(Run, one_more)
    multibyte = run(annotations={"a": "ā" * (limit // 2)})  # bytes, not characters, as the API server counts
    assert not model_accepts(Run, multibyte)


def test_each_refused_label_is_reported_at_its_own_line_with_what_to_write() -> None:
    doc = run(labels={"team": "vision research", "ok": "fine", "example.com/a/b": "x"})
    text = yaml.safe_dump(doc, sort_keys=False).encode()
    fleet = check_fleet({"runs/team-a/r.yaml": text})
    got = [(d.line, d.code) for d in fleet.diagnostics if d.path == "runs/team-a/r.yaml"]
    lines = text.decode().splitlines()
    want_lines = [
        i + 1 for i, line in enumerate(lines) if "vision research" in line or "example.com/a/b" in line
    ]
    assert got == [(line, codes.SCHEMA) for line in sorted(want_lines)]
    messages = " ".join(d.message for d in fleet.diagnostics)
    assert "label team has the value 'vision research'" in messages and "'vision-research'" in messages
    assert "has the prefix 'example.com/a'" in messages


def test_a_fleet_name_is_short_enough_to_be_the_value_of_the_fleet_label() -> None:
    config = {"apiVersion": "rq.davidlangworthy.io/v1", "kind": "FleetConfig", "spec": {}}
    assert verdicts({**config, "metadata": {"name": "a" * 63}}) == (True, True)
    assert verdicts({**config, "metadata": {"name": "a" * 64}}) == (False, False)
