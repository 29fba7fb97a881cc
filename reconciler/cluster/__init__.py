"""The cluster plane (DESIGN §7): observe Kubernetes clusters and apply a commit to them; the only importer of `kubernetes`.

An import-linter contract in pyproject.toml keeps the client here; the rest of the shell speaks in
this room's types and errors. Modules, in the order a pass uses them:

- `connect`: a `Target` per `clusters[]` entry of jobtree.yaml (kubeconfig context, KUBECONFIG,
  or the in-cluster configuration) and its `Api`;
- `api`: the REST calls (get, paged list, server-side apply as field manager `jobtree`, merge
  patch, delete, watch) over the official client, every failure one of `errors`, retried by
  `retry` (backoff, `Retry-After`);
- `kinds`: the kinds jobtree reads and writes, and their paths;
- `observations`: nodes and pods as the planner's `NodeObs` and `WorkloadEvent` (pure; shared with
  the agent); `observe`: one cluster's snapshot through them (step 3 of a pass, §7.2);
- `mirrors`: the record as in-cluster objects (Runs, Reservations, Budgets, open Leases, the
  fleet's settings) and the published CRDs; `stamp`: the fleet's labels and content hashes on
  everything applied; `changes`: what a commit changes on a cluster (pure); `sync`: sending it in
  order, bounded, each write retried (step 7, §7.3);
- `informer`: list-then-watch caches of one kind (the agent's, and `watched`: the long-lived
  reconciler's nodes and pods, read by observe and apply instead of a list every pass);
- `journal`: the agent's swaps as JournalEntry objects, what apply must leave alone while one is
  unfolded (§7.5); `folding`: entries marked Folded once their commit is applied, and deleted
  after the retention;
- `agent/`: the in-cluster agent (§7.4), its own room: `world` (the
  planner's world from the mirrors), `swap` (the decision as an entry, carried out step by step),
  `loop` (the watches and the worker), `leader` (coordination.k8s.io Lease election), `health`
  (metrics, probes, JSON logs), `main` (the process).

What it must not do: decide anything (the planner decides; the agent calls the planner's own
failure function, `planner.failover.decide`); write Git (`reconciler.git` is the only writer); print or
exit (`reconciler.cli` does); read the repository (`reconciler.passes` hands it plain manifests);
touch an object another fleet's label claims, prune a namespace or a CRD.
"""
