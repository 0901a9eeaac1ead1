#!/usr/bin/env bash
# Convert the podman-built fabbench image into Charliecloud's two image forms, cached by tag:
#   <out>/<tag>/dir        a directory image   (ch-run DIR -- fabbench ...)
#   <out>/<tag>/image.sqfs a SquashFS image    (ch-run IMAGE.sqfs -- ...; mounted through FUSE)
# with what ch-convert gives a converted image: the ten mount points /mnt/0../mnt/9 that binds
# target (ch-run creates none in a read-only image), and /ch/environment, the image's own
# environment (PATH to the venv, the build manifest's path) that `ch-run --set-env` applies.
#
#   .ci/charliecloud-image.sh TAG [OUT]   prints the directory, then the .sqfs path
#
# OUT defaults to $FABBENCH_CACHE/charliecloud; older conversions there are removed.
set -euo pipefail

tag=${1:?usage: $0 IMAGE-TAG [OUT]}
out=${2:-${FABBENCH_CACHE:-$HOME/.cache/fabbench}/charliecloud}
log() { printf '[charliecloud-image] %s\n' "$*" >&2; }
die() { printf '[charliecloud-image] ERROR: %s\n' "$*" >&2; exit 1; }
for tool in podman mksquashfs; do
  command -v "$tool" >/dev/null || die "$tool not found (.ci/apt-packages.txt)"
done

name=$(printf '%s' "$tag" | tr -c 'A-Za-z0-9._-' '_')
here=$out/$name
if [ -f "$here/done" ]; then
  printf '%s\n%s\n' "$here/dir" "$here/image.sqfs"
  exit 0
fi
mkdir -p "$out"
for old in "$out"/*/; do  # one conversion at a time is kept: images are large
  [ "${old%/}" = "$here" ] || rm -rf -- "${old%/}"
done
rm -rf -- "$here"
mkdir -p "$here/dir"

start=$SECONDS
mnt=$(timeout 300 podman image mount "$tag") || die "podman image mount $tag failed"
trap 'timeout 120 podman image unmount "$tag" >/dev/null 2>&1 || true' EXIT
log "copying $tag into $here/dir"
tar -C "$mnt" --numeric-owner -cf - . | tar -C "$here/dir" --numeric-owner -xf -
timeout 120 podman image unmount "$tag" >/dev/null
trap - EXIT

mkdir -p "$here/dir/ch" "$here"/dir/mnt/{0,1,2,3,4,5,6,7,8,9}
timeout 120 podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$tag" \
  | sed '/^$/d' >"$here/dir/ch/environment"
for f in etc/hosts etc/resolv.conf; do  # ch-run binds the host's over these when they exist
  [ -e "$here/dir/$f" ] || : >"$here/dir/$f"
done

log "making $here/image.sqfs"
timeout 1200 mksquashfs "$here/dir" "$here/image.sqfs" -noappend -quiet -no-progress \
  -comp lz4 -processors "$(nproc)" >&2 || die "mksquashfs failed"
touch "$here/done"
log "converted in $((SECONDS - start))s"
printf '%s\n%s\n' "$here/dir" "$here/image.sqfs"
