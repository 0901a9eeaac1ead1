#!/usr/bin/env bash
# Make the Debian base image of the cpu flavour offline from Docker Hub: debootstrap a minimal
# bookworm from Debian's archive and import it into podman's storage as localhost/debian:bookworm
# (the Dockerfile's default BASE_IMAGE for FLAVOR=cpu). Idempotent: an existing image is kept.
#
# Environment:
#   BASE_IMAGE      the tag to create (default: localhost/debian:bookworm)
#   DEBIAN_MIRROR   the archive to bootstrap from (default: http://deb.debian.org/debian)
#   DEBIAN_SUITE    the release (default: bookworm)
#   REBUILD=1       make it again even if it exists
set -euo pipefail

log() { printf '[base-image] %s\n' "$*"; }
die() { printf '[base-image] ERROR: %s\n' "$*" >&2; exit 1; }

BASE_IMAGE=${BASE_IMAGE:-localhost/debian:bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}

command -v podman >/dev/null 2>&1 || die "podman not found (apt-get install podman)"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap not found (apt-get install debootstrap)"
[ "$(id -u)" -eq 0 ] || die "debootstrap needs root"

if [ "${REBUILD:-0}" != 1 ] && timeout 60 podman image exists "$BASE_IMAGE"; then
  log "$BASE_IMAGE already exists"
  exit 0
fi

root=$(mktemp -d "${TMPDIR:-/var/tmp}/fabbench-debootstrap.XXXXXX")
cleanup() { rm -rf "$root"; }
trap cleanup EXIT

start=$SECONDS
log "debootstrap --variant=minbase $DEBIAN_SUITE from $DEBIAN_MIRROR"
timeout 1800 debootstrap --variant=minbase "$DEBIAN_SUITE" "$root" "$DEBIAN_MIRROR" \
  >"$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; die "debootstrap failed (log: $root.log)"; }
# Slim the tree the way Docker's official Debian images do.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
log "importing into podman as $BASE_IMAGE"
tar -C "$root" -c . | timeout 900 podman import \
  --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$BASE_IMAGE" >/dev/null
rm -f "$root.log"
log "done in $((SECONDS - start))s: $BASE_IMAGE"
