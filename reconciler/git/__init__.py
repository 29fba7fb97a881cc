"""Git: the only package that imports pygit2; one error tree (`errors`) for everything Git can say.

- `errors`: `GitStoreError`, temporary (retry later) or permanent, and the one map from pygit2's
  exceptions;
- `read`: open, resolve, walk and read trees and blobs; no writes;
- `write`: a state commit's trees and the commit (one ref move), and the other commits jobtree
  makes (a scenario's history, the demo fleet);
- `packs`: many new objects as one pack;
- `remote`: fetch, compare-and-swap push, sync, retry;
- `lock`: one writer per clone;
- `ownership`: which commits are jobtree's own, and where a pass's state starts;
- `checkout`: a checked-out branch's work tree follows every ref move, with a crash journal.

Never plans, renders or validates; callers hand it bytes and blob ids. Speed-only helpers it uses
(`reconciler.perf`) never change a byte it writes.
"""
