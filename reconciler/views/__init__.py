"""What the researcher's verbs show (`kubectl runs …`): the fleet read at a commit, each verb's answer as data.

- `fleet`: where to read (repository, revision), which run a name means, the files of one commit
  read lazily (spec, run and budget status, reservations, leases, ledger);
- `runs`: `get`, `plan`, `watch` and `leases` as versioned JSON-ready documents;
- `trail`: `explain`, the decision trail in words from the ledger and status;
- `draws`: a lottery cut replayed from the ledger with `planner.lottery.replay`;
- `usage`: `budgets usage` and `sponsors`.

Reads what the passes wrote (Git through `reconciler.git`), never writes it, never prints (the
command line does), and decides nothing: what the planner recorded is presented as it is.
"""
