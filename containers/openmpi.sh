#!/usr/bin/env bash
# Open MPI (cuda flavour), CUDA-aware, with pml ucx, mtl ofi (Debian's libfabric) and psm2, Slurm
# and PMIx support. Built from Debian's source tarball against $CUDA_HOME (Open MPI 4.1 loads the
# driver's libcuda.so.1 with dlopen at run time; it needs only cuda.h to build). Installs into
# $PREFIX; needs ucx.sh first, and the distribution's PMIx, libevent, hwloc, libfabric and psm2
# headers (distro-fabric.sh cuda-build). With the C++ bindings (libmpi_cxx), as Debian builds it:
# Horovod's MPI library links them, so a wheel built against Debian's Open MPI 4.1 loads here too.
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_cuda

archive=$(fetch "$OPENMPI_URL" "$OPENMPI_SHA256")
src=$(unpack "$archive")
log "building Open MPI $OPENMPI_VERSION in $src"
cd "$src"
./configure --prefix="$PREFIX" --with-cuda="$CUDA_HOME" --with-ucx="$PREFIX" \
  --with-ofi=/usr --with-psm2 --with-slurm --with-pmix=/usr/lib/x86_64-linux-gnu/pmix2 \
  --with-libevent=/usr --with-hwloc=/usr --enable-mca-no-build=btl-uct \
  --disable-oshmem --enable-shared --disable-static --enable-mpi-cxx >/dev/null
make -j"$JOBS" >/dev/null
make install >/dev/null
cd / && rm -rf "$src"
"$PREFIX/bin/ompi_info" --parsable --all | grep -q 'mpi_built_with_cuda_support:value:true' \
  || die "Open MPI was not built CUDA-aware"
"$PREFIX/bin/ompi_info" | grep -q 'MCA pml: ucx' || die "Open MPI was built without pml ucx"
log "installed Open MPI $OPENMPI_VERSION (CUDA-aware, pml ucx) into $PREFIX"
