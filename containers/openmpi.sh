#!/usr/bin/env bash
# Open MPI (cuda flavour), CUDA-aware, with pml ucx, mtl ofi and psm2, Slurm and PMIx support.
# Installs into $PREFIX; needs ucx.sh and libfabric.sh first, and the distribution's PMIx,
# libevent, hwloc and psm2 headers (distro-fabric.sh cuda-build).
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_cuda

archive=$(fetch "$OPENMPI_URL" "$OPENMPI_SHA256")
src=$(unpack "$archive")
log "building Open MPI $OPENMPI_VERSION in $src"
cd "$src"
# PMIx: the distribution's (external), so that `srun --mpi=pmix` of hosts with the same PMIx
# major version can launch the image's ranks (see Apptainer.def %help: hybrid MPI).
./configure --prefix="$PREFIX" --with-cuda="$CUDA_HOME" --with-ucx="$PREFIX" \
  --with-ofi="$PREFIX" --with-psm2 --with-slurm --with-pmix=/usr/lib/x86_64-linux-gnu/pmix2 \
  --with-libevent=/usr --with-hwloc=/usr --enable-mca-no-build=btl-uct \
  --disable-oshmem --enable-shared --disable-static
make -j"$JOBS"
make install
cd / && rm -rf "$src"
"$PREFIX/bin/ompi_info" --parsable --all | grep -q 'mpi_built_with_cuda_support:value:true' \
  || die "Open MPI was not built CUDA-aware"
log "installed Open MPI $OPENMPI_VERSION into $PREFIX"
