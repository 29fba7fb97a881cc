"""The content hashes of stamped objects, kept by what they are computed from (step 7 of a pass: apply's compare).

`stamp.stamped` digests every object a commit holds for a cluster (its spec, on a pod, and the
whole of it): at 10,000 nodes some 31,000 objects, each written as sorted JSON and hashed, on every
pass, though a pass with nothing changed stamps the same objects as the last one. `Known` keeps
those two digests keyed by the object they were computed from, as stamping left it just before
them: the blake2b of its marshal bytes (version 2, no references: the same plain value gives the
same bytes, and only the same value does, so an entry can only ever name the hashes of that
value). An object marshal cannot write, or one the memo does not hold, is digested as without it.

`held()` is what to keep for the next pass (the entries this one used); `Known(data)` takes what a
pass kept, and drops all of it unless its `check` (the hashes of a sample pod, computed by
this code) is what this code computes now, so a change to how objects are digested or stamped
never reads an old entry. Pure: the caller loads and saves it (`reconciler.passes.apply`).
"""

from __future__ import annotations

import hashlib
import marshal
import threading
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
Hashes = tuple[str, str]  # (spec hash, "" for objects that are not pods; content hash)
_MARSHAL_VERSION = 2  # no references: bytes that depend on the value alone

# A sample pod stamped before its hashes: what the check computes, in every kind of value a
# manifest holds (text, numbers whole and not, booleans, null, lists, nesting, non-ASCII).
SAMPLE: Obj = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "sample-0", "namespace": "t", "labels": {"a": "b"}, "annotations": {"n": "ü"}},
    "spec": {
        "nodeName": "n1",
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}, "args": ["1.5", 2]}],
        "priority": 0.25,
        "hostNetwork": True,
        "schedulerName": None,
        "tolerations": [],
    },
}


class Known:
    """Hashes computed earlier, by key (`key`); thread-safe for the clusters applied at once."""

    def __init__(self, data: Any, compute: Callable[[Obj, bool], Hashes]) -> None:
        """`data`: what `held` returned in an earlier pass (anything else is nothing); `compute`:
        the hashes of a stamped object before them (`stamp`'s own), `True` for a pod."""
        self.compute = compute
        self.check = compute(SAMPLE, True)
        self.known: dict[bytes, Hashes] = {}
        if (
            isinstance(data, dict)
            and data.get("check") == self.check
            and isinstance(data.get("hashes"), dict)
        ):
            self.known = data["hashes"]
        self.used: dict[bytes, Hashes] = {}
        self._lock = threading.Lock()

    def hashes(self, body: Obj, pod: bool) -> Hashes:
        """`compute(body, pod)`, from the memo when it holds `body`."""
        try:
            key = key_of(body, pod)
        except ValueError:  # a value marshal does not write: digested as it is
            return self.compute(body, pod)
        found = self.known.get(key)
        if not (isinstance(found, tuple) and len(found) == 2):
            found = self.compute(body, pod)
        with self._lock:
            self.used[key] = found
        return found

    def held(self) -> dict[str, Any]:
        """What the next pass may take (`Known(data)`): the entries this one used."""
        return {"check": self.check, "hashes": dict(self.used)}

    @property
    def changed(self) -> bool:
        """Whether `held` differs from what was taken (else there is nothing to save)."""
        return self.used.keys() != self.known.keys()


def key_of(body: Obj, pod: bool) -> bytes:
    """What an entry is kept under: the object's marshal bytes, hashed; ValueError when marshal
    cannot write one of its values."""
    data = marshal.dumps((pod, body), _MARSHAL_VERSION)
    return hashlib.blake2b(data, digest_size=20).digest()
