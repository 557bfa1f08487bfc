#!/usr/bin/env bash
# The demo: a real kube-apiserver + etcd (envtest), the control plane emulator
# and the operator, with the sample resources of examples/ reaching Ready.
# It builds only what it runs: etcd and kube-apiserver from the Go module
# proxy (hack/envtest/install.sh, once into .cache/envtest/) and, at the same
# time, the debug build of agent-operator, control-plane-emulator and
# testenv; then kubectl in the background while the demo runs (testenv
# applies examples/ and the operator's metrics tell when they are Ready, so
# nothing waits for kubectl before that). One line per step, with its time;
# the builds' output goes to .cache/demo/build.log. Everything it starts is stopped when it exits (also
# on Ctrl-C). DEMO_KEEP=1 (make demo KEEP=1) keeps it all up until Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
logs="$root/.cache/demo"
mkdir -p "$logs"
target=${CARGO_TARGET_DIR:-$root/target}
export DEMO_T0=$EPOCHREALTIME
# bash 5.1 or newer (EPOCHREALTIME, wait -n -p).
step() { # step <start EPOCHREALTIME> <what>: one line, the step and its time
  awk -v from="${1/,/.}" -v to="${EPOCHREALTIME/,/.}" -v what="$2" \
    'BEGIN { printf "%-66s %6.1f s\n", what, to - from }'
}

t=$EPOCHREALTIME
hack/prereqs.sh demo
step "$t" "demo: prerequisites"

build_log="$logs/build.log"
: >"$build_log"
t=$EPOCHREALTIME
hack/envtest/install.sh etcd kube-apiserver >"$logs/envtest.out" 2>>"$build_log" &
envtest_pid=$!
# --bin applies to every -p: each binary is named.
cargo build --locked -p agent-operator -p control-plane-emulator -p agent-operator-test-support \
  --bin agent-operator --bin control-plane-emulator --bin testenv >>"$build_log" 2>&1 &
cargo_pid=$!
failed() { # failed <what>
  echo "demo: $1 failed; the end of $build_log:" >&2
  tail -n 30 "$build_log" >&2
  kill "$envtest_pid" "$cargo_pid" 2>/dev/null || true
  exit 1
}
report() { # report <pid> <exit status>: whichever finishes first is reported first
  if [ "$1" = "$envtest_pid" ]; then
    [ "$2" = 0 ] || failed "building kube-apiserver and etcd"
    step "$t" "demo: kube-apiserver, etcd $(basename "$(tail -n1 "$logs/envtest.out")")"
  else
    [ "$2" = 0 ] || failed "cargo build"
    step "$t" "demo: cargo build (agent-operator, control-plane-emulator, testenv)"
  fi
}
status=0
wait -n -p first "$envtest_pid" "$cargo_pid" || status=$?
report "$first" "$status"
second=$([ "$first" = "$envtest_pid" ] && echo "$cargo_pid" || echo "$envtest_pid")
status=0
wait "$second" || status=$?
report "$second" "$status"
# kubectl, for the printout and the commands to look around, in the
# background and below the demo's own priority; hack/demo-inner.sh waits for
# its status file only after the resources are Ready.
rm -f "$logs/kubectl.status"
(
  status=0
  nice -n 10 hack/envtest/install.sh kubectl >/dev/null 2>>"$build_log" || status=$?
  echo "$status" >"$logs/kubectl.status"
) &
export KUBEBUILDER_ASSETS
KUBEBUILDER_ASSETS=$(tail -n1 "$logs/envtest.out")
export DEMO_TARGET=$target
# testenv's own progress only when something goes wrong; hack/demo-inner.sh
# gives the operator and the emulator the caller's RUST_LOG back.
export DEMO_RUST_LOG=${RUST_LOG-} RUST_LOG=warn
export DEMO_APISERVER_T0=$EPOCHREALTIME
exec "$target/debug/testenv" --crds crds --apply examples --kubeconfig-out "$logs/kubeconfig" -- hack/demo-inner.sh
