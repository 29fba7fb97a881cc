"""The seeded month: a fleet, a family of teams and a month of jobs drawn from published distributions.

Every number comes from `sources` (Helios's sizes, durations and rates; a named assumption where no
trace says). Same `Month`, same trace, byte for byte: one `random.Random(seed)` draws everything in
a fixed order. Reading a real trace file is `readers`; playing one is `engine` and `jobtree`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from evaluation import sources as src
from evaluation.trace import Domain, Job, Outage, Team, Trace
from schemas.common import parse_time

MONDAY = parse_time("2026-03-02T00:00:00Z")
DAY = 86400
# The family tree, as the template's: a root, two divisions with a small budget each, four teams under
# each. Team budgets are in the proportions of Helios's eight largest virtual clusters (`sources`).
DIVISIONS = ("rai", "media")
TEAMS = (
    ("rai", "llm"), ("media", "vision"), ("rai", "sys"), ("media", "audio"),
    ("rai", "rl"), ("media", "video"), ("rai", "eval"), ("media", "speech"),
)  # fmt: skip
DIVISION_SHARE = 1 / 32  # of the fleet, for each division's own envelope (the template gives 8 of 208)


@dataclass(frozen=True, slots=True)
class Month:
    """What to generate: the seed, the fleet's shape and the load as a multiple of Helios's."""

    seed: int = 1
    days: int = 30
    domains: int = 8
    nodes_per_domain: int = 8
    gpus_per_node: int = 8
    load: float = 1.0  # x Helios's offered load (GPU-time asked for / GPU-time there is: 0.80)
    failures: bool = True
    start: int = MONDAY


@dataclass(frozen=True, slots=True)
class Shape:
    """The fitted size and duration laws: P(size), and log-normal durations median * size**alpha."""

    sizes: tuple[int, ...]
    weights: tuple[float, ...]
    alpha: float
    sigma: float

    def mean_size(self) -> float:
        return sum(s * w for s, w in zip(self.sizes, self.weights, strict=True))

    def mean_work(self, cap: float) -> float:
        """Expected GPU-seconds of one job, durations cut at `cap` (E[min(X, c)] of a log-normal X)."""
        out = 0.0
        for size, p in zip(self.sizes, self.weights, strict=True):
            mu = math.log(src.HELIOS_MEDIAN_DURATION.value * size**self.alpha)
            s = self.sigma
            below = math.exp(mu + s * s / 2) * _phi((math.log(cap) - mu - s * s) / s)
            out += p * size * (below + cap * (1 - _phi((math.log(cap) - mu) / s)))
        return out


def fit(largest: int) -> Shape:
    """Sizes 1, 2, 4 ... `largest`: P(1) is ONE_GPU_SHARE, the rest decay geometrically so the mean
    is Helios's 3.716; durations log-normal with the 1-GPU median at Helios's 206 s, `alpha` fitted
    so mean GPU-seconds / mean duration is Helios's (49,351 / 6,652) and `sigma` so the mean is 6,652 s."""
    sizes = tuple(2**k for k in range(int(math.log2(largest)) + 1))
    one = src.ONE_GPU_SHARE.value

    def weights(r: float) -> tuple[float, ...]:
        rest = [r**k for k in range(1, len(sizes))]
        return (one, *((1 - one) * x / sum(rest) for x in rest))

    r = _solve(
        lambda r: sum(s * w for s, w in zip(sizes, weights(r), strict=True)) - src.HELIOS_MEAN_GPUS.value,
        1e-6,
        1.0,
    )
    w = weights(r)
    ratio = src.gpu_seconds_per_job() / src.HELIOS_MEAN_DURATION.value

    def moment(alpha: float, extra: int) -> float:
        return sum(p * s ** (alpha + extra) for s, p in zip(sizes, w, strict=True))

    alpha = _solve(lambda a: moment(a, 1) / moment(a, 0) - ratio, 0.0, 3.0)
    sigma = math.sqrt(
        2 * math.log(src.HELIOS_MEAN_DURATION.value / (src.HELIOS_MEDIAN_DURATION.value * moment(alpha, 0)))
    )
    return Shape(sizes, w, alpha, sigma)


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _solve(f: object, lo: float, hi: float) -> float:
    """The root of an increasing `f` between lo and hi, by bisection (60 halvings: exact to the float)."""
    assert callable(f)
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def rate_at(t: int) -> float:
    """Submissions at `t` (seconds from a Monday 00:00) relative to the week's mean: a day curve from
    DAY_TROUGH at 04:00 to DAY_PEAK at 16:00, and WEEKEND x the weekday rate on Saturday and Sunday."""
    hour = (t % DAY) / 3600
    amplitude = (src.DAY_PEAK.value - src.DAY_TROUGH.value) / 2
    day = 1 + amplitude * math.cos(2 * math.pi * (hour - 16) / 24)
    weekday = 7 / (5 + 2 * src.WEEKEND.value)
    return day * weekday * (src.WEEKEND.value if (t // DAY) % 7 >= 5 else 1)


def teams(fleet: int) -> tuple[Team, ...]:
    """The root, the divisions and the teams, with envelopes adding up to the fleet."""
    division = round(fleet * DIVISION_SHARE)
    left = fleet - division * len(DIVISIONS)
    shares = src.HELIOS_TEAM_SHARES
    gpus = [left * s // sum(shares) for s in shares]
    gpus[0] += left - sum(gpus)  # rounding goes to the largest team
    out = [Team("acme", "org:acme", None, 0)]
    out += [Team(d, f"org:acme:{d}", "org:acme", division) for d in DIVISIONS]
    out += [
        Team(f"{d}-{t}", f"org:acme:{d}:{t}", f"org:acme:{d}", g)
        for (d, t), g in zip(TEAMS, gpus, strict=True)
    ]
    return tuple(out)


def month(m: Month = Month()) -> Trace:
    rng = random.Random(m.seed)
    domains = tuple(Domain(f"d{i:02d}", m.nodes_per_domain, m.gpus_per_node) for i in range(m.domains))
    fleet = sum(d.gpus for d in domains)
    family = teams(fleet)
    workers = [t for t in family if t.parent is not None and t.parent != "org:acme"]
    largest = min(128, fleet // 4, max(d.gpus for d in domains) * 2)
    shape = fit(largest)
    horizon = m.days * DAY
    # how busy each team is per entitled GPU: spread evenly over DEMAND_SKEW, busiest first in TEAMS order
    skew = src.DEMAND_SKEW.value
    busy = [skew ** (0.5 - i / (len(workers) - 1)) for i in range(len(workers))]
    order = [1, 4, 0, 6, 2, 7, 3, 5]  # which team gets which busyness: not simply the largest
    demand = [w.gpus * busy[order[i]] for i, w in enumerate(workers)]
    # jobs a day so the GPU-time asked for is Helios's share of its GPU-time (0.80) x load, before
    # the short jobs are left out (they hold under 1% of it)
    per_day = src.offered_load() * m.load * fleet * DAY / shape.mean_work(src.MAX_DURATION.value)
    jobs: list[Job] = []
    kept_work = all_work = 0.0
    t = 0.0
    peak = (1 + (src.DAY_PEAK.value - src.DAY_TROUGH.value) / 2) * 7 / (5 + 2 * src.WEEKEND.value)
    n = 0
    while True:  # a non-homogeneous Poisson process by thinning
        t += rng.expovariate(per_day * peak / DAY)
        if t >= horizon:
            break
        accept = rng.random() < rate_at(int(t)) / peak
        team = rng.choices(workers, weights=demand)[0]
        gpus = rng.choices(shape.sizes, weights=shape.weights)[0]
        median = src.HELIOS_MEDIAN_DURATION.value * gpus**shape.alpha
        duration = min(
            int(rng.lognormvariate(math.log(median), shape.sigma)) + 1, int(src.MAX_DURATION.value)
        )
        draws = rng.random(), rng.random(), rng.random()
        if not accept:
            continue
        all_work += gpus * duration
        if duration < src.MIN_DURATION.value:
            continue
        kept_work += gpus * duration
        n += 1
        jobs.append(shaped(f"j{n:05d}", team.name, int(t), gpus, duration, draws))
    outages = _outages(rng, domains, horizon) if m.failures else ()
    kept = len(jobs)
    notes = (
        f"{kept} jobs of {fleet} GPUs' month at {m.load:g} x Helios's rate; jobs under "
        f"{int(src.MIN_DURATION.value) // 60} minutes left out ({100 * (1 - kept_work / all_work):.1f}% of "
        f"the GPU time drawn)",
        f"sizes {', '.join(f'{s}: {w:.3f}' for s, w in zip(shape.sizes, shape.weights, strict=True))}; "
        f"duration median 206 s x size^{shape.alpha:.3f}, log-normal sigma {shape.sigma:.3f}",
    )
    return Trace(f"month-seed{m.seed}", m.start, horizon, domains, family, tuple(jobs), outages, notes)


def shaped(
    name: str,
    team: str,
    submit: int,
    gpus: int,
    duration: int,
    draws: tuple[float, float, float],
    *,
    extras: bool = True,
) -> Job:
    """The run's shape: groups for jobs wider than a node, checkpoints, and (with `extras`) elastic,
    spared and opportunistic runs, each in the share `sources` gives; `draws` are three uniform draws."""
    group = min(gpus, int(src.GROUP_GPUS.value)) if gpus > 8 else None
    malleable = spares = None
    opportunistic = False
    if extras and group is not None and gpus > group and draws[0] < src.MALLEABLE_SHARE.value:
        malleable = gpus // 2
    if extras and gpus >= 32 and draws[1] < src.SPARES_SHARE.value:
        spares = 8
    if extras and gpus <= 2 and draws[1] < src.OPPORTUNISTIC_SHARE.value:
        opportunistic = True
    checkpoint = 1800 if duration >= 3600 and draws[2] < src.CHECKPOINT_SHARE.value else None
    return Job(name, team, submit, gpus, duration, group, malleable, spares or 0, opportunistic, checkpoint)


def _outages(rng: random.Random, domains: tuple[Domain, ...], horizon: int) -> tuple[Outage, ...]:
    """Each node fails as a Poisson process at NODE_FAILURES_PER_DAY and is back REPAIR later."""
    rate = src.NODE_FAILURES_PER_DAY.value / DAY
    out = []
    for d in domains:
        for node in d.node_names():
            t = rng.expovariate(rate)
            while t < horizon:
                out.append(Outage(node, int(t), int(t + src.REPAIR.value)))
                t += src.REPAIR.value + rng.expovariate(rate)
    return tuple(sorted(out, key=lambda o: (o.down, o.node)))
