//go:build tools

// The programs this module pins: kube-apiserver, and etcd at the version kube-apiserver requires.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
