"""What validate says of objects that plan, but not as their author meant: each a warning at its line with the
fix, the object still planned. And the one of them that is an error: groups larger than the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from reconciler.cli import main
from schemas import diagnostics as codes
from schemas.diagnostics import Diagnostic
from schemas.fleetcheck import ValidatedFleet, check_fleet
from tests.support.builders import a_budget, a_run, domain

NOW = 1772442000  # 2026-03-02T09:00:00Z


def text(doc: dict[str, Any]) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False).encode()


def fleet_files(
    *runs: dict[str, Any], budgets: tuple[dict[str, Any], ...] | None = None, **spec: Any
) -> dict[str, bytes]:
    """Tenant t (org:t) with a Budget, an inventory of H100-80GB and GB200 nodes, and `runs` under runs/t/."""
    config = {
        "apiVersion": "rq.davidlangworthy.io/v1",
        "kind": "FleetConfig",
        "metadata": {"name": "f"},
        "spec": {"tenants": [{"namespace": "t", "owner": "org:t"}], **spec},
    }
    inventory = {"domains": [domain("A", 4), domain("G", 2, gpus=4, flavor="GB200")], "nodes": []}
    files = {"jobtree.yaml": text(config), "inventory/nodes.yaml": text(inventory)}
    for b in budgets if budgets is not None else (a_budget("t", "org:t").envelope("h", 32).build(),):
        files[f"budgets/{b['metadata']['name']}.yaml"] = text(b)
    for r in runs:
        files[f"runs/t/{r['metadata']['name']}.yaml"] = text(r)
    return files


def warned(fleet: ValidatedFleet, code: str) -> list[Diagnostic]:
    return [d for d in fleet.warnings if d.code == code]


def line_of(files: dict[str, bytes], path: str, needle: str) -> int:
    return next(i + 1 for i, line in enumerate(files[path].decode().splitlines()) if needle in line)


def test_sponsors_on_a_run_that_may_not_borrow_are_a_warning_saying_to_allow_borrowing() -> None:
    run = a_run("t/r", "org:t").build()
    run["spec"]["funding"] = {"sponsors": ["org:t"]}
    files = fleet_files(run)
    fleet = check_fleet(files)
    [warning] = warned(fleet, codes.SPONSORS)
    assert (warning.path, warning.line, warning.severity) == (
        "runs/t/r.yaml",
        line_of(files, "runs/t/r.yaml", "sponsors"),
        "warning",
    )
    assert "set funding.allowBorrow: true, or remove the sponsors" in warning.message
    assert [r.metadata.name for r in fleet.runs] == ["r"]  # still planned
    run["spec"]["funding"]["allowBorrow"] = True
    assert warned(check_fleet(fleet_files(run)), codes.SPONSORS) == []


def test_a_thousand_spares_per_group_is_a_warning_naming_what_one_failure_can_use() -> None:
    files = fleet_files(a_run("t/r", "org:t").gpus(16).groups(8).spares(1000).build())
    [warning] = warned(check_fleet(files), codes.SPARES)
    assert warning.line == line_of(files, "runs/t/r.yaml", "sparesPerGroup")
    assert "sparesPerGroup 1000 holds more idle GPUs than a group has (8)" in warning.message
    assert warning.message.endswith("set sparesPerGroup to 8 or fewer")
    assert (
        warned(
            check_fleet(fleet_files(a_run("t/r", "org:t").gpus(16).groups(8).spares(8).build())), codes.SPARES
        )
        == []
    )


def test_too_few_spares_to_cover_a_node_are_still_a_warning() -> None:
    files = fleet_files(a_run("t/r", "org:t", "GB200").gpus(8).groups(8).spares(1).build())
    [warning] = warned(check_fleet(files), codes.SPARES)
    assert "cannot cover a node failing" in warning.message and "set sparesPerGroup to 4" in warning.message


def test_a_gpu_type_no_node_has_is_a_warning_with_the_closest_flavor() -> None:
    runs = [
        a_run("t/typo", "org:t", "H100").build(),
        a_run("t/case", "org:t", "gb200").build(),
        a_run("t/absent", "org:t", "A100").build(),
        a_run("t/fine", "org:t", "H100-80GB").build(),
    ]
    fleet = check_fleet(fleet_files(*runs))
    got = {d.obj: d.message for d in warned(fleet, codes.FLAVOR)}
    assert set(got) == {"Run t/typo", "Run t/case", "Run t/absent"}
    assert got["Run t/typo"].endswith("did you mean H100-80GB? set gpuType: H100-80GB")
    assert got["Run t/case"].endswith("did you mean GB200? set gpuType: GB200")
    assert got["Run t/absent"].startswith("no node of the fleet has GPUs of flavor A100")
    assert got["Run t/absent"].endswith("the fleet has GB200, H100-80GB; set gpuType to one of them")
    assert {r.metadata.name for r in fleet.runs} == {"typo", "case", "absent", "fine"}


def test_validate_says_did_you_mean_at_the_gpu_type_line(tmp_path: Path) -> None:
    files = fleet_files(a_run("t/r", "org:t", "H100").build())
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    result = CliRunner().invoke(main, ["validate", str(tmp_path)])
    assert result.exit_code == 0, result.output  # a warning: the fleet is valid
    line = line_of(files, "runs/t/r.yaml", "gpuType")
    assert f"runs/t/r.yaml:{line}:" in result.stdout
    assert "JT072 warning: no node of the fleet has GPUs of flavor H100" in result.stdout
    assert "did you mean H100-80GB?" in result.stdout


def test_with_clusters_configured_flavors_come_from_the_observed_clusters_once_all_are_observed() -> None:
    files = fleet_files(a_run("t/r", "org:t", "H100").build(), clusters=[{"name": "west"}, {"name": "east"}])
    del files["inventory/nodes.yaml"]
    both = {"west": {"H100-80GB"}, "east": {"GB200"}}
    got = warned(check_fleet(files, flavors_seen=both), codes.FLAVOR)
    assert [d.message.rsplit("; ", 1)[1] for d in got] == ["did you mean H100-80GB? set gpuType: H100-80GB"]
    assert (
        warned(check_fleet(files, flavors_seen={"west": {"GB200"}}), codes.FLAVOR) == []
    )  # east unknown yet
    assert warned(check_fleet(files), codes.FLAVOR) == []


def test_an_envelope_whose_window_ended_is_a_warning_as_of_now() -> None:
    budget = a_budget("t", "org:t").envelope("h", 32).envelope("old", 8, end="2026-03-01T00:00:00Z").build()
    files = fleet_files(budgets=(budget,))
    [warning] = warned(check_fleet(files, now=NOW), codes.WINDOW)
    assert (warning.path, warning.severity) == ("budgets/t.yaml", "warning")
    assert warning.line == line_of(files, "budgets/t.yaml", "2026-03-01T00:00:00Z")
    assert "envelope old's window ended at 2026-03-01T00:00:00Z, so it funds nothing now" in warning.message
    assert warned(check_fleet(files, now=NOW - 2 * 86400), codes.WINDOW) == []  # not ended yet
    assert warned(check_fleet(files), codes.WINDOW) == []  # no instant given: not judged


def test_validate_judges_windows_at_now(tmp_path: Path) -> None:
    budget = a_budget("t", "org:t").envelope("h", 32, end="2026-06-01T00:00:00Z").build()
    for rel, data in fleet_files(budgets=(budget,)).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    before = CliRunner().invoke(main, ["validate", str(tmp_path), "--now", "2026-05-31T23:59:59Z"])
    after = CliRunner().invoke(main, ["validate", str(tmp_path), "--now", "2026-06-01T00:00:00Z"])
    assert (before.exit_code, before.stdout) == (0, "")
    assert (
        after.exit_code == 0
        and "JT033 warning: envelope h's window ended at 2026-06-01T00:00:00Z" in after.stdout
    )


def test_a_tenant_whose_owner_has_no_budget_is_a_warning_at_the_tenant() -> None:
    files = fleet_files(budgets=())
    [warning] = warned(check_fleet(files), codes.TENANT_UNFUNDED)
    assert (warning.path, warning.line) == ("jobtree.yaml", line_of(files, "jobtree.yaml", "org:t"))
    assert (
        "tenant t's owner org:t has no Budget" in warning.message and "spec.owner: org:t" in warning.message
    )
    broken = a_budget("t", "org:t").envelope("h", 32).build()
    broken["spec"]["envelopes"][0]["concurrency"] = -1  # invalid, but the owner has a Budget to fix
    assert warned(check_fleet(fleet_files(budgets=(broken,))), codes.TENANT_UNFUNDED) == []


def test_groups_larger_than_the_run_are_an_error_and_the_run_is_left_out() -> None:
    files = fleet_files(a_run("t/r", "org:t").gpus(8).groups(16).build(), a_run("t/ok", "org:t").build())
    fleet = check_fleet(files)
    [error] = [d for d in fleet.diagnostics if d.code == codes.GROUP_SIZE]
    assert error.line == line_of(files, "runs/t/r.yaml", "groupGPUs")
    assert (
        "groupGPUs 16 is larger than totalGPUs 8" in error.message and "set groupGPUs to 8" in error.message
    )
    assert [r.metadata.name for r in fleet.runs] == ["ok"]


def test_template_fields_jobtree_sets_are_warnings_at_their_lines_and_the_run_still_plans() -> None:
    template = {
        "metadata": {"labels": {"rq.davidlangworthy.io/run": "x", "team": "t"}},
        "spec": {
            "nodeName": "A-n00",
            "restartPolicy": "Always",
            "nodeSelector": {"gpu": "h100"},
            "containers": [
                {
                    "name": "trainer",
                    "image": "ghcr.io/example/trainer:1",
                    "env": [{"name": "JOBTREE_RANK_BASE", "value": "0"}],
                    "resources": {"limits": {"nvidia.com/gpu": 8}},
                }
            ],
        },
    }
    files = fleet_files(a_run("t/r", "org:t").template(template).build())
    fleet = check_fleet(files)
    assert [r.metadata.name for r in fleet.runs] == ["r"]
    got = {(d.line, d.message.split(";")[0].split(" (")[0]) for d in warned(fleet, codes.POD_TEMPLATE)}
    at = lambda needle: line_of(files, "runs/t/r.yaml", needle)  # noqa: E731
    assert got == {
        (at("nodeName"), "jobtree sets spec.nodeName of every pod"),
        (at("restartPolicy"), "jobtree sets spec.restartPolicy of every pod"),
        (at("nodeSelector"), "jobtree places each pod on a node itself"),
        (at("rq.davidlangworthy.io/run"), "jobtree sets the pod label rq.davidlangworthy.io/run"),
        (at("JOBTREE_RANK_BASE"), "jobtree sets the JOBTREE_* variables"),
        (
            at("nvidia.com/gpu"),
            "jobtree sets nvidia.com/gpu of the GPU container to the GPUs each pod's leases hold",
        ),
    }


def test_a_short_template_setting_jobtrees_variables_is_warned() -> None:
    run = (
        a_run("t/r", "org:t")
        .template({"image": "x", "env": [{"name": "JOBTREE_WORLD_SIZE", "value": "1"}]})
        .build()
    )
    files = fleet_files(run)
    [warning] = warned(check_fleet(files), codes.POD_TEMPLATE)
    assert warning.line == line_of(files, "runs/t/r.yaml", "JOBTREE_WORLD_SIZE")
