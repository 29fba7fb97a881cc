"""The fair lottery's published arithmetic (§4.6): the seed, one draw, and a replay anyone can run.

H(x) is the first 16 hex digits of SHA-256 of x read as an integer; the seed is `0x` + 16 hex
digits of SHA-256 of `<namespace>/<name>|<activation instant>`. Decides nothing else.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from schemas.common import format_time


def H(text: str) -> int:
    """The lottery hash: the first 16 hex digits of SHA-256, read as an integer."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")  # = hexdigest()[:16]


def seed_for(run: str, instant: int) -> str:
    """`0x` + 16 hex digits of SHA-256 of `<namespace>/<name>|<activation instant>`."""
    return f"0x{H(f'{run}|{format_time(instant)}'):016x}"


def draw(seed: str, k: int, groups: Sequence[tuple[str, str, int]]) -> tuple[str, int]:
    """Draw k of the lottery over (owner, run, group index) candidates; returns (run, group).

    owners = sorted distinct owners; owner = owners[H(seed|k|owner) mod len]; that owner's groups
    sorted by (namespace/name, index) as `ns/name#i`; group = groups[H(seed|k|group) mod len].
    """
    owners = sorted({o for o, _, _ in groups})
    owner = owners[H(f"{seed}|{k}|owner") % len(owners)]
    mine = sorted((r, g) for o, r, g in groups if o == owner)
    return mine[H(f"{seed}|{k}|group") % len(mine)]


def replay(seed: str, rounds: Sequence[Sequence[tuple[str, str, int]]]) -> list[str]:
    """Replay a published lottery: the candidates before each draw in, the `ns/name#i` picks out."""
    return [f"{run}#{group}" for run, group in (draw(seed, k, cands) for k, cands in enumerate(rounds))]
