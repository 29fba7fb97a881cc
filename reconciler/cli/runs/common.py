"""What every researcher's verb shares: the options, finding the fleet and the run, exits, tables and colour.

Options come after the verb, as kubectl's do (`kubectl runs plan mm3 -n media --format json`).
A wrong repository, revision or run exits 2 (the closest run names said); a Git failure exits 4.
Tables are aligned, with the phase coloured on a terminal (click drops colour when the output is
piped; `NO_COLOR` turns it off everywhere). Prints; decides nothing.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import click
from click.shell_completion import CompletionItem

from reconciler.cli import exitcodes
from reconciler.git import errors
from reconciler.views import fleet as fleetview
from schemas.common import parse_time

F = TypeVar("F", bound=Callable[..., Any])

PHASE_COLOURS = {
    "Running": "green",
    "Pending": "yellow",
    "Waiting": "cyan",
    "Succeeded": "blue",
    "Failed": "red",
}


def _complete_runs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Run names for shell completion, from the fleet the command line points at (quietly none)."""
    try:
        fleet = fleetview.open_fleet(ctx.params.get("repo"), ctx.params.get("rev"))
        keys = fleet.run_keys
    except Exception:  # noqa: BLE001 - completion must never fail the shell
        return []
    namespace = ctx.params.get("namespace")
    if namespace:
        names = [k.split("/", 1)[1] for k in keys if k.startswith(f"{namespace}/")]
    elif "/" in incomplete:
        names = keys
    else:
        names = sorted({k.split("/", 1)[1] for k in keys} | set(keys))
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def run_argument(multiple: bool = False) -> Callable[[F], F]:
    name = "runs" if multiple else "run"
    return click.argument(name, nargs=-1 if multiple else 1, shell_complete=_complete_runs, metavar="RUN...")  # type: ignore[return-value]  # click's decorator typing


def fleet_options(f: F) -> F:
    """`--repo`, `--rev`, `--format` and `--now`, on every verb that reads the fleet."""
    for option in reversed(
        [
            click.option(
                "--repo", default=None, metavar="DIR", is_eager=True,
                help=f"A clone of the fleet repository (default: ${fleetview.REPO_ENV}, else the repository "
                "around the working directory).",
            ),
            click.option(
                "--rev", default=None, is_eager=True,
                help="The commit to read (default: the fleet branch as last fetched from origin, else the "
                "local branch).",
            ),
            click.option(
                "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
                help="json: the versioned document described in docs/cli.md.",
            ),
            click.option(
                "--now", "now_text", default=None, metavar="TIME",
                help="Show countdowns as of this RFC 3339 time instead of the clock.",
            ),
        ]
    ):  # fmt: skip
        f = option(f)
    return f


def namespace_option(f: F) -> F:
    return click.option(
        "-n", "--namespace", default=None, is_eager=True,
        help="The namespace of RUN (default: the one tenant namespace that has a run of that name).",
    )(f)  # fmt: skip


def now_of(text: str | None) -> int:
    if text is None:
        return int(time.time())
    try:
        return parse_time(text)
    except ValueError as err:
        raise click.UsageError(f"--now {text!r}: {err}") from None


def fail(message: str, code: int) -> NoReturn:
    click.echo(f"kubectl runs: {message}", err=True)
    sys.exit(code)


def open_fleet(repo: str | None, rev: str | None) -> fleetview.Fleet:
    try:
        return fleetview.open_fleet(repo, rev)
    except fleetview.WhereError as err:
        fail(str(err), exitcodes.USAGE)
    except errors.GitStoreError as err:
        fail(str(err), exitcodes.OTHER)


def find_run(fleet: fleetview.Fleet, run: str, namespace: str | None) -> str:
    try:
        return fleet.find(run, namespace)
    except fleetview.WhereError as err:
        fail(str(err), exitcodes.USAGE)


def reading(verb: Callable[..., None]) -> Callable[..., None]:
    """A verb's body with Git failures as exit 4 and no traceback (click's own exits pass through,
    anything unexpected is exit 4 naming it)."""

    @functools.wraps(verb)
    def wrapped(*args: Any, **kwargs: Any) -> None:
        try:
            verb(*args, **kwargs)
        except (errors.GitStoreError, OSError) as err:
            fail(str(err), exitcodes.OTHER)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as err:  # noqa: BLE001 - the contract is "no traceback": exit 4 names the bug
            fail(f"internal error ({type(err).__name__}: {err}); please report it", exitcodes.OTHER)

    return wrapped


def run_view(
    name: str, view: Callable[[fleetview.Fleet, str, int], dict[str, Any]],
    text: Callable[[dict[str, Any]], str], summary: str,
) -> click.Command:  # fmt: skip
    """A verb showing one view of RUN (`plan`, `leases`, `explain`): RUN, -n, the fleet options,
    `--format`, `--now`; the view's document printed as text or JSON. `summary` is its help."""

    def verb(
        run: str, namespace: str | None, repo: str | None, rev: str | None, fmt: str, now_text: str | None
    ) -> None:
        now = now_of(now_text)
        fleet = open_fleet(repo, rev)
        emit(view(fleet, find_run(fleet, run, namespace), now), fmt, text)

    verb.__doc__ = summary
    return click.command(name)(run_argument()(namespace_option(fleet_options(reading(verb)))))


def emit(doc: dict[str, Any], fmt: str, text: Callable[[dict[str, Any]], str]) -> None:
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        click.echo(text(doc), nl=False, color=_colour())


def _colour() -> bool | None:
    return False if os.environ.get("NO_COLOR") else None  # None: click decides (a terminal or not)


def phase(text: str | None) -> str:
    """The phase, coloured by what it means (the colour is dropped when piped)."""
    if not text:
        return "-"
    return click.style(text, fg=PHASE_COLOURS.get(text))


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned on their visible width (colour codes take no room), two spaces apart."""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], len(click.unstyle(cell)))
    lines = []
    for r in [list(headers), *rows]:
        cells = [cell + " " * (widths[i] - len(click.unstyle(cell))) for i, cell in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def until(seconds: int | None) -> str:
    """A countdown for people: `in 1h 5m`, `in 40s`, `due now`."""
    if seconds is None:
        return "unknown"
    if seconds <= 0:
        return "due now"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d"] * bool(days) + [f"{hours}h"] * bool(hours) + [f"{minutes}m"] * bool(minutes)
    if not days and not hours:
        parts += [f"{secs}s"] * bool(secs)
    return "in " + " ".join(parts[:2])


def eta(when: str | None, seconds: int | None) -> str:
    """`2026-03-02T10:10:00Z (in 15m)`, or `unknown` when nothing known makes the run startable."""
    return f"{when} ({until(seconds)})" if when else "unknown"


def gpus(n: int | None) -> str:
    return "-" if n is None else str(n)


def payer(p: dict[str, Any] | None) -> str:
    """`org:team (budget/envelope)`."""
    if not p:
        return "-"
    where = f" ({p['budget']}/{p['envelope']})" if p.get("budget") and p.get("envelope") else ""
    return f"{p['owner']}{where}"


def nodes(held: dict[str, int]) -> str:
    return ", ".join(f"{n}×{g}" for n, g in sorted(held.items()))


def read_at(doc: dict[str, Any]) -> str:
    """`main at 1a2b3c4d5e6f` (the commit alone when it was asked for by id)."""
    short = doc["commit"][:12]
    return short if doc["commit"].startswith(doc["rev"]) else f"{doc['rev']} at {short}"
