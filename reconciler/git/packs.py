"""Git object writer for one state commit (step 6 of a pass): many new objects as one pack, not loose files.

A first pass at 100k GPUs writes ~12,000 blobs and ~2,000 trees. As loose objects that is 14,000
compressed files created one by one before the commit exists, and every later reader (the push,
the next pass) opens them one by one again. One pack plus its version-2 index (the documented
formats git and libgit2 read, gitformat-pack(5)) is two file writes. Small batches stay loose, as
git itself does, so frequent small passes do not pile up packs; `git gc` consolidates either.

Nothing existing is touched or deleted. Only SHA-1 repositories get packs (anything else falls
back to loose objects through libgit2). A long-lived clone gathers packs (or loose objects) pass
by pass; `git gc` or `git maintenance` consolidates them, as for any busy clone. Knows nothing
of trees or commits beyond their bytes: `git.write` builds them.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import pygit2
from pygit2.enums import ObjectType

from reconciler import atomicfile
from reconciler.perf import forkmap

KIND_CODES = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}
PACK_FROM = 512  # objects: a smaller batch is written loose (one file each), like git's own writers
_LEVEL = 1  # zlib level, as git's core.looseCompression default: these objects are small and many


def object_id(kind: str, data: bytes) -> bytes:
    """The raw SHA-1 Git gives `data` as an object of `kind` ("blob", "tree", ...)."""
    digest = hashlib.sha1(f"{kind} {len(data)}\0".encode())
    digest.update(data)
    return digest.digest()


def sha1_repository(repo: pygit2.Repository) -> bool:
    config = repo.config
    found = config["extensions.objectformat"] if "extensions.objectformat" in config else "sha1"
    return str(found).lower() == "sha1"


def write(repo: pygit2.Repository, objects: Iterable[tuple[bytes, str, bytes]]) -> int:
    """Store `(raw id, kind, data)` objects (new ones: trees and blobs of a commit being written).

    A batch of `PACK_FROM` or more becomes one pack; a smaller one is written loose, skipping
    objects the repository has, its commits last (in the order given: parents first). A writer
    killed part way thus never leaves a commit whose tree is missing (a fetch walking it would fail
    with "object not found"). Ids are the caller's `object_id`; a
    mismatching id is a bug and raises ValueError before anything is stored in a pack. Returns how
    many objects were written.
    """
    todo: dict[bytes, tuple[str, bytes]] = {}
    for oid, kind, data in objects:
        todo.setdefault(oid, (kind, data))
    if len(todo) >= PACK_FROM and sha1_repository(repo):
        # No existence check: the caller passes new objects, and an object in two packs is harmless.
        directory = os.path.join(repo.path, "objects", "pack")
        _write_pack(directory, todo)
        return len(todo)
    odb = repo.odb
    types = {"commit": ObjectType.COMMIT, "tree": ObjectType.TREE, "blob": ObjectType.BLOB}
    written = 0
    for oid, (kind, data) in sorted(todo.items(), key=lambda item: item[1][0] == "commit"):
        if odb.exists(pygit2.Oid(raw=oid)):
            continue
        stored = odb.write(types[kind], data)
        if stored.raw != oid:
            raise ValueError(f"object id mismatch for a {kind}: {oid.hex()} != {stored}")
        written += 1
    return written


def _entry_header(code: int, size: int) -> bytes:
    """Pack entry header: type and size, 4 bits then 7 bits per byte, least significant first."""
    out = bytearray()
    byte = (code << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def _compress(items: Sequence[tuple[str, bytes]]) -> list[tuple[bytes, bytes]]:
    """Per object, its id and its zlib stream (the heavy part of a pack; `_compressed` splits it)."""
    return [(object_id(kind, data), zlib.compress(data, _LEVEL)) for kind, data in items]


def _compressed(items: list[tuple[str, bytes]]) -> list[tuple[bytes, bytes]]:
    """`_compress(items)` in one thread per CPU for a big batch: zlib and SHA-1 release the GIL, so
    threads split the work as well as forked children do, and also while the work tree is being
    written in the background (when `forkmap` will not fork)."""
    n = min(forkmap.workers(), len(items) // (forkmap.MIN_ITEMS // 2) or 1)
    if n < 2:
        return _compress(items)
    with ThreadPoolExecutor(n, thread_name_prefix="jobtree-pack") as pool:
        parts = list(pool.map(_compress, [items[i::n] for i in range(n)]))  # striped, as forkmap does
    out: list[tuple[bytes, bytes]] = [(b"", b"")] * len(items)
    for i, part in enumerate(parts):
        out[i::n] = part
    return out


def _write_pack(pack_dir: str, objects: dict[bytes, tuple[str, bytes]]) -> str:
    """Write `pack-<sha>.pack` then `pack-<sha>.idx` (the index makes the pack visible); returns the sha."""
    pack = bytearray(b"PACK" + struct.pack(">II", 2, len(objects)))
    rows: list[tuple[bytes, int, int]] = []  # (id, crc32, offset)
    packed = _compressed(list(objects.values()))
    for (oid, (kind, data)), (check, body) in zip(objects.items(), packed, strict=True):
        if check != oid:
            raise ValueError(f"object id mismatch for a {kind}: {oid.hex()}")
        header = _entry_header(KIND_CODES[kind], len(data))
        rows.append((oid, zlib.crc32(body, zlib.crc32(header)), len(pack)))
        pack += header
        pack += body
    checksum = hashlib.sha1(pack).digest()
    pack += checksum
    rows.sort()
    fanout = [0] * 256
    for oid, _, _ in rows:
        fanout[oid[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    small: list[int] = []
    large: list[int] = []
    for _, _, offset in rows:
        if offset < 0x80000000:
            small.append(offset)
        else:
            small.append(0x80000000 | len(large))
            large.append(offset)
    index = bytearray(b"\xfftOc" + struct.pack(">I", 2))
    index += struct.pack(">256I", *fanout)
    index += b"".join(oid for oid, _, _ in rows)
    index += struct.pack(f">{len(rows)}I", *(crc for _, crc, _ in rows))
    index += struct.pack(f">{len(small)}I", *small)
    index += struct.pack(f">{len(large)}Q", *large)
    index += checksum
    index += hashlib.sha1(index).digest()
    name = checksum.hex()
    os.makedirs(pack_dir, exist_ok=True)
    _place(pack_dir, f"pack-{name}.pack", bytes(pack))
    _place(pack_dir, f"pack-{name}.idx", bytes(index))
    return name


def _place(directory: str, name: str, data: bytes) -> None:
    """Write a read-only file under a temporary name, then rename it into place (atomic)."""
    atomicfile.write(os.path.join(directory, name), data, prefix="tmp_jobtree_", mode=0o444)
