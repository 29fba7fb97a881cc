"""A fleet repository at one commit, as the researcher's verbs read it: lazily, one file at a time.

Where to read (`--repo`, else `JOBTREE_REPO`, else the repository around the working directory;
`--rev`, else the fleet branch as last fetched from `origin`, else the local branch), which run a
`RUN` argument names (`name` in its namespace, or `namespace/name`; the closest names when none),
and the spec, status, reservation, lease and ledger files of that commit, each decoded when first
asked for. Writes nothing (but the parse cache in the Git dir) and decides nothing: what it hands
out is what the planner wrote.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from planner import accounting, records
from planner.reasons import Role
from planner.world import Lease, NodeObs, Reservation
from reconciler.git import errors
from reconciler.git import read as gitread
from reconciler.passes.embedded import nodes_from_inventory
from reconciler.spec import commit as speccache
from reconciler.spec import validated
from reconciler.state import codec, layout
from schemas.budget import Budget
from schemas.run import Run

REPO_ENV = "JOBTREE_REPO"
_ROLES = {Role.ACTIVE: 0, Role.SPARE: 1, Role.BORROWED: 2}  # a group's leases: working, spare, fill
REMOTE = "origin"


class WhereError(Exception):
    """The repository, revision or run asked for is not there (a usage error: exit 2)."""


class UnknownRun(WhereError):
    """No run goes by that name; `closest` are the names that look most like it."""

    def __init__(self, asked: str, closest: list[str]) -> None:
        hint = f"; did you mean {', '.join(closest)}?" if closest else ""
        super().__init__(f"no run {asked!r} in this fleet{hint}")
        self.closest = closest


def locate(repo: str | None) -> str:
    """The fleet repository's folder: `--repo`, else `JOBTREE_REPO`, else the repository around the
    working directory."""
    given = repo or os.environ.get(REPO_ENV) or None
    start = given if given is not None else os.getcwd()
    found = gitread.discover(start)
    if found is None:
        where = (
            f"{start} (from {'--repo' if repo else REPO_ENV})"
            if given
            else f"{start} (the working directory)"
        )
        raise WhereError(
            f"{where} is not in a Git repository: pass --repo with a clone of the fleet repository, "
            f"or set {REPO_ENV}"
        )
    return found


def default_rev(repo: gitread.Repository) -> str:
    """The fleet branch (`git.branch` of jobtree.yaml at HEAD, else main): the newer of the local
    branch and the branch as last fetched from origin (origin's when they have diverged), else HEAD."""
    branch = fleet_branch(repo)
    found = [
        ref for ref in (f"refs/remotes/{REMOTE}/{branch}", f"refs/heads/{branch}") if repo.references.get(ref)
    ]
    if not found:
        return "HEAD"
    if len(found) == 2:
        remote, local = (repo.references[ref].target for ref in found)
        if remote != local and repo.descendant_of(local, remote):
            return found[1]  # local commits on top of what was fetched (a reconciler's own clone)
    return found[0]


def fleet_branch(repo: gitread.Repository) -> str:
    try:
        data = gitread.read_file(repo, "HEAD", "jobtree.yaml")
    except errors.GitStoreError:
        data = None
    if data is None:
        return "main"
    return validated.read_spec({"jobtree.yaml": data}).fleet.git.branch


def open_fleet(repo: str | None = None, rev: str | None = None) -> Fleet:
    """The fleet at `rev` (default: `default_rev`) of the repository `locate` finds."""
    path = locate(repo)
    try:
        git = gitread.open_repo(path)
        chosen = rev if rev is not None else default_rev(git)
        commit = gitread.resolve(git, chosen)
    except (errors.NotARepository, errors.RevisionNotFound) as err:
        raise WhereError(str(err)) from None
    if gitread.read_file(git, str(commit.id), "jobtree.yaml") is None:
        raise WhereError(
            f"{path.rstrip('/') or path} at {_short_ref(chosen)} has no jobtree.yaml: it is not a fleet repository. Pass --repo "
            f"with a clone of your fleet repository (or set {REPO_ENV}), or cd into one"
        )
    return Fleet(git, commit, chosen, path)


def _short_ref(rev: str) -> str:
    return rev.removeprefix("refs/remotes/").removeprefix("refs/heads/")


class Fleet:
    """The fleet at one commit; every accessor reads only the files it needs, once."""

    def __init__(self, repo: gitread.Repository, commit: gitread.Commit, rev: str, path: str) -> None:
        self.repo, self.commit, self.rev, self.path = repo, commit, _short_ref(rev), path
        self.sha = str(commit.id)
        self._cache: dict[str, Any] = {}

    # -- files ------------------------------------------------------------------------------------
    @cached_property
    def _state_blobs(self) -> dict[str, str]:
        return gitread.list_blobs(self.repo, self.sha, [layout.STATE])

    def _yaml(self, path: str, kind: str) -> Any:
        key = f"{kind}:{path}"
        if key not in self._cache:
            blob = self._state_blobs.get(path)
            self._cache[key] = None if blob is None else codec.load(kind, gitread.read_blob(self.repo, blob))
        return self._cache[key]

    def read(self, path: str) -> bytes | None:
        """Any file of the commit (None when absent)."""
        return gitread.read_file(self.repo, self.sha, path)

    # -- the spec ---------------------------------------------------------------------------------
    @cached_property
    def spec(self) -> validated.Spec:
        return speccache.read_spec(self.repo, self.commit)[0]

    @cached_property
    def specs(self) -> dict[str, Run]:
        return {f"{r.metadata.namespace}/{r.metadata.name}": r for r in self.spec.runs}

    @cached_property
    def budgets(self) -> dict[str, Budget]:
        return {b.metadata.name: b for b in [*self.spec.budgets, *self.spec.kept]}

    @cached_property
    def tenants(self) -> dict[str, str]:
        """namespace -> owner."""
        return {t.namespace: t.owner for t in self.spec.fleet.tenants}

    @cached_property
    def nodes(self) -> dict[str, NodeObs]:
        """The embedded inventory's nodes (a cluster's observed nodes once the cluster half lands)."""
        return nodes_from_inventory(self.spec.inventory)

    @cached_property
    def envelopes(self) -> dict[str, accounting.Env]:
        """`budget/envelope` -> the envelope as cover reads it."""
        return accounting.envelopes(self.budgets.values())

    @cached_property
    def _family(self) -> Any:
        return accounting.family_order(self.budgets.values())

    def relatives(self, owner: str) -> list[str]:
        """The owner's relatives in the budget family, nearest first (§4.2)."""
        found: list[str] = self._family(owner)
        return found

    def owner_of(self, run: str) -> str | None:
        spec = self.specs.get(run)
        return spec.spec.owner if spec is not None else self.tenants.get(run.split("/", 1)[0])

    # -- which runs -------------------------------------------------------------------------------
    @cached_property
    def run_keys(self) -> list[str]:
        """Every run the commit knows: valid or rejected spec files, and status files."""
        keys = set(self.specs)
        keys |= {k.split(" ", 1)[1] for k in self.spec.rejected if k.startswith("Run ") and "/" in k}
        keys |= {
            p[len(layout.RUN_STATUS) : -len(".yaml")]
            for p in self._state_blobs
            if p.startswith(layout.RUN_STATUS)
        }
        return sorted(keys)

    def find(self, asked: str, namespace: str | None = None) -> str:
        """The run `asked` names: `namespace/name`, or `name` in `namespace`, else in the one tenant
        namespace that has a run of that name. `UnknownRun` with the closest names otherwise."""
        keys = self.run_keys
        if "/" in asked:
            if namespace is not None and asked.split("/", 1)[0] != namespace:
                raise WhereError(f"{asked!r} is in namespace {asked.split('/', 1)[0]}, not -n {namespace}")
            if asked in keys:
                return asked
        elif namespace is not None:
            if f"{namespace}/{asked}" in keys:
                return f"{namespace}/{asked}"
        else:
            found = [k for k in keys if k.split("/", 1)[1] == asked]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise WhereError(
                    f"{asked!r} names runs in several namespaces ({', '.join(found)}): pass -n NAMESPACE "
                    "or NAMESPACE/NAME"
                )
        wanted = asked if "/" in asked or namespace is None else f"{namespace}/{asked}"
        pool = keys if "/" in wanted else sorted({k.split("/", 1)[1] for k in keys})
        close = difflib.get_close_matches(wanted, pool, n=3, cutoff=0.5)
        if "/" not in wanted:
            close = [k for name in close for k in keys if k.split("/", 1)[1] == name][:3]
        raise UnknownRun(asked if namespace is None or "/" in asked else f"{namespace}/{asked}", close)

    # -- state ------------------------------------------------------------------------------------
    def status(self, run: str) -> dict[str, Any] | None:
        """The run's status as the planner wrote it (`status:` of its status file)."""
        obj = self._yaml(layout.run_status_file(run), codec.RUN)
        return obj.get("status") if isinstance(obj, dict) else None

    def statuses(self, namespace: str | None = None) -> dict[str, dict[str, Any]]:
        out = {}
        for key in self.run_keys:
            if namespace is None or key.split("/", 1)[0] == namespace:
                st = self.status(key)
                if st is not None:
                    out[key] = st
        return out

    def reservation(self, run: str) -> Reservation | None:
        obj = self._yaml(layout.reservation_file(run), codec.RESERVATION)
        return codec.reservation_from(obj) if isinstance(obj, dict) else None

    def reservations(self) -> dict[str, Reservation]:
        out = {}
        for path in self._state_blobs:
            if path.startswith(layout.RESERVATIONS):
                res = self.reservation(path[len(layout.RESERVATIONS) : -len(".yaml")])
                if res is not None:
                    out[res.run] = res
        return out

    def leases(self, run: str) -> list[Lease]:
        """Every lease of the run in `state/` (open, and closed within retention), oldest first."""
        docs = self._yaml(layout.lease_file(run), codec.LEASES) or []
        order = sorted((records.lease_from(d) for d in docs), key=lambda x: (x.start, x.group, x.name))
        return sorted(order, key=lambda x: (x.start, x.group, _ROLES.get(x.role, 9), x.node))

    def budget_status(self, name: str) -> dict[str, Any]:
        obj = self._yaml(layout.budget_status_file(name), codec.BUDGET)
        return (obj or {}).get("status") or {} if isinstance(obj, dict) else {}

    def budget_meters(self, name: str) -> dict[str, Any]:
        obj = self._yaml(layout.budget_status_file(name), codec.BUDGET)
        return (obj or {}).get("meters") or {} if isinstance(obj, dict) else {}

    @cached_property
    def fleet_state(self) -> dict[str, Any]:
        """`state/fleet.yaml`: asOf, the nodes jobtree cordoned, the groups charged to nobody."""
        obj = self._yaml(layout.FLEET, codec.FLEET)
        return obj if isinstance(obj, dict) else {}

    @cached_property
    def unfunded(self) -> set[tuple[str, int]]:
        return {
            (g.rsplit("#", 1)[0], int(g.rsplit("#", 1)[1])) for g in self.fleet_state.get("unfunded") or []
        }

    def events(
        self,
        run: str | None = None,
        days: int | None = None,
        day: str | None = None,
        since: str | None = None,
    ) -> list[dict[str, Any]]:
        """Ledger events in order (of `run` only when given; of the last `days` ledger files, of one
        `day`, or of the days from `since` on (`YYYY-MM-DD`), when given)."""
        paths = sorted(p for p in self._state_blobs if p.startswith(layout.LEDGER))
        if days is not None:
            paths = paths[-days:]
        if day is not None:
            paths = [p for p in paths if p == layout.ledger_file(day)]
        if since is not None:
            paths = [p for p in paths if p >= layout.ledger_file(since)]
        return list(self._events(paths, run))

    def _events(self, paths: list[str], run: str | None) -> Iterator[dict[str, Any]]:
        needle = json.dumps(run) if run is not None else None
        for path in paths:
            for line in gitread.read_blob(self.repo, self._state_blobs[path]).decode("utf-8").splitlines():
                if not line.strip() or (needle is not None and needle not in line):
                    continue
                event = json.loads(line)
                if run is None or event.get("run") == run:
                    yield event

    def run_file(self, run: str) -> tuple[str, bytes] | None:
        """The spec file that holds the run (`runs/<namespace>/<name>.yaml` when so named)."""
        ns, name = run.split("/", 1)
        path = f"runs/{ns}/{name}.yaml"
        data = self.read(path)
        if data is not None:
            return path, data
        for key, where in self.spec.rejected.items():
            if key == f"Run {run}":
                found = self.read(where)
                return (where, found) if found is not None else None
        folder = gitread.list_blobs(self.repo, self.sha, [f"runs/{ns}/"])
        for other, blob in folder.items():
            data = gitread.read_blob(self.repo, blob)
            if f"name: {name}".encode() in data or f'"name": "{name}"'.encode() in data:
                checked = validated.check({other: data})
                if any(f"{o.namespace}/{o.name}" == run for o in checked.objects if o.kind == "Run"):
                    return other, data
        return None

    def where(self) -> str:
        """`<rev> at <sha>`: what was read, for people."""
        return f"{self.rev} at {self.sha[:12]}"

    @property
    def folder(self) -> Path:
        return Path(self.path)
