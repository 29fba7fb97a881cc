"""The archive krew downloads for `kubectl runs` (`deploy/krew/runs.yaml`), built byte for byte the same every time.

`python deploy/krew/archive.py OUT.tar.gz` (`make krew`) writes `kubectl-runs` (the launcher beside
this file) and its README into a gzip'd tar with fixed owners, modes and times, and sets the
manifest's `sha256` (`runs.yaml`, beside it) to the archive's: a test checks they agree. Packaging only.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "runs.yaml"
SHA_LINE = re.compile(r"^(\s*sha256: )[0-9a-f]{64}$", re.M)
MEMBERS = (("kubectl-runs", 0o755), ("README.md", 0o644))


def build() -> bytes:
    """The archive's bytes: the same for the same files, on any machine."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, mode in MEMBERS:
            data = (HERE / name).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def main(target: str) -> None:
    data = build()
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    Path(target).write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    MANIFEST.write_text(SHA_LINE.sub(lambda m: m[1] + digest, MANIFEST.read_text()))
    print(f"{target}: sha256 {digest} (set in {MANIFEST.name})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python deploy/krew/archive.py OUT.tar.gz")
    main(sys.argv[1])
