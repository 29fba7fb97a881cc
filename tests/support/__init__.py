"""What tests share, one module per kind of help; nothing here is a test.

- `builders`: fleet objects (`a_run`, `a_budget`, ...) and planner worlds (`a_world`, `a_node`,
  `a_lease`) built in the Kueue style, so a test says only what matters to it;
- `scenarios`: a Scenario played in-process, or through `jobtree simulate`, and read like a user;
- `git`: real repositories: `git daemon` on 127.0.0.1, the template fleet as a bare remote and a
  clone, commits by a person or by jobtree, the writer lock held by another process;
- `corpus`: the manifest corpus (`tests/corpus/`) and its `# expect:` headers;
- `controlplane`: a real Kubernetes control plane (kube-apiserver, etcd and kwok, built by `make
  controlplane`), a fault proxy in front of it, and the pytest fixtures onto it (its own docstring).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: nothing a test reads lies outside it
TESTS = REPO / "tests"
