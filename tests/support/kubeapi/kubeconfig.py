"""Kubeconfig files that point the official client (or kubectl) at one or several test servers.

One context per server, each with its own cluster and user entry named after it, so a fleet test
can address `east` and `west` from one file as it would two real clusters. Servers take no
credentials; the token written here is a placeholder the server ignores.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import yaml


class HasURL(Protocol):
    @property
    def url(self) -> str: ...


def kubeconfig(clusters: Mapping[str, str | HasURL], current: str | None = None) -> dict[str, Any]:
    """The kubeconfig document for `{context name: server or URL}`; `current` defaults to the first."""
    if not clusters:
        raise ValueError("a kubeconfig needs at least one cluster")
    names = list(clusters)
    entries = {name: (target if isinstance(target, str) else target.url) for name, target in clusters.items()}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "current-context": current or names[0],
        "clusters": [{"name": name, "cluster": {"server": url}} for name, url in entries.items()],
        "users": [{"name": f"{name}-user", "user": {"token": "kubeapi-test-token"}} for name in names],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": f"{name}-user", "namespace": "default"}}
            for name in names
        ],
    }


def write_kubeconfig(
    path: str | Path, clusters: Mapping[str, str | HasURL], current: str | None = None
) -> Path:
    target = Path(path)
    target.write_text(yaml.safe_dump(kubeconfig(clusters, current), sort_keys=False))
    return target
