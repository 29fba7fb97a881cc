"""The cluster deployment (`deploy/`, `Dockerfile`) read as files: parseable, complete, least privilege.

No kubectl or kustomize here (the suite skips nothing for want of a tool): a small resolver follows
each kustomization's `resources:` and reads what it finds. The RBAC is held against the API calls
the code makes: `CALLS` names every call site in `reconciler/` (found again here with `ast`, so a
new call fails this file until it is named), `PLANNED` the few calls it cannot name (the leader
election's, through a view of the Api; the agent's own journal marks), and the roles grant exactly
their union.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cluster import kinds
from reconciler.cluster.api import Api
from tests.acceptance.test_packaging import PACKAGED
from tests.support import REPO
from tests.support.git import RECONCILE_CLI, bare_remote, cli_env

DEPLOY = REPO / "deploy"
BASE = DEPLOY / "base"
CRDS = REPO / "schemas" / "crds"
NAMESPACE = "jobtree-system"
AGENT, RECONCILE = "jobtree-agent", "jobtree-reconcile"  # the two service accounts

Obj = dict[str, Any]
Grant = tuple[str, str, str]  # (apiGroup, resource or resource/subresource, verb)

# ------------------------------------------------------------------------------- the call table

# What each `Api` method sends, as RBAC verbs: server-side apply is a PATCH that the API server
# authorizes as `create` when the object does not exist yet (Kubernetes API concepts, "Patch and
# apply"); on a subresource (status) it never creates.
VERBS = {
    "get": ("get",),
    "list_all": ("list",),
    "pages": ("list",),
    "serves": ("list",),  # a one-item list of the kind's collection
    "watch": ("watch",),
    "apply": ("patch", "create"),
    "create": ("create",),
    "merge_patch": ("patch",),
    "delete": ("delete",),
}

OWNED = kinds.OWNED
JOBTREE_CRS = (*kinds.MIRRORS, kinds.JOURNAL)  # every kind of schemas/crds/
WITH_STATUS = tuple(k for k in kinds.OWNED if k.status)
WATCHED = (
    kinds.NODE,
    kinds.POD,
    kinds.RUN,
    kinds.BUDGET,
    kinds.LEASE,
    kinds.FLEET,
    kinds.JOURNAL,
)  # agent caches

# Every call site of an `Api` method in reconciler/: (file, function, method, first argument as
# written) -> (whose, the kinds that argument can be, subresource). Kept by hand next to the code it
# names; `test_every_api_call_in_the_code_is_in_the_table` finds them all again.
CALLS: dict[tuple[str, str, str, str], tuple[str, tuple[kinds.Kind, ...], str]] = {
    ("cluster/observe.py", "observe", "list_all", "kinds.NODE"): (RECONCILE, (kinds.NODE,), ""),
    ("cluster/observe.py", "observe", "list_all", "kinds.POD"): (RECONCILE, (kinds.POD,), ""),
    ("cluster/sync.py", "read_live", "get", "kinds.CRD"): (RECONCILE, (kinds.CRD,), ""),  # by name
    ("cluster/sync.py", "read_live", "list_all", "kinds.NAMESPACE"): (RECONCILE, (kinds.NAMESPACE,), ""),
    ("cluster/sync.py", "read_live", "list_all", "kinds.NODE"): (RECONCILE, (kinds.NODE,), ""),
    ("cluster/sync.py", "_list_owned", "list_all", "kind"): (RECONCILE, OWNED, ""),  # for kind in kinds.OWNED
    # prune: what read_live found (owned kinds only: namespaces and CRDs are never pruned)
    ("cluster/sync.py", "_write", "delete", "kind"): (RECONCILE, OWNED, ""),
    ("cluster/sync.py", "_write", "merge_patch", "kinds.NODE"): (RECONCILE, (kinds.NODE,), ""),  # cordon
    # the changes' kinds: CRDs, namespaces, mirrors, rendered (changes.compare)
    ("cluster/sync.py", "_write", "apply", "kind"): (
        RECONCILE,
        (kinds.CRD, kinds.NAMESPACE, *OWNED),
        "",
    ),
    ("cluster/sync.py", "_write", "apply", "kind/status"): (RECONCILE, WITH_STATUS, "status"),
    ("cluster/sync.py", "_wait_gone", "list_all", "kinds.POD"): (RECONCILE, (kinds.POD,), ""),
    ("cluster/sync.py", "_wait_gone", "watch", "kinds.POD"): (RECONCILE, (kinds.POD,), ""),
    ("cluster/sync.py", "_established", "get", "kinds.CRD"): (RECONCILE, (kinds.CRD,), ""),
    ("cluster/sync.py", "_said_restored", "create", "kinds.EVENT"): (RECONCILE, (kinds.EVENT,), ""),
    # the kind a CRD being established serves: each of schemas/crds/
    ("cluster/sync.py", "_established", "serves", "_served_kind(crd)"): (RECONCILE, JOBTREE_CRS, ""),
    # the journal is read and marked by reconcile (fold, §7.5) and by the agent (§7.4)
    ("cluster/journal.py", "listed", "serves", "kinds.JOURNAL"): (RECONCILE, (kinds.JOURNAL,), ""),
    ("cluster/journal.py", "listed", "list_all", "kinds.JOURNAL"): (RECONCILE, (kinds.JOURNAL,), ""),
    ("cluster/journal.py", "mark", "apply", "kinds.JOURNAL/status"): (RECONCILE, (kinds.JOURNAL,), "status"),
    ("cluster/folding.py", "settle", "delete", "kinds.JOURNAL"): (
        RECONCILE,
        (kinds.JOURNAL,),
        "",
    ),  # retention
    # the caches (`informer`) list and watch each kind kept: `reconcile --interval` its nodes, pods,
    # mirrors and Services (`watched`); the agent's every kind it keeps are in PLANNED (one call site,
    # two accounts)
    ("cluster/informer.py", "_list_into", "pages", "self.kind"): (RECONCILE, (kinds.NODE, *kinds.OWNED), ""),
    ("cluster/informer.py", "watch_once", "watch", "self.kind"): (RECONCILE, (kinds.NODE, *kinds.OWNED), ""),
    ("cluster/agent/main.py", "fleet_name", "serves", "kinds.FLEET"): (AGENT, (kinds.FLEET,), ""),
    ("cluster/agent/main.py", "fleet_name", "list_all", "kinds.FLEET"): (AGENT, (kinds.FLEET,), ""),
    # a swap's steps: the entry, the pods, the cordon, the Lease mirrors, the run's status
    ("cluster/agent/swap.py", "carry_out", "create", "kinds.JOURNAL"): (AGENT, (kinds.JOURNAL,), ""),
    ("cluster/agent/swap.py", "carry_out", "create", "kinds.POD"): (AGENT, (kinds.POD,), ""),
    ("cluster/agent/swap.py", "carry_out", "delete", "kinds.POD"): (AGENT, (kinds.POD,), ""),
    # a filler's GPUs are free once it is gone (§7.6): asked by name while waiting for it
    ("cluster/agent/loop.py", "pods_gone", "get", "kinds.POD"): (AGENT, (kinds.POD,), ""),
    ("cluster/agent/swap.py", "carry_out", "get", "kinds.NODE"): (AGENT, (kinds.NODE,), ""),
    ("cluster/agent/swap.py", "carry_out", "merge_patch", "kinds.NODE"): (AGENT, (kinds.NODE,), ""),
    ("cluster/agent/swap.py", "carry_out", "get", "kinds.RUN"): (AGENT, (kinds.RUN,), ""),
    ("cluster/agent/swap.py", "carry_out", "merge_patch", "kinds.RUN"): (AGENT, (kinds.RUN,), "status"),
    ("cluster/agent/swap.py", "_events", "create", "kinds.EVENT"): (AGENT, (kinds.EVENT,), ""),
    ("cluster/agent/swap.py", "_leases", "delete", "kinds.LEASE"): (AGENT, (kinds.LEASE,), ""),
    ("cluster/agent/swap.py", "_leases", "apply", "kinds.LEASE"): (AGENT, (kinds.LEASE,), ""),
    ("cluster/agent/swap.py", "_leases", "apply", "kinds.LEASE/status"): (AGENT, (kinds.LEASE,), "status"),
}

# Calls the table cannot name by call site: whose -> (apiGroup, resource, verbs, why).
PLANNED: dict[str, list[tuple[str, str, tuple[str, ...], str]]] = {
    AGENT: [
        # `journal.mark` and `journal.listed` are called by both; the table names reconcile's
        ("rq.davidlangworthy.io", "journalentries/status", ("patch",), "Intent -> Applied"),
        ("rq.davidlangworthy.io", "journalentries", ("list",), "Intent entries finished on taking the lead"),
        # leader.py calls through `self._view()`, which the call finder cannot name
        ("coordination.k8s.io", "leases", ("get", "create", "patch"), "leader election (a Role)"),
        # its caches (`informer.Cache`, whose call sites the table names as reconcile's)
        *(
            (kind.api_version.rpartition("/")[0], kind.plural, ("list", "watch"), "the agent's caches")
            for kind in WATCHED
        ),
    ],
}

# whose calls a file makes: the agent's own modules (cluster/agent/) are named so; the rest is reconcile's
AGENT_FILES = ("agent",)

# ------------------------------------------------------------------------------------ reading


def documents(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def build(folder: Path, seen: frozenset[Path] = frozenset()) -> list[Obj]:
    """The objects a kustomization holds, following `resources:` (files and folders) as kustomize
    does; every entry must exist. Generators, patches and images are left to kustomize."""
    assert folder not in seen, f"{folder}: kustomizations include each other"
    file = folder / "kustomization.yaml"
    assert file.is_file(), f"{folder} has no kustomization.yaml"
    (spec,) = documents(file)
    out: list[Obj] = []
    for entry in spec.get("resources") or []:
        path = (folder / entry).resolve()
        assert path.exists(), f"{file}: resource {entry} does not exist"
        out += build(path, seen | {folder}) if path.is_dir() else documents(path)
    return out


def base() -> list[Obj]:
    return build(BASE)


def one(objs: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def grants(rules: list[Obj]) -> set[Grant]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def granted(objs: list[Obj], account: str) -> set[Grant]:
    """What the roles bound to service account `account` grant (cluster-wide and namespaced)."""
    out: set[Grant] = set()
    for binding in objs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and s["name"] == account for s in binding["subjects"]):
            continue
        assert all(s.get("namespace") == NAMESPACE for s in binding["subjects"]), binding["metadata"]["name"]
        ref = binding["roleRef"]
        out |= grants(one(objs, ref["kind"], ref["name"])["rules"])
    return out


def resource_of(kind: kinds.Kind) -> tuple[str, str]:
    """(apiGroup, resource) as RBAC names them."""
    return ("" if kind.api_version == "v1" else kind.api_version.split("/")[0]), kind.plural


def needed(account: str) -> set[Grant]:
    """What `account` needs: its call sites in the table, and what is planned for it."""
    out: set[Grant] = set()
    for (_, _, method, _), (whose, kind_names, sub) in CALLS.items():
        if whose != account:
            continue
        verbs = ("patch",) if sub else VERBS[method]
        for kind in kind_names:
            group, plural = resource_of(kind)
            out |= {(group, f"{plural}/{sub}" if sub else plural, v) for v in verbs}
    for group, resource, verbs, _ in PLANNED.get(account, []):
        out |= {(group, resource, v) for v in verbs}
    return out


def call_sites() -> Iterator[tuple[str, str, str, str]]:
    """(file under reconciler/, enclosing function, Api method, first argument as written), with
    `/status` appended to the argument of a call on the status subresource."""
    methods = {m for m in vars(Api) if not m.startswith("_")}
    for path in sorted((REPO / "reconciler").rglob("*.py")):
        rel = str(path.relative_to(REPO / "reconciler"))
        if rel == "cluster/api.py":
            continue
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                target = node.func.value
                receiver = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if node.func.attr not in methods or not str(receiver).endswith("api"):
                    continue
                first = ast.unparse(node.args[0]) if node.args else ""
                sub = [a for a in node.args[2:3] if isinstance(a, ast.Constant)] + [
                    k.value
                    for k in node.keywords
                    if k.arg == "subresource" and isinstance(k.value, ast.Constant)
                ]
                if node.func.attr == "apply" and sub:
                    first += f"/{sub[0].value}"
                yield rel, func.name, node.func.attr, first


# --------------------------------------------------------------------------------------- tests


def test_every_yaml_under_deploy_parses_and_names_its_kind() -> None:
    files = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
    assert files
    for path in files:
        for doc in documents(path):
            assert isinstance(doc, dict) and doc.get("kind") and doc.get("apiVersion"), path


@pytest.mark.parametrize("overlay", ["base", "overlays/example"])
def test_every_kustomization_resolves_to_files_that_exist(overlay: str) -> None:
    objs = build(DEPLOY / overlay)
    assert {"Deployment", "CronJob", "ClusterRole", "CustomResourceDefinition"} <= {o["kind"] for o in objs}


def test_the_namespaced_objects_live_in_jobtree_system() -> None:
    for obj in base():
        if obj["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"):
            continue
        if obj["kind"] == "CustomResourceDefinition":
            continue
        assert obj["metadata"].get("namespace") == NAMESPACE, f"{obj['kind']} {obj['metadata']['name']}"


def test_no_rule_grants_a_wildcard() -> None:
    for obj in base():
        for rule in obj.get("rules") or []:
            for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert not any("*" in v for v in rule.get(key) or []), f"{obj['metadata']['name']}: {rule}"


def test_every_api_call_in_the_code_is_in_the_table() -> None:
    found = set(call_sites())
    assert found, "no call of an Api method found: has the receiver's name changed?"
    unnamed = sorted(found - set(CALLS))
    assert not unnamed, (
        f"API calls the RBAC table does not name (add them to CALLS, and the roles): {unnamed}"
    )
    stale = sorted(set(CALLS) - found)
    assert not stale, f"CALLS names calls the code no longer makes: {stale}"


def test_calls_in_the_agents_modules_are_the_agents() -> None:
    for site in call_sites():
        if any(word in site[0] for word in AGENT_FILES):
            assert CALLS[site][0] == AGENT, site


def test_every_api_method_maps_to_verbs() -> None:
    assert {m for m in vars(Api) if not m.startswith("_")} == set(VERBS)


@pytest.mark.parametrize("account", [RECONCILE, AGENT])
def test_each_account_is_granted_exactly_what_it_calls(account: str) -> None:
    have, want = granted(base(), account), needed(account)
    assert not want - have, f"{account} lacks {sorted(want - have)}"
    assert not have - want, f"{account} is granted more than it calls: {sorted(have - want)}"


def test_reconcile_may_touch_jobtrees_own_crds_only() -> None:
    role = one(base(), "ClusterRole", RECONCILE)
    (rule,) = [r for r in role["rules"] if "customresourcedefinitions" in r["resources"]]
    published = sorted(documents(p)[0]["metadata"]["name"] for p in CRDS.glob("*.yaml"))
    assert sorted(rule["resourceNames"]) == published  # no CRD of anyone else's: no escalation path


def test_the_agents_leader_lease_is_granted_in_its_namespace_only() -> None:
    objs = base()
    cluster_wide = grants(one(objs, "ClusterRole", AGENT)["rules"])
    assert not any(g == "coordination.k8s.io" for g, _, _ in cluster_wide)
    role = one(objs, "Role", "jobtree-agent-leader")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role["rules"]) == {("coordination.k8s.io", "leases", v) for v in ("get", "create", "patch")}


def test_the_agent_runs_two_replicas_on_two_nodes_with_probes_and_resources() -> None:
    deployment = one(base(), "Deployment", AGENT)
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert spec["serviceAccountName"] == AGENT
    assert container["args"][:3] == ["agent", "--cluster", "$(CLUSTER_NAME)"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert {"name": "metrics", "containerPort": 8080, "protocol": "TCP"} in container["ports"]
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["CLUSTER_NAME"]["valueFrom"]["configMapKeyRef"]["name"] == "jobtree-config"
    anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [t["topologyKey"] for t in anti] == ["kubernetes.io/hostname"]
    assert spec["priorityClassName"] not in ("system-cluster-critical", "system-node-critical")
    one(base(), "PriorityClass", spec["priorityClassName"])
    pdb = one(base(), "PodDisruptionBudget", AGENT)
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]


@pytest.mark.parametrize("workload", [("Deployment", AGENT), ("CronJob", RECONCILE)])
def test_every_container_runs_unprivileged_on_a_read_only_root(workload: tuple[str, str]) -> None:
    obj = one(base(), *workload)
    pod = obj["spec"]["template"]["spec"] if workload[0] == "Deployment" else pod_of(obj)
    assert pod["securityContext"]["runAsNonRoot"] is True
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert container["resources"]["requests"] and container["resources"]["limits"]


def pod_of(cronjob: Obj) -> Obj:
    spec: Obj = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


def test_the_cronjob_reconciles_every_five_minutes_one_pass_at_a_time() -> None:
    cronjob = one(base(), "CronJob", RECONCILE)
    assert cronjob["spec"]["schedule"] == "*/5 * * * *"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    pod = pod_of(cronjob)
    assert pod["serviceAccountName"] == RECONCILE
    (container,) = pod["containers"]
    args = container["args"]
    assert args[0] == "reconcile" and {"--once", "--push", "--apply"} <= set(args)


def test_the_cronjob_takes_git_credentials_from_the_secret_never_a_literal() -> None:
    pod = pod_of(one(base(), "CronJob", RECONCILE))
    env = [e for c in [*pod["initContainers"], *pod["containers"]] for e in c.get("env", [])]
    token = next(e for e in env if e["name"] == "JOBTREE_GIT_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": "jobtree-git", "key": "token"}
    for e in env:
        if any(word in e["name"] for word in ("TOKEN", "PASSWORD", "SECRET", "KEY")):
            assert "value" not in e, e["name"]
    # the Secret itself is only an example with a placeholder, and not part of what is applied
    assert not [o for o in base() if o["kind"] == "Secret"]
    (example,) = documents(BASE / "secret.example.yaml")
    assert example["metadata"]["name"] == "jobtree-git" and example["stringData"]["token"].startswith("<")


def test_the_cronjob_invocation_reconciles_a_remote_from_an_empty_volume(tmp_path: Path) -> None:
    """The init container's script and the container's arguments, run as written (paths moved
    into a temporary folder) against a remote made from the template: the pass pushes."""
    pod = pod_of(one(base(), "CronJob", RECONCILE))
    (init,), (container,) = pod["initContainers"], pod["containers"]
    remote = bare_remote(tmp_path)
    volume = tmp_path / "volume"
    volume.mkdir()
    env = {**cli_env(), "FLEET_URL": str(remote), "FLEET_BRANCH": "main", "HOME": str(tmp_path)}
    script = init["args"][0].replace("/var/lib/jobtree", str(volume))
    for _ in range(2):  # an existing repository (a PersistentVolumeClaim) is kept as it is
        assert init["command"][0] == "python"  # the image's interpreter; here the one running the tests
        subprocess.run(
            [sys.executable, *init["command"][1:], script], env=env, check=True, capture_output=True
        )
    args = [
        a.replace("/var/lib/jobtree", str(volume)).replace("$(FLEET_BRANCH)", "main")
        for a in container["args"]
    ]
    assert args[0] == "reconcile"
    done = subprocess.run([*RECONCILE_CLI, *args[1:], "--quiet"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pushed "), done.stdout


def test_the_crd_copies_equal_the_generated_ones_and_are_all_listed() -> None:
    generated = {p.name: p.read_bytes() for p in CRDS.glob("*.yaml")}
    copies = {
        p.name: p.read_bytes() for p in (DEPLOY / "crds").glob("*.yaml") if p.name != "kustomization.yaml"
    }
    assert copies == generated, "deploy/crds/ differs from schemas/crds/: run `make schemas`"
    (spec,) = documents(DEPLOY / "crds" / "kustomization.yaml")
    assert sorted(spec["resources"]) == sorted(generated)


def test_the_overlays_set_the_cluster_the_image_and_the_repository() -> None:
    for overlay in ("example",):
        (spec,) = documents(DEPLOY / "overlays" / overlay / "kustomization.yaml")
        (config,) = spec["configMapGenerator"]
        assert config["behavior"] == "merge"
        assert {x.split("=")[0] for x in config["literals"]} == {"CLUSTER_NAME", "FLEET_URL", "FLEET_BRANCH"}
        assert [i["name"] for i in spec["images"]] == ["jobtree"]


def test_the_dockerfile_installs_the_project_with_pip_and_runs_jobtree_unprivileged() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text
    assert 'ENTRYPOINT ["jobtree"]' in text
    assert "pip install" in text and "ca-certificates" in text
    assert [line for line in text.splitlines() if line.startswith("USER ")] == ["USER 10001:10001"]
    # what the image is built from is what the wheel is built from (tests/acceptance/test_packaging.py)
    copied = [
        w
        for line in text.splitlines()
        if line.startswith("COPY ") and "--from" not in line
        for w in line.split()[1:-1]
    ]
    assert sorted(copied) == sorted(PACKAGED)
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignored and all(f"!{name}{'/' * (REPO / name).is_dir()}" in ignored for name in PACKAGED)


def test_no_file_under_deploy_reads_outside_the_repository() -> None:
    """A relative path climbing out of its folder still lands in the repository (a fresh clone
    has nothing beside it), and no file names a folder of the machine it was written on."""
    for path in DEPLOY.rglob("*"):
        if not path.is_file():
            continue
        text = path.read_text()
        for climb in re.findall(r"(?:\.\./)+[\w.-]*", text):
            assert (path.parent / climb).resolve().is_relative_to(REPO), f"{path}: {climb}"
        assert str(REPO) not in text, path
