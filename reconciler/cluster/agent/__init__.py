"""The in-cluster agent (§7.4): one active replica swaps a fenced node's groups onto hot spares at once.

In the order a swap uses them: `cache` keeps the cluster's nodes, this fleet's pods and mirrors
current (list, then watch); `loop.Agent` wakes on a fence, builds the planner's world from the
caches (`world`), and has `swap` prepare the decision (`planner.failover.decide`, the function
every reconcile pass runs) as a JournalEntry and carry it out, step by step and idempotently;
`leader` says whether this replica may act (a coordination.k8s.io Lease); `health` counts and
serves `/metrics`, `/healthz`, `/readyz` and writes the JSON log lines; `main` composes the process
`jobtree agent` runs. It never writes Git: the next reconcile folds the journal in (§7.5).
"""
