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
        "start    rai-sys/resnet-small: 8 GPUs in h100-east-a; paid by org:acme:media (media/east-h100, family) 8"
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
    # named at the person's own file and line (owner is line 8 of it), not at where it would go
    assert (
        f"{tmp_path / 'run.yaml'}:8:3: JT021" in shown.err
        and "runs/rai-sys/resnet-small.yaml:" not in shown.err
    )
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
    assert shown.code == 2  # Grace's clone: the branch on the remote holds Ada's commit, not hers
    assert (
        "a branch 'runs/rai-sys/resnet-small' exists on origin with commits that are not yours" in shown.err
    )
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


def test_submitting_again_adds_a_commit_to_your_own_open_branch(fleet: Path, tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(RESNET)
    first = runs("submit", "-f", str(tmp_path / "run.yaml"), "--now", NOW, repo=fleet / "work")
    assert first.code == 0, first.err
    tip = remote(fleet).references["refs/heads/runs/rai-sys/resnet-small"].target
    (tmp_path / "run.yaml").write_text(RESNET.replace("totalGPUs: 8", "totalGPUs: 16"))
    again = runs("submit", "-f", str(tmp_path / "run.yaml"), "--now", NOW, "-o", "json", repo=fleet / "work")
    doc = again.json()
    assert doc["updated"] is True and doc["branch"] == "runs/rai-sys/resnet-small"
    pushed = remote(fleet).references["refs/heads/runs/rai-sys/resnet-small"].peel(pygit2.Commit)
    assert [str(p) for p in pushed.parent_ids] == [str(tip)]  # on top: the pull request shows the change
    assert b"totalGPUs: 16" in pushed.tree["runs/rai-sys/resnet-small.yaml"].data
    start = doc["plan"]["starts"][0]
    assert (start["run"], start["gpus"]) == ("rai-sys/resnet-small", 16)  # planned against main, as before
    text = runs("submit", "-f", str(tmp_path / "run.yaml"), "--now", NOW, repo=fleet / "work").out
    assert "a new commit on your open branch" in text


def test_submit_fetches_the_fleet_branch_first_so_a_stale_clone_plans_on_the_newest_fleet(
    fleet: Path, tmp_path: Path
) -> None:
    # a colleague's run reaches main on the remote after this clone last fetched it
    other = clone(fleet / "fleet.git", tmp_path / "colleague")
    other.config["user.name"], other.config["user.email"] = "Grace", "grace@example.com"
    (tmp_path / "theirs.yaml").write_text(RESNET)
    assert (
        runs("submit", "-f", str(tmp_path / "theirs.yaml"), "--now", NOW, repo=tmp_path / "colleague").code
        == 0
    )
    bare = remote(fleet)
    merged = bare.references["refs/heads/runs/rai-sys/resnet-small"].target
    bare.references["refs/heads/main"].set_target(merged)  # merged (a fast-forward)
    # the stale clone submits the same file: it is now a run that exists, not a new one to propose
    (tmp_path / "mine.yaml").write_text(RESNET)
    shown = runs("submit", "-f", str(tmp_path / "mine.yaml"), "--now", NOW, repo=fleet / "work")
    assert shown.code == 2 and "a run rai-sys/resnet-small exists already" in shown.err
    work = pygit2.Repository(str(fleet / "work"))
    assert work.references["refs/remotes/origin/main"].target == merged


def test_a_json_file_is_refused_at_its_own_line_and_a_yaml_syntax_error_as_validate_says_it(
    fleet: Path, tmp_path: Path
) -> None:
    run = {
        "apiVersion": "rq.davidlangworthy.io/v1", "kind": "Run",
        "metadata": {"name": "js", "namespace": "rai-sys"},
        "spec": {"owner": "org:acme:rai:sys", "resources": {"gpuType": "GB200", "totalGPUs": 8},
                 "locality": {"groupGPUz": 4}},
    }  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(run, indent=2))
    shown = runs("submit", "-f", str(tmp_path / "run.json"), repo=fleet / "work")
    line = json.dumps(run, indent=2).splitlines().index('      "groupGPUz": 4') + 1
    assert shown.code == 3
    assert f"{tmp_path / 'run.json'}:{line}:7: JT010 unknown field spec.locality.groupGPUz" in shown.err
    (tmp_path / "tabs.yaml").write_text(RESNET.replace("  resources:", "\tresources:"))
    tabbed = runs("submit", "-f", str(tmp_path / "tabs.yaml"), repo=fleet / "work")
    assert tabbed.code == 3
    assert f"{tmp_path / 'tabs.yaml'}:9:1: JT001 a tab character is used for indentation" in tabbed.err
    assert "replace the tab with spaces" in tabbed.err and "while scanning" not in tabbed.err
    (tmp_path / "bad.json").write_text('{"kind": "Run",\n "metadata": }\n')
    broken = runs("submit", "-f", str(tmp_path / "bad.json"), repo=fleet / "work")
    assert (
        broken.code == 3
        and f"{tmp_path / 'bad.json'}:2:14: JT001 not valid JSON: Expecting value" in broken.err
    )


def test_a_run_missing_its_namespace_is_refused_at_the_line_of_the_file_as_given(
    fleet: Path, tmp_path: Path
) -> None:
    # submit adds `namespace:` after `name:` (line 5 of the file); a problem further down is still
    # named at its line in the file as the person wrote it
    given = RESNET.replace("  namespace: rai-sys\n", "").replace("totalGPUs: 8", "totalGPUz: 8")
    (tmp_path / "run.yaml").write_text(given)
    shown = runs("submit", "-f", str(tmp_path / "run.yaml"), repo=fleet / "work")
    line = given.splitlines().index("    totalGPUz: 8") + 1
    assert (
        shown.code == 3
        and f"{tmp_path / 'run.yaml'}:{line}:5: JT010 unknown field spec.resources.totalGPUz" in shown.err
    )


def test_a_draft_saved_inside_the_fleets_clone_is_noted(fleet: Path) -> None:
    (fleet / "work" / "draft.yaml").write_text(RESNET)
    shown = runs(
        "submit", "-f", str(fleet / "work" / "draft.yaml"), "--dry-run", "--now", NOW, repo=fleet / "work"
    )
    assert shown.code == 0, shown.err
    assert "draft.yaml is a draft inside the fleet's clone" in shown.err and "(JT004)" in shown.err


def test_the_proposal_document_says_what_every_document_says(fleet: Path, tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(RESNET)
    doc = runs(
        "submit",
        "-f",
        str(tmp_path / "run.yaml"),
        "--dry-run",
        "--now",
        NOW,
        "-o",
        "json",
        repo=fleet / "work",
    ).json()
    assert (doc["version"], doc["kind"], doc["rev"], doc["now"]) == (1, "Proposal", "origin/main", NOW)
    assert doc["base"]["commit"] == str(remote(fleet).references["refs/heads/main"].target)
