"""`jobtree apply [REPO] [--cluster NAME] [--dry-run]`: apply the branch head alone to the configured clusters.

A thin shell over `reconciler.passes.apply`: checks the options, applies (or, with --dry-run,
lists what would be created, changed, replaced and pruned), prints one line per cluster, and exits
0 when every cluster was applied in full (or none is configured: nothing to apply, and it says
so), 2 on a wrong option, 3 when jobtree.yaml is invalid or does not name a cluster the head
renders pods for, 4 when a cluster could not be reached or not applied in full (each named on
stderr; so is a cluster whose running pods were held back from a mass prune: `--allow-mass-prune`).
"""

from __future__ import annotations

import sys

import click

from reconciler.cli import exitcodes, massprune


@click.command("apply")
@click.argument("repo", default=".", type=click.Path(file_okay=False))
@click.option("--cluster", "only", default=None, help="Apply to this cluster of jobtree.yaml only.")
@click.option("--dry-run", is_flag=True, help="Read and compare only: list what would change, send nothing.")
@click.option(
    "--branch", default=None, help="Branch whose head to apply (default: git.branch of jobtree.yaml)."
)
@massprune.options()
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
def command(
    repo: str, only: str | None, dry_run: bool, branch: str | None, allow_mass_prune: bool,
    prune_share: float | None, quiet: bool,
) -> None:  # fmt: skip
    """Apply what the branch head of REPO holds (the CRDs, tenant namespaces, mirrors and
    rendered/<cluster>/) to each cluster jobtree.yaml configures, and prune what this fleet put
    there that the head no longer holds. Nothing is planned and nothing is committed:
    `jobtree reconcile --apply` plans, commits, pushes, then applies."""
    from reconciler.cli.reconcile import progress
    from reconciler.git import errors
    from reconciler.git import read as gitread
    from reconciler.passes import apply as applying
    from reconciler.passes.reconcile import configured_branch

    try:
        git = gitread.open_repo(repo)
        rev = f"refs/heads/{branch or configured_branch(git)}"
        if git.references.get(rev) is None:
            raise click.UsageError(f"there is no branch {rev.removeprefix('refs/heads/')!r} in {repo}")
        say = (lambda _: None) if quiet else progress()
        share = applying.prune_limit(allow_mass_prune, prune_share)
        outcome = applying.apply_commit(git, rev, only=only, dry_run=dry_run, say=say, prune_share=share)
    except errors.NotARepository as err:
        raise click.UsageError(str(err)) from err
    except applying.NoCluster as err:  # nothing to apply is no failure, as `reconcile --apply` says too
        click.echo(f"jobtree: {err}", err=True)
        sys.exit(exitcodes.OK)
    except applying.UnknownCluster as err:
        raise click.UsageError(f"--cluster {only}: {err}") from None
    except applying.ApplyRefused as err:  # jobtree.yaml does not validate
        click.echo(f"jobtree: {err}", err=True)
        sys.exit(exitcodes.INVALID)
    except errors.GitStoreError as err:
        click.echo(f"jobtree: {err}", err=True)
        sys.exit(exitcodes.OTHER)
    for line in outcome.lines(detail=dry_run):
        click.echo(line)
    for failure in outcome.failed:
        click.echo(f"jobtree: {failure}", err=True)
    sys.exit(exitcodes.OTHER if outcome.failed else exitcodes.OK)
