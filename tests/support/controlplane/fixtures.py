"""The pytest fixtures onto the control plane (a plugin `tests/conftest.py` loads).

`control_plane`: one `ControlPlane` per xdist worker and session, with deploy/'s RBAC and jobtree's
CRDs installed; `west_plane`: a second one, started the first time a test asks (the two-cluster
tests). `server` / `west`: a `Cluster` on each for one test, with its own fault proxy; everything the
test created is deleted when it ends (`Baseline.reset`). Without the built binaries the session
stops with the README's sentence: cluster tests are never skipped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.support.controlplane.cluster import Admin, Baseline, Cluster, install
from tests.support.controlplane.plane import ControlPlane, ControlPlaneMissing


class Running:
    """A started plane and the baseline its tests are reset to."""

    def __init__(self, name: str) -> None:
        try:
            self.plane = ControlPlane(name).start()
        except ControlPlaneMissing as err:
            pytest.exit(str(err), returncode=1)
        self.admin = Admin(self.plane)
        install(self.admin)
        self.baseline = Baseline(self.admin)

    @contextlib.contextmanager
    def cluster(self, name: str) -> Iterator[Cluster]:
        """A `Cluster` named `name` for one test (or one hypothesis example), reset when it ends."""
        cluster = Cluster(self.plane, name)
        try:
            yield cluster
        finally:
            cluster.close()
            self.baseline.reset(self.admin)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[Running]:
    running = Running("east")
    yield running
    running.plane.stop()


@pytest.fixture(scope="session")
def west_plane() -> Iterator[Running]:
    running = Running("west")
    yield running
    running.plane.stop()


@pytest.fixture
def server(control_plane: Running) -> Iterator[Cluster]:
    """Cluster `east` for one test (the name the fleets' jobtree.yaml gives it)."""
    with control_plane.cluster("east") as cluster:
        yield cluster


@pytest.fixture
def west(west_plane: Running) -> Iterator[Cluster]:
    """Cluster `west`, a second control plane, for one test."""
    with west_plane.cluster("west") as cluster:
        yield cluster
