"""State and rendered files (step 5 of a pass): a plan becomes `state/` and `rendered/`, and the words for the commit.

- `layout`: every path jobtree owns (`state/leases/…`, `state/ledger/`, `rendered/<cluster>/<ns>/<run>.yaml`);
- `codec`: planner values to the files' objects and back (Kubernetes-shaped dicts and cache rows);
- `yamlstyle`: byte-stable YAML;
- `nexttree`: the next tree (only what changed is rendered; did any decision change?);
- `memo`: the decoded state of one commit and what wrote each file, for the next pass;
- `message`: the commit message, its one author;
- `fleetmap`, `timeline`: the pictures `state/fleet.svg` and `state/timeline.svg` (`svg`: what both
  share), drawn from the decisions alone.

Decides nothing (the planner does), never writes Git (`reconciler.git` does), never prints.
"""
