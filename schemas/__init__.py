"""The contract layer: typed models, published JSON Schemas, and YAML loading with file:line diagnostics.

Imports nothing from planner/ or reconciler/, and no clock, network or randomness.
"""

API_VERSION = "rq.davidlangworthy.io/v1"
GROUP = "rq.davidlangworthy.io"
