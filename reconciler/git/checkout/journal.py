"""Checkout journal (around steps 1 and 6 of a pass): which work-tree paths a ref move is writing, so a killed writer's half-written files are put back.

Before jobtree writes any work-tree file for a ref move (`checkout.files.Writer`, or libgit2's checkout
for links and filtered files), `begin` records in `<gitdir>/jobtree/checkout-journal` the checked-out
branch, the trees moved from and to (trees, not commits: a pass writes the files of a commit that
does not exist yet) and every path about to be written with its old and new blob ids. It is written
under a temporary name, fsynced and renamed into place, so it is whole or absent. `end` removes it
once the files, the index and the branch agree again. A journal still there means a writer died (or
failed) in between, and `recover` settles it before anything else writes the work tree:

- every listed path whose file or index entry is not what the branch head holds is brought back to
  the head: a file holding its old content, its new content, neither (cut short: jobtree was
  writing it when it died, e.g. a 0-byte spec file brought by a fetched commit), or missing. The
  head is the old tree when the writer died before the branch moved (the move is undone, and the
  pass redoes it), the new one when after (the move is finished);
- a person's edit to a listed path made after the kill cannot be told from a half-written file and
  is replaced too: that path was jobtree's to write at that moment. Paths not listed are never
  looked at, so a person's edits anywhere else are kept exactly;
- a journal whose branch is no longer checked out, or whose head is neither tree (a person moved
  the branch since), is dropped without touching a file: that checkout decided the files.

Decides no move (`worktree`) and never touches a ref.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import pygit2
from pygit2.enums import CheckoutStrategy, FileMode, ReferenceType

from reconciler import atomicfile
from reconciler.git import read as gitread
from reconciler.git.checkout import files as workfiles

JOURNAL = os.path.join("jobtree", "checkout-journal")
Entry = workfiles.Entry


def path_of(gitdir: str) -> str:
    return os.path.join(gitdir, JOURNAL)


def begin(
    gitdir: str,
    branch: str,
    old: bytes | None,
    new: bytes,
    todo: Mapping[str, tuple[Entry | None, Entry | None]],
) -> None:
    """Durably record that the paths of `todo` are about to be written for a move of `branch` from
    tree `old` (raw id, None: nothing) to tree `new`.

    The file: one JSON line `{"branch", "from", "to"}`, then per path `<old id> <new id> <path>`
    (`-` for no blob), each ended by a NUL (the one byte no Git path holds).
    """
    head = {"branch": branch, "from": old.hex() if old is not None else None, "to": new.hex()}
    rows = [f"{_hex(a)} {_hex(b)} {path}\0" for path, (a, b) in todo.items()]
    data = (json.dumps(head) + "\n" + "".join(rows)).encode()
    where = path_of(gitdir)
    os.makedirs(os.path.dirname(where), exist_ok=True)
    atomicfile.write(where, data, prefix=os.path.basename(where) + ".", suffix=".tmp", durable=True)


def end(gitdir: str) -> None:
    """The move is complete (files, index and branch agree): forget the journal."""
    try:
        os.unlink(path_of(gitdir))
    except FileNotFoundError:
        pass


def _drop_partial(where: str) -> None:
    """Remove journals a killed writer had not renamed into place yet (`<journal>.<random>.tmp`): it
    wrote no work-tree file before the rename, and under the writer lock no one else is writing."""
    directory, name = os.path.split(where)
    try:
        leftovers = [f for f in os.listdir(directory) if f.startswith(f"{name}.") and f.endswith(".tmp")]
    except FileNotFoundError:
        return
    for leftover in leftovers:
        try:
            os.unlink(os.path.join(directory, leftover))
        except FileNotFoundError:
            pass


def recover(repo: pygit2.Repository) -> list[str]:
    """Settle a journal a killed writer left (see the module docstring); the paths put back, sorted.

    Call with the writer lock held and no move of this process under way.
    """
    where = path_of(repo.path)
    _drop_partial(where)
    try:
        with open(where, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return []
    try:
        first, _, rest = data.partition(b"\n")
        record = json.loads(first)
        branch, old, new = str(record["branch"]), record["from"], str(record["to"])
        paths = [row.split(" ", 2)[2] for row in rest.decode().split("\0")[:-1]]
    except (ValueError, KeyError, TypeError, IndexError):  # renamed into place whole: not ours to read
        end(repo.path)
        return []
    head = repo.references.get("HEAD")
    if repo.is_bare or head is None or head.type != ReferenceType.SYMBOLIC or head.target != branch:
        end(repo.path)
        return []
    ref = repo.references.get(branch)
    tree = repo[ref.target].peel(pygit2.Tree) if ref is not None else None
    if (str(tree.id) if tree is not None else None) not in (old, new):
        end(repo.path)
        return []
    workdir = os.path.join(repo.workdir, "")
    index = repo.index
    index.read(False)
    racy_from = workfiles.index_time(repo)
    want = {path: _entry(tree, path) for path in paths}
    want = {path: entry for path, entry in want.items() if entry is None or entry[1] != FileMode.COMMIT}
    stale = sorted(path for path, entry in want.items() if not _holds(workdir, index, path, entry, racy_from))
    gone = [path for path in stale if want[path] is None]
    back = [path for path in stale if want[path] is not None]
    if gone:
        for path in reversed(gone):  # deepest first, so emptied directories go too
            if not os.path.isdir(workdir + path) or os.path.islink(workdir + path):
                workfiles.remove(workdir, path)
            if path in index:
                index.remove(path)
        index.write()
    if back:
        assert tree is not None
        repo.checkout_tree(
            tree, strategy=CheckoutStrategy.FORCE | CheckoutStrategy.DISABLE_PATHSPEC_MATCH, paths=back
        )
        index.read()
        for path in back:
            index.add(path)
        index.write()
    end(repo.path)
    return stale


def _holds(workdir: str, index: pygit2.Index, path: str, want: Entry | None, racy_from: int) -> bool:
    """Whether the file and the index entry at `path` are the head's (`want`; None: no file)."""
    if not workfiles.safe(workdir, index, path, (want, want), racy_from):
        return False
    if want is None:
        return True
    executable = bool(os.lstat(workdir + path).st_mode & 0o100)
    return executable == (want[1] == FileMode.BLOB_EXECUTABLE)


def _entry(tree: pygit2.Tree | None, path: str) -> Entry | None:
    """The head's entry at `path`; None when it has no file there (nothing, or a directory).

    A submodule's entry is returned as it is, and the caller leaves that path alone.
    """
    found = gitread.entry_at(tree, path)
    return None if found is None or found[1] == FileMode.TREE else found


def _hex(entry: Entry | None) -> str:
    return entry[0].raw.hex() if entry is not None else "-"
