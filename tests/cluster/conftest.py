"""Cluster tests run against the real control plane: the `server` and `west` fixtures (tests/support/controlplane/fixtures.py)."""
