"""Parse one big YAML file in a child process while this one goes on (imports, set-up).

`start(path)` forks a child that parses the file (`yamldoc.parse_all`, field positions left to
be worked out when a diagnostic asks) and pickles the documents into a pipe; `Reading.result()`
reads them back. A small file, a platform without fork, or a child that fails: the file is
parsed here instead, so the answer never depends on how it was read. Knows nothing of kinds.
"""

from __future__ import annotations

import gc
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

from schemas import yamldoc

BIG = 256 * 1024  # below this, parsing takes less than forking and pickling would save

Parsed = tuple[list[yamldoc.Document], list[yamldoc.BadDocument]]


@dataclass(slots=True)
class Reading:
    path: str
    data: bytes
    pid: int | None = None  # the child parsing it, if any
    pipe: int | None = None  # the read end of the child's pipe

    def result(self) -> Parsed:
        if self.pid is not None and self.pipe is not None:
            try:
                with os.fdopen(self.pipe, "rb") as pipe:
                    raw = pipe.read()
                _, status = os.waitpid(self.pid, 0)
                if status == 0:
                    parsed: Parsed = pickle.loads(raw)
                    return parsed
            except (OSError, EOFError, pickle.UnpicklingError):
                pass  # parse it here: same answer, only slower
        return yamldoc.parse_all(self.data, self.path, positions=False)


def start(path: str) -> Reading:
    data = Path(path).read_bytes()
    if len(data) < BIG or not hasattr(os, "fork"):
        return Reading(path, data)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: parse, hand the documents over, exit without running any cleanup
        code = 1
        try:
            gc.disable()  # a short-lived child: collecting would only slow the parse (~30%)
            os.close(read_end)
            out = pickle.dumps(yamldoc.parse_all(data, path, positions=False), pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(out)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return Reading(path, data, pid, read_end)
