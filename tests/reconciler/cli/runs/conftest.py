"""The fleets the researcher's verbs are tried on: the worked examples played into fleet repositories.

- `lottery`: examples/04 (a reservation, unfunded work reclaimed, a conflict set, the lottery);
- `spares`: examples/03 (hot spares, fill on them, node failures swapped onto the spares);
- `cofunded`: examples/01 (a run paid by its owner and a sponsor; a borrow-limit reservation);
- `window`: examples/05 (a reservation aligned to a budget window that opens tomorrow).

Each is written once per test process and only read by the tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fleets import history
from tests.support.scenarios import EXAMPLES


def _example(factory: pytest.TempPathFactory, name: str) -> Path:
    return history(next(EXAMPLES.glob(f"{name}-*.yaml")), factory.mktemp(name) / "fleet")


@pytest.fixture(scope="session")
def lottery(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _example(tmp_path_factory, "04")


@pytest.fixture(scope="session")
def spares(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _example(tmp_path_factory, "03")


@pytest.fixture(scope="session")
def cofunded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _example(tmp_path_factory, "01")


@pytest.fixture(scope="session")
def window(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _example(tmp_path_factory, "05")
