"""`jobtree reconcile [REPO] [--once | --interval 60s] [--now T] [--push] [--apply]`: the verb and its loop.

Checks the options, then runs one pass (`reconciler.passes.reconcile`), or one every --interval,
waking early when a reservation or window falls due; prints each pass's warnings, the fleet files'
problems when they differ from the last pass's, and the outcome; stops on a signal between
passes. A failed pass (remote unreachable, invalid fleet) ends --once with its exit code and is
retried by the next --interval pass. With --interval the configured clusters' nodes and pods are
kept by watch between passes (`reconciler.cluster.watched`: listed once, then followed; a pass
whose watch is failing lists them, as --once does, and says so); the watch threads end with the
loop, a signal included.

This module stays light on purpose: on a clone with no parse cache yet (a first pass, a fresh CI
clone), the spec files at HEAD are parsed in a forked child (`spec.parsed.start`) while the
engine's modules (pydantic models, the planner: most of a second) are imported by `run`, so both
CPUs of a small machine work from the start.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import click

from reconciler.cli import exitcodes, massprune, signals
from reconciler.git import read as gitread
from reconciler.perf import batchgc
from reconciler.spec import parsed as specprefetch
from schemas.diagnostics import Diagnostic

DIAGNOSTICS_SHOWN = 50  # problem lines printed per pass; `jobtree validate` lists them all
MAX_INTERVAL = 7 * 24 * 3600  # the longest --interval: a week


@click.command("reconcile")
@click.argument("repo", default=".", type=click.Path(file_okay=False))
@click.option("--once", is_flag=True, help="One pass, then exit (the default without --interval).")
@click.option("--interval", default=None, help="Keep reconciling every DURATION (e.g. 60s), and when due.")
@click.option("--now", "now_text", default=None, help="Plan as of this RFC 3339 time instead of the clock.")
@click.option("--push", is_flag=True, help="Push the state commit to the remote (compare-and-swap).")
@click.option(
    "--apply", is_flag=True, help="Then apply the branch head to every cluster jobtree.yaml configures."
)
@massprune.options("With --apply: ")
@click.option("--remote", default="origin", show_default=True)
@click.option("--branch", default=None, help="Branch to reconcile (default: git.branch of jobtree.yaml).")
@click.option(
    "--quiet", is_flag=True, help="No progress lines on stderr (problems in the fleet files still are)."
)
def command(**options: Any) -> None:
    """Reconcile the fleet repository REPO: plan, commit state/ and rendered/, optionally push.

    Problems in the fleet files are printed to stderr as `jobtree validate` prints them (even with
    --quiet: they are problems, not progress); the objects concerned are left out and the valid
    ones reconciled (committed, pushed and applied as asked), then a single pass exits 3, as every
    verb does for invalid fleet files (4 when a cluster was not applied in full). An invalid jobtree.yaml or inventory/nodes.yaml (or
    an inventory missing or empty while leases are open) is different: every object depends on
    them, so the pass plans and commits nothing and exits 3 (what runs keeps running). So does work
    on a cluster jobtree.yaml no longer names, or on one never observed (no credentials, a context
    the kubeconfig lacks). With --interval a pass prints problems when they differ from the
    last pass's, not every time.
    """
    early = specprefetch.start(options["repo"])
    run(**options, early=early)


def run(
    *,
    repo: str,
    once: bool,
    interval: str | None,
    now_text: str | None,
    push: bool,
    apply: bool,
    remote: str,
    branch: str | None,
    quiet: bool,
    allow_mass_prune: bool = False,
    prune_share: float | None = None,
    early: specprefetch.Prefetch | None = None,
) -> None:
    """`jobtree reconcile` once its options are parsed: one pass, or one every --interval.
    `early`: spec files already being parsed for the first pass."""
    # the engine, imported while the child parses (module docstring)
    from reconciler.git import errors
    from reconciler.git import lock as writerlock
    from reconciler.passes import pipeline
    from reconciler.passes.reconcile import MAX_CLOCK_SKEW, FleetInvalid, Kept, Outcome, reconcile_once
    from schemas.common import format_time, parse_duration, parse_time

    try:
        now = parse_time(now_text) if now_text is not None else None
    except ValueError as err:
        raise click.UsageError(f"--now {now_text!r}: {err}") from err
    ahead = now is not None and push and now > time.time() + MAX_CLOCK_SKEW  # warned of once pushed
    if once and interval is not None:
        raise click.UsageError(
            f"--once and --interval {interval} exclude each other: --once runs one pass and exits, "
            "--interval keeps reconciling; give one of them"
        )
    if now_text is not None and interval is not None:
        raise click.UsageError(
            f"--now {now_text} and --interval {interval} exclude each other: every pass would plan the "
            "same instant; --interval follows the clock, --now is for one pass (with --once)"
        )
    try:
        every = parse_duration(interval) if interval else None
    except (ValueError, OverflowError) as err:
        raise click.UsageError(f"--interval {interval!r}: {err}") from err
    if every is not None and every <= 0:
        raise click.UsageError("--interval must be positive, e.g. 60s")
    if every is not None and every > MAX_INTERVAL:
        raise click.UsageError(
            f"--interval {interval} is longer than {MAX_INTERVAL // 3600}h: a schedule that rare misses "
            f"budget windows and reservations falling due; use at most {MAX_INTERVAL // 3600}h (passes "
            "wake early when due)"
        )
    try:
        gitread.open_repo(repo)
    except errors.NotARepository as err:  # a wrong argument, as `jobtree plan` reports it
        raise click.UsageError(str(err)) from err
    shown: list[Diagnostic] | None = None
    kept = Kept()  # what each pass of --interval keeps in memory for the next
    if every is not None:  # the clusters' nodes and pods kept by watch between passes; --once lists
        from reconciler.cluster.watched import Watches

        kept.watches = Watches()
    try:
        while True:
            try:
                with batchgc.paused(last=every is None):  # one pass: the process exits after it
                    outcome = reconcile_once(
                        repo,
                        now=now,
                        push=push,
                        apply=apply,
                        remote=remote,
                        branch=branch,
                        say=None if quiet else progress(),
                        early=early,
                        lock_wait=writerlock.WAIT,  # a pass of another process (the webhook's, a cron's) on this clone
                        kept=kept,
                        allow_mass_prune=allow_mass_prune,
                        prune_share=prune_share,
                    )
                early = None  # a head start for the first pass only
                for warning in outcome.warnings:  # shown even with --quiet: a person's file may be among them
                    click.echo(warning, err=True)
                if outcome.diagnostics != shown:
                    for line in problem_lines(outcome.diagnostics):
                        click.echo(line, err=True)
                    shown = outcome.diagnostics
                click.echo(str(outcome))
                applied = outcome.applied
                if applied is not None:
                    for line in applied.lines():
                        click.echo(f"apply: {line}")
                    for failure in applied.failed:  # named even with --quiet: the next pass retries it
                        click.echo(f"jobtree: {failure}; the next pass retries", err=True)
                    if applied.failed and every is None:
                        sys.exit(exitcodes.OTHER)
                if ahead and outcome.pushed:
                    click.echo(
                        f"jobtree: --now {now_text} is ahead of this machine's clock: pushed, it moved the "
                        "shared fleet's time forward, and passes on the clock plan as of it (time-driven "
                        "events wait) until the clock catches up",
                        err=True,
                    )
                if (
                    outcome.diagnostics and every is None
                ):  # invalid fleet files exit 3 (§5), though the rest went on
                    sys.exit(exitcodes.INVALID)
            except errors.GitStoreError as err:
                _notes(err)
                click.echo(f"jobtree: {err}", err=True)
                if every is None:
                    sys.exit(exitcodes.OTHER)
                outcome = Outcome()
            except FleetInvalid as err:
                _notes(err)
                if err.diagnostics != shown:
                    for line in problem_lines(err.diagnostics)[:-1]:  # not "the valid ones were reconciled"
                        click.echo(line, err=True)
                    shown = err.diagnostics
                click.echo(f"jobtree: {err}", err=True)
                if every is None:
                    sys.exit(exitcodes.INVALID)
                outcome = Outcome()
            except pipeline.InvariantViolation as err:
                _notes(err)
                click.echo(f"jobtree: {err}", err=True)
                sys.exit(exitcodes.OTHER)
            signum = signals.stopped()
            if signum is not None:  # a signal Python could not raise where it arrived: stop here
                sys.exit(128 + signum)
            if every is None:
                return
            wake = time.time() + every
            if outcome.next_due is not None:
                wake = min(wake, outcome.next_due)
            if not quiet:
                click.echo(f"next pass at {format_time(int(wake))}", err=True)
            time.sleep(max(0.0, wake - time.time()))
    finally:  # the watch threads end with the loop (a signal, an error)
        if kept.watches is not None:
            kept.watches.close()


def problem_lines(diagnostics: list[Diagnostic], limit: int = DIAGNOSTICS_SHOWN) -> list[str]:
    """The spec problems of a pass as `jobtree validate` prints them (`path:line:col: CODE message`),
    at most `limit` of them, then how many more there are and a summary."""
    lines = [str(d) for d in diagnostics[:limit]]
    if len(diagnostics) > limit:
        lines.append(f"... and {len(diagnostics) - limit} more (run `jobtree validate`)")
    if diagnostics:
        n = len(diagnostics)
        lines.append(
            f"jobtree: {n} problem{'s' * (n != 1)} in the fleet files; the objects concerned were "
            "left out of this pass, the valid ones were reconciled"
        )
    return lines


def progress() -> Callable[[str], None]:
    """Progress lines on stderr, each with the seconds since the pass began."""
    start = time.monotonic()

    def say(text: str) -> None:
        click.echo(f"[{time.monotonic() - start:6.2f}s] {text}", err=True)

    return say


def _notes(err: BaseException) -> None:
    """What a failed pass had to say before it failed (its warnings, carried as notes on the error)."""
    for note in getattr(err, "__notes__", ()):
        click.echo(note, err=True)
