#!/usr/bin/env bash
# UCX (cuda flavour) with CUDA, gdrcopy and verbs (rc, ud, dc, mlx5): Open MPI's pml ucx, the
# `infiniband` fabric profile. Installs into $PREFIX; needs gdrcopy.sh first.
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_cuda

archive=$(fetch "$UCX_URL" "$UCX_SHA256")
src=$(unpack "$archive")
log "building UCX $UCX_VERSION in $src"
cd "$src"
./contrib/configure-release --prefix="$PREFIX" --enable-mt --disable-doxygen-doc \
  --with-cuda="$CUDA_HOME" --with-gdrcopy="$PREFIX" --with-verbs --with-rdmacm \
  --with-rc --with-ud --with-dc --with-mlx5 --with-dm --enable-cma --without-java --without-go
make -j"$JOBS"
make install
cd / && rm -rf "$src"
"$PREFIX/bin/ucx_info" -v | head -n2
log "installed UCX $UCX_VERSION into $PREFIX"
