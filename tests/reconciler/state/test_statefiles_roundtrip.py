"""`state/` holds the whole FleetState: decoding what a pass wrote gives back every lease field.

Both ways back are checked: decoding the YAML files, and the rows the pass memo caches.
"""

from __future__ import annotations

from reconciler.passes.simulation import Simulation, load_scenario
from reconciler.state import codec as statefiles
from tests.support import REPO

EXAMPLES = REPO / "examples"


def test_every_lease_field_survives_the_files_and_the_memo_rows() -> None:
    # the spares scenario ends with swapped groups: leases that carry a moved rank
    scenario, raw, errors = load_scenario(str(EXAMPLES / "03-spares-fill-failure.yaml"))
    assert scenario is not None, errors
    sim = Simulation(scenario, raw)
    sim.play()
    plan = sim.last
    files = statefiles.encode(plan)
    state = {p: b for p, b in files.items() if p.startswith("state/")}
    want = sorted(plan.state.leases, key=lambda x: x.name)
    assert any(x.rank is not None and x.reason == "Swap" for x in want)
    from_files = statefiles.decode(state)
    assert sorted(from_files.leases, key=lambda x: x.name) == want
    pieces = {
        p: (kind, statefiles.piece(kind, statefiles.load(kind, data)))
        for p, data in state.items()
        if (kind := statefiles.kind_of(p)) is not None and kind not in statefiles.UNDECODED
    }
    from_rows = statefiles.assemble(pieces)
    assert sorted(from_rows.leases, key=lambda x: x.name) == want
    assert [x.rank for x in sorted(from_rows.leases, key=lambda x: x.name)] == [x.rank for x in want]
