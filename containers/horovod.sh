#!/usr/bin/env bash
# Build a Horovod wheel (version pinned in versions.env) for the torch of a given Python
# environment, with MPI and Gloo, from the checksum-pinned PyPI sdist.
#
# Horovod 0.28.1, the last release, compiles its torch extension as C++14, which torch >= 2.1
# rejects. This script patches the sdist's CMake files the way Horovod's main branch does since
# PR #3998 (unreleased): for torch >= 2.1 the torch extension is compiled as C++17 and linked to
# a C++17 copy of the bundled gloo ("pytorch17_gloo"). Raising only the extension to C++17 fails
# at link time with a duplicate gloo::rendezvous::Store::kDefaultTimeout.
#
# Environment:
#   PYTHON          interpreter of the target environment, which must already have torch
#                   (default: python3)
#   WHEEL_DIR       where the wheel goes (default: $FABBENCH_CACHE/wheels,
#                   FABBENCH_CACHE defaulting to ~/.cache/fabbench)
#   HOROVOD_GPU_OPERATIONS, HOROVOD_NCCL_HOME, HOROVOD_CUDA_HOME, ...  passed through to the
#                   build. With a CUDA build of torch: NCCL (required) builds Horovod's NCCL
#                   operations or fails; unset, they are built when nvcc and NCCL are found;
#                   none builds without. With a CPU torch there are none. (See "GPU operations".)
#   HOROVOD_BUILD_TIMEOUT  seconds allowed for the compilation (default: 3600)
#
# Idempotent: if WHEEL_DIR already has a wheel whose record (WHEEL.abi, written beside each wheel
# built here) names this environment, it says so and exits. Concurrent runs are serialised by a
# lock in WHEEL_DIR.
#   horovod.sh --check WHEEL KEY=VALUE...   only tests WHEEL's record against those fields
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=containers/versions.env
. "$here/versions.env"

log() { printf '[horovod] %s\n' "$*"; }
die() { printf '[horovod] ERROR: %s\n' "$*" >&2; exit 1; }

: "${HOROVOD_VERSION:?HOROVOD_VERSION must be set in versions.env}"
: "${HOROVOD_SHA256:?HOROVOD_SHA256 must be set in versions.env}"
PYTHON=${PYTHON:-python3}
cache=${FABBENCH_CACHE:-$HOME/.cache/fabbench}
WHEEL_DIR=${WHEEL_DIR:-$cache/wheels}
build_timeout=${HOROVOD_BUILD_TIMEOUT:-3600}

# shellcheck source=containers/wheel-record.sh
. "$here/wheel-record.sh"  # sha_of, mismatch, find_wheel, mpi_package

# horovod.sh --check WHEEL KEY=VALUE...: the same test for a caller that knows some of the fields
# without the environment (.ci/image-build.sh: what the image will install); says why not, exit 1.
if [ "${1:-}" = --check ]; then
  [ -f "${2:-}" ] || die "usage: horovod.sh --check WHEEL [KEY=VALUE...]"
  mismatch "${@:2}"
  exit 0
fi

command -v "$PYTHON" >/dev/null 2>&1 || die "PYTHON=$PYTHON is not an executable"
# Wheels are specific to the CPython version (and were compiled against this environment's torch).
pytag=$(timeout 60 "$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
mkdir -p "$WHEEL_DIR"

# ---- The target environment -------------------------------------------------------------------
torch_info=$(timeout 300 "$PYTHON" -c 'import platform, sys, torch
print(torch.__version__, torch.version.cuda or "none", sys.executable, platform.machine(),
      "".join(platform.libc_ver()))') \
  || die "torch is not importable with $PYTHON; install torch==${TORCH_VERSION:-?} there first"
read -r torch_version torch_cuda py_exe machine libc <<<"$torch_info"
command -v mpicxx >/dev/null 2>&1 || die "mpicxx not found: install an MPI (e.g. libopenmpi-dev)"
# "mpicxx: Open MPI 4.1.4 (Language: C++)" -> "Open MPI 4.1.4"
mpi=$(mpicxx --showme:version 2>/dev/null | sed -n '1s/^[^:]*: \(.*\) (Language: C++)$/\1/p')
[ -n "$mpi" ] || mpi="unidentified $(readlink -f "$(command -v mpicxx)")"
log "target: $py_exe ($pytag, $machine, $libc), torch $torch_version, CUDA $torch_cuda, MPI $mpi"

# ---- GPU operations ---------------------------------------------------------------------------
# With a CUDA build of torch, Horovod's GPU operations are NCCL's: its CUDA kernels compiled by
# nvcc ($HOROVOD_CUDA_HOME, $CUDA_HOME or /usr/local/cuda) for CUDA_ARCHS (versions.env, unless
# HOROVOD_BUILD_CUDA_CC_LIST says otherwise), linked to the NCCL torch loads (the nvidia-nccl
# wheel in the target environment, unless HOROVOD_NCCL_HOME/INCLUDE/LIB name another) and found
# at run time through a run path to it and to torch's libraries. HOROVOD_GPU_OPERATIONS=NCCL
# makes this a requirement (the cuda image: no nvcc or nccl.h is an error); unset, it is done when
# both are found and said when not; none builds without GPU operations.
if [ "$torch_cuda" != none ] && [ "${HOROVOD_GPU_OPERATIONS:-}" != none ]; then
  cuda_home=${HOROVOD_CUDA_HOME:-${CUDA_HOME:-/usr/local/cuda}}
  nvcc=""
  [ -x "$cuda_home/bin/nvcc" ] && nvcc=$cuda_home/bin/nvcc
  site=$(timeout 120 "$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
  nccl_inc="" nccl_lib=""
  for d in "${HOROVOD_NCCL_INCLUDE:-}" "${HOROVOD_NCCL_HOME:+$HOROVOD_NCCL_HOME/include}" \
           "$site/nvidia/nccl/include" "$cuda_home/include" /usr/include; do
    [ -n "$d" ] && [ -f "$d/nccl.h" ] && { nccl_inc=$d; break; }
  done
  for d in "${HOROVOD_NCCL_LIB:-}" "${HOROVOD_NCCL_HOME:+$HOROVOD_NCCL_HOME/lib}" \
           "$site/nvidia/nccl/lib" "$cuda_home/lib64" /usr/lib/x86_64-linux-gnu; do
    [ -n "$d" ] && [ -f "$d/libnccl.so.2" ] && { nccl_lib=$d; break; }
  done
  if [ -n "$nvcc" ] && [ -n "$nccl_inc" ] && [ -n "$nccl_lib" ]; then
    # NCCL's wheel has libnccl.so.2 only: the linker's -lnccl needs a libnccl.so beside it (in
    # its own folder, not a temporary one: the build keeps its link folders as the library's
    # run path, and a run path into /tmp would let anyone there plant a library)
    [ -e "$nccl_lib/libnccl.so" ] || ln -s libnccl.so.2 "$nccl_lib/libnccl.so"
    export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_CUDA_HOME=$cuda_home HOROVOD_NCCL_LINK=SHARED \
      HOROVOD_NCCL_INCLUDE=$nccl_inc HOROVOD_NCCL_LIB=$nccl_lib
    export HOROVOD_BUILD_CUDA_CC_LIST=${HOROVOD_BUILD_CUDA_CC_LIST:-${CUDA_ARCHS:?versions.env has no CUDA_ARCHS}}
    export LDFLAGS="${LDFLAGS:+$LDFLAGS }-Wl,-rpath,$nccl_lib:$site/torch/lib"
    export PATH=$cuda_home/bin:$PATH
    log "CUDA build: nvcc $nvcc ($("$nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p'))," \
        "NCCL $nccl_inc/nccl.h and $nccl_lib/libnccl.so.2, compute capabilities" \
        "$HOROVOD_BUILD_CUDA_CC_LIST; HOROVOD_GPU_OPERATIONS=NCCL"
  elif [ "${HOROVOD_GPU_OPERATIONS:-}" = NCCL ]; then
    die "HOROVOD_GPU_OPERATIONS=NCCL, but nvcc (${nvcc:-not in $cuda_home/bin}), nccl.h" \
        "(${nccl_inc:-not found}) or libnccl.so.2 (${nccl_lib:-not found}) is missing"
  else
    log "WARNING: torch is a CUDA build but nvcc (${nvcc:-missing}), nccl.h (${nccl_inc:-missing})" \
        "or libnccl.so.2 (${nccl_lib:-missing}) was not found: building without NCCL" \
        "(set HOROVOD_CUDA_HOME, HOROVOD_NCCL_HOME)"
  fi
elif [ "${HOROVOD_GPU_OPERATIONS:-}" = none ]; then
  unset HOROVOD_GPU_OPERATIONS
fi

# ---- What a wheel is compatible with ----------------------------------------------------------
# Beside each wheel it builds this script writes WHEEL.abi: the fields of `abi_fields` below (the
# environment the wheel was built for, one key=value a line) and the wheel's sha256. A wheel in
# WHEEL_DIR is used only when its record names that file and every field equals this
# environment's: same Horovod, CPython and machine, glibc, torch, MPI (vendor and version) and
# GPU operations. That is how the image build reuses the wheel of `make setup` (.ci/image-build.sh
# puts it into the context after checking the fields it can know before the build). Any other
# wheel is removed, and the log says why and that Horovod is built from the sdist.
gpu_operations=${HOROVOD_GPU_OPERATIONS:-none}
abi_fields=("horovod=$HOROVOD_VERSION" "python=$pytag-$machine" "libc=$libc"
  "torch=$torch_version" "mpi=$mpi" "gpu_operations=$gpu_operations")

usable=("$WHEEL_DIR" "horovod-$HOROVOD_VERSION-$pytag-*.whl" "${abi_fields[@]}")

if find_wheel "${usable[@]}"; then
  log "using the prebuilt $wheel: its record ${wheel##*/}.abi names this environment"
  exit 0
fi
# One build at a time per wheel directory; a second caller waits, then finds the wheel.
exec 9>"$WHEEL_DIR/.horovod-$HOROVOD_VERSION-$pytag.lock"
log "no usable horovod $HOROVOD_VERSION wheel for $pytag in $WHEEL_DIR: building from the sdist" \
  "once the build lock is free (at most ${build_timeout}s)"
flock -w "$build_timeout" 9 || die "timed out waiting for the lock in $WHEEL_DIR"
if find_wheel "${usable[@]}"; then
  log "wheel built by a concurrent run: $wheel"
  exit 0
fi
command -v cmake >/dev/null 2>&1 || die "cmake not found"

# --no-build-isolation builds with the target environment's own build tools.
if ! timeout 120 "$PYTHON" -c 'import setuptools, wheel, packaging' >/dev/null 2>&1; then
  log "installing the build requirements setuptools, wheel, packaging into the target environment"
  timeout 600 "$PYTHON" -m pip install --disable-pip-version-check -q setuptools wheel packaging
fi
env | grep -E '^(HOROVOD_(GPU|NCCL|CUDA|BUILD_CUDA)|LDFLAGS=)' | sed 's/^/[horovod] passing through /' || true

# ---- The sdist, checked against its pinned sha256 ---------------------------------------------
sdist_dir=$cache/sdist
sdist=$sdist_dir/horovod-$HOROVOD_VERSION.tar.gz
mkdir -p "$sdist_dir"
if [ -f "$sdist" ] && [ "$(sha_of "$sdist")" != "$HOROVOD_SHA256" ]; then
  log "cached $sdist does not match HOROVOD_SHA256; downloading it again"
  rm -f "$sdist"
fi
if [ ! -f "$sdist" ]; then
  log "downloading the horovod $HOROVOD_VERSION sdist"
  timeout 900 "$PYTHON" -m pip download --disable-pip-version-check -q --no-deps \
    --no-binary :all: -d "$sdist_dir" "horovod==$HOROVOD_VERSION"
  [ -f "$sdist" ] || die "pip download did not produce $sdist"
fi
actual=$(sha_of "$sdist")
if [ "$actual" != "$HOROVOD_SHA256" ]; then
  mv -f "$sdist" "$sdist.bad"
  die "sha256 mismatch for $sdist (kept as $sdist.bad): expected $HOROVOD_SHA256, got $actual"
fi
log "sdist verified: $sdist (sha256 $actual)"

# ---- Unpack and patch -------------------------------------------------------------------------
build_root=$(mktemp -d "${TMPDIR:-/tmp}/horovod-build.XXXXXX")
cleanup() { rm -rf "$build_root"; }
trap cleanup EXIT
tar -xzf "$sdist" -C "$build_root"
src=$build_root/horovod-$HOROVOD_VERSION
[ -f "$src/setup.py" ] || die "unexpected sdist layout: no $src/setup.py"

log "patching: C++17 torch extension and C++17 gloo copy for torch >= 2.1; libcuda.so.1"
timeout 60 "$PYTHON" - "$src" <<'PY'
import pathlib
import sys

src = pathlib.Path(sys.argv[1])


def patch(rel, old, new):
    """Replace exactly one occurrence of old with new in src/rel, or fail."""
    path = src / rel
    text = path.read_text()
    count = text.count(old)
    if count != 1:
        sys.exit(f"[horovod] ERROR: patch anchor found {count} times (expected 1) in {rel}:\n{old}")
    path.write_text(text.replace(old, new))
    print(f"[horovod]   patched {rel}")


# 1. torch >= 2.1: link the C++17 gloo copy instead of gloo / compatible_gloo.
patch("horovod/torch/CMakeLists.txt",
      """if(HAVE_GLOO)
    if (Pytorch_CXX11)
        list(APPEND PYTORCH_LINKER_LIBS gloo)
""",
      """# fabbench patch: torch >= 2.1 requires C++17, for the extension and the gloo it links
if(NOT Pytorch_VERSION VERSION_LESS "2.1.0")
    set(Pytorch_CXX17 TRUE)
else()
    set(Pytorch_CXX17 FALSE)
endif()
if(HAVE_GLOO)
    if (Pytorch_CXX17)
        list(APPEND PYTORCH_LINKER_LIBS pytorch17_gloo)
    elseif (Pytorch_CXX11)
        list(APPEND PYTORCH_LINKER_LIBS gloo)
""")

# 2. torch >= 2.1: compile the extension as C++17; tell the top level to build the gloo copy.
patch("horovod/torch/CMakeLists.txt",
      """set(Pytorch_CXX11 ${Pytorch_CXX11} PARENT_SCOPE)
if(NOT Pytorch_VERSION VERSION_LESS "1.5.0")
    set(CMAKE_CXX_STANDARD 14)
endif()
""",
      """set(Pytorch_CXX11 ${Pytorch_CXX11} PARENT_SCOPE)
set(Pytorch_CXX17 ${Pytorch_CXX17} PARENT_SCOPE)
if(Pytorch_CXX17)
    set(CMAKE_CXX_STANDARD 17)
    message(STATUS "fabbench patch: PyTorch ${Pytorch_VERSION}, extension compiled as C++17")
elseif(NOT Pytorch_VERSION VERSION_LESS "1.5.0")
    set(CMAKE_CXX_STANDARD 14)
endif()
""")

# 3. Top level: the C++17 copy of gloo, with the ABI of torch (like the C++17 TF copy).
patch("CMakeLists.txt",
      """# Gloo for c++17 TF
""",
      """# fabbench patch: gloo for the C++17 torch extension (torch >= 2.1)
if(HAVE_GLOO AND (DEFINED Pytorch_CXX17 AND Pytorch_CXX17))
    file(COPY ${PROJECT_SOURCE_DIR}/third_party/gloo/ DESTINATION ${PROJECT_SOURCE_DIR}/third_party/pytorch17_gloo)
    file(READ ${PROJECT_SOURCE_DIR}/third_party/pytorch17_gloo/gloo/CMakeLists.txt GLOO_CMAKE)
    string(REPLACE "gloo " "pytorch17_gloo " GLOO_CMAKE "${GLOO_CMAKE}")
    file(WRITE ${PROJECT_SOURCE_DIR}/third_party/pytorch17_gloo/gloo/CMakeLists.txt "${GLOO_CMAKE}")
    file(READ ${PROJECT_SOURCE_DIR}/third_party/pytorch17_gloo/CMakeLists.txt GLOO_CMAKE)
    string(REPLACE "-std=c++11" "-std=c++17" GLOO_CMAKE "${GLOO_CMAKE}")
    string(PREPEND GLOO_CMAKE "set(CMAKE_CXX_STANDARD 17)\\n")
    file(WRITE ${PROJECT_SOURCE_DIR}/third_party/pytorch17_gloo/CMakeLists.txt "${GLOO_CMAKE}")
    add_subdirectory(third_party/pytorch17_gloo)
    if (Pytorch_CXX11)
        target_compile_definitions(pytorch17_gloo PRIVATE _GLIBCXX_USE_CXX11_ABI=1)
    else()
        target_compile_definitions(pytorch17_gloo PRIVATE _GLIBCXX_USE_CXX11_ABI=0)
    endif()
    message(STATUS "fabbench patch: gloo copy pytorch17_gloo compiled as C++17")
endif()

# Gloo for c++17 TF
""")

# 4. The driver library's one name that every driver installation and container runtime gives
#    is its soname, libcuda.so.1 (nvidia-container-toolkit and apptainer --nv bind that; the
#    unversioned libcuda.so is a development link). Horovod's torch extension opens libcuda.so
#    the first time a GPU tensor passes through it: open libcuda.so.1, else libcuda.so.
patch("horovod/torch/cuda_util.cc",
      """  cudalib = dlopen("libcuda.so", RTLD_LAZY);
""",
      """  cudalib = dlopen("libcuda.so.1", RTLD_LAZY);  // fabbench patch: the driver's soname first
  if (!cudalib)
    cudalib = dlopen("libcuda.so", RTLD_LAZY);
""")

# The gloo copy relies on these two strings of gloo's own CMake files.
for rel, needle in (("third_party/gloo/gloo/CMakeLists.txt", "add_library(gloo "),
                    ("third_party/gloo/CMakeLists.txt", "-std=c++11")):
    if needle not in (src / rel).read_text():
        sys.exit(f"[horovod] ERROR: {rel} no longer contains {needle!r}")
PY

# ---- Build ------------------------------------------------------------------------------------
log_dir=$cache/logs
mkdir -p "$log_dir"
build_log=$log_dir/horovod-$HOROVOD_VERSION-build.log
out=$build_root/wheel
mkdir -p "$out"
export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1
export HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
export MAKEFLAGS=${MAKEFLAGS:--j2}  # without MAKEFLAGS, Horovod's setup.py runs make -j8
log "building (MAKEFLAGS=$MAKEFLAGS, at most ${build_timeout}s); log: $build_log"
start=$SECONDS
if ! timeout "$build_timeout" "$PYTHON" -m pip wheel --disable-pip-version-check -v --no-deps \
       --no-build-isolation -w "$out" "$src" >"$build_log" 2>&1; then
  tail -n 60 "$build_log" | sed 's/^/[horovod] | /' >&2
  die "build failed after $((SECONDS - start))s; full log: $build_log"
fi
for marker in "fabbench patch: PyTorch .* extension compiled as C++17" \
              "fabbench patch: gloo copy pytorch17_gloo compiled as C++17"; do
  grep -q "$marker" "$build_log" || die "the build did not pick up the C++17 patch (see $build_log)"
done
if [ "$gpu_operations" = NCCL ]; then
  grep -q "Found NCCL (include: " "$build_log" \
    || die "HOROVOD_GPU_OPERATIONS=NCCL, but the build found no NCCL (see $build_log)"
  grep -q "cuda_kernels.cu" "$build_log" \
    || die "HOROVOD_GPU_OPERATIONS=NCCL, but no CUDA kernel was compiled (see $build_log)"
fi

built=("$out"/horovod-"$HOROVOD_VERSION"-*.whl)
[ -f "${built[0]}" ] || die "pip wheel produced no horovod-$HOROVOD_VERSION wheel"
timeout 120 "$PYTHON" -m zipfile -l "${built[0]}" | grep -q 'horovod/torch/mpi_lib_v2' \
  || die "${built[0]} has no torch extension (horovod/torch/mpi_lib_v2*)"
# The record first, then the wheel: moved into place only when complete, so a half-written
# wheel never looks like a cached one, and a wheel is never there without its record.
record=$WHEEL_DIR/${built[0]##*/}.abi
{
  printf '# what containers/horovod.sh built this wheel for; compared before it is used\n'
  printf '%s\n' "${abi_fields[@]}" "sha256=$(sha_of "${built[0]}")"
  printf '# built %s on %s; mpicxx from %s\n' "$(date -u +%FT%TZ)" \
    "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")" \
    "$(mpi_package "$(command -v mpicxx)")"
} >"$record.part"
mv -f "$record.part" "$record"
mv -f "${built[0]}" "$WHEEL_DIR/"
log "built in $((SECONDS - start))s: $WHEEL_DIR/$(basename "${built[0]}")"
