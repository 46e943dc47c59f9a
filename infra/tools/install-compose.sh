#!/usr/bin/env bash
# Builds Docker Compose v2 (the `docker compose` plugin, here a standalone binary) from the Go module proxy for
# tests/contract/test_compose.py, which runs `docker-compose config --quiet` on docker-compose.yml: Compose's own
# loader (compose-go) with its interpolation, validation and warnings, no engine needed. `go install` refuses the
# module's `exclude` directives, so the module is copied out of the module cache and built there. Cached; about
# 10 minutes cold on 2 cores. The last stdout line is "OM_DOCKER_COMPOSE=<path>".
# Usage: infra/tools/install-compose.sh
set -euo pipefail

COMPOSE_VERSION="${COMPOSE_VERSION:-v5.6.0}"
CACHE="${OM_TOOLS_CACHE:-$HOME/.cache/om-stream/tools}"
dest="$CACHE/docker-compose-$COMPOSE_VERSION"
if [ ! -x "$dest" ]; then
  command -v go >/dev/null || { echo "install-compose: go is needed (Go module proxy)" >&2; exit 1; }
  mkdir -p "$CACHE"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  dir="$(cd "$work" && go mod init om-stream-compose-fetch >/dev/null 2>&1 \
    && go mod download -json "github.com/docker/compose/v5@$COMPOSE_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  cp -r "$dir" "$work/src"
  chmod -R u+w "$work/src"
  echo "install-compose: building docker compose $COMPOSE_VERSION (cold: about 10 minutes)" >&2
  (cd "$work/src" && go build -trimpath -ldflags "-s -w -X github.com/docker/compose/v5/internal.Version=$COMPOSE_VERSION" \
    -o "$dest.tmp" ./cmd)
  mv "$dest.tmp" "$dest"
fi
echo "OM_DOCKER_COMPOSE=$dest"
