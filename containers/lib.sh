# shellcheck shell=bash
# Helpers shared by the component build scripts (sourced, never run): logging, the pinned
# versions, and a download that is checked against its pinned sha256 before anything uses it.
#
# Environment read by every component script:
#   PREFIX     where the cuda flavour's fabric stack is installed (default /opt/fabric)
#   CUDA_HOME  the CUDA toolkit (default /usr/local/cuda)
#   SRC_DIR    where sources are downloaded and unpacked (default /tmp/fabbench-src)
#   JOBS       parallel make jobs (default: the number of cores)

containers_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=containers/versions.env
. "$containers_dir/versions.env"

PREFIX=${PREFIX:-/opt/fabric}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SRC_DIR=${SRC_DIR:-/tmp/fabbench-src}
JOBS=${JOBS:-$(nproc)}
component=${component:-$(basename "${BASH_SOURCE[1]:-$0}" .sh)}

log() { printf '[%s] %s\n' "$component" "$*"; }
die() { printf '[%s] ERROR: %s\n' "$component" "$*" >&2; exit 1; }

# fetch URL SHA256: download URL into $SRC_DIR (once), verify its sha256, print its path.
fetch() {
  local url=$1 sha=$2 file
  [ -n "$url" ] && [ -n "$sha" ] || die "fetch needs a URL and its sha256"
  mkdir -p "$SRC_DIR"
  file=$SRC_DIR/$(basename "$url")
  if [ ! -f "$file" ]; then
    log "downloading $url" >&2
    # the trust store a build host lends (python-stack.sh's BUILD_CA) where its TLS is intercepted
    local ca=${BUILD_CA:-/usr/local/share/fabbench/build-ca.crt} cacert=()
    [ -s "$ca" ] && cacert=(--cacert "$ca")
    timeout 1800 curl -fsSL --retry 3 "${cacert[@]}" -o "$file.part" "$url" \
      || die "download failed: $url"
    mv -f "$file.part" "$file"
  fi
  if ! printf '%s  %s\n' "$sha" "$file" | sha256sum --check --quiet >/dev/null 2>&1; then
    mv -f "$file" "$file.bad"
    die "sha256 mismatch for $url: expected $sha, got $(sha256sum "$file.bad" | cut -d' ' -f1)"
  fi
  printf '%s\n' "$file"
}

# unpack ARCHIVE: extract into a fresh directory under $SRC_DIR, print the top-level directory.
unpack() {
  local archive=$1 dest
  dest=$(mktemp -d "$SRC_DIR/build.XXXXXX")
  tar -xf "$archive" -C "$dest"
  find "$dest" -mindepth 1 -maxdepth 1 -type d | head -n1
}

require_cuda() {
  [ -f "$CUDA_HOME/include/cuda.h" ] && [ -e "$CUDA_HOME/lib64/libcudart.so" ] \
    || die "no CUDA headers and runtime in CUDA_HOME=$CUDA_HOME: this component is part of the" \
      "cuda flavour and builds after containers/cuda-toolkit.sh"
}
