"""The `jobtree` (and `kubectl-runs`) command line: one click group, one module per verb.

Exit codes (`reconciler.cli.exitcodes`): 0 success / no changes, 1 changes (with --exit-code), 2 usage,
3 invalid fleet, 4 other.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import sys

import click

from reconciler.cli import signals
from reconciler.perf import batchgc

# verb -> module exposing `command` (a click.Command). Modules are imported lazily so one verb's
# dependencies never slow or break another.
VERBS = {
    "validate": "reconciler.cli.validate",
    "codeowners": "reconciler.cli.codeowners",
    "simulate": "reconciler.cli.simulate",
    "reconcile": "reconciler.cli.reconcile",
    "apply": "reconciler.cli.apply",
    "plan": "reconciler.cli.plan",
    "webhook": "reconciler.cli.webhook",
    "map": "reconciler.cli.fleetmap",
    "timeline": "reconciler.cli.timeline",
    "runs": "reconciler.cli.runs",  # the researcher's verbs; the top level of `kubectl-runs`
    "completion": "reconciler.cli.completion",
    "agent": "reconciler.cli.agent",
}
PLUGIN = "kubectl-runs"  # installed under this name, the runs verbs are the top level


class _Lazy(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(v for v, mod in VERBS.items() if importlib.util.find_spec(mod) is not None)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        mod = VERBS.get(name)
        if mod is None or importlib.util.find_spec(mod) is None:
            return None
        command: click.Command = importlib.import_module(mod).command
        return command


@click.group(cls=_Lazy, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jobtree")
def main() -> None:
    """Run a GPU fleet from Git: budgets, runs, leases and reservations."""
    # A pass allocates millions of small acyclic objects (leases, models, manifests); CPython's
    # default cyclic-GC threshold (700) rescans them thousands of times, which measured at ~40% of a
    # 100k-GPU pass. Collect young objects every 100k allocations instead.
    gc.set_threshold(100_000, 50, 100)


def entry() -> None:
    """The console script: run the verb, flush what it printed, and leave without tearing the heap
    down object by object (after a 100k-GPU pass that alone is a tenth of a second or more).

    Nothing jobtree does waits for interpreter shutdown: files are closed by `with`, forked workers
    are joined, temporary directories are removed by their context managers."""
    code: object = 0
    batchgc.exits_after()  # every verb's last batch leaves the collector off: the heap goes with the process
    signals.install()  # before click resolves the verb (importing it): Ctrl-C then exits 130 too
    try:
        if os.path.basename(sys.argv[0]).startswith(PLUGIN):  # `kubectl runs submit ...`
            importlib.import_module(VERBS["runs"]).command(prog_name="kubectl runs")
        main()  # click's standalone mode always ends in SystemExit
    except SystemExit as done:
        code = done.code
    except Exception:  # noqa: BLE001 - only what a stop cut short; any other error is reraised
        if signals.stopped() is None:
            raise
        code = None  # a library turned the stop into its own error (pydantic building a validator)
    if isinstance(code, str):
        print(code, file=sys.stderr)
    signum = signals.stopped()
    if signum is not None:  # click's "Aborted!", or an error the stop cut short: exit as the signal says
        code = 128 + signum
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a closed stream: nothing to keep
            pass
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
