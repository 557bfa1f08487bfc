#!/usr/bin/env bash
# Assembles the operator's container image without a container engine (none
# runs on the build machines), the same image the Dockerfile describes: no
# base (scratch), a layer with the CA bundle (/etc/ssl/certs/
# ca-certificates.crt, this machine's, from Debian's ca-certificates: the
# control plane client verifies HTTPS against it), a layer with the static
# musl binary /agent-operator, entrypoint /agent-operator, command `run`,
# user 65532:65532 (numeric, non-root), OCI labels. Written as an OCI image layout tarball (oci-layout, index.json,
# blobs/sha256/...), which `podman load`, `skopeo copy oci-archive:...` and
# `docker load` (Docker 25 or newer) read.
#
#   hack/image.sh <static binary> <output tarball>
#
# crane (hack/tools/install.sh) builds the image: it pushes it to a registry
# it serves itself on 127.0.0.1 (in memory, gone when this script exits),
# sets the config there, and pulls it back as an OCI layout. Nothing is
# downloaded. The layer is reproducible: fixed owner, mode and mtime
# (SOURCE_DATE_EPOCH, default the commit's time).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=${1:?usage: hack/image.sh <static binary> <output tarball>}
ca_bundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
# The image's name, as deploy/ references it.
name=${IMAGE_NAME:-localhost/agent-operator}
output=${2:?usage: hack/image.sh <static binary> <output tarball>}
tools=$("$root/hack/tools/install.sh" crane | tail -n1)
crane="$tools/crane"

version=$(awk -F'"' '/^version = / {print $2; exit}' "$root/Cargo.toml")
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}

# A static binary only: the image has no libc and no dynamic loader.
if file "$binary" | grep -q 'dynamically linked'; then
  echo "$binary is dynamically linked; build it for x86_64-unknown-linux-musl" >&2
  exit 1
fi

work=$(mktemp -d)
registry_pid=
cleanup() {
  [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

[ -s "$ca_bundle" ] || { echo "no CA bundle at $ca_bundle (install ca-certificates, or set CA_BUNDLE)" >&2; exit 1; }

layer() { # layer <tar> <path in the image> <source file> <mode>
  local dir="$work/rootfs-$(basename "$1" .tar)"
  install -D -m "$4" "$3" "$dir/$2"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    -C "$dir" -cf "$1" "$2"
}
layer "$work/certs.tar" etc/ssl/certs/ca-certificates.crt "$ca_bundle" 0644
# Without symbols (binutils' strip): a quarter smaller, same code.
if command -v strip >/dev/null 2>&1; then
  strip -o "$work/agent-operator" "$binary"
  binary="$work/agent-operator"
fi
layer "$work/binary.tar" agent-operator "$binary" 0755

"$crane" registry serve --address 127.0.0.1:0 >"$work/registry.log" 2>&1 &
registry_pid=$!
port=
for _ in $(seq 50); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "crane registry did not start:" >&2; cat "$work/registry.log" >&2; exit 1; }
ref="127.0.0.1:$port/agent-operator:$version"

"$crane" append --oci-empty-base --platform linux/amd64 \
  -f "$work/certs.tar" -f "$work/binary.tar" -t "$ref" >/dev/null
"$crane" mutate "$ref" -t "$ref" \
  --set-platform linux/amd64 \
  --entrypoint /agent-operator \
  --cmd run \
  --user 65532:65532 \
  --workdir / \
  -l org.opencontainers.image.title=agent-operator \
  -l "org.opencontainers.image.description=Kubernetes operator that runs AI agent server deployments the GitOps way" \
  -l org.opencontainers.image.licenses=Apache-2.0 \
  -l "org.opencontainers.image.version=$version" \
  -l "org.opencontainers.image.revision=$revision" >/dev/null
"$crane" pull --format oci "$ref" "$work/layout"
# The name the image loads as (docker load, podman load, ctr import): the
# layout's index names its manifest.
python3 - "$work/layout/index.json" "$name:$version" "$version" <<'PY'
import json, sys
path, name, tag = sys.argv[1:]
index = json.load(open(path))
for manifest in index["manifests"]:
    manifest.setdefault("annotations", {}).update({
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": tag,
    })
json.dump(index, open(path, "w"), indent=2, sort_keys=True)
PY

mkdir -p "$(dirname "$output")"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --mode=u=rwX,go=rX \
  -C "$work/layout" -cf "$output.tmp" .
mv "$output.tmp" "$output"
echo "wrote $output ($(du -h "$output" | cut -f1); the binary $(du -h "$binary" | cut -f1) uncompressed)" >&2
"$crane" config "$ref" >&2
echo >&2
