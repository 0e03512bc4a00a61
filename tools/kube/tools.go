//go:build tools

// Package tools pins the Kubernetes control-plane commands that Tephra's real test tier runs.
// Build with scripts/build-kube.sh; nothing here is Tephra code.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
