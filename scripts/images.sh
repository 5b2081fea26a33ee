#!/usr/bin/env bash
# images.sh [--from-head] [TAG] — builds Rath's images with no registry: static binaries
# built on this host (CGO_ENABLED=0), each in an image FROM scratch with the
# host's CA certificates and an /etc/passwd naming the nonroot user 65532,
# the user the images run as. Default TAG: dev.
#
#   rath-coordinator:TAG   coordinator (port 7420)
#   rath-worker:TAG        worker (health/metrics 7421)
#   rath-natsd:TAG         NATS server with JetStream from e2e/natsd
#                          (-host 0.0.0.0 -port 4222 -store /data), for the
#                          tests: deployments run the official nats image
#
# The Dockerfile at the root builds the same images from a Go builder and
# distroless on machines with registry access; this script is for the
# machines without one (the multi-container e2e, air-gapped CI).
#
# Idempotent: an image already carrying the same content label (a hash of
# its binary and recipe) is left alone. Prints nothing on stdout.
# VERSION (default: git describe, else "dev") is linked into the binaries
# (`coordinator version`) and set as the OCI version label. --from-head
# builds the committed tree (git archive HEAD) instead of the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."

from_head=""
if [ "${1:-}" = --from-head ]; then
	from_head=1
	shift
fi
tag=${1:-dev}

if ! docker version >/dev/null 2>&1; then
	echo "images: no Docker Engine reachable" >&2
	exit 1
fi

version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
certs=""
for c in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
	[ -f "$c" ] && { certs=$c; break; }
done
if [ -z "$certs" ]; then
	echo "images: no CA bundle on this host (apt-get install ca-certificates)" >&2
	exit 1
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

src=.
if [ -n "$from_head" ]; then
	src="$out/src"
	mkdir -p "$src"
	git archive HEAD | tar -x -C "$src"
	version=${VERSION:-$(git describe --tags --always 2>/dev/null || echo dev)}
fi
echo "images: building static binaries ($version)" >&2
(cd "$src" && CGO_ENABLED=0 go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X github.com/rath-run/rath/internal/app.version=$version" \
	-o "$out/bin/" ./cmd/coordinator ./cmd/worker ./e2e/natsd)

# build NAME BINARY PORT ENTRYPOINT_ARGS...: one image FROM scratch.
build() {
	local name=$1 binary=$2 port=$3
	shift 3
	local ctx="$out/$name"
	mkdir -p "$ctx/etc/ssl/certs" "$ctx/home/nonroot" "$ctx/data" "$ctx/tmp"
	chmod 1777 "$ctx/tmp"
	cp "$out/bin/$binary" "$ctx/$binary"
	cp "$certs" "$ctx/etc/ssl/certs/ca-certificates.crt"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/etc/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/etc/group"
	local entry
	entry=$(printf '"%s",' "/usr/local/bin/$binary" "$@")
	cat >"$ctx/Dockerfile" <<EOF
FROM scratch
COPY etc/ /etc/
COPY tmp/ /tmp/
COPY --chown=65532:65532 home/ /home/
COPY --chown=65532:65532 data/ /data/
COPY $binary /usr/local/bin/$binary
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt HOME=/home/nonroot
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE $port
STOPSIGNAL SIGTERM
ENTRYPOINT [${entry%,}]
LABEL org.opencontainers.image.title="$name" \\
      org.opencontainers.image.source="https://github.com/rath-run/rath" \\
      org.opencontainers.image.version="$version" \\
      org.opencontainers.image.revision="$revision"
EOF
	local label have
	label=$(cat "$ctx/$binary" "$ctx/Dockerfile" "$ctx/etc/passwd" "$ctx/etc/ssl/certs/ca-certificates.crt" | sha256sum | cut -c1-32)
	have=$(docker image inspect -f '{{ index .Config.Labels "run.rath.image.content" }}' "$name:$tag" 2>/dev/null || true)
	if [ "$have" = "$label" ]; then
		echo "images: $name:$tag is up to date" >&2
		return 0
	fi
	echo "LABEL run.rath.image.content=$label" >>"$ctx/Dockerfile"
	DOCKER_BUILDKIT=0 docker build -q -t "$name:$tag" "$ctx" >/dev/null
	echo "images: built $name:$tag" >&2
}

build rath-coordinator coordinator 7420
build rath-worker worker 7421
build rath-natsd natsd 4222 -host 0.0.0.0 -port 4222 -store /data
