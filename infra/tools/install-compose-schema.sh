#!/usr/bin/env bash
# Fetches the compose specification's JSON schema for tests/contract/test_compose.py, from a package registry:
# the schema ships inside the Go module github.com/compose-spec/compose-go/v2 (schema/compose-spec.json, the file
# Docker Compose itself validates with), served by the Go module proxy. Cached; idempotent.
# The last stdout line is "OM_COMPOSE_SCHEMA=<path>". Usage: infra/tools/install-compose-schema.sh
set -euo pipefail

COMPOSE_GO_VERSION="${COMPOSE_GO_VERSION:-v2.16.2}"
CACHE="${OM_TOOLS_CACHE:-$HOME/.cache/om-stream/tools}"
dest="$CACHE/compose-spec-$COMPOSE_GO_VERSION.json"
if [ ! -s "$dest" ]; then
  command -v go >/dev/null || { echo "install-compose-schema: go is needed (Go module proxy)" >&2; exit 1; }
  mkdir -p "$CACHE"
  dir="$(GOFLAGS=-mod=mod go mod download -json "github.com/compose-spec/compose-go/v2@$COMPOSE_GO_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  cp "$dir/schema/compose-spec.json" "$dest.tmp"
  mv "$dest.tmp" "$dest"
  echo "install-compose-schema: compose-go $COMPOSE_GO_VERSION schema cached" >&2
fi
echo "OM_COMPOSE_SCHEMA=$dest"
