# Everyday targets. The two README commands are `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
export CARGO_TERM_COLOR ?= never
# make fuzz: seconds per target, and which targets (empty: all of fuzz/).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

setup: ## install the prerequisites (Rust components, Go, kube-apiserver/etcd/kubectl built from source, cargo-deny)
	hack/setup.sh

generate: ## regenerate the CRD YAML in crds/ and docs/reference.md from the Rust types
	cargo run --quiet --bin agent-operator -- crds --out crds
	cargo run --quiet --bin agent-operator -- reference --out docs/reference.md

lint: ## rustfmt and clippy, warnings are errors
	cargo fmt --all -- --check
	cargo fmt --manifest-path fuzz/Cargo.toml -- --check
	cargo clippy --all-targets -- -D warnings

deny: ## cargo deny: licences, bans, sources; advisories too with ADVISORY_DB=<local copy> (hack/deny.sh)
	hack/deny.sh

test: setup lint deny ## everything CI runs: setup, lint, cargo deny, unit + integration + end-to-end tests, then the secret scan of every operator log
	rm -rf target/test-logs
	KUBEBUILDER_ASSETS="$$(hack/envtest/install.sh | tail -n1)" cargo test --all-targets -- --nocapture
	$(MAKE) secret-scan

secret-scan: ## scan every operator log in target/test-logs for the tests' secret values (after the tests)
	cargo test --test zz_secret_scan -- --nocapture

bench: ## emulator scale benchmark (prints latencies and memory at 100 and 5,000 deployments)
	cargo bench --bench emulator_scale

bench-fleet: ## operator fleet benchmark, release binaries vs kube-apiserver + rate-limited emulator (ARGS="s1 s2 --count 500")
	cargo build --release --bins
	KUBEBUILDER_ASSETS="$$(hack/envtest/install.sh | tail -n1)" cargo bench --bench fleet -- $(ARGS)

faults: setup ## fault suite, full version: SIGKILLs during 100 creates and deletes, control plane faults and a 30 s outage, Kubernetes faults and leader failovers
	FAULT_FULL=1 KUBEBUILDER_ASSETS="$$(hack/envtest/install.sh | tail -n1)" cargo test --test fault_crash_fleet --test fault_control_plane --test fault_kubernetes -- --nocapture

fuzz: ## fuzz the wire decoders, FUZZ_SECONDS (60) per target (cargo fuzz, nightly; not part of test)
	FUZZ_SECONDS=$(FUZZ_SECONDS) hack/fuzz.sh $(FUZZ_TARGETS)

demo: setup ## a real kube-apiserver, the emulator, the operator and examples/ reaching Ready
	hack/demo.sh

.PHONY: help setup generate lint deny test secret-scan bench faults bench-fleet fuzz demo
