"""The seeded month: the same seed gives the same trace, and its laws reproduce the published numbers."""

from __future__ import annotations

import math

from evaluation import sources as src
from evaluation.generate import MONDAY, Month, fit, month, rate_at, teams

HOUR, DAY = 3600, 86400


def test_the_same_seed_gives_the_same_month_and_another_seed_another() -> None:
    small = Month(seed=7, days=3, domains=1)
    assert month(small) == month(small)
    assert month(small).jobs != month(Month(seed=8, days=3, domains=1)).jobs


def test_sizes_and_durations_reproduce_helios_means() -> None:
    # the fitted laws give Helios's mean job size (3.716 GPUs), its mean run time (6,652 s) and its
    # mean GPU-seconds per job (77,997,740,147 / 1,580,464 = 49,351): worked out from the laws
    shape = fit(128)
    assert shape.weights[0] == src.ONE_GPU_SHARE.value
    assert math.isclose(shape.mean_size(), 3.716, rel_tol=1e-9)
    growth = math.exp(shape.sigma**2 / 2) * 206
    mean_duration = sum(w * growth * s**shape.alpha for s, w in zip(shape.sizes, shape.weights, strict=True))
    mean_work = sum(
        w * growth * s ** (1 + shape.alpha) for s, w in zip(shape.sizes, shape.weights, strict=True)
    )
    assert math.isclose(mean_duration, 6651.681, rel_tol=1e-6)
    assert math.isclose(mean_work, 77_997_740_147 / 1_580_464, rel_tol=1e-6)


def test_submissions_peak_in_the_afternoon_and_fall_at_weekends() -> None:
    # the day curve: 1.6 x at 16:00, 0.4 x at 04:00; weekdays 7 / (5 + 2 x 0.6) of the mean, weekends 0.6 of that
    weekday = 7 / 6.2
    assert math.isclose(rate_at(16 * HOUR), 1.6 * weekday)
    assert math.isclose(rate_at(4 * HOUR), 0.4 * weekday)
    assert math.isclose(rate_at(5 * DAY + 16 * HOUR), 1.6 * weekday * 0.6)  # Saturday
    assert math.isclose(sum(rate_at(h * HOUR) for h in range(7 * 24)) / (7 * 24), 1.0)


def test_budgets_add_up_to_the_fleet_in_a_family_tree_like_the_templates() -> None:
    family = {t.name: t for t in teams(256)}
    assert sum(t.gpus for t in family.values()) == 256
    assert family["acme"].parent is None and family["acme"].gpus == 0
    assert {family["rai"].parent, family["media"].parent} == {"org:acme"}
    assert family["rai"].gpus == family["media"].gpus == 8  # 1/32 of the fleet each
    # 240 GPUs left for the teams in Helios's proportions 216 : 176 : 96 : 96 : 64 x 4 (of 840), rounded
    # down (61, 50, 27, 27, 18 x 4 = 237); the 3 left over go to the largest
    want = {
        "rai-llm": 64,
        "media-vision": 50,
        "rai-sys": 27,
        "media-audio": 27,
        "rai-rl": 18,
        "media-video": 18,
        "rai-eval": 18,
        "media-speech": 18,
    }
    assert {n: t.gpus for n, t in family.items() if t.parent in ("org:acme:rai", "org:acme:media")} == want


def test_a_month_keeps_to_the_published_bounds_and_mixes_run_kinds() -> None:
    trace = month(Month(days=7, domains=2))
    assert trace.start == MONDAY and trace.horizon == 7 * DAY and trace.gpus == 128
    assert all(600 <= j.duration <= 14 * DAY and 1 <= j.gpus <= 32 for j in trace.jobs)
    assert all(0 <= j.submit < trace.horizon for j in trace.jobs)
    assert [j.submit for j in trace.jobs] == sorted(j.submit for j in trace.jobs)
    assert all(j.group == min(j.gpus, 32) for j in trace.jobs if j.gpus > 8)
    assert any(j.checkpoint for j in trace.jobs) and any(j.opportunistic for j in trace.jobs)
    assert all(
        j.malleable_min is None or (j.group is not None and j.malleable_min == j.gpus // 2)
        for j in trace.jobs
    )
    # work asked for: Helios's 0.80 of the fleet's GPU-time, less what the 10-minute floor and the
    # two-week cap remove (a week is a small sample: within a wide band)
    offered = sum(j.work for j in trace.jobs) / (trace.gpus * trace.horizon)
    assert 0.4 < offered < 1.4
