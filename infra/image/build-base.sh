#!/usr/bin/env bash
# Makes the base image the Dockerfile starts from, docker.io/library/python:3.11-slim-bookworm, without a container
# registry: none can be pulled on these machines. The stand-in is Debian bookworm's own Python 3.11, made with
#   debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm ROOTFS <apt's mirror>
# plus /usr/local/bin/python (where the official image has its python) and the machine's CA bundle (so pip inside
# a build reaches the package index through whatever CA this machine trusts), then imported into the engine.
#
# Engine: podman when present (installed by infra/tools/install-podman.sh if neither podman nor a running docker is
# there), else a docker whose daemon answers. The rootfs tarball is cached under
# ~/.cache/om-stream/image/, so a second run only imports (or does nothing when the engine already has the image).
# Prints what it did on stderr; the last stdout lines are "OM_IMAGE_ENGINE=<podman|docker>" and
# "CONTAINERS_CONF=<file>" (runc and ulimits below the host's, for podman), so callers can `eval` them.
# Usage: infra/image/build-base.sh [--force]   (--force: debootstrap again and re-import)
set -euo pipefail

BASE_IMAGE="${OM_BASE_IMAGE:-docker.io/library/python:3.11-slim-bookworm}"
SUITE=bookworm
CACHE="${OM_IMAGE_CACHE:-$HOME/.cache/om-stream/image}"
TARBALL="$CACHE/python-3.11-slim-$SUITE-rootfs.tar"
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1
mkdir -p "$CACHE"

log() { echo "build-base: $*" >&2; }

apt_install() {  # apt_install PACKAGE... (only those missing)
  local missing=() p
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return
  [ "$(id -u)" = 0 ] || { log "need root to apt-get install ${missing[*]}"; exit 1; }
  log "apt-get install ${missing[*]}"
  apt-get update -qq >>"$CACHE/apt.log" 2>&1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$CACHE/apt.log" 2>&1 \
    || { log "apt-get install failed, see $CACHE/apt.log"; exit 1; }
}

# podman's settings for this machine class: runc, and ulimits below the host's (podman run fails otherwise)
write_containers_conf() {
  cat >"$CACHE/containers.conf" <<'EOF'
# written by infra/image/build-base.sh; used through CONTAINERS_CONF by the image scripts and tests
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]

[engine]
runtime = "runc"
EOF
}

choose_engine() {
  if [ -n "${OM_IMAGE_ENGINE:-}" ]; then echo "$OM_IMAGE_ENGINE"; return; fi
  if command -v podman >/dev/null; then echo podman; return; fi
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then echo docker; return; fi
  bash "$(dirname "$0")/../tools/install-podman.sh" >/dev/null
  echo podman
}

# the Debian mirror apt is configured with (the suite's main component, not security or updates)
debian_mirror() {
  apt-get indextargets --format '$(SITE) $(RELEASE) $(COMPONENT)' 2>/dev/null \
    | awk -v suite="$SUITE" '$2 == suite && $3 == "main" { print $1; exit }'
}

make_rootfs_tarball() {
  apt_install debootstrap
  local mirror rootfs started=$SECONDS
  mirror="$(debian_mirror)"
  [ -n "$mirror" ] || { log "no '$SUITE main' source in the apt configuration; cannot debootstrap"; exit 1; }
  rootfs="$(mktemp -d "$CACHE/.rootfs.XXXXXX")"
  trap 'rm -rf "$rootfs"' EXIT
  log "debootstrap $SUITE from $mirror (about a minute)"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "$SUITE" "$rootfs" "$mirror" \
    >"$CACHE/debootstrap.log" 2>&1 || { log "debootstrap failed, see $CACHE/debootstrap.log"; exit 1; }
  ln -sf /usr/bin/python3 "$rootfs/usr/local/bin/python"
  ln -sf /usr/bin/python3 "$rootfs/usr/local/bin/python3"
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  # what a slim image leaves out: package caches and lists, docs, man pages, translations
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
    "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log \
    "$rootfs"/debootstrap
  tar -C "$rootfs" --numeric-owner -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
  rm -rf "$rootfs"
  trap - EXIT
  log "rootfs $(du -h "$TARBALL" | cut -f1) cached at $TARBALL in $((SECONDS - started))s"
}

ENGINE="$(choose_engine)"
if [ "$ENGINE" = podman ]; then
  write_containers_conf
  export CONTAINERS_CONF="$CACHE/containers.conf"
  command -v runc >/dev/null || apt_install runc
fi
log "engine: $ENGINE"

if [ "$FORCE" = 1 ] || [ ! -s "$TARBALL" ]; then
  make_rootfs_tarball
else
  log "rootfs cached at $TARBALL"
fi

if [ "$FORCE" = 0 ] && "$ENGINE" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  log "$ENGINE already has $BASE_IMAGE"
else
  started=$SECONDS
  "$ENGINE" import --change 'CMD ["python3"]' "$TARBALL" "$BASE_IMAGE" >/dev/null
  log "imported $BASE_IMAGE into $ENGINE in $((SECONDS - started))s"
fi

echo "OM_IMAGE_ENGINE=$ENGINE"
echo "CONTAINERS_CONF=${CONTAINERS_CONF:-}"
