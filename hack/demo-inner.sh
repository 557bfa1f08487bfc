#!/usr/bin/env bash
# Runs inside `testenv` (crates/test-support): KUBECONFIG points at the envtest API server
# and PATH starts with the directory holding our kubectl. hack/demo.sh sets
# DEMO_T0 (its start), DEMO_APISERVER_T0 (when it started testenv) and
# DEMO_TARGET (the cargo target directory); DEMO_KEEP=1 keeps everything up
# until Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
logs="$root/.cache/demo"
bin="${DEMO_TARGET:-$root/target}/debug"
if [ -n "${DEMO_RUST_LOG-}" ]; then export RUST_LOG=$DEMO_RUST_LOG; else unset RUST_LOG; fi
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
step() { # step <start EPOCHREALTIME> <what>: one line, the step and its time
  awk -v from="${1/,/.}" -v to="${EPOCHREALTIME/,/.}" -v what="$2" \
    'BEGIN { printf "%-66s %6.1f s\n", what, to - from }'
}
step "${DEMO_APISERVER_T0:-$EPOCHREALTIME}" "demo: kube-apiserver and etcd up, CRDs installed, examples/ applied"

t=$EPOCHREALTIME
"$bin/control-plane-emulator" --listen 127.0.0.1:8585 --step-seconds 1 >"$logs/emulator.log" 2>&1 &
pids+=($!)
up=
for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/8585) 2>/dev/null && up=1 && break; sleep 0.1; done
[ -n "$up" ] || { echo "demo: the emulator did not listen on 127.0.0.1:8585 within 30 s; $logs/emulator.log:" >&2; tail -n 20 "$logs/emulator.log" >&2; exit 1; }
step "$t" "demo: control plane emulator on http://127.0.0.1:8585"

# The emulator (and the agent servers it serves) listen on 127.0.0.1, which the
# operator's default --allowed-hosts (LangSmith Cloud only) refuses.
t=$EPOCHREALTIME
metrics=127.0.0.1:8080
RUST_BACKTRACE=0 "$bin/agent-operator" run --poll-interval-seconds 1 --allowed-hosts 127.0.0.1 --metrics-addr "$metrics" >"$logs/operator.log" 2>&1 &
operator=$!
pids+=("$operator")
# Ready as the operator counts it from its watch of the API server
# (agent_operator_resources{kind="AgentDeployment",ready="True"}, docs/METRICS.md);
# kubectl confirms it below once it is built.
want=$(cat "$root"/examples/*.yaml | grep -c '^kind: AgentDeployment$')
ready_count() {
  { curl -sf "http://$metrics/metrics" 2>/dev/null || true; } |
    awk '/^agent_operator_resources\{/ && /kind="AgentDeployment"/ && /ready="True"/ { n += $NF } END { print n + 0 }'
}
ready=0
for _ in $(seq 240); do
  ready=$(ready_count)
  [ "$ready" = "$want" ] && break
  kill -0 "$operator" 2>/dev/null || { echo "demo: the operator exited (is $metrics taken?); the end of $logs/operator.log:" >&2; tail -n 20 "$logs/operator.log" >&2; exit 1; }
  sleep 0.5
done
[ "$ready" = "$want" ] || { echo "demo: $ready of $want AgentDeployments Ready after 120 s; the end of $logs/operator.log:" >&2; tail -n 20 "$logs/operator.log" >&2; exit 1; }
step "$t" "demo: operator started, $want AgentDeployments Ready"
step "${DEMO_T0:-$t}" "demo: all Ready, counted from the start of make demo"

t=$EPOCHREALTIME
for _ in $(seq 1200); do [ -e "$logs/kubectl.status" ] && break; sleep 0.5; done
[ "$(cat "$logs/kubectl.status" 2>/dev/null)" = 0 ] || { echo "demo: building kubectl failed; the end of $logs/build.log:" >&2; tail -n 30 "$logs/build.log" >&2; exit 1; }
kubectl wait --for=condition=Ready agentdeployments --all --timeout=60s >/dev/null
step "$t" "demo: kubectl (built meanwhile): kubectl wait --for=condition=Ready"
# The AgentAssistant and the AgentCron of examples/ wait for their
# AgentDeployment (echo-agent), the cron for its assistant too.
t=$EPOCHREALTIME
kubectl wait --for=condition=Ready agentassistants,agentcrons --all --timeout=60s >/dev/null ||
  { kubectl get agentassistants,agentcrons -o wide >&2; echo "demo: the end of $logs/operator.log:" >&2; tail -n 20 "$logs/operator.log" >&2; exit 1; }
step "$t" "demo: the AgentAssistant and the AgentCron Ready (kubectl wait)"
echo
kubectl get agents -o wide   # every kind of the category agents
echo
echo "== the deployments on the control plane"
curl -s -H 'X-Api-Key: demo-api-key' -H 'X-Tenant-Id: 00000000-0000-4000-8000-000000000001' \
  http://127.0.0.1:8585/v2/deployments | python3 -m json.tool | grep -E '"(name|status|latest_revision_id|custom_url)"' || true
echo
url=$(kubectl get agentdeployment support-agent -o jsonpath='{.status.url}')
echo "== the agent server of support-agent at $url (the emulator's built-in echo graph)"
curl -s -H 'X-Api-Key: demo-api-key' "$url/ok"; echo
curl -s -N -H 'X-Api-Key: demo-api-key' -H 'Content-Type: application/json' "$url/runs/stream" \
  -d '{"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "hello"}]}, "stream_mode": "updates"}'
echo
echo
url=$(kubectl get agentdeployment echo-agent -o jsonpath='{.status.url}')
assistant=$(kubectl get agentassistant echo-support -o jsonpath='{.status.assistantId}')
echo "== the AgentAssistant echo-support and the AgentCron echo-morning-digest on echo-agent's agent server"
curl -s -H 'X-Api-Key: demo-api-key' "$url/assistants/$assistant" | python3 -m json.tool |
  grep -E '^    "(assistant_id|graph_id|name|version)"' || true
curl -s -H 'X-Api-Key: demo-api-key' -H 'Content-Type: application/json' "$url/runs/crons/search" \
  -d "{\"assistant_id\": \"$assistant\"}" | python3 -m json.tool |
  grep -E '^        "(cron_id|schedule|timezone|enabled|next_run_date)"' || true
echo
# The commands to look around, with the envtest kubectl (first on PATH here).
look_around() {
  cat <<EOF
  export KUBECONFIG=$KUBECONFIG PATH=$(dirname "$(command -v kubectl)"):\$PATH
  kubectl get agents                     # every kind: control planes, deployments, assistants, crons
  kubectl get agd -w                     # watch them, and in another terminal change one:
  kubectl patch agd support-agent --type merge -p '{"spec":{"sourceRevisionConfig":{"repoRef":"v2"}}}'
  kubectl edit agd support-agent         # any field; the operator converges it
  kubectl describe agd support-agent     # conditions and events
  less $logs/operator.log   # and emulator.log
EOF
}
if [ "${DEMO_KEEP:-}" = 1 ]; then
  echo "== everything stays up until Ctrl-C. In another terminal:"
  look_around
  # Until Ctrl-C (testenv passes it on as SIGTERM), or until a process ends.
  wait -n "${pids[@]}" || true
  echo "a process of the demo ended; its log is in $logs" >&2
  exit 1
fi
echo "demo done: everything started here is stopped now. To look around, run"
echo "make demo KEEP=1 (everything stays up until Ctrl-C), then in another terminal:"
look_around
