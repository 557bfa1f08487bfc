#!/usr/bin/env bash
# Builds the real Kubernetes control plane binaries used by the tests and the demo
# (kube-apiserver, kubectl, etcd) from the Go module proxy, pinned by go.mod here,
# and caches them in .cache/envtest/<version>/ at the repository root (git-ignored).
#
# If KUBEBUILDER_ASSETS already names a directory holding kube-apiserver and etcd
# (the envtest convention of the Go ecosystem), nothing is built.
#
# Arguments name the binaries to build (default: all three); `make demo` builds
# etcd and kube-apiserver first and kubectl while the demo runs.
#
# `install.sh --oldest` builds instead the kube-apiserver of the oldest
# Kubernetes version the project claims (hack/envtest/oldest/go.mod), next to
# a link to the current etcd: only the supported-versions test uses it.
#
# Prints the directory holding the binaries on its last line of stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
module=$here
oldest=
if [ "${1:-}" = "--oldest" ]; then
  shift
  oldest=1
  module=$here/oldest
  # etcd first, from the current module, so the oldest directory can link it.
  current=$("$here/install.sh" etcd | tail -n1)
  set -- kube-apiserver
fi
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3} $1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' "$module/go.mod")
[ -n "$version" ] || { echo "cannot read the k8s.io/kubernetes version from $module/go.mod" >&2; exit 1; }

if [ -z "$oldest" ] && [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] && [ -x "$KUBEBUILDER_ASSETS/etcd" ]; then
  echo "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS" >&2
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

out="$root/.cache/envtest/$version"
# The version the binaries report (`kubectl version`, /version), as the release build sets it.
ldflags="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
mkdir -p "$out"
# -s -w strips the symbol table and DWARF at link time, so the compiler need
# not write DWARF at all (-dwarf=false): about 5 % less CPU, same binaries
# otherwise.
build() { # build <name> <package>
  local name=$1 pkg=$2
  if [ -x "$out/$name" ]; then return 0; fi
  echo "building $name from $pkg ($version), once per machine; this takes minutes" >&2
  local start=$SECONDS
  (cd "$module" && CGO_ENABLED=0 go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $ldflags" -o "$out/$name.tmp" "$pkg")
  mv "$out/$name.tmp" "$out/$name"
  echo "built $name in $((SECONDS - start)) s" >&2
}
names=("$@")
[ "${#names[@]}" -gt 0 ] || names=(etcd kube-apiserver kubectl)
for name in "${names[@]}"; do
  case "$name" in
    etcd) build etcd go.etcd.io/etcd/server/v3 ;;
    kube-apiserver) build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver ;;
    kubectl) build kubectl k8s.io/kubernetes/cmd/kubectl ;;
    *) echo "unknown binary $name (etcd, kube-apiserver or kubectl)" >&2; exit 2 ;;
  esac
done
[ -z "$oldest" ] || ln -sfn "$current/etcd" "$out/etcd"
echo "$out"
