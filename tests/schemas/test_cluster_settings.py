"""`clusters` in jobtree.yaml (DESIGN §7.1): topology label mapping, and what validate says about names and the inventory."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from click.testing import CliRunner

from reconciler.cli import main
from schemas import diagnostics as codes
from schemas.fleet import FleetConfig
from schemas.fleetcheck import check_fleet
from tests.support import REPO

TEMPLATE = REPO / "fleet-repo-template"


def fleet_yaml(clusters: list[dict[str, object]]) -> bytes:
    doc = {
        "apiVersion": "rq.davidlangworthy.io/v1",
        "kind": "FleetConfig",
        "metadata": {"name": "acme"},
        "spec": {"tenants": [{"namespace": "t", "owner": "org:t"}], "clusters": clusters},
    }
    return yaml.safe_dump(doc).encode()


def test_topology_labels_default_to_the_seeds_bare_keys_and_map_to_what_the_cluster_publishes() -> None:
    config = FleetConfig.model_validate(
        yaml.safe_load(
            fleet_yaml(
                [
                    {"name": "plain", "context": "a"},
                    {
                        "name": "gfd",
                        "context": "b",
                        "topologyLabels": {
                            "region": "topology.kubernetes.io/region",
                            "gpu.flavor": "nvidia.com/gpu.product",
                            "fabric.domain": "nvidia.com/gpu.clique",
                        },
                    },
                ]
            )
        )
    )
    plain, gfd = config.spec.clusters
    want_plain = {
        "region": "region",
        "cluster": "cluster",
        "fabric.domain": "fabric.domain",
        "gpu.flavor": "gpu.flavor",
        "rack": "rack",
    }
    assert plain.topologyLabels.keys() == want_plain
    assert gfd.topologyLabels.keys() == want_plain | {
        "region": "topology.kubernetes.io/region",
        "gpu.flavor": "nvidia.com/gpu.product",
        "fabric.domain": "nvidia.com/gpu.clique",
    }


def test_a_topology_key_that_is_not_one_or_a_label_key_that_is_not_one_is_a_schema_error() -> None:
    typo = check_fleet({"jobtree.yaml": fleet_yaml([{"name": "a", "topologyLabels": {"zone": "z"}}])})
    bad_key = check_fleet(
        {"jobtree.yaml": fleet_yaml([{"name": "a", "topologyLabels": {"region": "has space"}}])}
    )
    assert [d.code for d in typo.diagnostics] == [codes.SCHEMA]
    assert [d.code for d in bad_key.diagnostics] == [codes.SCHEMA]


def test_two_entries_with_one_cluster_name_are_an_error_at_the_second() -> None:
    fleet = check_fleet(
        {"jobtree.yaml": fleet_yaml([{"name": "a", "context": "x"}, {"name": "a", "context": "y"}])}
    )
    # sorted keys: line 10 is the second entry's `name: a` (after `- context: y` on line 9)
    assert [(d.code, d.line) for d in fleet.diagnostics] == [(codes.CLUSTER_NAME, 10)]
    assert "cluster a is already clusters[0]" in fleet.diagnostics[0].message


def test_an_inventory_beside_configured_clusters_is_reported_as_not_read() -> None:
    files = {
        "jobtree.yaml": fleet_yaml([{"name": "gb-west", "context": "prod"}]),
        "inventory/nodes.yaml": (TEMPLATE / "inventory" / "nodes.yaml").read_bytes(),
    }
    fleet = check_fleet(files)
    assert fleet.valid  # a warning: the fleet still plans, on the observed clusters
    [warning] = [
        w for w in fleet.warnings if w.path == "inventory/nodes.yaml"
    ]  # (and t has no Budget: JT022)
    assert (warning.path, warning.code, warning.severity) == ("inventory/nodes.yaml", "JT061", "warning")
    assert "is not read: jobtree.yaml configures clusters (gb-west)" in warning.message


def test_a_misspelled_cluster_beside_a_rendered_folder_no_cluster_names_is_an_error_naming_both() -> None:
    files = {"jobtree.yaml": fleet_yaml([{"name": "gb-wets", "context": "prod"}])}
    fleet = check_fleet(files, clusters_seen={"gb-west": "rendered/gb-west/"})
    assert not fleet.valid  # a pass would refuse it (exit 3): its pods would be pruned
    messages = sorted(d.message for d in fleet.diagnostics if d.code == codes.CLUSTER_UNMATCHED)
    assert len(messages) == 2
    assert messages[0].startswith("cluster gb-wets matches no node label: no observed or inventory node")
    assert "rendered/ holds pods for gb-west, which clusters does not name" in messages[0]
    assert messages[0].endswith("did you mean gb-west?")
    assert messages[1].startswith("rendered/gb-west/ holds pods on cluster gb-west, which clusters (gb-wets)")


def test_an_observed_cluster_none_of_whose_nodes_carries_its_name_is_an_error() -> None:
    files = {"jobtree.yaml": fleet_yaml([{"name": "west", "context": "prod"}])}
    fleet = check_fleet(
        files,
        clusters_seen={"west": "state/observed/west.yaml"},
        cluster_labels={"west": ["gb-west", "gb-west"]},
    )
    [error] = [d for d in fleet.diagnostics if d.code == codes.CLUSTER_UNMATCHED]
    assert error.severity == "error" and (error.path, error.line) == ("jobtree.yaml", 8)
    assert "none of the 2 nodes observed through its context carries cluster=west" in error.message
    assert "did you mean gb-west?" in error.message


def test_a_new_cluster_not_yet_observed_is_a_warning_only() -> None:
    files = {"jobtree.yaml": fleet_yaml([{"name": "gb-east", "context": "prod"}])}
    fleet = check_fleet(files, clusters_seen={}, cluster_labels={})
    assert not [d for d in fleet.diagnostics if d.code == codes.CLUSTER_UNMATCHED]
    [warning] = [d for d in fleet.warnings if d.code == codes.CLUSTER_UNMATCHED]
    assert warning.message.startswith("cluster gb-east matches no node label yet")


def test_validate_looks_at_the_rendered_folders_and_observed_clusters_of_the_repository(
    tmp_path: Path,
) -> None:
    root = tmp_path / "fleet"
    shutil.copytree(TEMPLATE, root)
    (root / "inventory" / "nodes.yaml").unlink()
    (root / "jobtree.yaml").write_text(
        (TEMPLATE / "jobtree.yaml").read_text() + "  clusters:\n    - {name: gb-west, context: prod}\n"
    )
    (root / "rendered" / "gb-west").mkdir(parents=True)
    (root / "rendered" / "h100-east").mkdir()  # empty: Git keeps no empty folder, so nothing runs there
    (root / "state" / "observed").mkdir(parents=True)
    (root / "state" / "observed" / "gb-west.yaml").write_text("nodes: []\n")
    result = CliRunner().invoke(main, ["validate", str(root)])
    assert result.exit_code == 0, result.output
    assert "JT081" not in result.stdout
    (root / "rendered" / "h100-east" / "r1.yaml").write_text("kind: Pod\n")  # pods rendered for h100-east
    result = CliRunner().invoke(main, ["validate", str(root)])
    assert result.exit_code == 3, result.output
    assert (
        "JT081 rendered/h100-east/ holds pods on cluster h100-east, which clusters (gb-west)" in result.stdout
    )
    # gb-west's observation lists no node, so it may be h100-east renamed: said, with what holds pods
    assert (
        "JT081 cluster gb-west matches no node label: no observed or inventory node carries" in result.stdout
    )


def test_kubectl_names_of_the_crds_never_shadow_the_core_lease_kind() -> None:
    from schemas import publish

    names = {n for spec in publish.CRDS for n in (spec.plural, spec.singular, spec.short)}
    assert not names & {"lease", "leases"}  # `kubectl get leases` keeps meaning coordination.k8s.io
    assert sorted(spec.short for spec in publish.CRDS) == [
        "jtbudget",
        "jtfleet",
        "jtjournal",
        "jtlease",
        "jtres",
        "jtrun",
    ]
    run = next(spec for spec in publish.CRDS if spec.kind == "Run")
    shown = [c["name"] for c in run.columns if c.get("priority", 0) == 0]
    assert shown == ["Phase", "Width", "Desired", "Reason"]  # what `kubectl get runs -A` prints
