#!/usr/bin/env bash
# What the fleet benchmark's AgentDeployment writes cost kube-apiserver with
# the CRDs of DIR_A and of DIR_B, side by side (hack/crd-write-cost.py).
# Usage: hack/crd-write-cost.sh DIR_A DIR_B [N] [ROUNDS]
# e.g. mkdir /tmp/old && git show HEAD~1:crds/agentdeployments.agentserver.dev.yaml
#        > /tmp/old/agentdeployments.agentserver.dev.yaml
#      hack/crd-write-cost.sh /tmp/old crds
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 4p "$0"; exit 2; }
assets="$(hack/envtest/install.sh | tail -n1)"
cargo build --quiet --release -p agent-operator-test-support --bin testenv
testenv=target/release/testenv
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
KUBEBUILDER_ASSETS="$assets" "$testenv" --crds "$1" --kubeconfig-out "$work/a" -- \
  env KUBEBUILDER_ASSETS="$assets" "$testenv" --crds "$2" --kubeconfig-out "$work/b" -- \
  env KUBECONFIG_A="$work/a" KUBECONFIG_B="$work/b" python3 hack/crd-write-cost.py "${3:-600}" "${4:-3}" \
  2>&1 | grep -v -e ' INFO ' -e '^KUBECONFIG='
