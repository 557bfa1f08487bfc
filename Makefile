# Everyday targets. The two README commands are `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
export CARGO_TERM_COLOR ?= never
# No incremental compilation under make: a fresh clone (CI) never reuses it,
# and its caches take several GiB next to the debug build (2.3 GiB after a
# few test builds of the operator). `make test CARGO_INCREMENTAL=1` keeps it.
export CARGO_INCREMENTAL ?= 0
# make fuzz: seconds per target, and which targets (empty: all of fuzz/).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
# make demo KEEP=1: everything stays up until Ctrl-C.
KEEP ?=
# make test: tests run at once per test binary. Most integration tests wait
# on processes (an emulator, an operator, kube-apiserver, an agent server)
# far more than they compute, so twice the 2 cores of the development
# machine keeps them busy (docs/DEVELOPMENT.md, "make test").
TEST_THREADS ?= 4
# make image: a static (musl) release build of the operator, assembled into
# an OCI image layout tarball without a container engine (hack/image.sh);
# crates/agent-operator/tests/integration/image.rs reads it from AGENT_OPERATOR_IMAGE.
MUSL_TARGET := x86_64-unknown-linux-musl
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
IMAGE_TAR ?= $(TARGET_DIR)/image/agent-operator.tar
export AGENT_OPERATOR_IMAGE := $(abspath $(IMAGE_TAR))
# make release: the release directory (hack/release.sh), which
# crates/agent-operator/tests/integration/release.rs reads from AGENT_OPERATOR_DIST;
# make push REPOSITORY=registry.example.com/platform/agent-operator (hack/push.sh).
DIST ?= dist
export AGENT_OPERATOR_DIST := $(abspath $(DIST))
REPOSITORY ?=

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

setup: ## what make test needs: checks the prerequisites, then kube-apiserver/etcd/kubectl, the agent server, helm, crane, hadolint, promtool, the GitOps health checker, cargo-deny
	hack/setup.sh

generate: ## regenerate the CRD YAML in crds/ (and the chart's copy), docs/reference.md, the Argo CD health keys (deploy/argocd/argocd-cm.yaml) and the generated tables of the docs (flags, Helm values, metrics, alerts, reasons, benchmark results, agentctl's commands) from the code
	cargo run --quiet -p agent-operator --bin agent-operator -- crds --out crds
	cargo run --quiet -p agent-operator --bin agent-operator -- crds --out deploy/helm/agent-operator/files/crds
	cargo run --quiet -p agent-operator --bin agent-operator -- reference --out docs/reference.md
	cargo run --quiet -p agent-operator --bin agent-operator -- docs
	cargo run --quiet -p agent-operator --bin agentctl -- docs
	python3 hack/argocd-cm.py

lint: ## rustfmt and clippy on every crate (warnings are errors), no import cycle, no function over 60 lines in any crate's src/, every doc link resolves, the fuzz targets compile, hadolint on the Dockerfile, helm lint --strict on the chart
	hack/prereqs.sh lint
	cargo fmt --all -- --check
	cargo fmt --manifest-path fuzz/Cargo.toml -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	# No import cycle between the files of any crate, and no function over 60
	# lines in the sources of any crate, tests inside them included
	# (docs/ARCHITECTURE.md).
	python3 hack/import-cycles.py
	python3 hack/import-cycles.py --upward crates/agent-operator/src/controller
	python3 hack/function-lengths.py --max 60 crates/*/src
	# The docstrings are the code's reference, private items included: every
	# link in them must resolve (links to private items and bare URLs in
	# clap help texts are fine).
	RUSTDOCFLAGS="-D warnings -A rustdoc::private_intra_doc_links -A rustdoc::bare_urls" \
	  cargo doc --quiet --workspace --no-deps --document-private-items
	cargo check --quiet --manifest-path fuzz/Cargo.toml --bins
	tools="$$(hack/tools/install.sh helm hadolint | tail -n1)" && "$$tools/hadolint" Dockerfile \
	  && "$$tools/helm" lint --strict deploy/helm/agent-operator \
	  && "$$tools/helm" lint --strict deploy/helm/agent-operator -f deploy/helm/agent-operator/ci/ha-values.yaml

image: ## the operator's container image without an engine: static musl release build + crane, an OCI tarball in target/image/ (IMAGE_TAR)
	hack/prereqs.sh image
	CC_x86_64_unknown_linux_musl=musl-gcc cargo build --release --locked --target $(MUSL_TARGET) -p agent-operator --bin agent-operator
	hack/image.sh $(TARGET_DIR)/$(MUSL_TARGET)/release/agent-operator $(IMAGE_TAR)

release: image ## dist/: the image tarball, the CRDs, the rendered install manifests and the Helm chart, naming the image by digest, a static agentctl, and SHA256SUMS (hack/release.sh)
	CC_x86_64_unknown_linux_musl=musl-gcc cargo build --release --locked --target $(MUSL_TARGET) -p agent-operator --bin agentctl
	AGENTCTL=$(TARGET_DIR)/$(MUSL_TARGET)/release/agentctl hack/release.sh $(IMAGE_TAR) $(DIST)

push: ## push the image of dist/ to REPOSITORY, check its digest there, write dist/pushed/ naming it (hack/push.sh)
	@[ -n "$(REPOSITORY)" ] || { echo "usage: make push REPOSITORY=registry.example.com/platform/agent-operator" >&2; exit 2; }
	hack/push.sh $(REPOSITORY) $(DIST)

deny: ## cargo deny: licences, bans, sources; advisories too with ADVISORY_DB=<local copy> (hack/deny.sh)
	hack/deny.sh

test: setup lint deny image release ## everything CI runs: setup, lint, cargo deny, the image and the release, unit + integration + end-to-end + install-manifest tests, then the secret scan of every operator log
	rm -rf target/test-logs
	AGENT_OPERATOR_REQUIRE_PREREQUISITES=1 KUBEBUILDER_ASSETS="$$(hack/envtest/install.sh | tail -n1)" cargo test --workspace --all-targets -- --nocapture --test-threads $(TEST_THREADS)
	$(MAKE) secret-scan

secret-scan: ## scan every operator log in target/test-logs for the tests' secret values (after the tests)
	cargo test -p agent-operator --test zz_secret_scan -- --nocapture

bench: ## emulator scale benchmark (prints latencies and memory at 100 and 5,000 deployments)
	cargo bench -p control-plane-emulator --bench emulator_scale

bench-fleet: ## operator fleet benchmark, release binaries vs kube-apiserver + rate-limited emulator (ARGS="s1 s2 --count 500"); appends its figures to crates/agent-operator/benches/results.jsonl (make generate shows them in docs/BENCHMARKS.md)
	cargo build --release --workspace --bins
	KUBEBUILDER_ASSETS="$$(hack/envtest/install.sh | tail -n1)" cargo bench -p agent-operator --bench fleet -- $(ARGS)

faults: setup ## fault suite, full version: SIGKILLs during 100 creates and deletes, control plane faults and a 30 s outage, Kubernetes faults and leader failovers
	FAULT_FULL=1 AGENT_OPERATOR_REQUIRE_PREREQUISITES=1 KUBEBUILDER_ASSETS="$$(hack/envtest/install.sh | tail -n1)" cargo test -p agent-operator --test integration -- --nocapture fault_crash_fleet:: fault_control_plane:: fault_kubernetes::

record-alert-series: setup ## rerecord deploy/prometheus/recorded/ (the series the alert rules are tested on) from real runs: a healthy leader, a frozen kube-apiserver, a throttled control plane, a stalled resource, a lost leader (minutes)
	AGENT_OPERATOR_REQUIRE_PREREQUISITES=1 KUBEBUILDER_ASSETS="$$(hack/envtest/install.sh | tail -n1)" cargo test -p agent-operator --test integration -- --ignored --nocapture alert_series::

fuzz: ## fuzz the wire decoders, FUZZ_SECONDS (60) per target (cargo fuzz, nightly; not part of test)
	FUZZ_SECONDS=$(FUZZ_SECONDS) hack/fuzz.sh $(FUZZ_TARGETS)

demo: ## a real kube-apiserver, the emulator, the operator and examples/ reaching Ready; KEEP=1 keeps them up until Ctrl-C
	DEMO_KEEP=$(KEEP) hack/demo.sh

.PHONY: help setup generate lint image release push deny test secret-scan bench faults bench-fleet record-alert-series fuzz demo
