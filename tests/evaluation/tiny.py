"""Small hand-made traces for the evaluation's tests: one fabric domain, two teams, a few jobs; and trace files."""

from __future__ import annotations

from evaluation.generate import MONDAY
from evaluation.trace import Domain, Job, Team, Trace


def a_job(
    name: str,
    team: str,
    submit: int,
    gpus: int,
    duration: int,
    *,
    group: int | None = None,
    checkpoint: int | None = None,
) -> Job:
    return Job(name, team, submit, gpus, duration, group=group, checkpoint=checkpoint)


def two_teams(jobs: list[Job], *, nodes: int = 2, a: int = 8, b: int = 8, days: float = 1) -> Trace:
    """Teams a and b (budgets `a` and `b` GPUs) under one root, on one domain of `nodes` x 8 GPUs."""
    family = (
        Team("root", "org:root", None, 0),
        Team("a", "org:root:a", "org:root", a),
        Team("b", "org:root:b", "org:root", b),
    )
    return Trace("tiny", MONDAY, int(days * 86400), (Domain("d00", nodes, 8),), family, tuple(jobs))


# A Helios cluster_log.csv and a Philly trace in the Helios artifact's columns, written by hand (test_readers)
HELIOS = """job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
1,uA,vcJkd,8,32,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0
2,uB,vchbv,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0
3,uC,vcJkd,0,1,1,COMPLETED,2020-06-09 19:00:00,2020-06-09 19:00:00,2020-06-09 21:00:00,7200,0
4,uD,vchbv,16,64,2,CANCELLED,2020-06-10 09:00:00,2020-06-10 09:05:00,2020-06-10 11:05:00,7200,300
5,uE,vchbv,two,1,1,COMPLETED,2020-06-10 10:00:00,2020-06-10 10:00:00,2020-06-10 11:00:00,3600,0
"""
PHILLY = """user,vc,jobname,gpu_num,state,submit_time,start_time,end_time,queue
u1,ee9e8c,a,1,Pass,2017-10-07 01:11:39,2017-10-07 01:13:30,2017-10-09 06:53:12,111
u2,925e2b,b,8,Killed,2017-10-08 12:00:00,2017-10-08 12:00:00,2017-10-08 14:00:00,0
u3,925e2b,c,2,Failed,2017-10-09 00:00:00,2017-10-09 00:10:00,2017-10-09 00:05:00,600
"""
