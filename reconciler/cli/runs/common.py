"""What every researcher's verb shares: the options, finding the fleet and the run, exits, output and colour.

Options come after the verb, as kubectl's do (`kubectl runs plan mm3 -n media -o json`).
`-o text|wide|name|json|yaml` as kubectl reads it (`--format text|json|yaml` too, the document
alone); a wrong repository, revision or run exits 2 (the closest run names said); a Git failure
exits 4. Tables are aligned, with the phase coloured on a terminal (click drops colour when the
output is piped; `NO_COLOR` turns it off everywhere). Prints; decides nothing.
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
import yaml
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


def complete_namespaces(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Tenant namespaces for shell completion (quietly none)."""
    try:
        tenants = fleetview.open_fleet(ctx.params.get("repo"), ctx.params.get("rev")).tenants
    except Exception:  # noqa: BLE001 - completion must never fail the shell
        return []
    return [CompletionItem(ns) for ns in sorted(tenants) if ns.startswith(incomplete)]


def complete_owners(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Budget and tenant owners for shell completion (quietly none)."""
    try:
        fleet = fleetview.open_fleet(ctx.params.get("repo"), ctx.params.get("rev"))
        owners = {b.spec.owner for b in fleet.budgets.values()} | set(fleet.tenants.values())
    except Exception:  # noqa: BLE001 - completion must never fail the shell
        return []
    return [CompletionItem(o) for o in sorted(owners) if o.startswith(incomplete)]


def run_argument(multiple: bool = False) -> Callable[[F], F]:
    name = "runs" if multiple else "run"
    return click.argument(  # type: ignore[return-value]  # click's decorator typing
        name,
        nargs=-1 if multiple else 1,
        shell_complete=_complete_runs,
        metavar="[RUN]..." if multiple else "RUN",
    )


TEXT, WIDE, NAME, JSON, YAML = "text", "wide", "name", "json", "yaml"
OUTPUTS = (TEXT, WIDE, NAME, JSON, YAML)  # -o, as kubectl spells them
DOCUMENTS = (TEXT, JSON, YAML)  # --format: the verb's document (or its text)


def fleet_options(f: F | None = None, *, objects: bool = False) -> Any:
    """`--repo`, `--rev`, `-o/--output`, `--format` and `--now`, on every verb that reads the fleet.

    The verb gets `fmt`: `-o` or `--format` (not both, unless they agree; text by default). With
    `objects`, the verb also gets `objects`: True when `-o json|yaml` asked for the Kubernetes
    objects it lists (as `kubectl get … -o yaml` prints them) rather than its document."""
    if f is None:
        return functools.partial(fleet_options, objects=objects)

    @functools.wraps(f)
    def resolved(*args: Any, output: str | None, fmt: str | None, **kwargs: Any) -> Any:
        if output is not None and fmt is not None and output != fmt:
            raise click.UsageError(f"-o {output} and --format {fmt} ask for different output: give one")
        if objects:
            kwargs["objects"] = output in (JSON, YAML)
        return f(*args, fmt=output or fmt or TEXT, **kwargs)

    listed = "the Kubernetes objects it lists, as `kubectl get` prints them" if objects else "its document"
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
                "-o", "--output", type=click.Choice(OUTPUTS), default=None,
                help=f"text (default), wide (more columns), name (one name a line), json or yaml ({listed}; "
                "docs/json.md).",
            ),
            click.option(
                "--format", "fmt", type=click.Choice(DOCUMENTS), default=None,
                help="text (default), or the versioned document as json or yaml (docs/json.md).",
            ),
            click.option(
                "--now", "now_text", default=None, metavar="TIME",
                help="Show countdowns as of this RFC 3339 time instead of the clock.",
            ),
        ]
    ):  # fmt: skip
        resolved = option(resolved)
    return resolved


def namespace_option(f: F) -> F:
    return click.option(
        "-n", "--namespace", default=None, is_eager=True, shell_complete=complete_namespaces,
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


KIND_PREFIXES = ("run/", "runs/", "run.rq.davidlangworthy.io/")  # what `-o name` prints, as kubectl takes it


def find_run(fleet: fleetview.Fleet, run: str, namespace: str | None) -> str:
    """The run RUN names: NAME, NAMESPACE/NAME, or either after `run/` (what `-o name` prints)."""
    try:
        return fleet.find(run, namespace)
    except fleetview.WhereError as err:
        bare = next((run[len(p) :] for p in KIND_PREFIXES if run.startswith(p) and len(run) > len(p)), None)
        if bare is not None:
            try:
                return fleet.find(bare, namespace)
            except fleetview.WhereError:
                pass
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
    """A verb showing one view of RUN (`plan`, `explain`): RUN, -n, the fleet options, `--now`; the
    view's document printed as text, JSON or YAML (`-o name`: the run). `summary` is its help."""

    def verb(
        run: str, namespace: str | None, repo: str | None, rev: str | None, fmt: str, now_text: str | None
    ) -> None:
        now = now_of(now_text)
        fleet = open_fleet(repo, rev)
        emit(view(fleet, find_run(fleet, run, namespace), now), fmt, text, names=run_name)

    verb.__doc__ = summary
    return click.command(name)(run_argument()(namespace_option(fleet_options(reading(verb)))))


def run_name(doc: dict[str, Any]) -> list[str]:
    """`-o name` of a document about one run: `run/<namespace>/<name>` (what RUN takes back)."""
    return [f"run/{doc['run']}"]


def emit(
    doc: dict[str, Any], fmt: str, text: Callable[[dict[str, Any]], str], *,
    wide: Callable[[dict[str, Any]], str] | None = None, names: Callable[[dict[str, Any]], list[str]] | None = None,
) -> None:  # fmt: skip
    """Print `doc` as `fmt` asks: its text (`wide`: more columns, where the verb has them), its
    names one a line, or the document as JSON or YAML."""
    if fmt == JSON:
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    elif fmt == YAML:
        click.echo(as_yaml(doc), nl=False)
    elif fmt == NAME:
        if names is None:
            raise click.UsageError("-o name: this verb names nothing; use -o text, wide, json or yaml")
        click.echo("".join(f"{n}\n" for n in names(doc)), nl=False)
    else:
        shown = wide if fmt == WIDE and wide is not None else text
        click.echo(shown(doc), nl=False, color=_colour())


def as_yaml(obj: Any) -> str:
    """YAML as kubectl prints it: block style, keys sorted, text as is."""
    return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, allow_unicode=True, width=4096)


def objects(items: list[dict[str, Any]], fmt: str, single: bool) -> None:
    """Kubernetes objects as `kubectl get -o json|yaml` prints them: the one object asked for by
    name, else a `List` of them."""
    doc = items[0] if single and len(items) == 1 else {
        "apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}
    }  # fmt: skip
    click.echo(json.dumps(doc, indent=2, sort_keys=True) if fmt == JSON else as_yaml(doc), nl=False)
    if fmt == JSON:
        click.echo("")


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


def span(seconds: int) -> str:
    """`1h 5m`, `40s`, `2d 3h`: the two largest units that are not zero."""
    days, rest = divmod(abs(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d"] * bool(days) + [f"{hours}h"] * bool(hours) + [f"{minutes}m"] * bool(minutes)
    if not days and not hours:
        parts += [f"{secs}s"] * bool(secs)
    return " ".join(parts[:2]) or "0s"


def until(seconds: int | None) -> str:
    """A countdown for people: `in 1h 5m`, `in 40s`, `due now`, `overdue by 2h 5m`."""
    if seconds is None:
        return "unknown"
    if seconds < 0:
        return f"overdue by {span(seconds)}"
    return "due now" if seconds == 0 else f"in {span(seconds)}"


def eta(when: str | None, seconds: int | None, now: str | None = None) -> str:
    """`2026-03-02T10:10:00Z (in 15m)` (`overdue by …` when `now`, the document's, is past it), or
    `unknown` when nothing known makes the run startable."""
    if not when:
        return "unknown"
    if now is not None:
        seconds = parse_time(when) - parse_time(now)
    return f"{when} ({until(seconds)})"


def overdue(when: str | None, doc: dict[str, Any]) -> bool:
    return bool(when) and parse_time(str(when)) < parse_time(doc["now"])


def last_pass(doc: dict[str, Any]) -> str:
    """Why an ETA can be past: `the last pass was at T (2h 30m ago): git pull …` (empty when the
    document names no pass)."""
    if not doc.get("asOf"):
        return ""
    ago = parse_time(doc["now"]) - parse_time(doc["asOf"])
    return (
        f"An ETA in the past has not been acted on in what you read: the last pass in it was at {doc['asOf']} "
        f"({span(ago)} ago). `git pull` for newer decisions; if there are none, the reconciler has not "
        "run since.\n"
    )


def place(entry: dict[str, Any] | None) -> str:
    """`3 of 5`: a run's place in line (`-` when it is not in line)."""
    return "-" if entry is None else f"{entry['position']} of {entry['of']}"


def gpus(n: int | None) -> str:
    return "-" if n is None else str(n)


def payer(p: dict[str, Any] | None) -> str:
    """`org:team (budget/envelope)`, with how it pays when the entry says (`…, family)`)."""
    if not p:
        return "-"
    how = f", {p['funding']}" if p.get("funding") else ""
    where = f" ({p['budget']}/{p['envelope']}{how})" if p.get("budget") and p.get("envelope") else ""
    return f"{p['owner']}{where}"


def nodes(held: dict[str, int]) -> str:
    return ", ".join(f"{n}×{g}" for n, g in sorted(held.items()))


def read_at(doc: dict[str, Any]) -> str:
    """`main at 1a2b3c4d5e6f` (the commit alone when it was asked for by id)."""
    short = doc["commit"][:12]
    return short if doc["commit"].startswith(doc["rev"]) else f"{doc['rev']} at {short}"
