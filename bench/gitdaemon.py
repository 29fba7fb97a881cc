"""`git daemon` on 127.0.0.1 for the benchmarks: a fleet's remote served over the network, as a Git host serves it."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """`git daemon` serving the bare repositories under `base` on 127.0.0.1 (a free port), pushes
    enabled; the URL to put before `/<name>.git`. Stopped (and waited for) on leaving."""
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}", f"--base-path={base}",
             "--export-all", "--enable=receive-pack", str(base)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        if proc.poll() is None:
            try:
                yield f"git://127.0.0.1:{port}"
            finally:
                proc.terminate()
                proc.wait(timeout=10)
            return
    raise RuntimeError("git daemon did not start on 127.0.0.1")
