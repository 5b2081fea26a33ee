# syntax=docker/dockerfile:1
#
# Rath's images, one target per binary:
#
#   docker build --target coordinator -t rath-coordinator .
#   docker build --target worker      -t rath-worker .
#   docker build --target worker-local -t rath-worker-local .   # + busybox for local sandboxes
#   docker build --target rathctl     -t rathctl .
#
# The binaries are static (CGO_ENABLED=0: the SQLite driver is modernc's
# pure-Go one), so the runtime is distroless/static: CA certificates,
# /etc/passwd with the nonroot user 65532, tzdata, and no shell. Build args
# VERSION and REVISION end up in `coordinator version` and the OCI labels.
#
# Without a registry (air-gapped CI, this repository's tests), use
# scripts/images.sh: the same images FROM scratch with binaries built on the
# host. docs/deploy.md has both paths.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
# The module and build caches are mounts, so a rebuild after a source
# change downloads and compiles only what changed.
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/rath-run/rath/internal/app.version=${VERSION}" \
      -o /out/ ./cmd/coordinator ./cmd/worker ./cmd/rathctl

# The common runtime: static binaries need nothing but CA certificates
# (model APIs over TLS, Postgres with sslmode=verify-full) and a user.
FROM gcr.io/distroless/static-debian12:nonroot AS runtime
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=
LABEL org.opencontainers.image.source="https://github.com/rath-run/rath" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.vendor="Rath"
USER 65532:65532
WORKDIR /home/nonroot

FROM runtime AS coordinator
LABEL org.opencontainers.image.title="rath-coordinator" \
      org.opencontainers.image.description="Rath coordinator: HTTP API, run orchestration, reconciliation"
COPY --from=build /out/coordinator /usr/local/bin/coordinator
EXPOSE 7420
ENTRYPOINT ["/usr/local/bin/coordinator"]

FROM runtime AS worker
LABEL org.opencontainers.image.title="rath-worker" \
      org.opencontainers.image.description="Rath worker: pulls step jobs, runs agents, commits versions"
COPY --from=build /out/worker /usr/local/bin/worker
EXPOSE 7421
# SIGTERM drains: the worker stops pulling and gives steps in flight
# --shutdown-timeout (30s) to finish; give it longer before SIGKILL
# (docker stop -t 40, terminationGracePeriodSeconds: 45).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/worker"]

# worker-local is the worker with a busybox userland (/busybox/sh), for the
# `local` sandbox backend inside the worker's own container (Kubernetes
# without a Docker Engine on the node). The container is then the sandbox
# boundary: run it with the hardened securityContext of deploy/k8s.
FROM gcr.io/distroless/static-debian12:debug-nonroot AS worker-local
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="rath-worker-local" \
      org.opencontainers.image.description="Rath worker with busybox for in-container local sandboxes" \
      org.opencontainers.image.source="https://github.com/rath-run/rath" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
ENV PATH=/usr/local/bin:/busybox
COPY --from=build /out/worker /usr/local/bin/worker
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 7421
ENTRYPOINT ["/usr/local/bin/worker"]

FROM runtime AS rathctl
LABEL org.opencontainers.image.title="rathctl" \
      org.opencontainers.image.description="Rath's command-line client"
COPY --from=build /out/rathctl /usr/local/bin/rathctl
ENTRYPOINT ["/usr/local/bin/rathctl"]
