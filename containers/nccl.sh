#!/usr/bin/env bash
# NCCL (cuda flavour), the version torch's CUDA wheel loads (versions.env; python-stack.sh
# checks torch.cuda.nccl.version() against it). Horovod and aws-ofi-nccl build against it.
# Installs into $PREFIX.
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_cuda

archive=$(fetch "$NCCL_URL" "$NCCL_SHA256")
src=$(unpack "$archive")
log "building NCCL $NCCL_VERSION in $src for sm $CUDA_ARCHS"
make -C "$src" -j"$JOBS" src.build CUDA_HOME="$CUDA_HOME" NVCC_GENCODE="$(nvcc_gencode)"
make -C "$src" src.install PREFIX="$PREFIX"
rm -rf "$src"
log "installed NCCL $NCCL_VERSION into $PREFIX"
