"""Pass cache on disk (around steps 1-6 of a pass): plain data a later pass may reuse, in the Git dir.

`<gitdir>/jobtree/cache/<name>` holds marshal data behind a header naming the cache format and a
digest of the payload. Never in the work tree, never in a commit. Anything unexpected — a missing
or truncated file, another format or jobtree version, a digest mismatch, data marshal cannot read
— is a miss: the caller recomputes, so a cache can make a pass faster but never change what it
writes. marshal only builds plain data (it never runs code); the Git dir is trusted like its hooks.
"""

from __future__ import annotations

import hashlib
import marshal
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pygit2

from reconciler import atomicfile

_MAGIC = b"JTCACHE1"
_DIGEST = 32
# Modules whose code decides what cached data means: a change to any of them starts a new cache.
_FORMAT_MODULES = (
    "reconciler/passcache.py",
    "reconciler/passmemo.py",
    "reconciler/speccache.py",
    "reconciler/specprefetch.py",
    "reconciler/statefiles.py",
    "reconciler/yamlout.py",
    "schemas/yamldoc.py",
    "planner/world.py",
)


def directory(repo: pygit2.Repository) -> Path:
    return Path(repo.path) / "jobtree" / "cache"


@cache
def format_id() -> bytes:
    """A digest of the cache layout: Python's marshal version, PyYAML, and the code that reads the data."""
    digest = hashlib.blake2b(digest_size=_DIGEST)
    digest.update(f"{marshal.version} {sys.version_info[:2]} {_yaml_version()}".encode())
    root = Path(__file__).resolve().parents[1]
    for name in _FORMAT_MODULES:
        try:
            digest.update((root / name).read_bytes())
        except OSError:
            digest.update(f"missing {name}".encode())
    return digest.digest()


def _yaml_version() -> str:
    import yaml

    return str(getattr(yaml, "__version__", "?"))


def load(where: Path, name: str) -> Any | None:
    """The data last saved as `name` in `where` (a `directory`), or None when none can be trusted."""
    try:
        raw = (where / name).read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 2 * _DIGEST
    if len(raw) < head or not raw.startswith(_MAGIC):
        return None
    version = raw[len(_MAGIC) : len(_MAGIC) + _DIGEST]
    digest, payload = raw[len(_MAGIC) + _DIGEST : head], raw[head:]
    if version != format_id() or hashlib.blake2b(payload, digest_size=_DIGEST).digest() != digest:
        return None
    try:
        return marshal.loads(payload)
    except Exception:  # whatever the bytes are, a cache that cannot be read is a miss
        return None


def save(where: Path, name: str, data: Any) -> bool:
    """Store `data` as `name` in `where` atomically; False (and nothing stored) when it cannot be.

    Touches no repository object, so it may run in a background thread.
    """
    try:
        payload = marshal.dumps(data)
    except ValueError:
        return False
    try:
        where.mkdir(parents=True, exist_ok=True)
        header = _MAGIC + format_id() + hashlib.blake2b(payload, digest_size=_DIGEST).digest()
        atomicfile.write(str(where / name), header + payload, prefix=f".{name}.")
    except OSError:
        return False
    return True
