#!/usr/bin/env bash
# libfabric (cuda flavour) with the psm2 (OmniPath), verbs, tcp, rxm and shm providers and CUDA
# memory support: Open MPI's mtl ofi, the `omnipath` fabric profile and aws-ofi-nccl.
# Installs into $PREFIX; needs gdrcopy.sh first.
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_cuda

archive=$(fetch "$LIBFABRIC_URL" "$LIBFABRIC_SHA256")
src=$(unpack "$archive")
log "building libfabric $LIBFABRIC_VERSION in $src"
cd "$src"
./configure --prefix="$PREFIX" --enable-psm2=yes --enable-verbs=yes --enable-tcp=yes \
  --enable-rxm=yes --enable-shm=yes --enable-sockets=yes --enable-udp=yes \
  --with-cuda="$CUDA_HOME" --enable-cuda-dlopen --with-gdrcopy="$PREFIX" --enable-gdrcopy-dlopen
make -j"$JOBS"
make install
cd / && rm -rf "$src"
"$PREFIX/bin/fi_info" --version
log "installed libfabric $LIBFABRIC_VERSION into $PREFIX"
