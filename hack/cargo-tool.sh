#!/usr/bin/env bash
# Installs a pinned cargo subcommand from crates.io into .cache/cargo-tools/
# (git-ignored) unless that version is already there, and prints the path of
# its binary on the last line of stdout.
#
#   hack/cargo-tool.sh cargo-deny    # make deny (part of make test)
#   hack/cargo-tool.sh cargo-fuzz    # make fuzz
#
# `cargo install --locked` builds it with the versions its own Cargo.lock
# pins (minutes the first time, nothing after). The pins live here only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.cache/cargo-tools"

name=${1:?usage: hack/cargo-tool.sh cargo-deny|cargo-fuzz}
case "$name" in
  cargo-deny) version=0.20.2 ;;
  cargo-fuzz) version=0.13.2 ;;
  *) echo "hack/cargo-tool.sh: no pinned version for $name" >&2; exit 2 ;;
esac

bin="$tools/bin/$name"
# Both print "<name> <version>" for --version.
if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "$name $version" ]; then
  echo "$bin"
  exit 0
fi
echo "installing $name $version into $tools (first time only)" >&2
start=$SECONDS
cargo install --quiet --locked --force "$name" --version "$version" --root "$tools" >&2
echo "$name $version installed ($((SECONDS - start)) s)" >&2
echo "$bin"
