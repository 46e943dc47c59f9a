#!/usr/bin/env bash
# Builds the om-stream image from the Dockerfile and tags it om-stream:<version> (version from pyproject.toml).
# `make image` runs it. No container registry is used: the base image comes from infra/image/build-base.sh; pip
# inside the build reaches the package index (PyPI) through the host network.
#   - podman/buildah with --format docker (a HEALTHCHECK survives only in the docker format), or a docker whose
#     daemon answers (classic builder, DOCKER_BUILDKIT=0: BuildKit is not installed and would pull a frontend)
#   - the layer cache makes a code-only change rebuild only the package layers (see the Dockerfile)
#   - prints the image size and what drives it: the largest site-packages directories, measured inside the image
# The last stdout lines are "OM_IMAGE_ENGINE=...", "CONTAINERS_CONF=..." and "OM_IMAGE=om-stream:<version>".
# Usage: infra/image/build.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
log() { echo "image: $*" >&2; }

eval "$(bash "$ROOT/infra/image/build-base.sh" | grep -E '^(OM_IMAGE_ENGINE|CONTAINERS_CONF)=')"
export CONTAINERS_CONF
[ -n "$CONTAINERS_CONF" ] || unset CONTAINERS_CONF
ENGINE="$OM_IMAGE_ENGINE"

VERSION="$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "$ROOT/pyproject.toml")"
IMAGE="om-stream:$VERSION"

previous="$("$ENGINE" image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
started=$SECONDS
log "building $IMAGE with $ENGINE"
if [ "$ENGINE" = podman ]; then
  podman build --format docker --network=host --layers -t "$IMAGE" -f "$ROOT/Dockerfile" "$ROOT" >&2
else
  DOCKER_BUILDKIT=0 docker build --network=host -t "$IMAGE" -f "$ROOT/Dockerfile" "$ROOT" >&2
fi
log "built $IMAGE in $((SECONDS - started))s"

current="$("$ENGINE" image inspect --format '{{.Id}}' "$IMAGE")"
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
  # the image this tag named before, now untagged: removed so rebuilds do not pile up (kept if something uses it)
  "$ENGINE" rmi "$previous" >/dev/null 2>&1 && log "removed the previous build ${previous:0:12}" || true
fi

size="$("$ENGINE" image inspect --format '{{.Size}}' "$IMAGE")"
log "size of $IMAGE: $((size / 1000000)) MB ($size bytes); the largest parts, measured inside it (MB):"
"$ENGINE" run --rm --network=none --user 0 "$IMAGE" sh -c '
  site=$(echo /opt/om-stream/lib/python3.*/site-packages)
  du -sm / --exclude=/proc --exclude=/sys --exclude=/opt 2>/dev/null | sed "s|/\$|base system (all but /opt)|"
  du -sm /opt/om-stream | sed "s|\$| (the virtualenv)|"
  du -sm "$site"/* | sort -rn | head -12' | sed 's/^/image:   /' >&2

echo "OM_IMAGE_ENGINE=$ENGINE"
echo "CONTAINERS_CONF=${CONTAINERS_CONF:-}"
echo "OM_IMAGE=$IMAGE"
