#!/usr/bin/env bash
# Installs a real agent server for the tests and the demo: a Python virtualenv
# in .cache/langgraph-venv with "langgraph-cli[inmem]" from PyPI, every
# package pinned by hack/agent-server/constraints.txt (pip freeze of a working
# install with Python 3.11). Reused when present and installed from the same
# pins (the stamp file holds their hash). Prints the venv's bin directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cli_version=0.4.40
venv="$root/.cache/langgraph-venv"
constraints="$root/hack/agent-server/constraints.txt"
python=${PYTHON:-python3}

want="langgraph-cli[inmem]==$cli_version $(sha256sum "$constraints" | cut -d' ' -f1)"
# The stamp must match and the venv must still run: its scripts carry the
# absolute path it was created at, so a moved or copied checkout rebuilds it.
if [ -x "$venv/bin/langgraph" ] && [ "$(cat "$venv/.pinned" 2>/dev/null)" = "$want" ] \
  && "$venv/bin/langgraph" --help >/dev/null 2>&1; then
  echo "$venv/bin"
  exit 0
fi
command -v "$python" >/dev/null || { echo "$python is required (3.11 or newer) for the agent server" >&2; exit 1; }
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "the agent server needs Python 3.11 or newer ($python is $("$python" --version 2>&1))" >&2; exit 1; }
echo "installing langgraph-cli[inmem]==$cli_version into $venv" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check \
  -c "$constraints" "langgraph-cli[inmem]==$cli_version" >&2
echo "$want" > "$venv/.pinned"
echo "$venv/bin"
