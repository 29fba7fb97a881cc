"""Every path jobtree owns in a fleet repository (step 5 of a pass): `state/` and `rendered/`, spelled once.

The files' contents are `codec`'s; what the spec files are is `schemas.layout`'s, which also names
the two owned prefixes (`OWNED_PREFIXES`) for readers that must not import this shell.
"""

from __future__ import annotations

from schemas import layout

OWNED_PREFIXES = layout.OWNED_PREFIXES  # ("state/", "rendered/")
STATE = "state/"
RENDERED = "rendered/"
FLEET = "state/fleet.yaml"  # asOf and the fleet's meters
FLEET_MAP = "state/fleet.svg"  # the fleet map: domains x nodes x GPU slots (`fleetmap`)
TIMELINE = "state/timeline.svg"  # the reservation timeline (`timeline`)
LEASES = "state/leases/"  # <namespace>/<run>.yaml: every Lease of a run
RESERVATIONS = "state/reservations/"  # <namespace>/<run>.yaml
RUN_STATUS = "state/status/runs/"  # <namespace>/<run>.yaml
BUDGET_STATUS = "state/status/budgets/"  # <name>.yaml
LEDGER = "state/ledger/"  # <YYYY-MM-DD>.jsonl, append-only
OBSERVED = "state/observed/"  # <cluster>.yaml: a configured cluster's nodes as the pass observed them


def lease_file(run: str) -> str:
    return f"{LEASES}{run}.yaml"


def reservation_file(run: str) -> str:
    return f"{RESERVATIONS}{run}.yaml"


def run_status_file(run: str) -> str:
    return f"{RUN_STATUS}{run}.yaml"


def budget_status_file(name: str) -> str:
    return f"{BUDGET_STATUS}{name}.yaml"


def ledger_file(day: str) -> str:
    """`day` is `YYYY-MM-DD`."""
    return f"{LEDGER}{day}.jsonl"


def observed_file(cluster: str) -> str:
    return f"{OBSERVED}{cluster}.yaml"


def observed_cluster(path: str) -> str | None:
    """The cluster whose observed file `path` is, or None for another path."""
    if not path.startswith(OBSERVED) or "/" in path[len(OBSERVED) :] or not path.endswith(".yaml"):
        return None
    return path[len(OBSERVED) :].removesuffix(".yaml")


def rendered_cluster(path: str) -> str | None:
    """The cluster a rendered file `path` is applied to, or None for another path."""
    parts = path.split("/")
    return parts[1] if len(parts) == 4 and f"{parts[0]}/" == RENDERED else None


def rendered_file(cluster: str, run: str) -> str:
    """A run's pods and headless Service on one cluster; `run` is `<namespace>/<name>`."""
    return f"{RENDERED}{cluster}/{run}.yaml"


def rendered_run(path: str) -> str | None:
    """The run (`<namespace>/<name>`) whose rendered file `path` is, or None for another path."""
    parts = path.split("/")
    if len(parts) != 4 or f"{parts[0]}/" != RENDERED:
        return None
    return f"{parts[2]}/{parts[3].removesuffix('.yaml')}"
