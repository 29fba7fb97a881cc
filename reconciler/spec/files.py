"""Which files are spec, and their bytes (step 1 of a pass): the one lister, for a folder and for a commit.

Spec files are `jobtree.yaml`, `inventory/nodes.yaml` and the YAML files under `budgets/` and
`runs/` (`schemas.layout.spec_kind`); data files that may be misplaced spec are listed too, with
their first bytes only, for validation to name (`schemas.strays.candidate`). A spec file held as a
symbolic link is handed over as a `Symlink` (validation reports it, nothing is read through it),
and so is a spec folder held as one (`runs/<ns>` → a copy: `spec_folder`), which Git stores as a
link like any other. Hidden folders, `state/` and `rendered/` are never looked at. Reads only: no
checkout, no writes, no parsing (`parsed`), no validation (`validated`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from reconciler.git import read as gitread
from reconciler.git.errors import GitReadError
from schemas import layout, strays

FLEET_FILE, SPEC_FILES, SPEC_DIRS = layout.FLEET_FILE, layout.SPEC_FILES, layout.SPEC_DIRS
# Past this size a spec file is a mistake or an attack: only its first MAX_FILE_BYTES + 1 bytes are
# read, and validation reports the file as too large (its neighbours are still checked).
MAX_FILE_BYTES = layout.MAX_FILE_BYTES
_INVENTORY_DIR = layout.INVENTORY_FILE.split("/")[0]
Listing = gitread.Listing


def spec_folder(path: str) -> bool:
    """Whether `path` is a folder spec lives in: `budgets`, `runs`, `inventory` or `runs/<namespace>`."""
    top, _, rest = path.partition("/")
    return (not rest and top in (*SPEC_DIRS, _INVENTORY_DIR)) or (
        top == "runs" and bool(rest) and "/" not in rest
    )


@dataclass(frozen=True, slots=True)
class Listed:
    """The spec of one commit by blob id (path -> blob id, sorted by path)."""

    files: dict[str, str]  # the files validation reads
    links: dict[
        str, str
    ]  # spec paths (files or folders) that are symbolic links: the blob is the target's name
    stray: dict[str, str]  # files that may be misplaced spec (`strays.candidate`)
    trees: dict[str, Listing]  # the subtree listings used, by tree id (for the parse cache)


def list_commit(repo: gitread.Repository, tree: gitread.Tree, known: dict[str, Listing]) -> Listed:
    """The spec files below `tree` (a commit's root tree); subtrees in `known` are not walked again."""
    out: dict[str, tuple[str, bool]] = {}
    for name in SPEC_FILES:
        found = gitread.file_at(repo, tree, name)
        if found is not None:
            out[name] = found
    stray: dict[str, str] = {}
    seen: dict[str, Listing] = {}
    for top, rows in gitread.top_level(repo, tree, known, seen, layout.walked):
        for p, oid, link in rows:
            path = f"{top}/{p}" if p else top
            if top in SPEC_DIRS and layout.spec_kind(path):
                out[path] = (oid, link)
            elif link and spec_folder(path):
                out[path] = (oid, link)
            elif not link and strays.candidate(path):
                stray[path] = oid
    files = {path: oid for path, (oid, link) in sorted(out.items()) if not link}
    links = {path: oid for path, (oid, link) in sorted(out.items()) if link}
    return Listed(files, links, stray, seen)


def read_listed(repo: gitread.Repository, listed: Listed, files: bool = True) -> dict[str, bytes]:
    """The bytes validation reads of what `list_commit` listed: a link's target name (short, never
    read through), a stray's first bytes, and (with `files`) each spec file capped past the limit."""
    from schemas import load  # the models behind it: imported once a pass reads, not by a head start

    out: dict[str, bytes] = {
        path: load.Symlink(gitread.read_blob(repo, oid)[: layout.LINK_BYTES])
        for path, oid in listed.links.items()
    }
    out.update(
        (path, gitread.read_blob(repo, oid)[: strays.SNIFF_BYTES]) for path, oid in listed.stray.items()
    )
    if files:
        out.update(
            (path, gitread.read_blob(repo, oid)[: MAX_FILE_BYTES + 1]) for path, oid in listed.files.items()
        )
    return out


def read_tree(repo_path: str | os.PathLike[str], rev: str) -> dict[str, bytes]:
    """Spec files at `rev` (any revision Git understands), for the folder `repo_path` inside its repo."""
    repo, tree = gitread.folder_tree(repo_path, rev)
    if tree is None:
        return {}
    return dict(sorted(read_listed(repo, list_commit(repo, tree, {})).items()))


def read_worktree(path: str | os.PathLike[str]) -> dict[str, bytes]:
    """Spec files of a folder, keyed by POSIX path relative to it. A symbolic link to a spec file or
    folder is handed over as a `load.Symlink` (validation reports it), as in --rev; linked folders
    are not entered."""
    root = Path(path)
    if not root.is_dir():
        raise GitReadError(f"{root} is not a directory; pass the fleet repository's folder")
    if (root / "HEAD").is_file() and (root / "objects").is_dir() and not (root / FLEET_FILE).exists():
        raise GitReadError(
            f"{root} is a bare Git repository with no files to read; pass --rev (e.g. --rev main)"
        )
    from schemas import load  # as in `read_listed`

    out: dict[str, bytes] = {}
    ignored = gitread.ignored_by_git(root)
    for name in SPEC_FILES:
        file = root / name
        if file.is_symlink():
            out[name] = load.Symlink(os.fsencode(os.readlink(file)))
        elif file.is_file():
            out[name] = _read(file)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        linked = [d for d in dirnames if (here / d).is_symlink()]
        dirnames[:] = sorted(  # not a nested repository (a submodule): Git does not hold its files here
            d
            for d in dirnames
            if d not in linked and (here != root or layout.walked(d)) and not (here / d / ".git").exists()
        )
        for name in sorted([*filenames, *linked]):  # Git stores a link to a folder as a link too
            file = here / name
            rel = file.relative_to(root).as_posix()
            if rel.split("/", 1)[0] in SPEC_DIRS and name.endswith(layout.YAML_SUFFIXES):
                if file.is_symlink():  # reported, never read through
                    out[rel] = load.Symlink(os.fsencode(os.readlink(file)))
                elif file.is_file():
                    out[rel] = _read(file)
            elif file.is_symlink() and spec_folder(rel) and (here != root or layout.walked(name)):
                out[rel] = load.Symlink(os.fsencode(os.readlink(file)))
            elif strays.candidate(rel) and file.is_file() and not file.is_symlink() and not ignored(file):
                out[rel] = _read(file, strays.SNIFF_BYTES)
    return out


def _read(file: Path, cap: int = MAX_FILE_BYTES + 1) -> bytes:
    with file.open("rb") as f:
        return f.read(cap)


OBSERVED_DIR = "state/observed"  # state/observed/<cluster>.yaml: what a pass last observed of a cluster
RENDERED_DIR = "rendered"  # rendered/<cluster>/: what a pass applies to it


_REGULAR = (0o100644, 0o100755)  # Git's file modes of a plain file (not a link, not a submodule)


def observed_files(repo_path: str | os.PathLike[str], rev: str | None = None) -> dict[str, bytes]:
    """`state/observed/<cluster>.yaml` files (path -> bytes, each capped as a spec file is): for
    validate's warnings only (the GPU flavors the observed clusters have)."""
    out: dict[str, bytes] = {}
    if rev is None:
        folder = Path(repo_path) / OBSERVED_DIR
        for file in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
            if file.is_file() and not file.is_symlink():
                out[f"{OBSERVED_DIR}/{file.name}"] = _read(file)
        return out
    repo, tree = gitread.folder_tree(repo_path, rev)
    observed = gitread.subtree(repo, tree, OBSERVED_DIR.split("/")) if tree is not None else None
    for path, obj in gitread.walk(repo, observed) if observed is not None else ():
        if path.endswith(".yaml") and "/" not in path and obj.filemode in _REGULAR:
            out[f"{OBSERVED_DIR}/{path}"] = gitread.read_blob(repo, str(obj.id))[: MAX_FILE_BYTES + 1]
    return out


def _holds_a_file(folder: Path) -> bool:
    """Whether a folder of the work tree holds a file (Git keeps no empty folder)."""
    return any(path.is_file() for path in folder.rglob("*"))


def cluster_folders(repo_path: str | os.PathLike[str], rev: str | None = None) -> dict[str, str]:
    """The cluster names the owned folders hold, each with where (`rendered/<name>/` when it holds a
    file, else `state/observed/<name>.yaml`): for validate's JT081 only; nothing under them is read."""
    found: list[tuple[str, str]] = []
    if rev is None:
        root = Path(repo_path)
        for top, want_dir in ((RENDERED_DIR, True), (OBSERVED_DIR, False)):
            folder = root / top
            names = sorted(os.listdir(folder)) if folder.is_dir() else []
            found += [
                (n, top)
                for n in names
                if (folder / n).is_dir() == want_dir and (not want_dir or _holds_a_file(folder / n))
            ]
    else:
        repo, tree = gitread.folder_tree(repo_path, rev)
        for top, want_dir in ((RENDERED_DIR, True), (OBSERVED_DIR, False)):
            rows = gitread.entries(repo, tree, top.split("/")) if tree is not None else []
            found += [(n, top) for n, is_dir in rows if is_dir == want_dir]
    out: dict[str, str] = {}
    for name, top in found:
        if top == RENDERED_DIR:
            out.setdefault(name, f"{top}/{name}/")
        elif name.endswith(".yaml"):
            out.setdefault(name.removesuffix(".yaml"), f"{top}/{name}")
    return dict(sorted(out.items()))
