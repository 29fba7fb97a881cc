"""Speed only: nothing here changes a byte of output, and each piece has a plain fallback.

- `diskcache`: plain data a later pass may reuse, in the Git dir, keyed on the jobtree version
  and a format number (fallback: a miss, recompute);
- `forkmap`: big batches split over forked children (fallback: computed here, serially);
- `prefetch`: a big scenario file parsed in a child while the engine imports (fallback: parsed
  here);
- `batchgc`: the cyclic garbage collector paused during a pass (fallback: the collector on).

Each module's docstring gives the measurement that justifies it. Knows nothing of Git, plans or
specs: callers hand it functions and plain data.
"""
