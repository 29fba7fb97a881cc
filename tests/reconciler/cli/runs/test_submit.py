"""`kubectl runs submit`: a researcher's run file becomes a pushed branch, the plan of it, and a pull request.

The fleet is the template (tests/support/git.py), reconciled and pushed to a bare remote: every
run fits (136 of 144 GB200 GPUs, 24 of 64 H100). The researcher's quick-start run asks for 8 H100
GPUs in rai-sys: rai-sys has no H100 envelope, so cover goes to family: its parent org:acme:rai has
none either, the rai division's parent org:acme has one only in a 2027 window, and the nearest
relative with H100 headroom is org:acme:media (media/east-h100, 8 GPUs): it starts at once in the
H100 domain, paid by that envelope.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pygit2
import pytest

from reconciler.passes.reconcile import reconcile_once
from tests.support.fleets import runs
from tests.support.git import T0, bare_remote, clone, daemon, steady_files
from tests.support.githubapi import github_api

__all__ = ["daemon"]  # a fixture: imported for pytest, used by name
NOW = "2026-03-02T09:05:00Z"
RESNET = """# The researcher guide's quick start.
apiVersion: rq.davidlangworthy.io/v1
kind: Run
metadata:
  name: resnet-small
  namespace: rai-sys
spec:
  owner: "org:acme:rai:sys"
  resources:
    gpuType: H100-80GB
    totalGPUs: 8
  runtime:
    checkpoint: "10m"   # safe to requeue every 10 minutes
"""


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pristine")
    bare_remote(root, steady_files())
    clone(root / "fleet.git", root / "work")
    assert reconcile_once(root / "work", now=T0, push=True).pushed
    return root


@pytest.fixture
def fleet(pristine: Path, tmp_path: Path) -> Path:
    """A researcher's clone of the fleet (its own copy of the remote), Git knowing who they are."""
    shutil.copytree(pristine, tmp_path, dirs_exist_ok=True)
    work = pygit2.Repository(str(tmp_path / "work"))
    work.remotes.set_url("origin", str(tmp_path / "fleet.git"))
    work.config["user.name"] = "Ada Lovelace"
    work.config["user.email"] = "ada@example.com"
    return tmp_path


def remote(fleet: Path) -> pygit2.Repository:
    return pygit2.Repository(str(fleet / "fleet.git"))


def test_submit_pushes_the_file_on_its_own_branch_and_prints_the_plan(fleet: Path, tmp_path: Path) -> None:
    (tmp_path / "resnet-small.yaml").write_text(RESNET)
    main_before = remote(fleet).references["refs/heads/main"].target
    shown = runs("submit", "-f", str(tmp_path / "resnet-small.yaml"), "--now", NOW, repo=fleet / "work")
    assert shown.code == 0, shown.err
    assert "Pushed runs/rai-sys/resnet-small to origin: runs/rai-sys/resnet-small.yaml" in shown.out
    assert (
        "start    rai-sys/resnet-small: 8 GPUs in h100-east-a; paid by org:acme:media (media/east-h100) 8"
        in shown.out
    )
    pushed = remote(fleet).references["refs/heads/runs/rai-sys/resnet-small"].peel(pygit2.Commit)
    assert (
        pushed.tree["runs/rai-sys/resnet-small.yaml"].data == RESNET.encode()
    )  # byte for byte, comments kept
    assert (pushed.author.name, pushed.author.email) == ("Ada Lovelace", "ada@example.com")
    assert pushed.parents[0].id == main_before  # on top of the fleet branch, which did not move
    assert remote(fleet).references["refs/heads/main"].target == main_before
    changed = {p.delta.new_file.path for p in remote(fleet).diff(pushed.parents[0], pushed)}
    assert changed == {"runs/rai-sys/resnet-small.yaml"}


def test_submit_in_json_gives_the_proposal_and_the_plan_report(fleet: Path, tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(RESNET)
    doc = runs(
        "submit", "-f", str(tmp_path / "run.yaml"), "--now", NOW, "--format", "json", repo=fleet / "work"
    ).json()
    assert (doc["version"], doc["kind"], doc["run"], doc["branch"]) == (
        1,
        "Proposal",
        "rai-sys/resnet-small",
        "runs/rai-sys/resnet-small",
    )
    assert (
        doc["pushed"] and doc["base"]["branch"] == "main" and doc["compareURL"] is None
    )  # a local path has no web page
    start = doc["plan"]["starts"][0]
    assert (start["run"], start["gpus"], start["domains"]) == ("rai-sys/resnet-small", 8, ["h100-east-a"])


def test_a_json_file_without_a_namespace_is_committed_as_yaml_in_the_namespace_given(
    fleet: Path, tmp_path: Path
) -> None:
    run = {
        "apiVersion": "rq.davidlangworthy.io/v1",
        "kind": "Run",
        "metadata": {"name": "sweep"},
        "spec": {"owner": "org:acme:media:audio", "resources": {"gpuType": "H100-80GB", "totalGPUs": 8}},
    }
    (tmp_path / "sweep.json").write_text(json.dumps(run))
    shown = runs(
        "submit",
        "--file",
        str(tmp_path / "sweep.json"),
        "-n",
        "media-audio",
        "--now",
        NOW,
        repo=fleet / "work",
    )
    assert shown.code == 0, shown.err
    pushed = remote(fleet).references["refs/heads/runs/media-audio/sweep"].peel(pygit2.Commit)
    want_yaml = (
        "apiVersion: rq.davidlangworthy.io/v1\nkind: Run\nmetadata:\n  name: sweep\n  namespace: media-audio\n"
        "spec:\n  owner: org:acme:media:audio\n  resources:\n    gpuType: H100-80GB\n    totalGPUs: 8\n"
    )
    assert pushed.tree["runs/media-audio/sweep.yaml"].data.decode() == want_yaml


def test_a_file_the_validator_refuses_exits_3_with_its_diagnostics_and_pushes_nothing(
    fleet: Path, tmp_path: Path
) -> None:
    # rai-sys belongs to org:acme:rai:sys: nobody spends another team's budget by typing its name
    (tmp_path / "run.yaml").write_text(
        RESNET.replace('owner: "org:acme:rai:sys"', 'owner: "org:acme:media:vision"')
    )
    shown = runs("submit", "-f", str(tmp_path / "run.yaml"), repo=fleet / "work")
    assert shown.code == 3
    assert "runs/rai-sys/resnet-small.yaml:" in shown.err and "JT021" in shown.err
    assert remote(fleet).references.get("refs/heads/runs/rai-sys/resnet-small") is None
    assert (
        pygit2.Repository(str(fleet / "work")).references.get("refs/heads/runs/rai-sys/resnet-small") is None
    )
    (tmp_path / "broken.yaml").write_text("kind: Run\nmetadata: [\n")
    assert runs("submit", "-f", str(tmp_path / "broken.yaml"), repo=fleet / "work").code == 3


def test_a_name_that_exists_is_refused_unless_replaced(fleet: Path, tmp_path: Path) -> None:
    template = (fleet / "work" / "runs" / "media-audio" / "whisper-finetune.yaml").read_text()
    (tmp_path / "again.yaml").write_text(template.replace("totalGPUs: 8", "totalGPUs: 16"))
    shown = runs("submit", "-f", str(tmp_path / "again.yaml"), repo=fleet / "work")
    assert shown.code == 2 and "exists already" in shown.err and "--replace" in shown.err
    replaced = runs(
        "submit", "-f", str(tmp_path / "again.yaml"), "--replace", "--now", NOW, repo=fleet / "work"
    )
    assert replaced.code == 0, replaced.err
    assert "Pushed runs/media-audio/whisper-finetune" in replaced.out


def test_a_branch_the_remote_has_already_is_not_overwritten(fleet: Path, tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(RESNET)
    assert runs("submit", "-f", str(tmp_path / "run.yaml"), "--now", NOW, repo=fleet / "work").code == 0
    other = clone(fleet / "fleet.git", tmp_path / "colleague")
    other.config["user.name"], other.config["user.email"] = "Grace", "grace@example.com"
    shown = runs("submit", "-f", str(tmp_path / "run.yaml"), "--now", NOW, repo=tmp_path / "colleague")
    assert shown.code == 2 and "has a branch 'runs/rai-sys/resnet-small' already" in shown.err
    moved = runs(
        "submit",
        "-f",
        str(tmp_path / "run.yaml"),
        "--branch",
        "grace/resnet",
        "--now",
        NOW,
        repo=tmp_path / "colleague",
    )
    assert moved.code == 0, moved.err
    assert remote(fleet).references.get("refs/heads/grace/resnet") is not None


def test_a_dry_run_validates_and_plans_without_any_branch(fleet: Path, tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(RESNET)
    shown = runs("submit", "-f", str(tmp_path / "run.yaml"), "--dry-run", "--now", NOW, repo=fleet / "work")
    assert shown.code == 0, shown.err
    assert (
        "dry run: no branch made, nothing pushed" in shown.out
        and "start    rai-sys/resnet-small" in shown.out
    )
    assert [r for r in remote(fleet).references if "runs/" in r] == []


def test_with_github_token_the_pull_request_is_opened_with_the_plan_as_its_body(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "run.yaml").write_text(RESNET)
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/fleet")
    with github_api() as api:
        monkeypatch.setenv("GITHUB_API_URL", api.url)
        shown = runs("submit", "-f", str(tmp_path / "run.yaml"), "--now", NOW, repo=fleet / "work",
                     env={"GITHUB_TOKEN": "t0ken"})  # fmt: skip
    assert shown.code == 0, shown.err
    assert "Pull request: https://github.example/acme/fleet/pull/1" in shown.out
    (request,) = api.requests
    assert request["path"] == "/repos/acme/fleet/pulls"
    assert request["headers"]["Authorization"] == "Bearer t0ken"
    body = request["body"]
    assert (body["head"], body["base"], body["title"]) == (
        "runs/rai-sys/resnet-small",
        "main",
        "runs: submit rai-sys/resnet-small",
    )
    assert "<!-- jobtree-plan -->" in body["body"] and "`rai-sys/resnet-small`" in body["body"]


def test_without_a_token_it_says_where_to_open_the_pull_request(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "run.yaml").write_text(RESNET)
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/fleet")
    shown = runs(
        "submit",
        "-f",
        str(tmp_path / "run.yaml"),
        "--now",
        NOW,
        repo=fleet / "work",
        env={"GITHUB_TOKEN": ""},
    )
    assert shown.code == 0, shown.err
    want = "Open the pull request: https://github.example/acme/fleet/compare/main...runs/rai-sys/resnet-small?expand=1"
    assert want in shown.out


def test_a_pull_request_github_refuses_leaves_the_pushed_branch_and_the_link(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "run.yaml").write_text(RESNET)
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/fleet")
    with github_api() as api:
        api.refuse = True
        monkeypatch.setenv("GITHUB_API_URL", api.url)
        shown = runs(
            "submit",
            "-f",
            str(tmp_path / "run.yaml"),
            "--now",
            NOW,
            repo=fleet / "work",
            env={"GITHUB_TOKEN": "t"},
        )
    assert shown.code == 0, shown.err
    assert (
        "answered 422: Validation Failed; A pull request already exists for acme:runs/rai-sys/resnet-small."
        in shown.out
    )
    assert "compare/main...runs/rai-sys/resnet-small" in shown.out
    assert remote(fleet).references.get("refs/heads/runs/rai-sys/resnet-small") is not None


def test_a_server_that_refuses_the_branch_exits_4_and_keeps_it_committed_here(
    pristine: Path, daemon: tuple[Path, str], tmp_path: Path
) -> None:
    base, url = daemon
    shutil.copytree(pristine / "fleet.git", base / "guarded.git")
    hook = base / "guarded.git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'runs/ branches need a signed-off commit here' >&2\nexit 1\n")
    hook.chmod(0o755)
    work = clone(f"{url}/guarded.git", tmp_path / "work")
    work.config["user.name"], work.config["user.email"] = "Ada", "ada@example.com"
    (tmp_path / "run.yaml").write_text(RESNET)
    shown = runs("submit", "-f", str(tmp_path / "run.yaml"), "--now", NOW, repo=tmp_path / "work")
    assert shown.code == 4
    assert (
        "did not take runs/rai-sys/resnet-small" in shown.err
        and "git push origin runs/rai-sys/resnet-small" in shown.err
    )
    assert work.references.get("refs/heads/runs/rai-sys/resnet-small") is not None


def test_a_person_git_does_not_know_is_asked_to_say_who_they_are(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = pygit2.Repository(str(fleet / "work"))
    del work.config["user.name"]
    del work.config["user.email"]
    level = pygit2.enums.ConfigLevel.GLOBAL
    saved = pygit2.settings.search_path[level]
    pygit2.settings.search_path[level] = str(tmp_path / "no-global-config")
    try:
        (tmp_path / "run.yaml").write_text(RESNET)
        shown = runs("submit", "-f", str(tmp_path / "run.yaml"), repo=fleet / "work",
                     env={"GIT_AUTHOR_NAME": "", "GIT_AUTHOR_EMAIL": ""})  # fmt: skip
    finally:
        pygit2.settings.search_path[level] = saved
    assert shown.code == 4 and "git config --global user.email" in shown.err
