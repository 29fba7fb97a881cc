"""A checked-out branch's work tree (around steps 1 and 6 of a pass): it follows every ref move, path by path.

- `worktree`: which paths a move changes, checked against local edits (refused, never
  overwritten), and the owned files put back after a kill or a person's edit;
- `files`: writing those paths and their index entries (by a forked child for a big batch);
- `journal`: the crash journal: which paths a move is writing, so the next pass puts back what a
  killed writer left half written.

libgit2's `checkout_tree` is the plain fallback, used for links, submodules and filtered files;
the measurement that keeps the path-by-path writer is in `bench/README.md`. Decides no commit and
never talks to a remote.
"""
