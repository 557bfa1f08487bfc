#!/usr/bin/env bash
# Checks the prerequisites of a target before any long build, and installs
# the few that a package manager provides when it can (Rust components and
# targets with rustup; golang-go and musl-tools with apt-get, as root or
# through sudo). Every prerequisite still missing prints one line, naming it
# and how to install it, and the script exits 1 after the last check.
#
#   hack/prereqs.sh demo    make demo: cargo, a C compiler, setpriv, curl,
#                           python3, Go (unless the envtest binaries exist)
#   hack/prereqs.sh test    make setup / make test: the above, Python 3.11+
#                           with venv, a C++ compiler, git, tar, file, flock
#   hack/prereqs.sh lint    make lint: rustfmt, clippy, a C++ compiler, Go,
#                           Python 3 with venv
#   hack/prereqs.sh image   make image / make release: the musl target,
#                           musl-gcc, Go, strip, file, tar, git
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:?usage: hack/prereqs.sh demo|test|lint|image}
case "$what" in demo | test | lint | image) ;; *) echo "usage: hack/prereqs.sh demo|test|lint|image" >&2; exit 2 ;; esac
python=${PYTHON:-python3}
missing=0
miss() { # miss <what is missing> <how to install it>
  echo "missing prerequisite: $1 (install: $2)" >&2
  missing=1
}
have() { command -v "$1" >/dev/null 2>&1; }
# apt-get as root, or through sudo; fails without either.
can_apt() { have apt-get && { [ "$(id -u)" = 0 ] || have sudo; }; }
apt_install() { # apt_install <package>...
  echo "installing $* with apt-get (Debian packages)" >&2
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq >&2 && "${sudo[@]}" apt-get install -y -qq "$@" >/dev/null
}
no_apt_how() { # how to install a Debian package without root or sudo here
  if have apt-get; then echo "sudo is missing and this is not root: as root, apt-get install -y $1"
  else echo "this is not a Debian-based system: install $1 with its package manager"; fi
}

# Rust: cargo and rustc, from rustup.
if ! have cargo || ! have rustc; then
  miss "cargo and rustc (Rust)" "https://rustup.rs, then open a new shell"
fi
# A C compiler: ring and the other -sys crates compile C.
if ! have cc; then
  miss "a C compiler (cc)" "apt-get install -y gcc"
fi

case "$what" in demo | test)
  have setpriv || miss "setpriv (starts kube-apiserver and etcd with --pdeathsig)" "apt-get install -y util-linux"
  have curl || miss "curl" "apt-get install -y curl"
  ;;
esac
case "$what" in test | lint | image)
  for tool in git tar file flock; do
    have "$tool" || miss "$tool" "apt-get install -y $(case $tool in flock) echo util-linux ;; *) echo "$tool" ;; esac)"
  done
  ;;
esac

# Python: the demo formats one JSON answer with it; the tests run a real agent
# server (langgraph dev, Python 3.11+) and hadolint from PyPI in virtualenvs.
pyver=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || pyver=
if [ -z "$pyver" ]; then
  miss "$python (Python 3$([ "$what" = test ] && echo ".11 or newer"))" "apt-get install -y python3 python3-venv"
elif [ "$what" = test ] || [ "$what" = lint ]; then
  if [ "$what" = test ] && ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    miss "Python 3.11 or newer for the agent server ($python is $pyver)" \
      "Debian 12: apt-get install -y python3; elsewhere a python3.11 or newer, named by PYTHON=/path/to/python3"
  fi
  if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    miss "Python's venv module with ensurepip" "apt-get install -y python3-venv"
  fi
fi

# A C++ compiler: make lint compiles the fuzz targets (libFuzzer is C++).
case "$what" in test | lint)
  have c++ || miss "a C++ compiler (c++)" "apt-get install -y g++"
  ;;
esac

# Rust components and the musl target, added with rustup when it is here.
if have cargo; then
  case "$what" in test | lint)
    have rustup && rustup component add rustfmt clippy >/dev/null 2>&1 || true
    cargo fmt --version >/dev/null 2>&1 || miss "rustfmt" "rustup component add rustfmt"
    cargo clippy --version >/dev/null 2>&1 || miss "clippy" "rustup component add clippy"
    ;;
  esac
  case "$what" in test | image)
    musl=x86_64-unknown-linux-musl
    installed() { [ -d "$(rustc --print sysroot)/lib/rustlib/$musl" ]; }
    installed || { have rustup && rustup target add "$musl" >/dev/null 2>&1; } || true
    installed || miss "the Rust target $musl (a static operator binary)" "rustup target add $musl"
    ;;
  esac
fi

# musl-gcc (Debian's musl-tools) compiles ring's C for the static binary.
case "$what" in test | image)
  if ! have musl-gcc; then
    if can_apt; then apt_install musl-tools || true; fi
    have musl-gcc || miss "musl-gcc (compiles C for the static binary)" "$(can_apt && echo "apt-get install -y musl-tools" || no_apt_how musl-tools)"
  fi
  have strip || miss "strip" "apt-get install -y binutils"
  ;;
esac

# Go builds kube-apiserver, etcd and kubectl (and helm, crane, promtool) from
# the Go module proxy; a Go older than a go.mod asks for fetches the newer
# toolchain from the proxy itself. The demo needs it only until the envtest
# binaries are built.
need_go=1
if [ "$what" = demo ]; then
  version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' "$root/hack/envtest/go.mod")
  assets=${KUBEBUILDER_ASSETS:-$root/.cache/envtest/$version}
  if [ -x "$assets/kube-apiserver" ] && [ -x "$assets/etcd" ] && [ -x "$assets/kubectl" ]; then need_go=; fi
fi
if [ -n "$need_go" ] && ! have go; then
  if can_apt; then apt_install golang-go || true; fi
  have go || miss "Go (builds kube-apiserver, etcd and kubectl from the Go module proxy)" \
    "$(can_apt && echo "apt-get install -y golang-go" || no_apt_how golang-go)"
fi

exit "$missing"
