# syntax=docker/dockerfile:1
# The operator's container image: a static (musl) binary on an empty base,
# with the CA bundle the control plane client verifies HTTPS with, run as a
# numeric non-root user. Pod Security `restricted` (deploy/) relies on it.
#
#   docker build -t localhost/agent-operator:0.1.0 \
#     --build-arg REVISION="$(git rev-parse HEAD)" .
#
# No container engine runs on this project's build machines: this file is
# checked by hadolint (make lint) but not built there. `make image`
# assembles the same image without an engine (hack/image.sh: crane, an OCI
# image layout tarball), and crates/agent-operator/tests/integration/image.rs checks that one.

# Build: on Alpine the Rust host target is x86_64-unknown-linux-musl, linked
# statically by default. ring's C and assembly need gcc (in the image) and
# the musl headers; ca-certificates (in the image) gives the CA bundle.
FROM rust:1.95-alpine AS build
# Alpine's repository keeps only the current build of a package, so a pinned
# version would stop resolving; the Rust toolchain is pinned by the tag.
# hadolint ignore=DL3018
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p agent-operator --bin agent-operator \
 && install -m 0755 target/release/agent-operator /agent-operator

# Run: nothing but the binary and the CA bundle (no shell, no package
# manager, no libc). 65532 is the conventional "nonroot" uid/gid of
# distroless images; a numeric USER lets the kubelet check runAsNonRoot.
FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="agent-operator" \
      org.opencontainers.image.description="Kubernetes operator that runs AI agent server deployments the GitOps way" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /agent-operator /agent-operator
USER 65532:65532
ENTRYPOINT ["/agent-operator"]
CMD ["run"]
