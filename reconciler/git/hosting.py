"""The Git host behind a remote: its web pages (where to open a pull request, a file at a commit) and GitHub's REST API.

`Repo.of(url)` reads `https://host/owner/name(.git)`, `git@host:owner/name(.git)` and
`ssh://git@host/owner/name(.git)`; in GitHub Actions `GITHUB_SERVER_URL` and `GITHUB_REPOSITORY`
say it instead. A remote on a local path or `git://` has no web pages: None. Pull requests are
opened with `POST /repos/{owner}/{name}/pulls` at `GITHUB_API_URL` (else `https://api.github.com`
for github.com, `https://<host>/api/v3` for GitHub Enterprise), authenticated by a token the
caller gives. GitLab gets its merge-request page; its API is not used. Nothing is sent unless
`open_pull_request` is called.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

TIMEOUT = 30  # seconds the host's API may take to answer
_URL = re.compile(
    r"^(?:https?://(?:[^@/]+@)?|ssh://(?:[^@/]+@)?|[^@/:]+@)(?P<host>[^/:]+)(?::\d+)?[:/](?P<path>.+?)/?$"
)


class HostError(Exception):
    """The host refused or could not be reached; the message says what it answered."""


@dataclass(frozen=True, slots=True)
class Repo:
    web: str  # https://host
    owner: str
    name: str

    @staticmethod
    def of(url: str | None) -> Repo | None:
        server, slug = os.environ.get("GITHUB_SERVER_URL"), os.environ.get("GITHUB_REPOSITORY")
        if server and slug and "/" in slug:
            owner, name = slug.split("/", 1)
            return Repo(server.rstrip("/"), owner, name)
        if not url or url.startswith(("git://", "file://", "/", ".")):
            return None
        found = _URL.match(url)
        if found is None:
            return None
        path = found["path"].removesuffix(".git")
        if path.count("/") < 1:
            return None
        owner, name = path.rsplit("/", 1)
        return Repo(f"https://{found['host']}", owner, name)

    @property
    def gitlab(self) -> bool:
        return "gitlab" in self.web

    def compare(self, base: str, branch: str) -> str:
        """Where to open a pull (merge) request of `branch` into `base`."""
        q = urllib.parse.quote
        if self.gitlab:
            return (
                f"{self.web}/{self.owner}/{self.name}/-/merge_requests/new?"
                f"merge_request%5Bsource_branch%5D={q(branch, safe='')}&merge_request%5Btarget_branch%5D={q(base, safe='')}"
            )
        return f"{self.web}/{self.owner}/{self.name}/compare/{q(base)}...{q(branch)}?expand=1"

    def blob(self, commit: str, path: str) -> str:
        """A file as it is at `commit`, shown by the host (SVG pictures render there)."""
        middle = "-/blob" if self.gitlab else "blob"
        return f"{self.web}/{self.owner}/{self.name}/{middle}/{commit}/{urllib.parse.quote(path)}"

    def api(self) -> str:
        given = os.environ.get("GITHUB_API_URL")
        if given:
            return given.rstrip("/")
        return "https://api.github.com" if self.web == "https://github.com" else f"{self.web}/api/v3"


def open_pull_request(repo: Repo, base: str, branch: str, title: str, body: str, token: str) -> str:
    """Open a pull request of `branch` into `base` through GitHub's REST API; its web URL."""
    if repo.gitlab:
        raise HostError("opening merge requests on GitLab is not built: open it at the URL above")
    url = f"{repo.api()}/repos/{repo.owner}/{repo.name}/pulls"
    data = json.dumps({"title": title, "head": branch, "base": base, "body": body}).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "User-Agent": "jobtree",
            "X-GitHub-Api-Version": "2022-11-28",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            created = json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as err:
        raise HostError(f"{url} answered {err.code}: {_said(err)}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise HostError(f"cannot reach {url}: {getattr(err, 'reason', err)}") from None
    link = created.get("html_url") if isinstance(created, dict) else None
    if not isinstance(link, str):
        raise HostError(f"{url} created no pull request it would name (answer: {str(created)[:200]})")
    return link


def _said(err: urllib.error.HTTPError) -> str:
    """GitHub's own words for a refusal (`message`, and each error's), else the status text."""
    try:
        body = json.loads(err.read() or b"{}")
    except ValueError:
        return str(err.reason)
    words = [str(body.get("message") or err.reason)]
    words += [
        str(e.get("message")) for e in body.get("errors") or [] if isinstance(e, dict) and e.get("message")
    ]
    return "; ".join(words)
