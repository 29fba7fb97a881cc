"""Where a remote's pull requests are opened: the host's web pages from the remote URL, or GitHub Actions' variables."""

from __future__ import annotations

import pytest

from reconciler.git import hosting


@pytest.fixture(autouse=True)
def _not_in_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_API_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/fleet.git",
        "https://github.com/acme/fleet",
        "https://x-access-token@github.com/acme/fleet.git",
        "git@github.com:acme/fleet.git",
        "ssh://git@github.com/acme/fleet.git",
        "ssh://git@github.com:22/acme/fleet.git",
    ],
)
def test_every_spelling_of_a_github_remote_gives_the_same_compare_page(url: str) -> None:
    repo = hosting.Repo.of(url)
    assert repo is not None
    want = "https://github.com/acme/fleet/compare/main...runs/team-a/r1?expand=1"
    assert repo.compare("main", "runs/team-a/r1") == want
    assert repo.api() == "https://api.github.com"
    assert repo.blob("abc", "state/fleet.svg") == "https://github.com/acme/fleet/blob/abc/state/fleet.svg"


def test_github_enterprise_and_gitlab_get_their_own_pages() -> None:
    ghe = hosting.Repo.of("git@git.acme.example:platform/fleet.git")
    assert ghe is not None and ghe.api() == "https://git.acme.example/api/v3"
    lab = hosting.Repo.of("https://gitlab.com/acme/gpu/fleet.git")
    assert lab is not None and (lab.owner, lab.name) == ("acme/gpu", "fleet")
    assert lab.compare("main", "runs/a/b") == (
        "https://gitlab.com/acme/gpu/fleet/-/merge_requests/new?"
        "merge_request%5Bsource_branch%5D=runs%2Fa%2Fb&merge_request%5Btarget_branch%5D=main"
    )


@pytest.mark.parametrize(
    "url", ["/srv/fleet.git", "../fleet.git", "file:///srv/fleet.git", "git://127.0.0.1:9418/fleet.git", None]
)
def test_a_remote_with_no_web_pages_has_none(url: str | None) -> None:
    assert hosting.Repo.of(url) is None


def test_in_github_actions_the_workflow_variables_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example/")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/fleet")
    monkeypatch.setenv("GITHUB_API_URL", "https://api.github.example")
    repo = hosting.Repo.of("/a/local/path")
    assert repo == hosting.Repo("https://github.example", "acme", "fleet")
    assert repo.api() == "https://api.github.example"
