#!/usr/bin/env bash
# Installs podman from Debian when it is missing, with what it needs on this machine class: runc (podman's default
# crun fails on hybrid cgroups), buildah, fuse-overlayfs, slirp4netns and uidmap.
#
# Two callers need it: `podman-compose config` in tests/contract/test_compose.py (podman-compose refuses to run
# when `podman version` fails, even for `config`), and infra/image/build-base.sh (the image's engine). A fresh
# machine has no podman, so CI installs it before `make test`.
#
# Idempotent: nothing is done when every package is installed. The last stdout line is "OM_PODMAN_BIN=<path>".
# Usage: infra/tools/install-podman.sh
set -euo pipefail

CACHE="${OM_TOOLS_CACHE:-$HOME/.cache/om-stream/tools}"
mkdir -p "$CACHE"
log() { echo "install-podman: $*" >&2; }

missing=()
for p in podman buildah runc fuse-overlayfs slirp4netns uidmap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || { log "apt-get is needed to install ${missing[*]}"; exit 1; }
  [ "$(id -u)" = 0 ] || { log "need root to apt-get install ${missing[*]}"; exit 1; }
  started=$SECONDS
  log "apt-get install ${missing[*]} (log: $CACHE/apt-podman.log)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$CACHE/apt-podman.log" 2>&1; then
    apt-get update -qq >>"$CACHE/apt-podman.log" 2>&1
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$CACHE/apt-podman.log" 2>&1 \
      || { log "apt-get install failed, see $CACHE/apt-podman.log"; exit 1; }
  fi
  log "installed in $((SECONDS - started))s"
fi
podman version --format '{{.Client.Version}}' >/dev/null 2>&1 || { log "podman is installed but 'podman version' fails"; exit 1; }
log "podman $(podman version --format '{{.Client.Version}}')"
echo "OM_PODMAN_BIN=$(command -v podman)"
