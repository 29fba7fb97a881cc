"""A file written whole or not at all: a temporary name in the same directory, then a rename.

Used for what the reconciler keeps beside a repository (pack files, the pass cache, the checkout
journal). A reader sees the old file, the new one, or none; never half of one. `durable` also
fsyncs the file and its directory, for a record that must survive a power cut, not only a kill.
Knows nothing of what it writes; never creates directories.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def write(
    path: str, data: bytes, *, prefix: str, suffix: str = "", mode: int = 0o644, durable: bool = False
) -> None:
    """Put `data` at `path`. The temporary file is `<prefix>XXXXXXXX<suffix>` in the same directory
    (a caller that sweeps leftovers of killed writers matches that); it is removed on any failure."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        _sync_directory(directory)


def _sync_directory(directory: str) -> None:
    """Make a rename in `directory` durable; where directories cannot be fsynced, nothing to do."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
