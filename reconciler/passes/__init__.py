"""The passes: one reconcile pass, the pull-request plan, the simulator; each returns values and never prints.

A pass drives the pipeline (`pipeline`: read spec → observe → plan → render) over the rooms below
it: `spec` (which files, parsed once, validated), `state` (the next tree of `state/` and
`rendered/`, and the commit message), `report` (the plan's comparison) and `git` (reading and
writing the repository). `reconcile` is numbered phases, as Kueue's `schedule()`: 1 repair the
work tree, 2 sync with the remote, 3 read spec and state, 4 plan, 5 the next tree, 6 commit,
7 push; its `Outcome` carries the warnings the command line prints. What to print, exit codes and
options are `reconciler.cli`'s; no module here imports click, and none imports pygit2.
"""
