#!/usr/bin/env bash
# make release: writes the release a cluster can install into DIST (default
# dist/), every file naming the image by digest, plus SHA256SUMS:
#
#   agent-operator-image.oci.tar      the OCI image layout tarball of make image
#   image.txt                         the image by digest: <name>@sha256:<hex>
#   crds.yaml                         the CustomResourceDefinitions of crds/
#   install-cluster-wide.yaml         kubectl kustomize deploy/overlays/<overlay>
#   install-namespaced.yaml           with the image set to its digest (the
#   install-ha.yaml                   kustomize `images:` transformer)
#   agent-operator-<version>.tgz      the Helm chart (helm package) with
#                                     image.digest set in its values.yaml
#   agentctl-linux-amd64              agentctl, static (musl), when AGENTCTL
#                                     names the binary (make release does)
#   SHA256SUMS                        sha256sum of the files above
#
#   [AGENTCTL=path/to/agentctl] hack/release.sh <image tarball> [DIST]
#
# The digest is the image manifest's, as the layout's index.json names it:
# the one a registry answers for the image after hack/push.sh (or crane push)
# put it there. helm and kustomize come from hack/tools/install.sh: nothing
# here needs a kube-apiserver, etcd or kubectl. The image and agentctl are
# linux/amd64 only (the musl target of make image).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
image=${1:?usage: hack/release.sh <image tarball> [DIST]}
dist=${2:-$root/dist}
name=${IMAGE_NAME:-localhost/agent-operator}
version=$(awk -F'"' '/^version = / {print $2; exit}' "$root/Cargo.toml")
[ -s "$image" ] || { echo "no image tarball at $image: run make image" >&2; exit 1; }
tools=$("$root/hack/tools/install.sh" helm kustomize | tail -n1)

# The manifest digest the layout names (one image manifest).
digest=$(tar -xOf "$image" ./index.json | python3 -c '
import json, sys
manifests = json.load(sys.stdin)["manifests"]
assert len(manifests) == 1, manifests
print(manifests[0]["digest"])')
[[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "unexpected digest $digest in $image" >&2; exit 1; }
ref="$name@$digest"

work=$(mktemp -d "$root/.cache/release.XXXXXX")
trap 'rm -rf "$work"' EXIT
rm -rf "$dist"
mkdir -p "$dist"

cp "$image" "$dist/agent-operator-image.oci.tar"
echo "$ref" >"$dist/image.txt"

for crd in "$root"/crds/*.yaml; do
  echo "---"
  cat "$crd"
done >"$dist/crds.yaml"

for overlay in cluster-wide namespaced ha; do
  mkdir -p "$work/$overlay"
  cat >"$work/$overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$work/$overlay" "$root/deploy/overlays/$overlay")
images:
  - name: $name
    digest: $digest
EOF
  "$tools/kustomize" build "$work/$overlay" >"$dist/install-$overlay.yaml"
done

mkdir -p "$work/chart"
cp -r "$root/deploy/helm/agent-operator" "$work/chart/"
values="$work/chart/agent-operator/values.yaml"
sed -i "s|^  digest: \"\"|  digest: \"$digest\"|" "$values"
grep -q "^  digest: \"$digest\"" "$values" || { echo "could not set image.digest in $values" >&2; exit 1; }
HELM_CONFIG_HOME="$work/helm" HELM_CACHE_HOME="$work/helm" HELM_DATA_HOME="$work/helm" \
  "$tools/helm" package "$work/chart/agent-operator" --destination "$dist" >/dev/null
chart="$dist/agent-operator-$version.tgz"
"$tools/helm" template agent-operator "$chart" >"$work/chart.yaml"

# Every image the install manifests and the chart name is the image by digest.
for file in "$dist"/install-*.yaml "$work/chart.yaml"; do
  images=$(sed -n 's/^ *image: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$file" | sort -u)
  [ "$images" = "$ref" ] || { echo "$file names $images, not $ref" >&2; exit 1; }
done

if [ -n "${AGENTCTL:-}" ]; then
  [ -x "$AGENTCTL" ] || { echo "AGENTCTL=$AGENTCTL is not an executable" >&2; exit 1; }
  install -m 0755 "$AGENTCTL" "$dist/agentctl-linux-amd64"
fi

(cd "$dist" && sha256sum -- * >SHA256SUMS)
echo "wrote $dist, the image $ref:" >&2
(cd "$dist" && ls -l --time-style=+ -- *) >&2
