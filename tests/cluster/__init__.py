"""Cluster tests: code that talks to Kubernetes, against the in-process API server (tests/support/kubeapi)."""
