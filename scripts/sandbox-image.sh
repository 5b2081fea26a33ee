#!/usr/bin/env bash
# sandbox-image.sh [TAG] — builds the default Docker sandbox image locally,
# with no registry: Debian's statically linked busybox in an image FROM
# scratch, /bin/sh and the other applets as symlinks, a nobody user, /tmp and
# /workspace. Default TAG: rath-sandbox:busybox (the docker backend's default
# image).
#
# Installs busybox-static with apt-get when missing (root only), as testpg.sh
# does for PostgreSQL. Idempotent: an image already carrying the same content
# label (a hash of busybox and this recipe) is left alone.
set -euo pipefail

tag=${1:-rath-sandbox:busybox}

if ! docker version >/dev/null 2>&1; then
	echo "sandbox-image: no Docker Engine reachable; skipping the image" >&2
	exit 0
fi

busybox=""
for b in /bin/busybox /usr/bin/busybox; do
	if [ -x "$b" ] && file "$b" 2>/dev/null | grep -q 'statically linked'; then
		busybox=$b
		break
	fi
done
if [ -z "$busybox" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "sandbox-image: a static busybox is needed (apt-get install busybox-static)" >&2
		exit 1
	fi
	echo "sandbox-image: installing busybox-static from Debian's packages" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq busybox-static >&2
	busybox=/bin/busybox
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$busybox" "$ctx/busybox"
mkdir -p "$ctx/etc"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/workspace:/bin/sh\n' >"$ctx/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$ctx/etc/group"
cat >"$ctx/Dockerfile" <<'EOF'
FROM scratch
COPY busybox /bin/busybox
COPY etc/ /etc/
RUN ["/bin/busybox", "sh", "-c", "/bin/busybox --install -s /bin && mkdir -p /tmp /workspace && chmod 1777 /tmp && chown 65534:65534 /workspace"]
ENV PATH=/bin
WORKDIR /workspace
USER 65534:65534
CMD ["/bin/sh"]
EOF

label=$(cat "$ctx/busybox" "$ctx/Dockerfile" "$ctx/etc/passwd" "$ctx/etc/group" | sha256sum | cut -c1-32)
have=$(docker image inspect -f '{{ index .Config.Labels "run.rath.sandbox.content" }}' "$tag" 2>/dev/null || true)
if [ "$have" = "$label" ]; then
	echo "sandbox-image: $tag is up to date" >&2
	exit 0
fi
echo "LABEL run.rath.sandbox.content=$label" >>"$ctx/Dockerfile"
echo "sandbox-image: building $tag" >&2
DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >&2
echo "sandbox-image: built $tag" >&2
