#!/usr/bin/env bash
# The demo: a real kube-apiserver + etcd (envtest), the control plane emulator
# and the operator, with the sample resources of examples/ reaching Ready.
# Everything it starts is stopped when it exits (also on Ctrl-C).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
assets=$(hack/envtest/install.sh | tail -n1)
export KUBEBUILDER_ASSETS=$assets
cargo build --quiet --workspace --bins
mkdir -p .cache/demo
exec target/debug/testenv --crds crds --kubeconfig-out .cache/demo/kubeconfig -- hack/demo-inner.sh
