#!/usr/bin/env bash
# Builds promtool (github.com/prometheus/prometheus/cmd/promtool), the
# checker of Prometheus rule files, from the Go module proxy, pinned by go.mod
# and go.sum here, into .cache/tools/bin/ at the repository root
# (git-ignored). crates/agent-operator/tests/integration/alert_rules.rs runs
# `promtool check rules deploy/prometheus/alerts.yaml` and `promtool test
# rules deploy/prometheus/alerts_test.yaml` with it.
#
# promtool is rebuilt only when the pins changed (the stamp file
# .promtool.pinned next to it holds the hash of go.mod and go.sum). Prints the
# directory holding the binary on its last line of stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/.cache/tools/bin"
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
mkdir -p "$out"
# One builder at a time (make test and hack/setup.sh may both call this).
exec 9>"$out/.promtool.lock"
flock 9

# build <name> <package> [extra ldflags]: the one of hack/tools.
. "$root/hack/tools/go-build.sh"
# promtool's version string (promtool --version), as Prometheus's release
# build sets it: module v0.316.0 is Prometheus 3.16.0.
module_version=$(awk '{ for (i = 1; i < NF; i++) if ($i == "github.com/prometheus/prometheus" && $(i + 1) ~ /^v0\./) print $(i + 1) }' "$here/go.mod")
prometheus_version=$(echo "$module_version" | sed -E 's/^v0\.([0-9]+)([0-9]{2})\.([0-9]+)(.*)$/\1.\2.\3\4/; s/\.0([0-9])\./.\1./')
build promtool github.com/prometheus/prometheus/cmd/promtool \
  "-X github.com/prometheus/common/version.Version=$prometheus_version"
echo "$out"
