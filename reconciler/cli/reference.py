"""The command-line reference (`docs/cli.md`), generated from the click application itself.

`python -m reconciler.cli.reference > docs/cli.md` (`make docs`) writes it; a test fails when the
file is stale. Every verb of `jobtree`, then the researcher's verbs as `kubectl runs` spells them:
usage, help, options with their defaults. Reads the commands; runs none.
"""

from __future__ import annotations

import importlib
import inspect
import sys

import click

HEADER = """# Command-line reference

Generated from the click application by `make docs` (`python -m reconciler.cli.reference`); a test
fails when this file is stale. `jobtree runs VERB` and `kubectl runs VERB` are the same commands
(installed as the kubectl plugin `kubectl-runs`). The JSON every `--format json` prints is described
in [json.md](json.md); exit codes are 0 success, 1 changes (`plan --exit-code`), 2 usage (an unknown
run included), 3 invalid fleet files, 4 any other failure.
"""


def _options(ctx: click.Context, command: click.Command) -> list[str]:
    rows = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
        if record is None:
            continue
        names, text = (part.replace("|", "\\|") for part in record)
        rows.append(f"| `{names}` | {text} |")
    return ["| Option | Meaning |", "|---|---|", *rows] if rows else []


def _section(name: str, command: click.Command, parent: click.Context | None, depth: int) -> list[str]:
    ctx = click.Context(command, info_name=name, parent=parent)
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [
        f"{'#' * depth} `{ctx.command_path}`",
        "",
        "```",
        f"{ctx.command_path} {usage}".rstrip(),
        "```",
        "",
    ]
    for p in inspect.cleandoc(command.help or "").split("\n\n"):
        if p.startswith("\b"):  # click's mark for a paragraph kept as written
            lines += ["```", p.removeprefix("\b").strip("\n"), "```", ""]
        elif p.strip():
            lines += [" ".join(p.split()), ""]
    table = _options(ctx, command)
    if table:
        lines += [*table, ""]
    if isinstance(command, click.Group):
        for sub in command.list_commands(ctx):
            found = command.get_command(ctx, sub)
            if found is not None:
                lines += _section(sub, found, ctx, min(depth + 1, 4))
    return lines


def reference() -> str:
    from reconciler.cli import VERBS, main

    top = click.Context(main, info_name="jobtree")
    lines = [HEADER, "## `jobtree`", "", " ".join(inspect.cleandoc(main.help or "").split()), ""]
    for verb in main.list_commands(top):
        if verb == "runs":
            continue
        lines += _section(verb, main.get_command(top, verb) or main, top, 3)
    runs = importlib.import_module(VERBS["runs"]).command
    lines += ["## `kubectl runs` (also `jobtree runs`)", ""]
    lines += _section("kubectl runs", runs, None, 2)[6:]  # the group's heading is the one above
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
