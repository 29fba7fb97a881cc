"""Every number the trace generator uses, with where it comes from: a published trace or paper, or ours.

`generate` reads its numbers from here and the report prints this table, so a figure's inputs can
be checked against their sources. An `ASSUMPTION` is a number no trace publishes (what share of
runs checkpoint, say): it is named as ours, with the reason for its value. No randomness here.
"""

from __future__ import annotations

from dataclasses import dataclass

# The references every number below cites, by key: the report prints them under its sources table.
HELIOS = "[1]"
HELIOS_DATA = "[2]"
HELIOS_PERIOD = "[3]"
PHILLY = "[4]"
PAI = "[5]"
LLAMA3 = "[6]"
ASSUMPTION = "ours"
REFERENCES = (
    (HELIOS, "Hu et al., Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU "
     "Datacenters, SC 2021; the numbers are the row `total` of the authors' artifact "
     "github.com/S-Lab-System-Group/HeliosArtifact, analysis/1_compare with Philly trace/helios_cluster_summary.csv"),
    (HELIOS_DATA, "the Helios trace release, github.com/S-Lab-System-Group/HeliosData, README (cluster_gpu_number.csv example)"),
    (HELIOS_PERIOD, "HeliosArtifact, analysis/trace_parser.py: the trace's date range, 2020-04-01 to 2020-09-28"),
    (PHILLY, "Jeon et al., Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads, USENIX "
     "ATC 2019; the public trace github.com/msr-fiddle/philly-traces, README"),
    (PAI, "Weng et al., MLaaS in the Wild: Workload Analysis and Scheduling in Large-Scale Heterogeneous GPU "
     "Clusters, NSDI 2022; the public trace github.com/alibaba/clusterdata, cluster-trace-gpu-v2020/README.md"),
    (LLAMA3, "Llama Team, The Llama 3 Herd of Models, 2024, section 3.3.4: 419 unexpected interruptions in a "
     "54-day snapshot of pre-training on 16,384 H100 GPUs (2,048 nodes), about 78% of them hardware"),
    (ASSUMPTION, "an assumption of this evaluation, where no trace or paper gives the number; the reason is beside it"),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Number:
    value: float
    what: str
    source: str
    why: str = ""  # how it was derived, or why an assumption has this value


# -- Helios (SenseTime), the distributions' main source ---------------------------------------------
HELIOS_GPUS = Number(6220, "GPUs in Helios's four traced clusters", HELIOS)
HELIOS_GPU_JOBS = Number(1_580_464, "GPU jobs in the six months", HELIOS)
HELIOS_DAYS = Number(181, "days the trace spans", HELIOS_PERIOD)
HELIOS_MEAN_GPUS = Number(3.716, "mean GPUs per GPU job", HELIOS)
HELIOS_MEDIAN_GPUS = Number(1, "median GPUs per GPU job", HELIOS)
HELIOS_MEAN_DURATION = Number(6651.681, "mean GPU job run time, seconds", HELIOS)
HELIOS_MEDIAN_DURATION = Number(206, "median GPU job run time, seconds", HELIOS)
HELIOS_GPU_SECONDS = Number(
    77_997_740_147,
    "GPU-seconds of all GPU jobs",
    HELIOS,
    "complete_gpu_time + cancel_gpu_time + fail_gpu_time (39,994,296,320 + 30,715,109,125 + 7,288,334,702)",
)
HELIOS_VC_GPUS = Number(
    1144,
    "GPUs of one Helios cluster's virtual clusters on 2020-09-01 (216, 176, 96, 96, 64, 64, 64, 64, 56, "
    "48, 40, 40, 32, 32, 16, 16, 16, 8)",
    HELIOS_DATA,
    "cluster_gpu_number.csv example row; its eight largest virtual clusters set the teams' relative budgets",
)
HELIOS_TEAM_SHARES = (216, 176, 96, 96, 64, 64, 64, 64)  # the eight largest of HELIOS_VC_GPUS

# -- Philly (Microsoft) and PAI (Alibaba): scale, and what their formats carry ------------------------
PHILLY_JOBS = Number(117_325, "jobs in the public Philly trace, submitted 2017-08-07 to 2017-12-22", PHILLY)
PAI_GPUS = Number(6500, "GPUs (on about 1,800 machines) of the PAI cluster, July and August 2020", PAI)

# -- what the traces do not say ---------------------------------------------------------------------
ONE_GPU_SHARE = Number(
    0.6,
    "share of jobs with 1 GPU",
    ASSUMPTION,
    "Helios's median job has 1 GPU, so more than half do; larger sizes are powers of two whose "
    "decay is fitted so the mean is Helios's 3.716",
)
MIN_DURATION = Number(
    600,
    "shortest job kept, seconds",
    ASSUMPTION,
    "shorter GPU jobs (two thirds of the fitted law's jobs, under 1% of its GPU time: the month's notes "
    "give the share) are debugging and interactive work nobody sends through a reviewed pull request",
)
MAX_DURATION = Number(
    14 * 86400, "longest job, seconds", ASSUMPTION, "the log-normal's far tail is cut at two weeks"
)
DAY_PEAK = Number(1.6, "submission rate at the afternoon peak / the daily mean", ASSUMPTION)
DAY_TROUGH = Number(0.4, "submission rate before dawn / the daily mean", ASSUMPTION)
WEEKEND = Number(
    0.6,
    "weekend submission rate / weekday rate",
    ASSUMPTION,
    "Helios (Hu et al. section 3.1) and Philly show submissions following the working day and week; "
    "neither release gives the amplitude as a number, so these three are ours",
)
GROUP_GPUS = Number(
    32,
    "largest placement group, GPUs",
    ASSUMPTION,
    "a job wider than 8 GPUs keeps groups of up to 32 on one fabric domain",
)
MALLEABLE_SHARE = Number(
    0.25, "share of multi-group jobs that are malleable (down to half width)", ASSUMPTION
)
SPARES_SHARE = Number(
    0.25, "share of jobs of 32 GPUs or more with a spare node (8 GPUs) per group", ASSUMPTION
)
OPPORTUNISTIC_SHARE = Number(
    0.15, "share of 1-2 GPU jobs that are opportunistic (sweeps on spare GPUs)", ASSUMPTION
)
CHECKPOINT_SHARE = Number(
    0.7, "share of jobs of an hour or more that checkpoint, every 30 minutes", ASSUMPTION
)
DEMAND_SKEW = Number(
    2.0,
    "busiest team's submissions per entitled GPU / the quietest's",
    ASSUMPTION,
    "teams do not ask in proportion to their budgets; a 2x spread makes borrowing and fairness matter",
)
NODE_FAILURES_PER_DAY = Number(
    0.00296,
    "node failures per node-day",
    LLAMA3,
    "419 x 0.78 / (54 days x 2,048 nodes); not one of the three cluster traces, none of which reports it",
)
REPAIR = Number(12 * 3600, "seconds a failed node is out", ASSUMPTION)

TABLE = (
    HELIOS_GPUS, HELIOS_GPU_JOBS, HELIOS_DAYS, HELIOS_MEAN_GPUS, HELIOS_MEDIAN_GPUS, HELIOS_MEAN_DURATION,
    HELIOS_MEDIAN_DURATION, HELIOS_GPU_SECONDS, HELIOS_VC_GPUS, PHILLY_JOBS, PAI_GPUS, ONE_GPU_SHARE,
    MIN_DURATION, MAX_DURATION, DAY_PEAK, DAY_TROUGH, WEEKEND, GROUP_GPUS, MALLEABLE_SHARE, SPARES_SHARE,
    OPPORTUNISTIC_SHARE, CHECKPOINT_SHARE, DEMAND_SKEW, NODE_FAILURES_PER_DAY, REPAIR,
)  # fmt: skip


def jobs_per_gpu_day() -> float:
    """Helios's GPU jobs per GPU per day: 1,580,464 / (6,220 x 181) = 1.40."""
    return HELIOS_GPU_JOBS.value / (HELIOS_GPUS.value * HELIOS_DAYS.value)


def offered_load() -> float:
    """Helios's GPU-time used / GPU-time there was: 77,997,740,147 / (6,220 x 181 x 86,400) = 0.80."""
    return HELIOS_GPU_SECONDS.value / (HELIOS_GPUS.value * HELIOS_DAYS.value * 86400)


def gpu_seconds_per_job() -> float:
    """Helios's mean GPU-seconds per GPU job: 77,997,740,147 / 1,580,464 = 49,351."""
    return HELIOS_GPU_SECONDS.value / HELIOS_GPU_JOBS.value
