"""A state commit's subject says what is new in it: a run named when there is one, never what merely stays so.

Plans from the template fleet (`tests.support.git.template_files`) with the embedded cluster: a
first pass at T0 starts the five template runs; a run too big for any budget then waits.
"""

from __future__ import annotations

from planner.plan import Plan
from planner.world import FleetState
from reconciler.passes import pipeline
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.spec import validated
from reconciler.state import message
from tests.support.git import T0, template_files

SHA = "0" * 40
BIG = b"name: whisper-big"


def _plan(files: dict[str, bytes], state: FleetState, now: int) -> Plan:
    spec = validated.read_spec(files)
    return pipeline.run_pass(spec, EmbeddedCluster(spec.inventory), state, now, render=False)


def _with_a_run_that_waits() -> dict[str, bytes]:
    files = template_files()
    whisper = files["runs/media-audio/whisper-finetune.yaml"]
    files["runs/media-audio/whisper-big.yaml"] = whisper.replace(b"name: whisper-finetune", BIG).replace(
        b"totalGPUs: 8", b"totalGPUs: 96"
    )  # more H100s than media-audio and its family can fund
    return files


def subject(lines: list[str]) -> str:
    return message.format_message(lines, SHA).splitlines()[0]


def test_one_run_started_is_named_and_starts_and_growth_are_told_apart() -> None:
    files = template_files()
    first = _plan(files, FleetState(), T0)
    assert (
        subject(message.lines(first, []))
        == "jobtree: started 5 runs (152 GPUs); media-audio/whisper-finetune +8 GPUs"
    )
    vit = "runs/media-vision/vit-elastic.yaml"
    files[vit] = files[vit].replace(b"desiredTotalGPUs: 16", b"desiredTotalGPUs: 24")
    grown = _plan(files, first.state, T0 + 60)
    assert subject(message.lines(grown, [])).startswith("jobtree: grew media-vision/vit-elastic (+8 GPUs)")


def test_news_of_a_pass_leads_the_subject_and_a_run_still_waiting_follows_it() -> None:
    files = _with_a_run_that_waits()
    first = _plan(files, FleetState(), T0)
    assert subject(message.lines(first, [])).startswith(
        "jobtree: started 5 runs (152 GPUs); reserved media-audio/whisper-big"
    )
    # the next pass: nothing new planned, but the cluster was observed anew (44 nodes seen)
    later = _plan(files, first.state, T0 + 600)
    observed = ["observed gb-west: 44 nodes (36 new)"]
    lines = message.lines(later, [], observed=observed)
    assert lines.index("observed gb-west: 44 nodes (36 new)") < lines.index("1 run waiting")
    assert subject(lines) == "jobtree: observed gb-west: 44 nodes (36 new); 1 run waiting"
    # with nothing else to say, what stays so is all there is
    assert subject(message.lines(later, [])) == "jobtree: 1 run waiting"
