"""The evaluation: a month of a GPU fleet replayed against Jobtree and the schedulers people use.

A shell over the product, as `reconciler` is: it generates or reads a trace (`generate`, `readers`),
plays it through Jobtree's real pipeline (`jobtree`) and through small baseline policies on one
event engine (`engine`, `policies`), and measures and reports the outcomes (`metrics`, `report`,
`figures`, `knobs`). Nothing in `planner`, `schemas` or `reconciler` imports it.
"""
