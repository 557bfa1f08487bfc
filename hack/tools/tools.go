//go:build tools

// Package tools pins the command-line tools that the install-manifest and
// image tests and the release run: helm (lint and template of
// deploy/helm/agent-operator), crane (an OCI image assembled without a
// container engine) and kustomize (the release's manifests), built from
// the Go module proxy because no release binary can be downloaded here.
package tools

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "sigs.k8s.io/kustomize/kustomize/v5"
)
