"""A stand-in for GitHub's REST API on 127.0.0.1: `POST /repos/{owner}/{repo}/pulls`, as GitHub answers it.

It records every request (path, headers, JSON body) and answers 201 with the pull request's
`html_url` and `number`, or, once `refuse` is set, GitHub's 422 "Validation Failed" with the
error GitHub gives for a branch that already has a pull request. Point `GITHUB_API_URL` at `url`.
Nothing leaves the machine.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class GitHub:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    refuse: bool = False


@contextmanager
def github_api() -> Iterator[GitHub]:
    api = GitHub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            api.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            parts = self.path.strip("/").split("/")
            if len(parts) != 4 or parts[0] != "repos" or parts[3] != "pulls":
                return self._answer(404, {"message": "Not Found"})
            if api.refuse:
                return self._answer(
                    422,
                    {
                        "message": "Validation Failed",
                        "errors": [{"resource": "PullRequest", "code": "custom",
                                    "message": f"A pull request already exists for {parts[1]}:{body.get('head')}."}],
                    },
                )  # fmt: skip
            number = len(api.requests)
            html = f"https://github.example/{parts[1]}/{parts[2]}/pull/{number}"
            return self._answer(201, {"number": number, "html_url": html, "state": "open"})

        def _answer(self, status: int, doc: dict[str, Any]) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
