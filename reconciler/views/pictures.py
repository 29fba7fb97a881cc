"""The pictures of a commit (`jobtree map`, `jobtree timeline`): drawn from its `state/` as a pass draws them.

The fleet map needs the whole fleet's open leases, so the commit's `state/` is decoded (from the
pass cache when it describes that commit); the nodes are the inventory's. For a commit a pass
wrote, the result is the `state/fleet.svg` and `state/timeline.svg` it holds, byte for byte; for
an older commit (before jobtree drew pictures) it is what that pass would have drawn.
"""

from __future__ import annotations

from reconciler.state import fleetmap, timeline
from reconciler.state import memo as passmemo
from reconciler.views.fleet import Fleet


def _state(fleet: Fleet) -> passmemo.Memo:
    return passmemo.cached(fleet.repo, fleet.commit) or passmemo.read(fleet.repo, fleet.commit)


def fleet_map(fleet: Fleet) -> str:
    st = _state(fleet).state()
    owners = {key: run.spec.owner for key, run in fleet.specs.items()}
    return fleetmap.draw(
        fleetmap.key(fleet.nodes.values(), st.leases, st.unfunded, st.cordoned, owners, st.runs)
    )


def reservations(fleet: Fleet) -> str:
    st = _state(fleet).state()
    return timeline.draw(timeline.key(st.reservations, st.runs))
