"""Pass cache on disk (around steps 1-6 of a pass): plain data a later pass may reuse, in the Git dir.

`<gitdir>/jobtree/cache/<name>` holds marshal data behind a header naming the cache format and a
digest of the payload. Never in the work tree, never in a commit. Anything unexpected — a missing
or truncated file, another format or jobtree version, a digest mismatch, data marshal cannot read
— is a miss: the caller recomputes, so a cache can make a pass faster but never change what it
writes. marshal only builds plain data (it never runs code); the Git dir is trusted like its hooks.

What it saves, measured on the 100k-GPU bench fleet (bench/README.md, a warm pass against a fresh
clone with no cache): the spec read in 0.3-0.6 s instead of 0.4-1.5 s parsing, the state in
0.0-0.1 s instead of 0.8-2.5 s decoding, and an unchanged file neither rendered nor hashed again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import marshal
import sys
from functools import cache
from pathlib import Path
from typing import Any

from reconciler import atomicfile

_MAGIC = b"JTCACHE1"
_DIGEST = 32
# The cache's format: bump it with any change to what a cached payload holds or means (the rows of
# `reconciler.spec.parsed`, the memo of `reconciler.state.memo` and the codec it reads, the documents
# of `reconciler.state.filedocs`). A changed format without a bump fails
# `tests/reconciler/perf/test_diskcache.py` (its golden digest of sample payloads), so a stale cache
# is never read as a new one.
FORMAT = 5


@cache
def format_id() -> bytes:
    """What a cache must have been written by to be read: jobtree's version and `FORMAT` (as black
    keys its cache on its version and mode), and what decides the payload's bytes besides jobtree's
    own code: Python's marshal and PyYAML."""
    key = f"jobtree {_version()} format {FORMAT} marshal {marshal.version} python {sys.version_info[:2]} "
    key += f"yaml {_yaml_version()}"
    return hashlib.blake2b(key.encode(), digest_size=_DIGEST).digest()


def _version() -> str:
    try:
        return importlib.metadata.version("jobtree")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


def _yaml_version() -> str:
    import yaml

    return str(getattr(yaml, "__version__", "?"))


def load(where: Path, name: str) -> Any | None:
    """The data last saved as `name` in `where` (`reconciler.git.read.cache_directory`), or None when
    none can be trusted."""
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
