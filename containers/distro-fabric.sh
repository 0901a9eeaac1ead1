#!/usr/bin/env bash
# What comes from the distribution's archive, per flavour and stage:
#   cpu-build     Debian's fabric stack (Open MPI 4.1 with pml ucx/ob1/cm, mtl ofi/psm2;
#                 libfabric with psm2/tcp/rxm/shm; UCX; PSM2) with headers, and the compilers
#                 that build mpi4py and Horovod against it
#   cpu-runtime   the same stack without headers or compilers
#   cuda-build    the prerequisites of the from-source stack (verbs, psm2, PMIx, hwloc, libevent,
#                 libfabric, autotools), pip for CUDA's wheels, and those of the Python stack
#   cuda-runtime  their run-time libraries
# Both runtime stages carry the ceiling's tools (fabbench.ceiling: iperf3 for Ethernet,
# ucx_perftest, fi_pingpong), so that a run in the image measures the wire it runs on.
# The installed versions are recorded in /etc/fabbench/build.json by manifest.sh.
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stage=${1:-}
common=(ca-certificates openssh-client python3 procps)
case $stage in
  cpu-build)
    pkgs=("${common[@]}" python3-dev python3-venv build-essential cmake openmpi-bin libopenmpi-dev
          libfabric-dev libfabric-bin libucx-dev ucx-utils libpsm2-dev libibverbs-dev librdmacm-dev) ;;
  cpu-runtime)
    pkgs=("${common[@]}" openmpi-bin libopenmpi3 libfabric1 libfabric-bin libucx0 ucx-utils
          libpsm2-2 libibverbs1 ibverbs-providers librdmacm1 iperf3) ;;
  cuda-build)
    pkgs=("${common[@]}" python3-dev python3-venv python3-pip build-essential cmake curl
          autoconf automake libtool pkg-config libibverbs-dev librdmacm-dev libpsm2-dev
          libnuma-dev libpmix-dev libevent-dev libhwloc-dev libfabric-dev) ;;
  cuda-runtime)
    pkgs=("${common[@]}" libibverbs1 ibverbs-providers librdmacm1 libpsm2-2 libnuma1 libpmix2
          libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15 libfabric1 libfabric-bin
          libgomp1 iperf3) ;;  # libgomp1: ucx_perftest is built with OpenMP
  *) die "usage: distro-fabric.sh cpu-build|cpu-runtime|cuda-build|cuda-runtime" ;;
esac

export DEBIAN_FRONTEND=noninteractive
log "installing ${pkgs[*]}"
timeout 900 apt-get update -qq
if ! timeout 1800 apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/tmp/apt.log 2>&1; then
  tail -n 40 /tmp/apt.log >&2
  die "apt-get install failed"
fi
rm -f /tmp/apt.log
apt-get clean
rm -rf /var/lib/apt/lists/*
if [ "${stage%-*}" = cpu ]; then
  ompi_info --version | head -n1
  fi_info --version | head -n1
  ucx_info -v | head -n1
fi
