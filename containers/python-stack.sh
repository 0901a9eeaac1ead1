#!/usr/bin/env bash
# The image's Python stack, in a virtual environment ($FABBENCH_VENV, default /opt/fabbench/venv)
# made from the distribution's python3. Two steps, so that a change to fabbench's source rebuilds
# only the last, cheap layer of the image:
#   python-stack.sh deps REQS        torch (pinned; from $WHEELS when the wheel is there),
#                                    mpi4py compiled against the image's MPI (the mpicc on PATH),
#                                    Horovod with MPI and Gloo through horovod.sh, NCCL's wheel
#                                    (cuda flavour), and fabbench's run-time dependencies
#                                    (REQS: a requirements file made from pyproject.toml)
#   python-stack.sh fabbench SRC     fabbench itself, from its source tree
# Environment: BUILD_CA (see below), FLAVOR (cpu|cuda), WHEELS (a folder of prebuilt wheels, default
# /tmp/wheels; a horovod wheel there is used instead of building one when its record, WHEEL.abi,
# names this environment: containers/horovod.sh).
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FLAVOR=${FLAVOR:-cpu}
FABBENCH_VENV=${FABBENCH_VENV:-/opt/fabbench/venv}
WHEELS=${WHEELS:-/tmp/wheels}
py=$FABBENCH_VENV/bin/python
# A trust store the build host lends read-only (podman build -v HOST_CA:$BUILD_CA:ro) for hosts
# whose TLS is intercepted; the image's own store (ca-certificates) is used otherwise.
BUILD_CA=${BUILD_CA:-/usr/local/share/fabbench/build-ca.crt}
if [ -s "$BUILD_CA" ]; then
  export PIP_CERT=$BUILD_CA
elif [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  export PIP_CERT=/etc/ssl/certs/ca-certificates.crt
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_DEFAULT_TIMEOUT=${PIP_DEFAULT_TIMEOUT:-180}
pip() { timeout 1800 "$py" -m pip "$@"; }
mkdir -p "$WHEELS"

deps() {
  local requirements=$1
  [ -f "$requirements" ] || die "usage: python-stack.sh deps REQUIREMENTS_FILE"
  [ -x "$py" ] || python3 -m venv "$FABBENCH_VENV"
  pip install -q --upgrade setuptools wheel packaging

  log "torch $TORCH_VERSION (wheels from $WHEELS when present)"
  pip install -q --find-links "$WHEELS" "torch==$TORCH_VERSION"

  log "mpi4py $MPI4PY_VERSION compiled against $(mpicc --showme:version 2>&1 | head -n1)"
  MPICC=$(command -v mpicc) pip install -q --no-binary mpi4py "mpi4py==$MPI4PY_VERSION"

  if [ "$FLAVOR" = cuda ]; then
    log "NCCL: $NCCL_WHEEL (hash-checked)"
    printf '%s --hash=sha256:%s\n' "$NCCL_WHEEL" "$NCCL_WHEEL_SHA256" >/tmp/nccl-requirements.txt
    pip install -q --no-deps --require-hashes -r /tmp/nccl-requirements.txt
    rm -f /tmp/nccl-requirements.txt
    if "$py" -c 'import sys, torch; sys.exit(torch.version.cuda is None)'; then
      # a CUDA build of torch must load the pinned NCCL
      local torch_nccl
      torch_nccl=$("$py" -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())))')
      [ "$torch_nccl" = "$NCCL_VERSION" ] || die "torch $TORCH_VERSION loads NCCL" \
        "$torch_nccl but versions.env pins NCCL_VERSION=$NCCL_VERSION: update the pin"
    else
      log "torch $TORCH_VERSION is a CPU build: torch and Horovod use host memory in this image"
    fi
  fi
  log "horovod $HOROVOD_VERSION (containers/horovod.sh: a wheel in $WHEELS is used when its record" \
      "names this environment, else built from the sdist; the next line says which)"
  PYTHON=$py WHEEL_DIR=$WHEELS FABBENCH_CACHE=/tmp/fabbench-cache "$containers_dir/horovod.sh"
  pip install -q --find-links "$WHEELS" "horovod==$HOROVOD_VERSION"  # its dependencies: PyPI
  rm -rf /tmp/fabbench-cache

  log "fabbench's dependencies, from $requirements"
  pip install -q -r "$requirements"
}

fabbench() {
  local src=$1
  [ -f "$src/pyproject.toml" ] || die "usage: python-stack.sh fabbench SOURCE_TREE"
  log "fabbench from $src"
  pip install -q --no-build-isolation "${src}[comm]"
  # the runtime stage has no compiler: the MPI batch loop is built here, into the venv
  "$py" -m fabbench.comm.batch_loop
  "$FABBENCH_VENV/bin/fabbench" version
  "$py" -c 'import torch, mpi4py.MPI, horovod.torch as hvd, fabbench
assert hvd.mpi_built() and hvd.gloo_built(), (hvd.mpi_built(), hvd.gloo_built())
print("imports ok; horovod built with MPI and Gloo")'
}

case ${1:-} in
  deps) deps "${2:-}" ;;
  fabbench) fabbench "${2:-}" ;;
  *) die "usage: python-stack.sh deps REQS | fabbench SRC" ;;
esac
