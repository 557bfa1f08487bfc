#!/usr/bin/env bash
# Builds hack/health (kstatus + the Argo CD Lua health check under gopher-lua,
# used by crates/agent-operator/tests/integration/gitops_health.rs) from the Go module proxy, pinned by go.mod
# and go.sum here, into .cache/health/<hash of the sources>/health (git-ignored;
# a change of the sources builds a new one). Prints its path on the last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
hash=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-16)
out="$root/.cache/health/$hash"
if [ ! -x "$out/health" ]; then
  echo "building hack/health (kstatus, gopher-lua) once per machine" >&2
  start=$SECONDS
  mkdir -p "$out"
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$out/health.tmp" .)
  mv "$out/health.tmp" "$out/health"
  echo "built hack/health in $((SECONDS - start)) s" >&2
fi
echo "$out/health"
