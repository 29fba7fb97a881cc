"""`jobtree plan`'s report: two plans compared, as a typed, versioned model and its three views.

- `model`: the report's shape (JSON `version: 3`), as TypedDicts: what `compare` returns and what
  `render` reads;
- `compare`: a plan outlined, and two outlines compared (one list of section keys drives both);
- `render`: text, Markdown (one pull-request comment) and JSON.

Plans nothing and reads no Git: the pull-request pass (`reconciler.passes.pr`) hands it two plans.
"""
