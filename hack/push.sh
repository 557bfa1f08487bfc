#!/usr/bin/env bash
# Pushes the release image of DIST (make release; default dist/) to a
# registry of yours and writes the install manifests naming it there:
#
#   hack/push.sh <repository> [DIST]      e.g. registry.example.com/platform/agent-operator
#
# 1. checks DIST against its SHA256SUMS;
# 2. pushes the image (crane push of the OCI layout) as <repository>:<version>;
# 3. checks that the registry answers, for <repository>@<digest>, the digest
#    that DIST/image.txt and the manifests name (a registry that changed the
#    image, or a release whose files disagree, stops here);
# 4. writes DIST/pushed/: the install-*.yaml of DIST with the image
#    <repository>@<digest>, image.txt, and SHA256SUMS.
# The Helm chart of DIST pins the digest already: install it with
# --set image.repository=<repository>.
#
# crane (hack/tools/install.sh) uses your registry login (crane auth login,
# or docker login); 127.0.0.1 and localhost are spoken to over plain HTTP.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repository=${1:?usage: hack/push.sh <repository> [DIST]}
dist=${2:-$root/dist}
version=$(awk -F'"' '/^version = / {print $2; exit}' "$root/Cargo.toml")
crane="$("$root/hack/tools/install.sh" crane | tail -n1)/crane"
[[ $repository != *@* && ! $repository =~ :[^/]*$ ]] ||
  { echo "give a repository without a tag or digest, e.g. registry.example.com/platform/agent-operator" >&2; exit 2; }

[ -f "$dist/SHA256SUMS" ] || { echo "no release in $dist: run make release" >&2; exit 1; }
(cd "$dist" && sha256sum --check --quiet --strict SHA256SUMS) ||
  { echo "$dist does not match its SHA256SUMS" >&2; exit 1; }
released=$(cat "$dist/image.txt")
name=${released%@*}
digest=${released#*@}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/layout"
tar -xf "$dist/agent-operator-image.oci.tar" -C "$work/layout"
pushed=$("$crane" push "$work/layout" "$repository:$version")
[ "${pushed#*@}" = "$digest" ] ||
  { echo "the registry holds $pushed, but $dist names $digest" >&2; exit 1; }
answered=$("$crane" digest "$repository@$digest")
[ "$answered" = "$digest" ] ||
  { echo "$repository@$digest: the registry answers $answered" >&2; exit 1; }

out="$dist/pushed"
rm -rf "$out"
mkdir -p "$out"
for file in "$dist"/install-*.yaml; do
  grep -qF "image: $released" "$file" || { echo "$file does not name $released" >&2; exit 1; }
  sed "s|image: $name@$digest|image: $repository@$digest|" "$file" >"$out/$(basename "$file")"
done
echo "$repository@$digest" >"$out/image.txt"
(cd "$out" && sha256sum -- * >SHA256SUMS)
echo "pushed $repository:$version ($digest); the manifests naming it are in $out:" >&2
echo "  kubectl apply --server-side -f $dist/crds.yaml && kubectl apply --server-side -f $out/install-cluster-wide.yaml" >&2
echo "  or: helm install agent-operator $dist/agent-operator-$version.tgz -n agent-operator --create-namespace --set image.repository=$repository" >&2
