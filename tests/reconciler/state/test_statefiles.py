"""State files as the pass cache sees them: sources, decoded rows and assembly agree with the files.

The cache keeps, per file, the source its bytes were written from and the rows `decode` takes from
it; these properties are what make a cached pass write and read exactly what an uncached one does.
"""

from __future__ import annotations

import marshal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from planner import records
from planner.world import FleetState
from reconciler.state import codec as statefiles
from reconciler.state import nexttree as gitsink
from tests.planner.test_planner_properties import FLEET, PROPS, T0, TEAMS, one_pass, spec_of
from tests.support.builders import a_budget, a_run

STATE_KINDS = (statefiles.LEASES, statefiles.RESERVATION, statefiles.RUN, statefiles.BUDGET, statefiles.FLEET)


def check_timeline(fleet: tuple[Any, ...]) -> set[str]:
    """Plan a few passes; every file checked against its source and rows; the kinds seen."""
    spec = spec_of(fleet)
    state = FleetState()
    seen: set[str] = set()
    for now in (T0, T0 + 600, T0 + 1800, T0 + 7200):
        plan = one_pass(spec, state, now)
        files = statefiles.encode(plan)
        sources = statefiles.sources(plan)
        assert list(sources) == list(files)
        pieces = {}
        for path, (kind, key) in sources.items():
            seen.add(kind)
            assert statefiles.kind_of(path) == kind
            obj = statefiles.file_object(kind, key)
            assert statefiles.file_bytes(kind, obj) == files[path]
            if kind in statefiles.UNDECODED:  # pods and pictures: no rows of their own
                continue
            rows = statefiles.piece(kind, obj)
            assert rows == statefiles.piece(kind, statefiles.load(kind, files[path]))
            pieces[path] = (kind, marshal.loads(marshal.dumps(rows)))  # as the cache hands them back
            if kind in (statefiles.LEASES, statefiles.RESERVATION):
                assert records.without_clock(obj) == obj  # no field of these moves with the clock alone
        state = statefiles.decode({p: b for p, b in files.items() if p.startswith("state/")})
        assert statefiles.assemble(pieces) == state
    return seen


@PROPS
@given(fleet=FLEET)
def test_every_file_is_a_function_of_its_source_and_decodes_to_its_rows(fleet: tuple[Any, ...]) -> None:
    check_timeline(fleet)


def test_a_fleet_with_leases_reservations_and_pods_checks_every_kind_of_file() -> None:
    budgets = [a_budget(owner.replace(":", "-"), owner).envelope("e", 48).build() for owner in TEAMS]
    runs = [a_run(f"x/r{i}", "org:r:a:x").gpus(8).build() for i in range(3)]
    seen = check_timeline((budgets, runs, "H100-80GB", (1, 1, 1)))  # two H100 nodes: one run waits
    assert seen == {*STATE_KINDS, statefiles.RENDERED, *statefiles.PICTURES}


KEYS = st.sampled_from(["asOf", "hours", "meters", "phase", "gpus", "run", "ownedGPUHours"])
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, 1.0, 2.5])
    | st.sampled_from(["a", "b"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


@PROPS
@given(VALUES, VALUES)
def test_comparing_without_the_clock_fields_equals_comparing_stripped_copies(a: Any, b: Any) -> None:
    assert gitsink._same_stable(a, b) == (records.without_clock(a) == records.without_clock(b))
    assert gitsink._same_stable(a, a)


def _pod(name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"image": image}]},
    }


def test_a_frozen_runs_file_keeps_its_last_pods_and_drops_those_whose_leases_closed() -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "r"},
        "spec": {"clusterIP": "None"},
    }
    last = statefiles.file_bytes(
        statefiles.RENDERED, [_pod("r-g0-n1", "train:1"), _pod("r-g1-n2", "train:1"), service]
    )
    # this pass: the spec is invalid, so pods are rendered from no spec (a pause image), and g1's lease closed
    now = (_pod("r-g0-n1", "pause"), service)
    kept = statefiles.as_last_rendered(now, last)
    assert [d["metadata"]["name"] for d in kept] == ["r-g0-n1", "r"]
    assert kept[0]["spec"]["containers"][0]["image"] == "train:1"
    assert statefiles.as_last_rendered(now, b"kind: [unclosed\n") == now  # unreadable: as rendered now
