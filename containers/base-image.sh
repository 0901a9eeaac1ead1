#!/usr/bin/env bash
# Make the Debian base image of the cpu flavour offline from Docker Hub: debootstrap a minimal
# bookworm from Debian's archive and import it as localhost/debian:bookworm (the Dockerfile's
# default BASE_IMAGE for FLAVOR=cpu) into the engine's store: podman's, or with ENGINE=docker the
# Docker Engine's that DOCKER_HOST names. Idempotent: an existing image is kept. For Docker, a
# base podman already holds is loaded from it (`podman save | docker load`: the same layer and
# image id, so both engines build on the very same tree); else the debootstrap tree is
# `docker import`ed.
#
# Environment:
#   BASE_IMAGE      the tag to create (default: localhost/debian:bookworm)
#   DEBIAN_MIRROR   the archive to bootstrap from (default: http://deb.debian.org/debian)
#   DEBIAN_SUITE    the release (default: bookworm)
#   ENGINE          podman (default) or docker; DOCKER: the docker client (default docker)
#   REBUILD=1       make it again even if it exists
set -euo pipefail

log() { printf '[base-image] %s\n' "$*"; }
die() { printf '[base-image] ERROR: %s\n' "$*" >&2; exit 1; }

BASE_IMAGE=${BASE_IMAGE:-localhost/debian:bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
ENGINE=${ENGINE:-podman}
DOCKER=${DOCKER:-docker}
case $ENGINE in
  podman) engine=(podman); exists() { timeout 60 podman image exists "$1"; } ;;
  docker) engine=("$DOCKER"); exists() { timeout 60 "$DOCKER" image inspect "$1" >/dev/null 2>&1; } ;;
  *) printf '[base-image] ENGINE must be podman or docker, not %s\n' "$ENGINE" >&2; exit 2 ;;
esac

command -v "${engine[0]}" >/dev/null 2>&1 || die "${engine[0]} not found (.ci/apt-packages.txt)"
if [ "${REBUILD:-0}" != 1 ] && exists "$BASE_IMAGE"; then
  log "$BASE_IMAGE already exists"
  exit 0
fi
if [ "$ENGINE" = docker ] && [ "${REBUILD:-0}" != 1 ] && command -v podman >/dev/null 2>&1 \
   && timeout 60 podman image exists "$BASE_IMAGE"; then
  log "loading podman's $BASE_IMAGE into docker (the same layer as podman's builds)"
  timeout 900 podman save --format docker-archive "$BASE_IMAGE" \
    | timeout 900 "$DOCKER" load >/dev/null || die "podman save | docker load of $BASE_IMAGE failed"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || die "debootstrap not found (apt-get install debootstrap)"
[ "$(id -u)" -eq 0 ] || die "debootstrap needs root"

root=$(mktemp -d "${TMPDIR:-/var/tmp}/fabbench-debootstrap.XXXXXX")
cleanup() { rm -rf "$root"; }
trap cleanup EXIT

start=$SECONDS
log "debootstrap --variant=minbase $DEBIAN_SUITE from $DEBIAN_MIRROR"
timeout 1800 debootstrap --variant=minbase "$DEBIAN_SUITE" "$root" "$DEBIAN_MIRROR" \
  >"$root.log" 2>&1 || { tail -n 30 "$root.log" >&2; die "debootstrap failed (log: $root.log)"; }
# Slim the tree the way Docker's official Debian images do.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
log "importing into $ENGINE as $BASE_IMAGE"
tar -C "$root" -c . | timeout 900 "${engine[@]}" import \
  --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$BASE_IMAGE" >/dev/null
rm -f "$root.log"
log "done in $((SECONDS - start))s: $BASE_IMAGE"
