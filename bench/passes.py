"""Time every reconcile pass of a scenario on its own: `python -m bench.passes SCENARIO`.

Prints one JSON object: load seconds, and per pass the virtual instant, wall seconds, ledger
events and pending reservations. The pass is the real pipeline (validate once, then plan); it
excludes reading the file and writing the JSON, which `jobtree simulate` rows include.
"""

from __future__ import annotations

import gc
import json
import sys
import time

from reconciler.passes import simulation
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
        passes.append(
            {
                "at": format_time(now),
                "seconds": round(time.perf_counter() - began, 3),
                "events": len(sim.last.events) if sim.last is not None else 0,
                "pendingReservations": sum(
                    1 for r in sim.state.reservations.values() if r.state == "Pending"
                ),
            }
        )

    sim.run_pass = timed  # type: ignore[method-assign]  # wrap, to time each pass the simulator makes
    with batchgc.paused():  # as `jobtree simulate` runs
        sim.play()
    print(json.dumps({"loadSeconds": round(loaded, 3), "passes": passes}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
