#!/usr/bin/env bash
# Builds the distribution project's registry (hack/registry/main.go: its
# registry package with the in-memory and filesystem drivers and htpasswd
# authentication) from the Go module proxy, pinned by go.mod and go.sum
# here, into .cache/tools/bin/registry at the repository root (git-ignored).
# crates/agent-operator/tests/integration/registry_auth.rs serves images that
# need credentials with it.
#
# Rebuilt only when the pins or main.go changed. Prints the directory holding
# the binary on its last line of stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/.cache/tools/bin"
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
mkdir -p "$out"
exec 9>"$out/.registry.lock"
flock 9

# build <name> <package> [extra ldflags]: the one of hack/tools; main.go is
# part of the pins here.
. "$root/hack/tools/go-build.sh"
pins=$(sha256sum "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -d' ' -f1)
build registry . \
  "-X github.com/distribution/distribution/v3/version.version=$(awk '$1 == "require" && $2 == "github.com/distribution/distribution/v3" { print $3 }' "$here/go.mod")"
echo "$out"
