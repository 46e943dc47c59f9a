#!/usr/bin/env bash
# Installs Jaeger v2 (an OpenTelemetry Collector distribution with Jaeger's storage and query API), built from the
# Go module proxy, into the tools cache: the tracing backend the tests of issue 31 start like Kafka and Cassandra.
# No release binary, no GitHub download.
#
# Jaeger's go.mod holds replace directives, so `go install pkg@version` refuses it; the Go proxy's way is a module
# of our own that names it as a tool (`go get -tool`), then `go build` of that tool. The first build takes about 15
# minutes on 2 idle cores (about 50 at nice 19 on a busy machine) and downloads a few hundred modules; later runs
# find the binary in the cache.
#
# Idempotent. Prints "OM_JAEGER=<path to the binary>" on stdout's last line. Usage: infra/tools/install-jaeger.sh
set -euo pipefail

JAEGER_VERSION="${JAEGER_VERSION:-v1.75.0}"  # the module's tag; its cmd/jaeger is Jaeger v2
CACHE="${OM_TOOLS_CACHE:-$HOME/.cache/om-stream/tools}"
dest="$CACHE/jaeger-$JAEGER_VERSION"
log() { echo "install-jaeger: $*" >&2; }

if [ ! -x "$dest/jaeger" ]; then
  command -v go >/dev/null || { log "go is needed to build jaeger (the Go module proxy serves its source)"; exit 1; }
  mkdir -p "$CACHE"
  work="$(mktemp -d "$CACHE/.build-jaeger.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  started=$SECONDS
  log "building jaeger $JAEGER_VERSION from the Go module proxy (2 cores: about 15 minutes the first time)"
  (cd "$work" && go mod init om-stream.local/jaeger-build >/dev/null 2>&1 \
    && GOFLAGS=-mod=mod go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION" \
    && CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false -trimpath" \
       go build -ldflags "-s -w" -o "$work/bin/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger)
  rm -rf "$dest"
  mkdir -p "$dest"
  mv "$work/bin/jaeger" "$dest/jaeger"
  log "jaeger $JAEGER_VERSION built in $((SECONDS - started))s"
else
  log "jaeger $JAEGER_VERSION cached at $dest"
fi
echo "OM_JAEGER=$dest/jaeger"
