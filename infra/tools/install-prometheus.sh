#!/usr/bin/env bash
# Installs a Prometheus server binary for the dashboard proof (tests/integration/test_dashboards_prometheus.py).
#
# Source: Debian's `prometheus` package (bookworm: 2.42.0), fetched with `apt-get download` and unpacked into a
# cache with dpkg-deb: nothing is installed system-wide, no service is started, no postinst runs. The binary needs
# only libc, so no other package.
#
# Idempotent: a cached binary is reused. The last stdout line is "OM_PROMETHEUS_BIN=<path>" (callers can eval it;
# the test finds the cached binary by itself). Usage: infra/tools/install-prometheus.sh
set -euo pipefail

CACHE="${OM_TOOLS_CACHE:-$HOME/.cache/om-stream/tools}"
log() { echo "install-prometheus: $*" >&2; }

existing="$(ls -d "$CACHE"/prometheus-*/usr/bin/prometheus 2>/dev/null | sort -V | tail -1 || true)"
if [ -n "$existing" ] && "$existing" --version >/dev/null 2>&1; then
  log "cached: $existing"
  echo "OM_PROMETHEUS_BIN=$existing"
  exit 0
fi

command -v apt-get >/dev/null || { log "apt-get is needed (Debian's prometheus package)"; exit 1; }
version="$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')"
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
  log "refreshing the package lists"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
  version="$(apt-cache policy prometheus | awk '/Candidate:/ {print $2}')"
fi
[ -n "$version" ] && [ "$version" != "(none)" ] || { log "no prometheus package in the apt sources"; exit 1; }

started=$SECONDS
work="$(mktemp -d)"
chmod 755 "$work"  # apt's download sandbox user must be able to write there
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -q "prometheus=$version" >&2)
dest="$CACHE/prometheus-${version%%+*}"
rm -rf "$dest"
mkdir -p "$dest"
dpkg-deb -x "$work"/prometheus_*.deb "$dest"
# the console templates and the default config are not needed; keep only the server and promtool
find "$dest" -mindepth 1 -maxdepth 1 ! -name usr -exec rm -rf {} +
"$dest/usr/bin/prometheus" --version >&2
log "Prometheus $version unpacked in $((SECONDS - started))s"
echo "OM_PROMETHEUS_BIN=$dest/usr/bin/prometheus"
