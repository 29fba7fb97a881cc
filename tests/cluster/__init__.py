"""Cluster tests: code that talks to Kubernetes, against a real kube-apiserver, etcd and kwok (tests/support/controlplane)."""
