#!/usr/bin/env bash
# Runs inside `testenv` (crates/test-support): KUBECONFIG points at the envtest API server
# and PATH starts with the directory holding our kubectl.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
logs="$root/.cache/demo"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

echo "== control plane emulator on http://127.0.0.1:8585 (log: $logs/emulator.log)"
"$root/target/debug/control-plane-emulator" --listen 127.0.0.1:8585 --step-seconds 1 >"$logs/emulator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8585) 2>/dev/null && break; sleep 0.1; done

echo "== agent-operator (log: $logs/operator.log)"
# The emulator (and the agent servers it serves) listen on 127.0.0.1, which the
# operator's default --allowed-hosts (LangSmith Cloud only) refuses.
"$root/target/debug/agent-operator" run --poll-interval-seconds 1 --allowed-hosts 127.0.0.1 >"$logs/operator.log" 2>&1 &
pids+=($!)

echo "== kubectl apply -f examples/"
kubectl apply -f "$root/examples/"
echo "== kubectl wait --for=condition=Ready agentdeployments --all"
kubectl wait --for=condition=Ready agentdeployments --all --timeout=120s
echo
kubectl get agentcontrolplanes,agentdeployments -o wide
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
echo "demo done: everything started here is stopped now."
