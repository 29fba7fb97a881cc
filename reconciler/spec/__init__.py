"""Spec reading (steps 1-2 of a pass): which files are spec, their bytes, each parsed once, validated.

- `files`: the one lister of spec files, for a folder (`jobtree validate`) and for a commit (every
  pass): one predicate (`schemas.layout.spec_kind`, `schemas.strays.candidate`) for both;
- `parsed`: the parse cache by blob id and its head start (parsing in a forked child while the
  engine imports); the one owner of the cached documents' format;
- `validated`: files to a `Spec` (valid objects, diagnostics, what was left out);
- `lastvalid`: an invalid Budget keeps funding: its last valid version;
- `commit`: the spec at a commit, through the four above.

Never plans, never writes Git (its only writes are the parse cache in the Git dir), never prints.
"""
