"""The imperative shell: it owns the clock, chance, files, Git and the clusters; the planner decides.

One folder per concern; open the one your change is about (each opens with where it sits in a
pass and what it does not do). Imports point down this list only (import-linter contracts in
pyproject.toml), and each third-party client lives in one folder:

- `cli/`      the verbs (`jobtree validate | plan | reconcile | apply | simulate | webhook |
              codeowners`, and the researcher's `runs` verbs, `kubectl runs …`): options, printing,
              exit codes; the only importer of click;
- `views/`    what the researcher's verbs show: a fleet read at a commit, each verb's answer as
              versioned data (get, plan, watch, leases, explain, budgets usage, sponsors);
- `passes/`   one reconcile pass in numbered phases, the pull-request plan, the simulator, the
              configured clusters as a pass sees them, applying a commit to them, the pipeline they
              share, and a run change proposed as a pull request (`propose`: submit, shrink,
              grow); they return values and never print;
- `spec/`     which files are spec, each parsed once (the parse cache), validated; a Run file
              edited as a person would (`runfile`);
- `state/`    `state/` and `rendered/` as files: the next tree, the commit message, the memo,
              the observed clusters, the pictures;
- `report/`   `jobtree plan`'s report: its typed model, the comparison, its views;
- `cluster/`  the Kubernetes half: observe a cluster, apply a commit to it (mirrors, prune,
              retries), and (to come) the agent; the only importer of kubernetes;
- `git/`      reading and writing the repository, remotes, the writer lock, whose commits are
              jobtree's, the checked-out work tree, a person's branch, the Git host's web pages
              and pull requests (`hosting`); the only importer of pygit2;
- `perf/`     speed only: the disk cache, fork-parallel maps, prefetch, the paused collector;
              nothing there changes a byte of output;
- `atomicfile` a file written whole or not at all.

Where to look: funding is decided in `planner/` (`cover`, `accounting`); how a pass writes Git is
`passes/reconcile.py` phases 5-7, then `state/nexttree.py`, `state/message.py`, `git/write.py`;
the PR report is `report/`; caching is `perf/diskcache.py` with its users `spec/parsed.py` and
`state/memo.py`; the clusters are `passes/clusters.py` (observed in a pass), `passes/apply.py`
(a commit applied) and `cluster/` (the Kubernetes calls, observations, mirrors, sync).
"""
