//go:build tools

// The program this module pins: kwok, the kubelet stand-in for nodes that have no kubelet.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
