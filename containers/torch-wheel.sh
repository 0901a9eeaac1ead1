#!/usr/bin/env bash
# PyTorch's CPU wheel, torch-$TORCH_VERSION+cpu, into a folder, checked against its pinned sha256
# (TORCH_CPU_WHEEL_SHA256, versions.env) whatever the source. Used by the development set-up
# (.ci/setup.sh) and the cpu image's build context (.ci/image-build.sh).
#
#   torch-wheel.sh DEST     print the wheel's path in DEST (fetched once; kept there)
#
# Where it comes from: FABBENCH_TORCH_WHEELS, a folder holding the wheel (a site's mirror, a
# machine with no route to PyTorch's servers) or the URL of a package index; by default PyTorch's
# own CPU index. PyPI's torch==$TORCH_VERSION for Linux is the CUDA build (3.5 GB with its nvidia
# wheels): it is never taken in its place, and a wheel of another content is refused.
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

dest=${1:?usage: torch-wheel.sh DEST}
source=${FABBENCH_TORCH_WHEELS:-$TORCH_CPU_INDEX}
pytag=$(timeout 60 python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
name=torch-$TORCH_VERSION+cpu-$pytag-$pytag-manylinux_2_28_$(uname -m).whl
mkdir -p "$dest"
wheel=$dest/$name

check() {
  printf '%s  %s\n' "$TORCH_CPU_WHEEL_SHA256" "$1" | sha256sum --check --quiet >/dev/null 2>&1
}

if [ -f "$wheel" ] && check "$wheel"; then
  printf '%s\n' "$wheel"
  exit 0
fi
rm -f "$wheel"
case $source in
  http://*|https://*)
    log "torch $TORCH_VERSION+cpu from $source (FABBENCH_TORCH_WHEELS sets another source)" >&2
    tmp=$(mktemp -d "$dest/.torch.XXXXXX")
    # --index-url, not --extra-index-url: PyPI's CUDA build must not be a candidate
    if ! timeout 1800 python3 -m pip download -q --disable-pip-version-check --no-deps \
        --index-url "$source" -d "$tmp" "torch==$TORCH_VERSION+cpu" >&2; then
      rm -rf "$tmp"
      die "could not get torch $TORCH_VERSION+cpu from $source: set FABBENCH_TORCH_WHEELS to a" \
        "folder holding $name, or to an index that serves it"
    fi
    mv -f "$tmp/$name" "$wheel" 2>/dev/null \
      || { rm -rf "$tmp"; die "$source gave no $name"; }
    rm -rf "$tmp" ;;
  *)
    [ -d "$source" ] || die "FABBENCH_TORCH_WHEELS=$source is neither a folder nor an http(s) URL"
    [ -f "$source/$name" ] || die "no $name in FABBENCH_TORCH_WHEELS=$source"
    log "torch $TORCH_VERSION+cpu from $source" >&2
    cp -f "$source/$name" "$wheel.part"
    mv -f "$wheel.part" "$wheel" ;;
esac
if ! check "$wheel"; then
  mv -f "$wheel" "$wheel.bad"
  die "$name from $source: sha256 $(sha256sum "$wheel.bad" | cut -d' ' -f1), not the pinned" \
    "TORCH_CPU_WHEEL_SHA256=$TORCH_CPU_WHEEL_SHA256 (containers/versions.env)"
fi
printf '%s\n' "$wheel"
