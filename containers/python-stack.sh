#!/usr/bin/env bash
# The image's Python stack, in a virtual environment ($FABBENCH_VENV, default /opt/fabbench/venv)
# made from the distribution's python3. Two steps, so that a change to fabbench's source rebuilds
# only the last, cheap layer of the image:
#   python-stack.sh deps REQS        torch (pinned; cpu: the CPU wheel in $WHEELS),
#                                    mpi4py compiled against the image's MPI (the mpicc on PATH;
#                                    containers/mpi4py.sh: the setup's wheel where it fits),
#                                    Horovod with MPI and Gloo through horovod.sh, NCCL's wheel
#                                    (cuda flavour), and fabbench's run-time dependencies
#                                    (REQS: a requirements file made from pyproject.toml)
#   python-stack.sh fabbench SRC     fabbench itself, from its source tree
# Environment: BUILD_CA (see below), FLAVOR (cpu|cuda), WHEELS (a folder of prebuilt wheels, default
# /tmp/wheels; a horovod or mpi4py wheel there is used instead of building one when its record,
# WHEEL.abi, names this environment: containers/horovod.sh, containers/mpi4py.sh).
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FLAVOR=${FLAVOR:-cpu}
FABBENCH_VENV=${FABBENCH_VENV:-/opt/fabbench/venv}
WHEELS=${WHEELS:-/tmp/wheels}
py=$FABBENCH_VENV/bin/python
# A trust store the build host lends for hosts whose TLS is intercepted: the build secret build-ca,
# which the Dockerfile mounts here for the steps that download (podman build and docker build
# --secret id=build-ca,src=HOST_CA; never in a layer); the image's own store (ca-certificates) is
# used otherwise.
BUILD_CA=${BUILD_CA:-/usr/local/share/fabbench/build-ca.crt}
if [ -s "$BUILD_CA" ]; then
  export PIP_CERT=$BUILD_CA
elif [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  export PIP_CERT=/etc/ssl/certs/ca-certificates.crt
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_DEFAULT_TIMEOUT=${PIP_DEFAULT_TIMEOUT:-180}
pip() { timeout 1800 "$py" -m pip "$@"; }
mkdir -p "$WHEELS"

# torch_cuda: torch's CUDA build and every wheel it requires, from containers/torch-cuda.lock with
# their sha256 (never a local CPU wheel: no --find-links, and the hashes would refuse it), then
# checked: torch's CUDA is the flavour's, the NCCL it loads is the pinned one.
torch_cuda() {
  local lock=$containers_dir/torch-cuda.lock want_cuda have
  [ -f "$lock" ] || die "no $lock"
  grep -qx "torch==$TORCH_VERSION --hash=sha256:$TORCH_CUDA_WHEEL_SHA256" "$lock" \
    || die "$lock does not pin torch==$TORCH_VERSION with TORCH_CUDA_WHEEL_SHA256 of versions.env"
  grep -q "^$NCCL_WHEEL --hash=sha256:$NCCL_WHEEL_SHA256\$" "$lock" \
    || die "$lock does not pin $NCCL_WHEEL with NCCL_WHEEL_SHA256 of versions.env"
  grep -q "^cuda-toolkit==$CUDA_VERSION\(\.0\)* " "$lock" \
    || die "$lock does not pin cuda-toolkit==$CUDA_VERSION (versions.env's CUDA_VERSION)"
  log "torch $TORCH_VERSION, CUDA build, with the $(grep -c '^[a-z]' "$lock") wheels of" \
      "${lock##*/} (hash-checked)"
  (unset PIP_FIND_LINKS; pip install -q --require-hashes --only-binary :all: -r "$lock")
  want_cuda=$(echo "$CUDA_VERSION" | cut -d. -f1-2)
  have=$("$py" -c 'import torch; print(torch.__version__.split("+")[0], torch.version.cuda)')
  [ "$have" = "$TORCH_VERSION $want_cuda" ] \
    || die "installed torch is '$have', not '$TORCH_VERSION $want_cuda' (a CPU wheel?)"
  have=$("$py" -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())))')
  [ "$have" = "$NCCL_VERSION" ] \
    || die "torch $TORCH_VERSION loads NCCL $have but versions.env pins NCCL_VERSION=$NCCL_VERSION"
  log "torch $TORCH_VERSION with CUDA $want_cuda, NCCL $have"
}

deps() {
  local requirements=$1
  [ -f "$requirements" ] || die "usage: python-stack.sh deps REQUIREMENTS_FILE"
  [ -x "$py" ] || python3 -m venv "$FABBENCH_VENV"
  pip install -q --upgrade setuptools wheel packaging

  if [ "$FLAVOR" = cuda ]; then
    torch_cuda
  else
    # PyTorch's CPU wheel, which the build context's wheels/ holds (containers/torch-wheel.sh);
    # PyPI has no +cpu version, so its CUDA build cannot be taken instead
    log "torch $TORCH_VERSION+cpu from $WHEELS"
    pip install -q --find-links "$WHEELS" "torch==$TORCH_VERSION+cpu"
  fi

  log "mpi4py $MPI4PY_VERSION against $(mpicc --showme:version 2>&1 | head -n1) (containers/mpi4py.sh:" \
      "a wheel in $WHEELS is used when its record names this environment, else compiled)"
  local mpi4py_wheel
  mpi4py_wheel=$(PYTHON=$py WHEEL_DIR=$WHEELS "$containers_dir/mpi4py.sh" | tail -n1)
  pip install -q --no-deps "$mpi4py_wheel"

  log "horovod $HOROVOD_VERSION (containers/horovod.sh: a wheel in $WHEELS is used when its record" \
      "names this environment, else built from the sdist; the next line says which)"
  local gpu_operations=none
  [ "$FLAVOR" = cuda ] && gpu_operations=NCCL
  HOROVOD_GPU_OPERATIONS=$gpu_operations PYTHON=$py WHEEL_DIR=$WHEELS \
    FABBENCH_CACHE=/tmp/fabbench-cache "$containers_dir/horovod.sh"
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
  FLAVOR=$FLAVOR "$py" -c 'import torch, mpi4py.MPI, horovod.torch as hvd, fabbench
import os
built = {"mpi": hvd.mpi_built(), "gloo": hvd.gloo_built(), "nccl": hvd.nccl_built()}
want = {"mpi", "gloo"} | ({"nccl"} if os.environ["FLAVOR"] == "cuda" else set())
assert all(built[k] for k in want), built
assert (torch.version.cuda is None) == (os.environ["FLAVOR"] == "cpu"), torch.version.cuda
print("imports ok; torch", torch.__version__, "CUDA", torch.version.cuda, "; horovod built with",
      ", ".join(k for k, v in built.items() if v))'
}

case ${1:-} in
  deps) deps "${2:-}" ;;
  fabbench) fabbench "${2:-}" ;;
  *) die "usage: python-stack.sh deps REQS | fabbench SRC" ;;
esac
