"""Shell completion: verbs, options, and the run names of the fleet the command line points at.

On the lottery example's fleet: runs a1, fill (team-a), b1 (team-b), c1, c2 (team-c).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import main
from reconciler.cli.completion import command as completion


def complete(shell: str, words: str, cword: int | str, repo: Path) -> list[str]:
    """What click answers the shell's completion call (fish gives the word itself as COMP_CWORD)."""
    env = {
        "_JOBTREE_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
        "JOBTREE_REPO": str(repo),
    }
    result = CliRunner().invoke(main, [], env=env, prog_name="jobtree")
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_bash_completes_run_names_and_namespace_slash_name(lottery: Path) -> None:
    assert complete("bash", "jobtree runs plan b", 3, lottery) == ["plain,b1"]
    assert complete("bash", "jobtree runs explain team-c/", 3, lottery) == [
        "plain,team-c/c1",
        "plain,team-c/c2",
    ]
    assert complete("bash", "jobtree runs leases -n team-a ", 5, lottery) == ["plain,a1", "plain,fill"]


def test_verbs_and_options_complete_too(lottery: Path) -> None:
    verbs = [line.split(",", 1)[1] for line in complete("bash", "jobtree runs ", 2, lottery)]
    assert verbs == [
        "budgets",
        "explain",
        "get",
        "grow",
        "leases",
        "plan",
        "shrink",
        "sponsors",
        "submit",
        "watch",
    ]
    assert "plain,--format" in complete("bash", "jobtree runs get --fo", 3, lottery)


@pytest.mark.parametrize(
    ("shell", "want"),
    [
        ("bash", "_JOBTREE_COMPLETE=bash_complete"),
        ("zsh", "#compdef jobtree"),
        ("fish", "complete --no-files --command jobtree"),
    ],
)
def test_completion_prints_each_shells_script(shell: str, want: str) -> None:
    shown = CliRunner().invoke(completion, [shell])
    assert shown.exit_code == 0 and want in shown.output
    plugin = CliRunner().invoke(completion, [shell, "--kubectl-runs"])
    assert "kubectl-runs" in plugin.output and "_KUBECTL_RUNS_COMPLETE" in plugin.output


def test_zsh_and_fish_complete_run_names(lottery: Path) -> None:
    assert complete("zsh", "jobtree runs watch c", 3, lottery) == ["plain", "c1", "_", "plain", "c2", "_"]
    assert complete("fish", "jobtree runs watch fi", "fi", lottery) == ["plain,fill"]


def test_kubectl_calls_kubectl_complete_runs_with_the_words_typed(lottery: Path) -> None:
    script = shutil.which("kubectl_complete-runs", path=str(Path(sys.executable).parent))
    assert script is not None

    def kubectl(*words: str) -> list[str]:
        out = subprocess.run([script, *words], capture_output=True, text=True, cwd=lottery, check=True)
        return out.stdout.splitlines()

    assert kubectl("plan", "b") == ["b1", ":4"]
    assert kubectl("submit", "--fi") == ["--file\tThe Run, YAML or JSON.", ":4"]
    assert kubectl("")[0].startswith("budgets\t") and kubectl("")[-1] == ":4"


def test_namespaces_owners_and_output_formats_complete_too(lottery: Path) -> None:
    assert complete("bash", "jobtree runs get -n team-", 4, lottery) == [
        "plain,team-a",
        "plain,team-b",
        "plain,team-c",
    ]
    assert complete("bash", "jobtree runs plan -n team-c c", 5, lottery) == ["plain,c1", "plain,c2"]
    assert complete("bash", "jobtree runs budgets usage --owner org:team-", 5, lottery) == [
        "plain,org:team-a",
        "plain,org:team-b",
        "plain,org:team-c",
    ]
    assert complete("bash", "jobtree runs get -o ", 4, lottery) == [
        "plain,text",
        "plain,wide",
        "plain,name",
        "plain,json",
        "plain,yaml",
    ]
