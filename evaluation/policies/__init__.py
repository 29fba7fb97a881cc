"""The baseline schedulers, each a small policy over `engine.Engine`: FIFO gang, EASY backfill, Slurm-like, Kueue-like.

Each names what it leaves out (`leaves_out`); placement is the same for all (`cluster`).
"""

from __future__ import annotations

from evaluation.engine import Policy
from evaluation.policies.easy import Easy
from evaluation.policies.fifo import Fifo
from evaluation.policies.kueue import Kueue
from evaluation.policies.slurm import Slurm
from evaluation.trace import Trace


def baselines(trace: Trace) -> list[Policy]:
    """The four baselines the report compares Jobtree with, in its order."""
    return [Fifo(), Easy(), Slurm(trace), Kueue(trace)]
