"""Cross-object rules over whole fleets: each broken object is reported at its line, its neighbours never are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler.passes.embedded import nodes_from_inventory
from schemas import cycles, rules
from schemas import diagnostics as codes
from schemas.fleetcheck import check_fleet
from tests.support.corpus import FLEETS, Expected, fleet_expectations, fleet_files, materialize

FLEET_NAMES = sorted(p.name for p in FLEETS.iterdir() if p.is_dir())


def found(files: dict[str, bytes]) -> set[Expected]:
    return {Expected(d.path, d.code, d.line) for d in check_fleet(files).diagnostics}


@pytest.mark.parametrize(
    "name", FLEET_NAMES, ids=lambda n: f"fleet {n} reports exactly its expected problems"
)
def test_a_fleet_reports_exactly_the_problems_its_files_expect(name: str, tmp_path: Path) -> None:
    root = materialize(name, tmp_path)
    assert found(fleet_files(root)) == fleet_expectations(root)


@pytest.mark.parametrize(
    "name", FLEET_NAMES, ids=lambda n: f"in fleet {n} only objects with expectations are excluded"
)
def test_only_objects_with_expected_problems_are_excluded(name: str, tmp_path: Path) -> None:
    root = materialize(name, tmp_path)
    fleet = check_fleet(fleet_files(root))
    expected_paths = {e.path for e in fleet_expectations(root)}
    for obj in fleet.objects:
        if obj.path not in expected_paths:
            assert obj.valid, f"{obj.key} in {obj.path} was excluded: {obj.diagnostics}"


def test_the_seeds_fleet_is_valid_and_plans_every_seed_object(tmp_path: Path) -> None:
    fleet = check_fleet(fleet_files(materialize("seeds", tmp_path)))
    assert fleet.diagnostics == []
    want_runs = {"j2", "resnet-small", "train-128-cofunded", "train-64-with-spares"}
    assert {r.metadata.name for r in fleet.runs} == want_runs
    want_budgets = {"example-vision", "team-a", "example-sys", "team-b", "rai-sys", "demo-research"}
    assert {b.metadata.name for b in fleet.budgets} == want_budgets


def test_valid_neighbours_of_broken_objects_are_still_planned(tmp_path: Path) -> None:
    fleet = check_fleet(fleet_files(materialize("broken", tmp_path)))
    runs = {f"{r.metadata.namespace}/{r.metadata.name}" for r in fleet.runs}
    want_runs = {"team-a/ok", "team-b/fine", "team-b/third", "team-b/twin"}
    assert runs == want_runs
    assert {b.metadata.name for b in fleet.budgets} == {"root", "team-a", "team-b"}
    twin = next(r for r in fleet.runs if r.metadata.name == "twin")
    assert twin.spec.resources.totalGPUs == 8, "the first copy in path order is the one kept"


def test_rejected_keys_name_broken_objects_but_not_kept_duplicates(tmp_path: Path) -> None:
    fleet = check_fleet(fleet_files(materialize("broken", tmp_path)))
    assert "Run team-b/syntax" in fleet.rejected, "a file that does not parse is named by its path"
    assert "Budget loop-a" in fleet.rejected
    assert "Run team-b/twin" not in fleet.rejected
    assert "Budget team-a" not in fleet.rejected


def test_a_broken_jobtree_yaml_keeps_the_tenants_it_still_declares(tmp_path: Path) -> None:
    fleet = check_fleet(fleet_files(materialize("bad-config", tmp_path)))
    assert [(t.namespace, t.owner) for t in fleet.config.tenants] == [("team-a", "org:team-a")]
    assert [r.metadata.namespace for r in fleet.runs] == ["team-a"]


def test_a_duplicate_tenant_binding_keeps_the_first_owner(tmp_path: Path) -> None:
    fleet = check_fleet(fleet_files(materialize("dup-tenant", tmp_path)))
    assert [(t.namespace, t.owner) for t in fleet.config.tenants] == [("team-a", "org:team-a")]


def test_diagnostics_are_sorted_by_path_line_and_column(tmp_path: Path) -> None:
    diags = check_fleet(fleet_files(materialize("broken", tmp_path))).diagnostics
    assert [(d.path, d.line, d.col) for d in diags] == sorted((d.path, d.line, d.col) for d in diags)


def test_every_message_says_what_to_change(tmp_path: Path) -> None:
    diags = check_fleet(fleet_files(materialize("broken", tmp_path))).diagnostics
    verbs = ("add", "remove", "rename", "set", "use", "move", "fix", "lower", "pick", "break", "close", "indent",
             "quote", "save", "replace", "split", "write", "delete", "flatten", "keep")  # fmt: skip
    for d in diags:  # whole words: "use" must not be found in "because"
        words = set(re.findall(r"[a-z]+", d.message.lower()))
        assert words & set(verbs), str(d)


def test_a_parent_cycle_names_the_whole_cycle() -> None:
    want = {
        ("a", "b"): ["a", "b", "c", "a"],
        ("b", "c"): ["b", "c", "a", "b"],
        ("c", "a"): ["c", "a", "b", "c"],
    }
    assert cycles.cyclic_edges({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == want


def test_a_self_parent_is_a_cycle_of_one() -> None:
    assert cycles.cyclic_edges({"a": ["a"]}) == {("a", "a"): ["a", "a"]}


def test_a_deep_acyclic_family_is_not_a_cycle_and_does_not_recurse() -> None:
    chain = {f"o{i}": [f"o{i + 1}"] for i in range(5000)}
    assert cycles.cyclic_edges(chain) == {}


@pytest.mark.parametrize(
    ("pattern", "want_ok"),
    [
        ("org:example:vision", True),
        ("org:example:*", True),
        ("*", True),
        ("org:*:vision", False),
        ("*org", False),
        ("org:**", False),
        ("", False),
        ("org example", False),
    ],
    ids=lambda v: repr(v),
)
def test_lending_to_accepts_exact_owners_prefixes_and_star_only(pattern: str, want_ok: bool) -> None:
    assert rules.owner_pattern_ok(pattern) is want_ok


def test_a_run_outside_its_namespace_folder_is_rejected_even_when_the_owner_matches(tmp_path: Path) -> None:
    files = fleet_files(materialize("seeds", tmp_path))
    files["runs/demo/sneaky.yaml"] = files.pop("runs/team-b/j2.yaml")
    fleet = check_fleet(files)
    assert [(d.path, d.code) for d in fleet.diagnostics] == [("runs/demo/sneaky.yaml", codes.LOCATION)]


def test_duplicate_node_names_in_the_inventory_are_reported() -> None:
    files = {
        "jobtree.yaml": b"apiVersion: rq.davidlangworthy.io/v1\nkind: FleetConfig\nmetadata: {name: f}\n",
        "inventory/nodes.yaml": b"""domains:
  - {name: A, region: r, cluster: c, flavor: H100-80GB, nodes: 2, gpusPerNode: 8}
nodes:
  - {name: A-n01, gpus: 8}
""",
    }
    fleet = check_fleet(files)
    assert [(d.path, d.code, d.line) for d in fleet.diagnostics] == [
        ("inventory/nodes.yaml", codes.INVENTORY, 4)
    ]
    assert fleet.inventory is None


def test_a_node_of_a_domain_block_is_marked_failed_or_cordoned_by_name_in_the_block() -> None:
    files = {
        "jobtree.yaml": b"apiVersion: rq.davidlangworthy.io/v1\nkind: FleetConfig\nmetadata: {name: f}\n",
        "inventory/nodes.yaml": b"""domains:
  - name: A
    region: r
    cluster: c
    flavor: H100-80GB
    nodes: 4
    gpusPerNode: 8
    states: {A-n03: Failed, A-n01: NotReady}
    cordoned: [A-n02]
""",
    }
    fleet = check_fleet(files)
    assert fleet.diagnostics == [] and fleet.inventory is not None
    nodes = nodes_from_inventory(fleet.inventory)
    state = {n: (o.ready, o.cordoned, o.out_of_service) for n, o in sorted(nodes.items())}
    assert state == {
        "A-n00": (True, False, False),
        "A-n01": (False, False, False),
        "A-n02": (True, True, False),
        "A-n03": (False, False, True),  # failed: out of service, as an explicit node with state: Failed
    }


def test_a_marked_node_the_block_does_not_have_is_named_at_its_line() -> None:
    files = {
        "jobtree.yaml": b"apiVersion: rq.davidlangworthy.io/v1\nkind: FleetConfig\nmetadata: {name: f}\n",
        "inventory/nodes.yaml": b"""domains:
  - {name: A, region: r, cluster: c, flavor: H100-80GB, nodes: 4, gpusPerNode: 8,
     states: {A-n04: Failed}, cordoned: [A-n00, B-n00]}
""",
    }
    fleet = check_fleet(files)
    assert [(d.code, d.line, d.message) for d in fleet.diagnostics] == [
        (
            codes.INVENTORY,
            3,
            "A-n04 is not a node of domain block A (its nodes are A-n00 to A-n03); name one of them",
        ),
        (
            codes.INVENTORY,
            3,
            "B-n00 is not a node of domain block A (its nodes are A-n00 to A-n03); name one of them",
        ),
    ]


def test_yaml_nested_past_the_limit_is_a_diagnostic_not_a_crash() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    fleet = check_fleet({"runs/ns/deep.yaml": deep})
    assert {d.code for d in fleet.diagnostics} == {codes.YAML_SYNTAX, codes.TENANT}


@pytest.mark.parametrize(
    "name", ["broken", "seeds"], ids=lambda n: f"fleet {n} gives the same verdicts in any file order"
)
def test_the_order_files_arrive_in_changes_nothing(name: str, tmp_path: Path) -> None:
    files = fleet_files(materialize(name, tmp_path))
    shuffled = dict(reversed(list(files.items())))
    want, got = check_fleet(files), check_fleet(shuffled)
    assert (got.diagnostics, got.objects, got.rejected) == (want.diagnostics, want.objects, want.rejected)
    assert [r.metadata.name for r in got.runs] == [r.metadata.name for r in want.runs]


def test_a_same_named_copy_never_displaces_a_run_from_its_own_file(tmp_path: Path) -> None:
    root = materialize("seeds", tmp_path)
    j2 = (root / "runs" / "team-b" / "j2.yaml").read_text()
    # "a-copy" sorts before "j2": path order alone would keep the copy and reject the original
    (root / "runs" / "team-b" / "a-copy.yaml").write_text(j2.replace("totalGPUs: 24", "totalGPUs: 16"))
    fleet = check_fleet(fleet_files(root))
    assert [(d.path, d.code) for d in fleet.diagnostics] == [
        ("runs/team-b/a-copy.yaml", codes.DUPLICATE_OBJECT)
    ]
    (kept,) = [r for r in fleet.runs if r.metadata.name == "j2"]
    assert kept.spec.resources.totalGPUs == 24
    assert "is already defined at runs/team-b/j2.yaml:" in fleet.diagnostics[0].message
