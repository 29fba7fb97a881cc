"""Time every reconcile pass of a scenario on its own: `python -m bench.passes SCENARIO`.

Prints one JSON object: load seconds, and per pass the virtual instant, wall seconds, ledger
events and pending reservations. The pass is the real pipeline (validate once, then plan); it
excludes reading the file and writing the JSON, which `jobtree simulate` rows include.

After each timed pass the same pass runs again, untimed, at the same instant from the first one's
output, and `again` counts what it changed (lease events, reservations, run statuses): a pass is a
fixed point (DESIGN §4.5), so every count should be zero.
"""

from __future__ import annotations

import gc
import json
import sys
import time

from reconciler.passes import pipeline, simulation
from reconciler.perf import batchgc
from schemas.common import format_time


def main(path: str) -> int:
    gc.set_threshold(100_000, 50, 100)  # as the CLI does
    start = time.perf_counter()
    scenario, raw, errors = simulation.load_scenario(path)
    if scenario is None:
        print("\n".join(errors), file=sys.stderr)
        return 3
    loaded = time.perf_counter() - start
    sim = simulation.Simulation(scenario, raw)
    passes: list[dict[str, object]] = []
    real_pass = sim.run_pass

    def timed(now: int) -> None:
        began = time.perf_counter()
        real_pass(now)
        seconds = round(time.perf_counter() - began, 3)
        first = sim.last
        assert first is not None and sim.spec_cache is not None
        again = pipeline.run_pass(sim.spec_cache, sim.cluster, first.state, now, render=False)
        passes.append(
            {
                "at": format_time(now),
                "seconds": seconds,
                "events": len(first.events),
                "pendingReservations": sum(
                    1 for r in sim.state.reservations.values() if r.state == "Pending"
                ),
                "again": {
                    "events": len(again.events) + len(again.moves),
                    "reservations": sum(
                        1
                        for k in first.state.reservations.keys() | again.state.reservations.keys()
                        if first.state.reservations.get(k) != again.state.reservations.get(k)
                    ),
                    "runs": sum(1 for k in first.runs if first.runs[k] != again.runs.get(k)),
                },
            }
        )

    sim.run_pass = timed  # type: ignore[method-assign]  # wrap, to time each pass the simulator makes
    with batchgc.paused():  # as `jobtree simulate` runs
        sim.play()
    print(json.dumps({"loadSeconds": round(loaded, 3), "passes": passes}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
