"""Benchmarks: a generated 100,000-GPU fleet and the harness timing simulate and reconcile on it."""
