#!/usr/bin/env bash
# Charliecloud's image tool, ch-image (pull), without Debian's charliecloud-builders package, which
# depends on docker.io (a daemon these machines do not need): the package's .deb is fetched with
# apt-get download and unpacked under $FABBENCH_CACHE, next to links to the installed
# charliecloud-common (the Python library ch-image loads from ../lib/charliecloud) and ch-run, of
# the same version. Its Python dependencies (python3-lark, python3-requests) come from
# .ci/apt-packages.txt; it runs on Debian's /usr/bin/python3. Idempotent; prints ch-image's path.
set -euo pipefail

cache=${FABBENCH_CACHE:-$HOME/.cache/fabbench}
die() { printf '[ch-image] ERROR: %s\n' "$*" >&2; exit 1; }
version=$(dpkg-query -W -f='${Version}' charliecloud-common 2>/dev/null) \
  || die "charliecloud-common is not installed (.ci/apt-packages.txt: charliecloud-runtime)"
here=$cache/charliecloud-builders-$version
if [ ! -x "$here/usr/bin/ch-image" ]; then
  work=$(mktemp -d "$cache/ch-image.XXXXXX")
  trap 'rm -rf -- "$work"' EXIT
  (cd "$work" && timeout 300 apt-get download "charliecloud-builders=$version" >/dev/null 2>&1) \
    || die "apt-get download charliecloud-builders=$version failed"
  dpkg-deb -x "$work"/charliecloud-builders_*.deb "$work/root"
  mkdir -p "$work/root/usr/lib"
  ln -s /usr/lib/charliecloud "$work/root/usr/lib/charliecloud"
  ln -s /usr/bin/ch-run "$work/root/usr/bin/ch-run"
  # Debian's Python, where python3-lark and python3-requests are (not whichever python3 is first
  # on PATH)
  sed -i '1s|^#!.*|#!/usr/bin/python3|' "$work/root/usr/bin/ch-image"
  rm -rf -- "$here"
  mv "$work/root" "$here"
fi
printf '%s\n' "$here/usr/bin/ch-image"
