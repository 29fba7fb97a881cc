"""The cluster plane (DESIGN §7): the room reserved for the Kubernetes half; nothing is built here yet.

The only package that will import `kubernetes` (an import-linter contract in pyproject.toml says
so). What it will own, each behind the two-method `Cluster` protocol the passes already use
(`reconciler.passes.pipeline.Cluster`: `observe`, `apply_cordons`):

- **observe** (§7.2): per configured cluster, one consistent snapshot of nodes (labels through
  `topologyLabels`, GPU capacity, Ready and its transition time, cordon, fencing) and of this
  fleet's pods, turned into the planner's observations (`planner.world.NodeObs`,
  `WorkloadEvent`); what a decision depends on is handed back to be committed
  (`state/observed/<cluster>.yaml`, ledger events), so any state commit can be recomputed from Git;
- **apply** (§7.3): after the push, server-side apply with field manager `jobtree` of the CRDs,
  the tenant namespaces, the mirrors and `rendered/<cluster>/` exactly as the pushed commit holds
  them; prune what carries this fleet's label and the commit no longer holds; retries with
  backoff; one unreachable cluster leaves the others applied;
- **mirrors** (§7.3): Runs, Reservations, Budgets, open Leases and the fleet settings as
  in-cluster objects, so `kubectl get runs -A` shows the record and the agent has its world;
- **agent** (§7.4, §7.5): the fast path: on a fence, the planner's own failure function on a small
  world, carried out through a durable in-cluster journal that the next reconcile folds into Git.

What it must not do: decide anything (the planner decides; the agent calls the planner's failure
function, never a second implementation); write Git (`reconciler.git` is the only writer); print
or exit (`reconciler.cli` does); act ahead of Git except through the journal; touch an object
without this fleet's label. Until it exists, `reconcile --apply` with `clusters` configured exits 4
saying so, and the embedded cluster (`reconciler.passes.embedded`) is the one a pass observes.
"""
