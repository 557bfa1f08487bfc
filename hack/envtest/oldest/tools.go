//go:build tools

// Package oldest pins the oldest kube-apiserver this project claims to support
// (docs/VERSIONING.md, "Supported Kubernetes versions"). Only the test that
// installs the CRDs and the pod policy on it uses this build; etcd is shared
// with the current version (../go.mod).
package oldest

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
