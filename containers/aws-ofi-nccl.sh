#!/usr/bin/env bash
# aws-ofi-nccl (cuda flavour): the NCCL net plugin that carries NCCL over libfabric (OmniPath
# through psm2, EFA, verbs). Installs libnccl-net*.so into $PREFIX/lib, where NCCL finds it on
# LD_LIBRARY_PATH. Needs libfabric.sh, openmpi.sh and nccl.sh first.
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_cuda

archive=$(fetch "$AWS_OFI_NCCL_URL" "$AWS_OFI_NCCL_SHA256")
src=$(unpack "$archive")
log "building aws-ofi-nccl $AWS_OFI_NCCL_VERSION in $src"
cd "$src"
./autogen.sh
./configure --prefix="$PREFIX" --with-libfabric="$PREFIX" --with-cuda="$CUDA_HOME" \
  --with-nccl="$PREFIX" --with-mpi="$PREFIX" --with-hwloc=/usr --disable-tests
make -j"$JOBS"
make install
cd / && rm -rf "$src"
ls "$PREFIX"/lib/libnccl-net*.so >/dev/null || die "no libnccl-net plugin was installed"
log "installed aws-ofi-nccl $AWS_OFI_NCCL_VERSION into $PREFIX"
