# shellcheck shell=bash
# Sourced by hack/tools/install.sh and hack/promtool/install.sh (not run by
# itself): build(), which builds one Go tool of the module in $here (pinned
# by its go.mod and go.sum) into $out, the directory the caller created and
# locked; $root is the repository root. A tool is rebuilt only when the pins
# changed: the stamp file .<name>.pinned next to it holds the hash of go.mod
# and go.sum.
pins=$(sha256sum "$here/go.mod" "$here/go.sum" | sha256sum | cut -d' ' -f1)
build() { # build <name> <package> [extra ldflags]
  local name=$1 pkg=$2 ldflags=${3:-}
  if [ -x "$out/$name" ] && [ "$(cat "$out/.$name.pinned" 2>/dev/null)" = "$pins" ]; then return 0; fi
  echo "building $name from $pkg (pinned in ${here#"$root"/}/go.mod), once per machine" >&2
  local start=$SECONDS
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$out/$name.tmp" "$pkg")
  mv "$out/$name.tmp" "$out/$name"
  echo "$pins" > "$out/.$name.pinned"
  echo "built $name in $((SECONDS - start)) s" >&2
}
