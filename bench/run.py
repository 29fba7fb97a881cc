"""`make bench`: time `jobtree simulate`, `jobtree reconcile` and `jobtree apply` on generated fleets.

Measures commands as subprocesses (wall time, and peak RSS from a fresh wrapper process per
measurement); it never imports the planner. A verb that does not exist yet is reported as
`not available`, never as a failure: the harness always exits 0 once the fleet is generated.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bench import agent as bench_agent
from bench import apply as bench_apply
from bench import cluster10k as bench_10k
from bench import generate
from bench.gitdaemon import git_daemon

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
README = Path(__file__).resolve().parent / "README.md"
TABLE_START, TABLE_END = "<!-- bench:table:start -->", "<!-- bench:table:end -->"
TABLE_10K = ("<!-- bench:10k:start -->", "<!-- bench:10k:end -->")  # `--nodes-10k`'s own table
NOW = generate.START
WARM_NOW = "2026-03-02T09:05:00Z"
FRESH_NOW = "2026-03-02T09:10:00Z"
LIMIT = {"timeout": 300}  # seconds per measured command (--timeout); slower is reported as timed out
REPEAT = {"times": 3}  # measurements per row (--repeat): the row shows the median and the range

# One fresh process per measurement, so RUSAGE_CHILDREN sees only the measured command. Its stderr
# lines are read as they come, each kept with its arrival time and the largest resident set
# (VmRSS, sampled every 20 ms) the command's own process had since the line before: what each
# stage of a pass held in memory. (Forked workers share its pages and are not added; the Peak RSS
# column is the largest of any one process, `ru_maxrss`.)
_WRAPPER = """
import json, resource, subprocess, sys, threading, time
cmd, out, cwd, timeout = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
start = time.perf_counter()
peak, lines = [0], []
def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
with open(out, "wb") as sink:
    proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.PIPE, cwd=cwd)
    def sample():
        while proc.poll() is None:
            peak[0] = max(peak[0], rss(proc.pid))
            time.sleep(0.02)
    def read():
        for raw in proc.stderr:
            now = rss(proc.pid)
            lines.append((time.perf_counter() - start, max(peak[0], now), raw.decode(errors="replace").rstrip()))
            peak[0] = now
    threads = [threading.Thread(target=work, daemon=True) for work in (sample, read)]
    for thread in threads:
        thread.start()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = None
    threads[1].join(10)
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
rss_kb, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
err = "\\n".join(text for _, _, text in lines)
print(json.dumps({"rc": rc, "wall": wall, "rss_kb": rss_kb, "cpu": cpu, "stderr": err[-4000:], "lines": lines}))
"""


@dataclass(slots=True)
class Measured:
    rc: int | None
    wall: float
    rss_mb: float
    stderr: str
    stdout_path: str
    cpu: float = 0.0  # user + system seconds of the command and its children
    lines: list[tuple[float, int, str]] = field(
        default_factory=list
    )  # stderr: (arrival s, peak kB before, text)

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def problem(self) -> str:
        if self.rc is None:
            return f"timed out after {LIMIT['timeout']}s"
        last = [line for line in self.stderr.strip().splitlines() if line.strip()]
        return f"failed (exit {self.rc}): {last[-1][:120] if last else 'no output'}"


@dataclass(slots=True)
class Row:
    name: str
    target: str
    wall: str = "-"
    rss: str = "-"
    throughput: str = "-"
    verdict: str = ""
    note: str = ""


def measure(cmd: list[str], stdout_path: str | None = None, cwd: Path = ROOT) -> Measured:
    sink = stdout_path or os.devnull
    wrapper = [sys.executable, "-c", _WRAPPER, json.dumps(cmd), sink, str(cwd), str(LIMIT["timeout"])]
    proc = subprocess.run(wrapper, capture_output=True, text=True, check=True)
    data = json.loads(proc.stdout)
    lines = [(float(at), int(kb), str(text)) for at, kb, text in data.get("lines", [])]
    return Measured(
        data["rc"], data["wall"], data["rss_kb"] / 1024, data["stderr"], sink, data.get("cpu", 0.0), lines
    )


def middle(samples: list[T], seconds: Callable[[T], float]) -> tuple[T, str]:
    """The median sample by `seconds` (the lower middle of an even count) and the range of all of
    them, as ` (4.31–4.60)`, or "" for a single sample."""
    ranked = sorted(samples, key=seconds)
    spread = f" ({seconds(ranked[0]):.2f}–{seconds(ranked[-1]):.2f})" if len(ranked) > 1 else ""
    return ranked[(len(ranked) - 1) // 2], spread


def measure_median(cmd: list[str], stdout_path: str | None = None) -> tuple[Measured, str]:
    """`measure` REPEAT times; the median and the range (the first failure instead, if one fails)."""
    samples = []
    for _ in range(REPEAT["times"]):
        m = measure(cmd, stdout_path)
        if not m.ok:
            return m, ""
        samples.append(m)
    return middle(samples, lambda m: m.wall)


def jobtree_bin() -> str:
    local = Path(sys.executable).parent / "jobtree"
    return str(local) if local.exists() else (shutil.which("jobtree") or "jobtree")


def verbs(jobtree: str) -> set[str]:
    """The verbs `jobtree --help` lists (an empty set when the CLI itself is missing)."""
    try:
        out = subprocess.run([jobtree, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    section = out.split("Commands:", 1)[1] if "Commands:" in out else ""
    return {line.split()[0] for line in section.splitlines() if line.strip()}


def ensure_generated(out: Path, seed: int, scale: float, force: bool) -> generate.Fleet:
    stamp = out / ".params.json"
    params = {"seed": seed, "scale": scale}
    have = (
        out / generate.SCENARIO_FILE,
        out / generate.CONTENDED_FILE,
        out / generate.REPO_DIR / "jobtree.yaml",
    )
    current = stamp.exists() and json.loads(stamp.read_text()) == params and all(p.exists() for p in have)
    if not current or force:
        started = time.perf_counter()
        fleet = generate.write(out, seed, scale, contended=True)
        stamp.write_text(json.dumps(params))
        print(f"generated {out} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        return fleet
    return generate.build(seed, scale)


def _verdict(wall: float, rss_mb: float | None, max_wall: float, max_rss_mb: float | None = None) -> str:
    ok = wall <= max_wall and (max_rss_mb is None or rss_mb is None or rss_mb <= max_rss_mb)
    return "meets target" if ok else "MISSES target"


def _summary(path: str) -> str:
    """A few counts from a simulate JSON output, so the row says what the pass actually did."""
    try:
        with open(path, "rb") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return ""
    final = data.get("final") or {}
    phases: dict[str, int] = {}
    conflicted = 0
    for status in (final.get("runs") or {}).values():
        phase = (status or {}).get("phase", "?")
        phases[phase] = phases.get(phase, 0) + 1
        conflicted += bool((status or {}).get("conflicts"))
    ledger = data.get("ledger") or []
    cuts = sum(
        1
        for e in ledger
        if e.get("event") == "End"
        and str(e.get("reason", "")).startswith(("RandomPreempt", "ReclaimUnfunded", "Shrink", "DropSpare"))
    )
    parts = [", ".join(f"{k} {v}" for k, v in sorted(phases.items()))]
    parts.append(f"{len(final.get('reservations') or {})} reservations, {conflicted} runs in conflict sets")
    parts.append(f"{len(final.get('leases') or [])} open leases, {cuts} leases cut by the resolver")
    return "; ".join(p for p in parts if p)


def simulate_row(
    name: str,
    jobtree: str,
    scenario: Path,
    fleet: generate.Fleet,
    max_wall: float | None,
    max_rss: float | None,
    available: bool,
    details: bool = False,
    no_target: str = "- (5 s per pass: see below)",
) -> Row:
    """`max_wall` None: no target for the whole command (`no_target` says why: the contended one is
    judged per pass)."""
    if max_wall is None:
        target = no_target
    else:
        target = f"<= {max_wall:g} s" + (f", <= {max_rss / 1024:g} GB" if max_rss else "")
    row = Row(name, target)
    if not available:
        row.verdict = "not available (`jobtree simulate` not built yet)"
        return row
    m, spread = measure_median([jobtree, "simulate", str(scenario), "--format", "json"])
    if not m.ok:
        row.verdict = m.problem()
        return row
    row.wall, row.rss = f"{m.wall:.2f} s{spread}", f"{m.rss_mb:.0f} MB"
    row.throughput = f"{fleet.gpus / m.wall:,.0f} GPUs/s, {len(fleet.runs) / m.wall:,.0f} runs/s"
    row.verdict = _verdict(m.wall, m.rss_mb, max_wall, max_rss) if max_wall is not None else "measured"
    if not details:
        return row
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        detail = fh.name
    try:  # an untimed second run, only to describe what the pass did
        again = measure([jobtree, "simulate", str(scenario), "--format", "json"], stdout_path=detail)
        row.note = _summary(detail) if again.ok else ""
    finally:
        os.unlink(detail)
    return row


def pass_row(name: str, scenario: Path, max_wall: float | None) -> Row:
    """The slowest single reconcile pass of a scenario (`python -m bench.passes`), load excluded;
    `max_wall` None: measured, no target."""
    row = Row(name, f"<= {max_wall:g} s per pass" if max_wall is not None else "-")
    runs = []  # (slowest pass seconds, its measurement, its passes), one per repetition
    for _ in range(REPEAT["times"]):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
            out = fh.name
        try:
            m = measure([sys.executable, "-m", "bench.passes", str(scenario)], stdout_path=out)
            if not m.ok:
                row.verdict = m.problem()
                return row
            passes = json.loads(Path(out).read_text())["passes"]
        finally:
            os.unlink(out)
        runs.append((max(p["seconds"] for p in passes), m, passes))
    (_, m, passes), spread = middle(runs, lambda r: r[0])
    slowest = max(passes, key=lambda p: p["seconds"])
    row.wall, row.rss = f"{slowest['seconds']:.2f} s{spread}", f"{m.rss_mb:.0f} MB"
    row.throughput = ", ".join(f"{p['at'][11:16]} {p['seconds']:.1f} s" for p in passes)
    row.verdict = _verdict(slowest["seconds"], None, max_wall) if max_wall is not None else "measured"
    changed = [p for p in passes if any((p.get("again") or {}).values())]
    fixed = (
        "a second pass at each instant changed nothing (fixed point)"
        if not changed
        else "a second pass changed something at "
        + ", ".join(f"{p['at'][11:16]} {p['again']}" for p in changed)
    )
    row.note = (
        f"{len(passes)} passes; up to {max(p['pendingReservations'] for p in passes):,} pending reservations;"
        f" {fixed}"
    )
    return row


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@localhost",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@localhost",
    }
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _commit_time(text: str) -> str:
    """The commit duration if the reconcile printed one (e.g. `commit 0.42s`, `committed in 310 ms`)."""
    lines = [line for line in text.splitlines() if "commit" in line.lower()]
    # `committed <sha> in 2.55 s` first; a bare duration on a line naming commits only as a fallback
    for pattern in (r"\bcommitted \S+ in (\d+(?:\.\d+)?)\s*(ms|s)\b", r"(\d+(?:\.\d+)?)\s*(ms|s)\b"):
        for line in lines:
            m = re.search(pattern, line)
            if m:
                value = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
                return f"{value:.2f} s"
    return ""


_STAMP = re.compile(r"^\[\s*(\d+\.\d+)s\] (.*)$")
# A reconcile's stages, by the progress line that ends each (its stamp: seconds since the pass began)
_ENDS = (("read spec", "read ", "spec files"), ("state", "read state", ""), ("plan", "planned", ""),
         ("render", "rendered", ""))  # fmt: skip


@dataclass(slots=True)
class Stage:
    name: str
    seconds: float
    rss_mb: float  # the largest resident set of the command's process during the stage (0: not sampled)


def stages(m: Measured) -> list[Stage]:
    """Where a reconcile's time and memory went, from its progress lines: read spec, state, plan,
    render, commit, push, and the work-tree writes that outlast the push."""
    out: list[Stage] = []
    last = 0.0
    peak = 0  # kB since the last stage ended
    for _, kb, line in m.lines:
        peak = max(peak, kb)
        found = _STAMP.match(line.strip())
        if not found:
            continue
        when, what = float(found.group(1)), found.group(2)
        for name, start, also in _ENDS:
            if what.startswith(start) and also in what and not any(s.name == name for s in out):
                out.append(Stage(name, when - last, peak / 1024))
                last, peak = when, 0
        took = re.search(r" in (\d+\.\d+) s", what)
        if took and what.startswith(("committed", "push to")):
            out.append(
                Stage("commit" if what.startswith("committed") else "push", float(took.group(1)), peak / 1024)
            )
            last, peak = when, 0
        waited = re.search(r"\((\d+\.\d+) s waited\)", what)
        if waited and float(waited.group(1)) > 0:
            out.append(Stage("work tree", float(waited.group(1)), peak / 1024))
    return out


def _stages(m: Measured) -> str:
    """`stages` as one line for the Result column: `read spec 0.5 s (210 MB), state ...`."""
    return ", ".join(
        f"{s.name} {s.seconds:.1f} s" + (f" ({s.rss_mb:,.0f} MB)" if s.rss_mb else "") for s in stages(m)
    )


def _git_round(
    tmp: Path, jobtree: str, repo_src: Path, fleet: generate.Fleet, push: list[str]
) -> dict[str, tuple[Measured, str]]:
    """One round in `tmp`: cold, warm and fresh-clone reconciles and the pull-request plan; per row its
    measurement and its output (stdout and stderr). Stops after a measurement that failed.

    The remote is what production has: a network remote, here `git daemon` on 127.0.0.1 serving a
    bare repository (receive-pack enabled), so every fetch and push goes over the Git protocol."""
    out: dict[str, tuple[Measured, str]] = {}
    bare, repo = tmp / "remote.git", tmp / "fleet"
    tmp.mkdir()
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    with git_daemon(tmp) as base_url:
        url = f"{base_url}/remote.git"
        shutil.copytree(repo_src, repo)
        _git(repo, "init", "-q", "-b", "main")
        _git(repo, "add", ".")
        _git(repo, "commit", "-q", "-m", "fleet: 100k GPUs")
        _git(repo, "remote", "add", "origin", url)
        _git(repo, "push", "-q", "-u", "origin", "main")
        return _git_passes(tmp, jobtree, repo, url, fleet, push, out)


def _git_passes(
    tmp: Path, jobtree: str, repo: Path, url: str, fleet: generate.Fleet, push: list[str],
    out: dict[str, tuple[Measured, str]],
) -> dict[str, tuple[Measured, str]]:  # fmt: skip
    """The measured commands of `_git_round`, against the remote at `url`."""
    for key, now in (("cold", NOW), ("warm", WARM_NOW), ("fresh", FRESH_NOW)):
        where = repo
        if key == "warm":
            ns = next(t.namespace for t in fleet.teams if t.level == 3)
            run = {
                "apiVersion": generate.API,
                "kind": "Run",
                "metadata": {"name": "bench-warm", "namespace": ns},
                "spec": {
                    "owner": next(t.owner for t in fleet.teams if t.namespace == ns),
                    "resources": {"gpuType": generate.FLAVOR, "totalGPUs": 8},
                },
            }
            (repo / "runs" / ns / "bench-warm.yaml").write_text(generate.dump(run))
            _git(repo, "add", "runs")
            _git(repo, "commit", "-q", "-m", "runs: add bench-warm")
        if key == "fresh":  # a new clone of the reconciled fleet: no cache, as on a CI runner
            where = tmp / "fresh"
            subprocess.run(["git", "clone", "-q", url, str(where)], check=True, capture_output=True)
        with tempfile.NamedTemporaryFile(suffix=".out", delete=False) as fh:
            out_path = fh.name
        m = measure([jobtree, "reconcile", str(where), "--once", "--now", now, *push], stdout_path=out_path)
        out[key] = (m, Path(out_path).read_text(errors="replace") + "\n" + m.stderr)
        os.unlink(out_path)
        if not m.ok:
            return out
    # what a CI runner does for a pull request: a new clone (no cache), the change planned against
    # its base. main is: cold state commit, the bench-warm run, the warm state commit, ...
    where = tmp / "pr"
    subprocess.run(["git", "clone", "-q", url, str(where)], check=True, capture_output=True)
    base, head = _parent_and_commit(where, "runs: add bench-warm")
    m = measure([jobtree, "plan", str(where), "--base", base, "--head", head, "--now", WARM_NOW,
                 "--format", "markdown"])  # fmt: skip
    out["pr"] = (m, "")
    return out


def _median_round(
    rounds: list[dict[str, tuple[Measured, str]]], key: str
) -> tuple[Measured | None, str, str]:
    """(the median measurement of row `key` over the rounds, its output, the range of wall times);
    the first failure instead if one failed, None if an earlier row's failure left it unmeasured."""
    samples = [r[key] for r in rounds if key in r]
    failed = next((s for s in samples if not s[0].ok), None)
    if failed is not None:
        return failed[0], failed[1], ""
    if len(samples) < len(rounds):
        return None, "", ""
    (m, text), spread = middle(samples, lambda s: s[0].wall)
    return m, text, spread


@dataclass(frozen=True, slots=True)
class Size:
    """A fleet size the Git rows are measured at, with the issue's targets there (None: none)."""

    suffix: str  # added to each row's name ("" for the default 100k fleet)
    cold: float
    warm: float
    pr: float | None = None
    rss_mb: float | None = None


HUNDRED_K = Size("", cold=10.0, warm=1.0, pr=2.0)
MILLION = Size(" at 1M GPUs", cold=30.0, warm=3.0, rss_mb=4096.0)  # the suffix follows --scale (`gpus`)


def gpus(n: int) -> str:
    """1,000,000 -> "1M GPUs", 100,000 -> "100k GPUs"."""
    return f"{n / 1e6:g}M GPUs" if n >= 1_000_000 else f"{n / 1e3:g}k GPUs"


PROFILE: list[tuple[str, str, Measured]] = []  # (size, row, measurement): the stage table (`stage_table`)


def _target(seconds: float | None, rss_mb: float | None) -> str:
    if seconds is None:
        return "-"
    return f"<= {seconds:g} s" + (f", <= {rss_mb / 1024:g} GB" if rss_mb else "")


def git_rows(
    jobtree: str, repo_src: Path, fleet: generate.Fleet, available: bool, size: Size = HUNDRED_K
) -> list[Row]:
    cold = Row(f"reconcile, cold (Git){size.suffix}", _target(size.cold, size.rss_mb))
    warm = Row(f"reconcile, warm (+1 run){size.suffix}", _target(size.warm, size.rss_mb))
    fresh = Row(f"reconcile, fresh clone (no cache){size.suffix}", "-")
    commit = Row(f"state commit (from reconcile output){size.suffix}", "-")
    pr = Row(f"plan, pull request (+1 run, fresh clone){size.suffix}", _target(size.pr, None))
    rows = [cold, warm, fresh, commit, pr]
    if not available:
        for row in rows:
            row.verdict = "not available (`jobtree reconcile` not built yet)"
        return rows
    help_text = subprocess.run([jobtree, "reconcile", "--help"], capture_output=True, text=True).stdout
    push = ["--push"] if "--push" in help_text else []
    # every round's files are kept until all rounds are done: deleting a round's ~40,000 files just
    # before the next cold pass slows the creation of its work tree (see "Wall time" above)
    with tempfile.TemporaryDirectory(prefix="jobtree-bench-") as tmp:
        rounds = [
            _git_round(Path(tmp) / f"round-{i}", jobtree, repo_src, fleet, push)
            for i in range(REPEAT["times"])
        ]
    outputs = []
    for row, key in ((cold, "cold"), (warm, "warm"), (fresh, "fresh")):
        m, text, spread = _median_round(rounds, key)
        if m is None:
            row.verdict = "not measured: an earlier reconcile failed"
            continue
        if not m.ok:
            row.verdict = m.problem()
            continue
        PROFILE.append((gpus(fleet.gpus), key, m))
        if row is not fresh:
            outputs.append(text)
        row.wall, row.rss = f"{m.wall:.2f} s{spread}", f"{m.rss_mb:.0f} MB"
        split = f"CPU {m.cpu:.1f} s (user + system); " + _stages(m)
        if row is fresh:
            row.verdict = "measured (no target)"
            row.note = "state decoded and every file written again: " + split
            continue
        row.verdict = _verdict(m.wall, m.rss_mb, size.cold if row is cold else size.warm, size.rss_mb)
        row.note = ("with --push to git daemon on 127.0.0.1: " if push else "no --push flag yet: ") + split
    found = [t for t in (_commit_time(o) for o in outputs) if t]
    commit.wall = " / ".join(found) if found else "-"
    commit.verdict = "cold / warm (the median rounds')" if found else "not reported by `jobtree reconcile`"
    m, _, spread = _median_round(rounds, "pr")
    if m is None:
        pr.verdict = "not measured: a reconcile before it failed"
    elif not m.ok:
        pr.verdict = m.problem()
    else:
        pr.wall, pr.rss = f"{m.wall:.2f} s{spread}", f"{m.rss_mb:.0f} MB"
        pr.verdict = _verdict(m.wall, None, size.pr) if size.pr is not None else "measured (no target)"
        pr.note = (
            f"CPU {m.cpu:.1f} s (user + system): both specs read, the base state decoded, both planned "
            "(Markdown to /dev/null)"
        )
    return rows


def _started(m: Measured) -> float:
    """Seconds from the command's start to its pass's start (Python start-up, imports, the lock):
    a progress line's arrival less its own stamp."""
    for at, _, line in m.lines:
        found = _STAMP.match(line.strip())
        if found:
            return max(0.0, at - float(found.group(1)))
    return 0.0


def stage_table(profile: list[tuple[str, str, Measured]]) -> str:
    """Where each reconcile's time and memory went, one row per stage: seconds (the process's
    largest resident set during the stage) per measured pass. Python start-up and imports are the
    wall time before the first stage."""
    if not profile:
        return ""
    heads = [f"{size}, {key}" for size, key, _ in profile]
    split = [{s.name: s for s in stages(m)} for _, _, m in profile]
    names = [n for n in ("read spec", "state", "plan", "render", "commit", "push", "work tree")
             if any(n in d for d in split)]  # fmt: skip
    lines = ["| Stage | " + " | ".join(heads) + " |", "| --- |" + " --- |" * len(heads)]
    start = [_started(m) for _, _, m in profile]
    lines.append("| start-up, imports | " + " | ".join(f"{s:.1f} s" for s in start) + " |")
    for name in names:
        cells = [
            f"{d[name].seconds:.1f} s" + (f" ({d[name].rss_mb:,.0f} MB)" if d[name].rss_mb else "")
            if name in d else "-"
            for d in split
        ]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| whole command (peak RSS) | " + " | ".join(
        f"{m.wall:.1f} s ({m.rss_mb:,.0f} MB)" for _, _, m in profile) + " |")  # fmt: skip
    return "\n".join(lines)


def million_rows(args: argparse.Namespace, jobtree: str, have: set[str]) -> list[Row]:
    """The 1,000,000-GPU rows (10x the fleet: 2,500 domains, 2,000 teams, 50,000 runs), each measured
    once, with a longer time limit: one full simulate pass, the planner alone, and the Git rows."""
    out = args.out / "1m"
    fleet = ensure_generated(out, args.seed, args.scale * 10, args.regenerate)
    label = gpus(fleet.gpus)
    size = dataclasses.replace(MILLION, suffix=f" at {label}")
    times, limit = REPEAT["times"], LIMIT["timeout"]
    REPEAT["times"], LIMIT["timeout"] = 1, max(limit, 3600)
    try:
        rows = [
            simulate_row(f"simulate, one full pass at {label}", jobtree, out / generate.SCENARIO_FILE, fleet,
                         None, None, "simulate" in have, no_target="-"),
            pass_row(f"one pass alone (plan, no I/O) at {label}", out / generate.SCENARIO_FILE, None),
        ]  # fmt: skip
        if not args.skip_git:
            rows += git_rows(jobtree, out / generate.REPO_DIR, fleet, "reconcile" in have, size)
    finally:
        REPEAT["times"], LIMIT["timeout"] = times, limit
    return rows


def apply_rows(scale: float, seed: int, available: bool) -> list[Row]:
    """Apply to real control planes (`python -m bench.apply`: it runs them and times each jobtree
    command itself, counting requests in the servers' logs)."""
    if not available:
        return [Row("apply", "-", verdict="not available (`jobtree apply` not built yet)")]
    cmd = ["bench.apply", "--scale", f"{scale:g}", "--seed", str(seed), "--repeat", str(REPEAT["times"])]
    return _bench_rows("apply", cmd, bench_apply.rows)


def agent_rows(failures: int, available: bool) -> list[Row]:
    """The agent's swap against the same swap through Git (`python -m bench.agent`: it runs the API
    test server and `jobtree agent` as a subprocess, and times each swap by the server's clock)."""
    if not available:
        return [Row("agent swap", "-", verdict="not available (`jobtree agent` not built yet)")]
    return _bench_rows("agent swap", ["bench.agent", "--failures", str(failures)], bench_agent.rows)


def rows_10k(failures: int) -> list[Row]:
    """One control plane of 10,000 realistic GPU nodes (`python -m bench.cluster10k`: first apply,
    the unchanged pass), then the agent's rows on as many nodes, with and without fillers."""
    rows = _bench_rows("10k nodes", ["bench.cluster10k"], bench_10k.rows, limit=3600)
    agent = ["bench.agent", "--failures", str(failures), "--domains", "200", "--runs-per-domain", "1"]
    agent += ["--round-trips", "1", "--fillers", str(failures * 3 // 2)]  # a filler on enough spares
    return rows + _bench_rows("10k nodes: agent", agent, bench_agent.rows, limit=3600)


def _bench_rows(
    name: str,
    module_args: list[str],
    rows: Callable[[dict[str, Any]], list[dict[str, Any]]],
    limit: float | None = None,
) -> list[Row]:
    """The rows of a bench module run as `python -m MODULE ARGS` (its JSON on stdout); one row
    saying why when it fails or runs past its time (`limit`, default four commands' timeout), so
    the rows measured before it are kept."""
    limit = limit or LIMIT["timeout"] * 4
    try:
        done = subprocess.run([sys.executable, "-m", *module_args], cwd=ROOT, capture_output=True, text=True,
                              timeout=limit)  # fmt: skip
    except subprocess.TimeoutExpired:
        return [Row(name, "-", verdict=f"timed out after {limit:g} s")]
    if done.returncode != 0:
        last = [line for line in done.stderr.splitlines() if line.strip()][-1:] or ["no output"]
        return [Row(name, "-", verdict=f"failed (exit {done.returncode}): {last[0][:160]}")]
    return [Row(**fields) for fields in rows(json.loads(done.stdout))]


def _parent_and_commit(repo: Path, subject: str) -> tuple[str, str]:
    """(its parent, the commit) for the first-parent commit of `main` whose subject is `subject`."""
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--first-parent", "--format=%H %P%x09%s", "main"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for line in log.splitlines():
        ids, _, text = line.partition("\t")
        if text == subject:
            commit, parent = ids.split()[:2]
            return parent, commit
    raise RuntimeError(f"no commit {subject!r} on main in {repo}")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
        mem = f", {mem_kb / 1024 / 1024:.1f} GB RAM"
    except (OSError, StopIteration, ValueError):
        mem = ""
    return f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {cpu}{mem}, Python {platform.python_version()}, {platform.system()} {platform.release()}"


def table(rows: list[Row]) -> str:
    lines = [
        "| Measurement | Wall time | Peak RSS | Throughput | Target | Result |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        result = r.verdict + (f" — {r.note}" if r.note else "")
        lines.append(f"| {r.name} | {r.wall} | {r.rss} | {r.throughput} | {r.target} | {result} |")
    return "\n".join(lines)


def write_readme(text: str, markers: tuple[str, str] = (TABLE_START, TABLE_END)) -> None:
    """Put `text` between the README's `markers` (appended at its end when it has none)."""
    start, end = markers
    current = README.read_text() if README.exists() else f"# Benchmarks\n\n{start}\n{end}\n"
    if start not in current or end not in current:
        current += f"\n{start}\n{end}\n"
    head, rest = current.split(start, 1)
    _, tail = rest.split(end, 1)
    README.write_text(f"{head}{start}\n{text}\n{end}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--regenerate", action="store_true", help="generate even if the files exist")
    parser.add_argument("--write-readme", action="store_true", help="put the table into bench/README.md")
    parser.add_argument("--skip-git", action="store_true", help="skip the reconcile rows")
    parser.add_argument("--skip-apply", action="store_true", help="skip the apply rows")
    parser.add_argument("--skip-agent", action="store_true", help="skip the agent rows")
    parser.add_argument("--failures", type=int, default=200, help="node failures the agent rows time")
    parser.add_argument(
        "--apply-scale", type=float, default=0.1, help="fleet scale of the apply rows (0.1: 10,000 GPUs)"
    )
    parser.add_argument(
        "--details", action="store_true", help="rerun each simulate untimed and summarise its JSON"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=LIMIT["timeout"],
        help="seconds before a measured command counts as timed out",
    )
    parser.add_argument("--jobtree", help="the jobtree executable (default: the one beside this Python)")
    parser.add_argument(
        "--million",
        action="store_true",
        help="also the 1,000,000-GPU rows (10x --scale, in OUT/1m/; measured once each, --timeout 3600 s): "
        "about an hour on 2 CPUs",
    )
    parser.add_argument(
        "--nodes-10k",
        action="store_true",
        help="only the 10,000-node rows (one control plane of realistic GPU nodes; about 30 minutes)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=REPEAT["times"],
        help="measurements per row; the table shows the median and the range (default 3)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    LIMIT["timeout"] = int(args.timeout)
    REPEAT["times"] = args.repeat
    if args.nodes_10k:
        return main_10k(args.failures, args.write_readme)
    fleet = ensure_generated(args.out, args.seed, args.scale, args.regenerate)
    jobtree = args.jobtree or jobtree_bin()
    have = verbs(jobtree)
    print(
        f"fleet: {fleet.gpus:,} GPUs, {len(fleet.domains)} domains, {len(fleet.teams)} teams, {len(fleet.runs):,} runs, demand {generate.demand(fleet) / fleet.gpus:.2f}x supply",
        file=sys.stderr,
    )
    rows = [
        simulate_row(
            "simulate, one full pass",
            jobtree,
            args.out / generate.SCENARIO_FILE,
            fleet,
            5.0,
            1024.0,
            "simulate" in have,
            args.details,
        ),
        simulate_row(
            "simulate, contended (+20m surge, until +40m)",
            jobtree,
            args.out / generate.CONTENDED_FILE,
            fleet,
            None,
            None,
            "simulate" in have,
            args.details,
        ),
    ]
    rows += [
        pass_row("one pass alone (plan, no I/O)", args.out / generate.SCENARIO_FILE, 5.0),
        pass_row("contended, slowest pass", args.out / generate.CONTENDED_FILE, 5.0),
    ]
    if not args.skip_git:
        rows += git_rows(jobtree, args.out / generate.REPO_DIR, fleet, "reconcile" in have)
    if args.million:
        rows += million_rows(args, jobtree, have)
    if not args.skip_apply:
        rows += apply_rows(args.apply_scale, args.seed, "apply" in have)
    if not args.skip_agent:
        rows += agent_rows(args.failures, "agent" in have)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = f"; load average {os.getloadavg()[0]:.1f} at the end" if hasattr(os, "getloadavg") else ""
    text = (
        f"Measured {stamp} on {machine()}; fleet seed {args.seed}, scale {args.scale:g} "
        f"({fleet.gpus:,} GPUs, {len(fleet.runs):,} runs). Each row is the median of {args.repeat} "
        f"measurement{'s' if args.repeat > 1 else ''}"
        + (", with the fastest and slowest in brackets" if args.repeat > 1 else "")
        + f"{load}.\n\n{table(rows)}"
    )
    if PROFILE:
        text += "\n\nWhere each reconcile's time went, by stage (the process's peak RSS during it):\n\n"
        text += stage_table(PROFILE)
    print(text)
    if args.write_readme:
        write_readme(text)
    return 0


def main_10k(failures: int, readme: bool) -> int:
    """`--nodes-10k`: the 10,000-node rows, into their own table (with the load average, as the
    machine is shared)."""
    began, load = datetime.now(UTC), os.getloadavg()
    rows = rows_10k(failures)
    minutes = (datetime.now(UTC) - began).total_seconds() / 60
    after = os.getloadavg()
    text = (
        f"Measured {began.strftime('%Y-%m-%d %H:%M UTC')} on {machine()}, in {minutes:.0f} minutes; load average "
        f"(1, 5, 15 minutes) {', '.join(f'{x:.1f}' for x in load)} at the start and "
        f"{', '.join(f'{x:.1f}' for x in after)} at the end. One measurement per row.\n\n{table(rows)}"
    )
    print(text)
    if readme:
        write_readme(text, TABLE_10K)
    return 0


if __name__ == "__main__":
    sys.exit(main())
