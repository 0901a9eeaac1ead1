#!/usr/bin/env bash
# gdrcopy (cuda flavour): the user-space library of GPUDirect RDMA copies, used by UCX. Only the
# library is built; the gdrdrv kernel module belongs to the host. Installs into $PREFIX.
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_cuda

archive=$(fetch "$GDRCOPY_URL" "$GDRCOPY_SHA256")
src=$(unpack "$archive")
log "building gdrcopy $GDRCOPY_VERSION in $src"
make -C "$src" -j"$JOBS" prefix="$PREFIX" CUDA="$CUDA_HOME" lib
make -C "$src" prefix="$PREFIX" CUDA="$CUDA_HOME" lib_install
rm -rf "$src"
log "installed gdrcopy $GDRCOPY_VERSION into $PREFIX"
