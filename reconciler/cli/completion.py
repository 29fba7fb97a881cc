"""`jobtree completion bash|zsh|fish`: the shell completion script, and `kubectl_complete-runs` for kubectl.

Completion itself is click's: the script calls `jobtree` (or `kubectl-runs`) back with
`_JOBTREE_COMPLETE` (`_KUBECTL_RUNS_COMPLETE`) set, and a RUN argument completes with the run names
of the fleet the command line points at (`--repo`, `JOBTREE_REPO`, the working directory).
`kubectl runs <TAB>` goes through kubectl (1.26 or later), which runs the executable
`kubectl_complete-runs` with the words typed so far and reads one completion a line, then
`:<directive>` (cobra's protocol; 4: do not fall back to file names).
"""

from __future__ import annotations

import importlib
import os
import sys

import click
from click.shell_completion import ShellComplete, get_completion_class

SHELLS = ("bash", "zsh", "fish")
NO_FILE_COMPLETION = 4  # cobra's ShellCompDirectiveNoFileComp


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.option(
    "--kubectl-runs", "plugin", is_flag=True,
    help="The script for the kubectl-runs executable (for `kubectl runs`, kubectl itself calls kubectl_complete-runs).",
)  # fmt: skip
def command(shell: str, plugin: bool) -> None:
    """Print the completion script for SHELL: verbs, options and run names.

    \b
    bash:  eval "$(jobtree completion bash)"        (in ~/.bashrc)
    zsh:   eval "$(jobtree completion zsh)"         (in ~/.zshrc)
    fish:  jobtree completion fish > ~/.config/fish/completions/jobtree.fish"""
    from reconciler.cli import VERBS, main

    cli = importlib.import_module(VERBS["runs"]).command if plugin else main
    prog = "kubectl-runs" if plugin else "jobtree"
    var = f"_{prog.replace('-', '_').upper()}_COMPLETE"
    complete = get_completion_class(shell)
    assert complete is not None
    click.echo(complete(cli, {}, prog, var).source(), nl=False)


def kubectl_complete() -> None:
    """The `kubectl_complete-runs` console script: kubectl passes the words after `kubectl runs`,
    the last one being the word to complete (empty for a new word)."""
    from reconciler.cli import VERBS

    words = sys.argv[1:] or [""]
    runs = importlib.import_module(VERBS["runs"]).command
    try:
        found = ShellComplete(runs, {}, "kubectl runs", "_KUBECTL_RUNS_COMPLETE").get_completions(
            words[:-1], words[-1]
        )
    except Exception:  # noqa: BLE001 - a completion must never print a traceback into the shell
        found = []
    for item in found:
        help_text = f"\t{item.help.splitlines()[0]}" if item.help else ""
        sys.stdout.write(f"{item.value}{help_text}\n")
    sys.stdout.write(f":{NO_FILE_COMPLETION}\n")
    sys.stdout.flush()
    os._exit(0)
