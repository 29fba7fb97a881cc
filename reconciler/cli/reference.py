"""The command-line reference, generated from the click application itself: `docs/cli.md` and a page per verb.

`python -m reconciler.cli.reference docs` (`make docs`) writes `docs/cli.md` (every verb, a line
each, linked to its page) and `docs/verbs/<command>.md` for each verb: usage, help, options with
their defaults, and, for a researcher's verb, where its JSON is described; a verb page no command
has any more is removed. A test fails when a page is stale. Reads the commands; runs none.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import click

VERB_FOLDER = "verbs"
INDEX = "cli.md"
HEADER = """# Command-line reference

Generated from the click application by `make docs` (`python -m reconciler.cli.reference docs`); a
test fails when these pages are stale. `jobtree runs VERB` and `kubectl runs VERB` are the same
commands (installed as the kubectl plugin `kubectl-runs`; [krew manifest](../deploy/krew/runs.yaml)).
Every researcher's verb takes `-o text|wide|name|json|yaml` as kubectl does; the JSON is described in
[json.md](json.md). Exit codes, for every verb: 0 success, 1 changes (`plan --exit-code`), 2 usage
(an unknown run included), 3 invalid fleet files, 4 any other failure. Shell completion:
`jobtree completion bash|zsh|fish` ([page](verbs/jobtree-completion.md)).
"""
# the JSON document each researcher's verb prints, by the heading of its section in docs/json.md
DOCUMENTS = {
    "get": "`RunList` (`get`)",
    "plan": "`RunPlan` (`plan`)",
    "watch": "`RunWatch` (`watch`)",
    "leases": "`RunLeases` (`leases`)",
    "explain": "`RunExplain` (`explain`)",
    "budgets usage": "`BudgetUsage` (`budgets usage`)",
    "sponsors": "`Sponsors` (`sponsors`)",
    "submit": "`Proposal` (`submit`, `shrink`, `grow`)",
    "shrink": "`Proposal` (`submit`, `shrink`, `grow`)",
    "grow": "`Proposal` (`submit`, `shrink`, `grow`)",
}
OBJECTS = {"get": "Run", "leases": "Lease"}  # verbs whose `-o json|yaml` print the objects they list


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading (lower case; spaces to hyphens; other punctuation dropped)."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def _options(ctx: click.Context, command: click.Command) -> list[str]:
    rows = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
        if record is None:
            continue
        names, text = (part.replace("|", "\\|") for part in record)
        rows.append(f"| `{names}` | {text} |")
    return ["| Option | Meaning |", "|---|---|", *rows] if rows else []


def _help(command: click.Command) -> list[str]:
    lines: list[str] = []
    for p in inspect.cleandoc(command.help or "").split("\n\n"):
        if p.startswith("\b"):  # click's mark for a paragraph kept as written
            lines += ["```", p.removeprefix("\b").strip("\n"), "```", ""]
        elif p.strip():
            lines += [" ".join(p.split()), ""]
    return lines


def _page(ctx: click.Context, command: click.Command, researcher: str | None) -> str:
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"# `{ctx.command_path}`", "", "```", f"{ctx.command_path} {usage}".rstrip(), "```", ""]
    lines += _help(command)
    table = _options(ctx, command)
    if table:
        lines += [*table, ""]
    doc = DOCUMENTS.get(researcher or "")
    kind = OBJECTS.get(researcher or "")
    if doc is not None:
        said = (
            f"`--format json` (or `yaml`) prints the {doc.split(' ', 1)[0]} document described in "
            f"[json.md](../json.md#{_anchor(doc)}); `-o json` and `-o yaml` print the {kind} objects it "
            f"lists, as `kubectl get` prints objects (one {kind} when one was named, else a `List`)."
            if kind is not None
            else f"`-o json` and `--format json` (or `yaml`) print the {doc.split(' ', 1)[0]} document "
            f"described in [json.md](../json.md#{_anchor(doc)})."
        )
        lines += [said, ""]
    lines += [f"[All verbs](../{INDEX})", ""]
    return "\n".join(lines)


def _summary(command: click.Command) -> str:
    return " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split()).replace("|", "\\|")


def _walk(
    command: click.Command, name: str, parent: click.Context | None, researcher: str | None
) -> list[tuple[click.Context, click.Command, str | None]]:
    """Every command below `command` (itself when it is no group), with its context."""
    ctx = click.Context(command, info_name=name, parent=parent)
    if not isinstance(command, click.Group):
        return [(ctx, command, researcher)]
    out = []
    for sub in command.list_commands(ctx):
        found = command.get_command(ctx, sub)
        if found is not None:
            out += _walk(found, sub, ctx, f"{researcher} {sub}".strip() if researcher is not None else None)
    return out


def pages() -> dict[str, str]:
    """`{path under docs/: text}`: the index and one page per verb."""
    from reconciler.cli import VERBS, main

    top = click.Context(main, info_name="jobtree")
    verbs = [
        leaf
        for verb in main.list_commands(top)
        if verb != "runs"
        for leaf in _walk(main.get_command(top, verb) or main, verb, top, None)
    ]
    runs = importlib.import_module(VERBS["runs"]).command
    verbs += _walk(runs, "kubectl runs", None, "")
    out: dict[str, str] = {}
    index = [HEADER, "| Command | What it does |", "|---|---|"]
    for ctx, command, researcher in verbs:
        path = f"{VERB_FOLDER}/{ctx.command_path.replace(' ', '-')}.md"
        out[path] = _page(ctx, command, researcher)
        index.append(f"| [`{ctx.command_path}`]({path}) | {_summary(command)} |")
    index += ["", "## `kubectl runs` (also `jobtree runs`)", "", *_help(runs)]
    out[INDEX] = "\n".join(index).rstrip() + "\n"
    return out


def write(docs: Path) -> list[str]:
    """Write every page under `docs`, remove verb pages no command has; the paths changed."""
    wanted = pages()
    changed = []
    for path, text in wanted.items():
        target = docs / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            changed.append(path)
    for stale in sorted((docs / VERB_FOLDER).glob("*.md")):
        if f"{VERB_FOLDER}/{stale.name}" not in wanted:
            stale.unlink()
            changed.append(f"{VERB_FOLDER}/{stale.name}")
    return changed


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m reconciler.cli.reference DOCS_FOLDER")
    for done in write(Path(sys.argv[1])):
        print(f"wrote docs/{done}")
