#!/usr/bin/env bash
# Idempotent set-up of a development machine: Debian packages, a virtual environment with the
# package, PyTorch's CPU wheel, mpi4py built against the system Open MPI and, with --all, the
# Debian packages only the tests use, the Horovod wheel (built once, cached) and checkov (the
# tests' manifest scanner, in a venv of its own). Called by `make
# setup` (what the demo needs) and `make setup-all` (make test); safe to run again; downloads and builds are cached under
# $FABBENCH_CACHE. torch's wheel comes from FABBENCH_TORCH_WHEELS (a folder or an index URL;
# default PyTorch's CPU index), checked against its pinned sha256 (containers/torch-wheel.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${VENV:-$here/.venv}
cache=${FABBENCH_CACHE:-$HOME/.cache/fabbench}
wheels=$cache/wheels
mkdir -p "$wheels"
# shellcheck source=containers/versions.env
. "$here/containers/versions.env"

log() { printf '[setup] %s\n' "$*"; }

all=0
[ "${1:-}" = --all ] && all=1

# 1. Debian packages, only those missing: the demo's (above "# @tests"), or all with --all.
missing=()
while read -r pkg; do
  [ -z "$pkg" ] && continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done < <(awk -v all="$all" '/^# @tests/ && !all { exit } !/^#/' "$here/.ci/apt-packages.txt")
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  timeout 900 "${sudo_cmd[@]}" apt-get update -qq
  timeout 1800 "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. The virtual environment.
if [ ! -x "$venv/bin/python" ]; then
  log "creating $venv"
  python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)

# 3. mpi4py compiled against this machine's Open MPI (the wheel on PyPI is not), cached with a
# record of what it was compiled for (containers/mpi4py.sh), which the image build reuses.
mpi4py_wheel=$(PYTHON="$venv/bin/python" WHEEL_DIR="$wheels" "$here/containers/mpi4py.sh" | tail -n1)

# 4. torch's CPU wheel (never PyPI's CUDA build: 3.5 GB of nvidia wheels a CPU machine does not
# use), the package and its test tools.
torch_wheel=$("$here/containers/torch-wheel.sh" "$wheels")
"${pip[@]}" install --find-links "$wheels" "$torch_wheel" "$mpi4py_wheel"
# a venv made before this took PyPI's mpi4py wheel of the same version (manylinux: it loads an
# MPI at run time), which pip keeps as installed: the compiled one replaces it
if ! "$venv/bin/python" -c 'import sys; from importlib.metadata import distribution
sys.exit("manylinux" in (distribution("mpi4py").read_text("WHEEL") or ""))'; then
  log "replacing the venv's mpi4py (PyPI's wheel) with $mpi4py_wheel"
  "${pip[@]}" install --force-reinstall --no-deps "$mpi4py_wheel"
fi
"${pip[@]}" install -e "${here}[comm,plots,dev]"
have=$("$venv/bin/python" -c 'import torch; print(torch.__version__, torch.version.cuda)')
[ "$have" = "$TORCH_VERSION+cpu None" ] \
  || { log "ERROR: the venv's torch is '$have', not '$TORCH_VERSION+cpu None'"; exit 1; }

# 5. Horovod with the C++17 fix, built once into the wheel cache (containers/horovod.sh), when
# asked for (--all: make test, make setup-all); the demo does not use it.
if [ "$all" = 1 ] && ! "$venv/bin/python" -c "import horovod.torch" >/dev/null 2>&1; then
  PYTHON="$venv/bin/python" WHEEL_DIR="$wheels" "$here/containers/horovod.sh"
  "${pip[@]}" install --find-links "$wheels" "horovod==$HOROVOD_VERSION"
fi
# 6. checkov, the tests' Kubernetes manifest scanner, in a venv of its own under $FABBENCH_CACHE
# (.ci/checkov.sh: its pinned dependencies would downgrade this venv's), when asked for (--all).
if [ "$all" = 1 ]; then
  "$here/.ci/checkov.sh" >/dev/null
fi
log "ready: $venv"
