//go:build tools

// Package envtest pins the Kubernetes control plane binaries that the tests and
// the demo run: kube-apiserver, kubectl and etcd, built from the Go module proxy
// because no release binary can be downloaded on our machines.
package envtest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
