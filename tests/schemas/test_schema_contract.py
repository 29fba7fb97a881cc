"""The published JSON Schemas accept exactly what the models accept, and the committed files are current."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from schemas import publish
from schemas.load import KINDS as KINDS_BY_NAME
from tests.support.corpus import INVALID, VALID, documents, kind_files, model_for, schema_validator, sentence

SCHEMAS_DIR = Path(publish.__file__).parent


def model_accepts(model: type[BaseModel], data: Any) -> bool:
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True


def corpus_documents() -> list[tuple[str, type[BaseModel], Any]]:
    out = []
    for path in [*kind_files(VALID), *kind_files(INVALID)]:
        try:
            docs = documents(path)
        except yaml.YAMLError:
            continue  # syntax errors never reach a schema
        for i, data in enumerate(docs):
            model = model_for(path, data)
            if model is not None and data is not None:
                out.append((f"{sentence(path)} #{i}", model, data))
    return out


CORPUS_DOCS = corpus_documents()


@pytest.mark.parametrize(
    ("model", "data"), [(m, d) for _, m, d in CORPUS_DOCS], ids=[n for n, _, _ in CORPUS_DOCS]
)
def test_the_schema_and_the_model_agree_on_a_corpus_document(model: type[BaseModel], data: Any) -> None:
    assert schema_validator(model).is_valid(data) == model_accepts(model, data)


def test_the_corpus_has_schema_invalid_documents_of_every_kind() -> None:
    rejected = {m.__name__ for _, m, d in CORPUS_DOCS if not model_accepts(m, d)}
    assert rejected == {"Budget", "Run", "Lease", "Reservation", "FleetConfig", "Scenario", "Inventory"}


def test_every_valid_corpus_document_passes_its_published_schema() -> None:
    for path in kind_files(VALID):
        for data in documents(path):
            validator = schema_validator(model_for(path, data))  # type: ignore[arg-type]  # None only for files the corpus never holds
            assert validator.is_valid(data), (path.name, [e.message for e in validator.iter_errors(data)])


# --- mutations: the corpus's valid documents, changed one place at a time ------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=300),
    st.sampled_from([0.0, 8.0, 0.5, 1.5, -1.0, 1e20]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12),
    st.sampled_from(
        [
            "",
            "*",
            "org:x",
            "a\n",
            "org x",
            "2026-02-30T00:00:00Z",
            "2026-03-02T09:00:00Z\n",
            "2026-03-02T09:00:00.5+01:00",
            "15m",
            "1h30m",
            "90",
            "0m0s",
            "+5m",
            "Active",
            "Spare",
            "family",
            "none",
            "Pending",
            "RandomPreempt(0x0123456789abcdef)",
            "0x00000000000000ff",
            "team-a",
            "Team_A",
            "٣",
            "rq.davidlangworthy.io/v1",
        ]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["name", "x", "at", "kind"]), inner, max_size=3),
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def perturbed(value: Any) -> st.SearchStrategy[Any]:
    """A value just across a boundary of the original: the edits schemas and models disagree on."""
    if isinstance(value, bool):
        return st.sampled_from([not value, int(value), str(value).lower()])
    if isinstance(value, int):
        bounds = [1_025, 100_001, 1_000_000, 1_000_001]  # just past the published maxima (GPUs per node, ...)
        return st.sampled_from(
            [value - 1, value + 1, -value, float(value), value + 0.5, str(value), 0, *bounds]
        )
    if isinstance(value, float):
        return st.sampled_from([-value, value * 3, int(value), str(value), 0, 1])
    if isinstance(value, str):
        return st.sampled_from(
            [
                value + "\n",
                " " + value,
                value.upper(),
                value[:-1],
                value + "*",
                value.replace(":", " "),
                value * 20,
                "",
            ]
        )
    return VALUES


@st.composite
def mutated(draw: st.DrawFn) -> tuple[type[BaseModel], Any]:
    path_, model, data = draw(st.sampled_from([c for c in CORPUS_DOCS if model_accepts(c[1], c[2])]))
    data = copy.deepcopy(data)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(st.sampled_from(_paths(data)))
        op = draw(st.sampled_from(["replace", "delete", "add", "perturb", "perturb"]))
        if not where:
            data = draw(VALUES) if op == "replace" else data
            continue
        parent = data
        for step in where[:-1]:
            parent = parent[step]
        key = where[-1]
        if op == "replace":
            parent[key] = draw(VALUES)
        elif op == "perturb":
            parent[key] = draw(perturbed(parent[key]))
        elif op == "delete":
            del parent[key]
        elif isinstance(parent[key], dict):
            name = draw(
                st.sampled_from(
                    ["spares", "sparesPerGroup", "status", "extra", "checkpoint", "node", "apply"]
                )
            )
            parent[key][name] = draw(VALUES)
        elif isinstance(parent[key], list):
            parent[key].append(draw(VALUES))
    return model, data


@settings(
    max_examples=int(os.environ.get("JOBTREE_SCHEMA_EXAMPLES", "600")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutated())
def test_the_schema_and_the_model_agree_on_any_mutated_document(case: tuple[type[BaseModel], Any]) -> None:
    model, data = case
    assert schema_validator(model).is_valid(data) == model_accepts(model, data)


# --- the committed files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel", sorted(publish.render()), ids=lambda rel: f"committed {rel} is what make schemas writes"
)
def test_a_committed_schema_file_equals_what_publish_generates(rel: str) -> None:
    assert (SCHEMAS_DIR / rel).read_text(encoding="utf-8") == publish.render()[rel]


def test_no_stale_schema_file_is_left_behind() -> None:
    on_disk = {
        p.relative_to(SCHEMAS_DIR).as_posix() for d in ("json", "crds") for p in (SCHEMAS_DIR / d).iterdir()
    }
    assert on_disk == set(publish.render())


def test_the_crds_are_structural_and_name_the_lease_gpuleases() -> None:
    crds = {rel: yaml.safe_load(text) for rel, text in publish.render().items() if rel.startswith("crds/")}
    want_names = {"budgets", "runs", "gpuleases", "reservations", "fleetconfigs", "journalentries"}
    assert {c["spec"]["names"]["plural"] for c in crds.values()} == want_names
    lease = crds["crds/gpuleases.yaml"]["spec"]
    assert (lease["names"]["kind"], lease["names"]["singular"], lease["scope"]) == (
        "Lease",
        "gpulease",
        "Namespaced",
    )
    assert crds["crds/budgets.yaml"]["spec"]["scope"] == "Cluster"
    for crd in crds.values():
        version = crd["spec"]["versions"][0]
        assert version["subresources"] == {"status": {}}
        _assert_structural(version["schema"]["openAPIV3Schema"], "")


def _assert_structural(node: Any, where: str) -> None:
    """Every schema node has a type (or is int-or-string / open), with no $ref, const or title."""
    assert isinstance(node, dict), where
    assert not {"$ref", "$defs", "const", "title", "default"} & set(node), where
    if node.get("x-kubernetes-int-or-string"):
        assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], where  # the only form allowed
    else:
        assert "type" in node and "anyOf" not in node, where
    if "properties" in node:
        assert "additionalProperties" not in node, where
        for name, sub in node["properties"].items():
            _assert_structural(sub, f"{where}.{name}")
    if isinstance(node.get("items"), dict):
        _assert_structural(node["items"], f"{where}[]")
    if isinstance(node.get("additionalProperties"), dict):
        _assert_structural(node["additionalProperties"], f"{where}{{}}")


# --- the CRDs' openAPIV3Schema, read as the API server would ----------------------------------

CRD_FILES = {"Budget": "budgets", "Run": "runs", "Lease": "gpuleases", "Reservation": "reservations"}


def _as_json_schema(node: Any) -> Any:
    """OpenAPI v3 (Kubernetes flavour) to JSON Schema: `nullable` admits null; x- keys are hints."""
    if isinstance(node, list):
        return [_as_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _as_json_schema(v) for k, v in node.items() if not k.startswith("x-") and k != "nullable"}
    return {"anyOf": [out, {"type": "null"}]} if node.get("nullable") else out


def crd_validator(kind: str) -> Any:
    from jsonschema import Draft202012Validator

    text = (SCHEMAS_DIR / "crds" / f"{CRD_FILES[kind]}.yaml").read_text(encoding="utf-8")
    schema = yaml.safe_load(text)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return Draft202012Validator(_as_json_schema(schema))


def test_the_crd_files_are_plain_yaml_without_anchors_or_aliases() -> None:
    for kind, plural in CRD_FILES.items():
        text = (SCHEMAS_DIR / "crds" / f"{plural}.yaml").read_text(encoding="utf-8")
        assert "&id" not in text and "*id" not in text, kind


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_a_crd_accepts_every_valid_corpus_object_of_its_kind(kind: str) -> None:
    validator = crd_validator(kind)
    found = 0
    for path in kind_files(VALID):
        for data in documents(path):
            if isinstance(data, dict) and data.get("kind") == kind:
                found += 1
                assert validator.is_valid(data), (path.name, [e.message for e in validator.iter_errors(data)])
    assert found, f"the valid corpus has no {kind}"


@pytest.mark.parametrize(
    ("resources", "want_valid"),
    [
        ({"gpuType": "H100-80GB", "totalGPUs": 8}, True),
        ({"gpuType": "H100-80GB", "totalGPUs": "8"}, False),
        ({"gpuType": "H100-80GB", "totalGPUs": 0}, False),
        ({"gpuType": "H100-80GB", "totalGPUs": 1_000_001}, False),
        ({"gpuType": "", "totalGPUs": 8}, False),
    ],
)
def test_the_run_crd_rejects_what_the_run_model_rejects(resources: dict[str, Any], want_valid: bool) -> None:
    run = {
        "apiVersion": "rq.davidlangworthy.io/v1",
        "kind": "Run",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {"owner": "org:x", "resources": resources},
    }
    assert crd_validator("Run").is_valid(run) is want_valid
    assert model_accepts(KINDS_BY_NAME["Run"], run) is want_valid
