#!/usr/bin/env bash
# The CUDA toolkit the cuda flavour builds with, from PyPI's nvidia-* wheels (pinned with their
# sha256 in versions.env; NVIDIA's base images need Docker Hub / NGC), in NVIDIA's own layout so
# that nvcc, CMake's FindCUDAToolkit, torch.utils.cpp_extension and configure scripts find it:
#   $CUDA_HOME/targets/x86_64-linux/{include,lib}   include and lib64 link to them
#   $CUDA_HOME/include        cuda.h, cuda_runtime.h, ... (nvidia-cuda-runtime), crt/*.h
#                             (nvidia-cuda-crt), cccl/ (nvidia-cuda-cccl: cub, thrust, libcu++),
#                             nvml.h (nvidia-nvml-dev)
#   $CUDA_HOME/lib64          libcudart.so.13 (+ libcudart.so for -lcudart), libcudart_static.a
#                             and libcudadevrt.a (nvcc links them by default), libnvvm.so.4
#   $CUDA_HOME/bin            nvcc, cudafe++, fatbinary, nvlink, ptxas, bin2c (nvidia-cuda-nvcc)
#   $CUDA_HOME/nvvm           cicc and libdevice (nvidia-nvvm)
#   $CUDA_HOME/lib64/stubs    libcuda.so and libnvidia-ml.so: link-time stubs made here from the
#                             headers' function names (sonames libcuda.so.1, libnvidia-ml.so.1),
#                             so that UCX links against the driver API. They never go into the
#                             runtime image: there the host's driver provides both (the nvidia
#                             container toolkit, apptainer --nv), and no stub can shadow it.
#   $CUDA_HOME/version.json   what was installed, from which wheels
# Only libcudart.so.13 and version.json reach the runtime image (Dockerfile, cuda-runtime).
# Run in the cuda-build stage (needs gcc and python3); it ends by compiling and linking a kernel
# with the installed nvcc for every architecture of CUDA_ARCHS.
# Environment: CUDA_HOME (default /usr/local/cuda), BUILD_CA (a trust store for pip, see
# python-stack.sh).
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILD_CA=${BUILD_CA:-/usr/local/share/fabbench/build-ca.crt}
if [ -s "$BUILD_CA" ]; then
  export PIP_CERT=$BUILD_CA
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1

work=$(mktemp -d /tmp/cuda-wheels.XXXXXX)
trap 'rm -rf "$work"' EXIT
reqs=$work/requirements.txt
wheels=(RUNTIME NVCC NVVM CRT CCCL NVML)
for w in "${wheels[@]}"; do
  spec=CUDA_${w}_WHEEL sha=CUDA_${w}_WHEEL_SHA256
  [ -n "${!spec:-}" ] && [ -n "${!sha:-}" ] || die "versions.env has no $spec / $sha"
  printf '%s --hash=sha256:%s\n' "${!spec}" "${!sha}"
done >"$reqs"
log "downloading $(cut -d' ' -f1 "$reqs" | tr '\n' ' ')(hash-checked)"
timeout 1200 python3 -m pip download -q --no-deps --require-hashes --only-binary :all: \
  --platform manylinux2014_x86_64 --python-version 3 -d "$work/wheels" -r "$reqs" \
  || die "could not download the CUDA wheels (pip's message above)"

for wheel in "$work"/wheels/*.whl; do
  python3 -m zipfile -e "$wheel" "$work/tree" || die "could not unpack $wheel"
done
tk=$work/tree/nvidia/cu13
for f in include/cuda.h include/cuda_runtime.h include/crt/host_config.h include/nvml.h \
         include/cccl/cuda/std/version lib/libcudart.so.13 lib/libcudart_static.a bin/nvcc \
         bin/nvcc.profile bin/cudafe++ bin/ptxas bin/fatbinary nvvm/bin/cicc; do
  [ -e "$tk/$f" ] || die "the CUDA wheels have no nvidia/cu13/$f"
done

target=$CUDA_HOME/targets/x86_64-linux
mkdir -p "$target" "$CUDA_HOME/bin" "$CUDA_HOME/nvvm"
cp -a "$tk/include" "$target/include"
mkdir -p "$target/lib/stubs"
cp -a "$tk/lib/." "$target/lib/"
rm -rf "$target/lib/cmake"
cp -a "$tk/bin/." "$CUDA_HOME/bin/"
cp -a "$tk/nvvm/." "$CUDA_HOME/nvvm/"
find "$CUDA_HOME" -name '__init__.py' -delete
chmod 0755 "$CUDA_HOME"/bin/* "$CUDA_HOME/nvvm/bin/cicc"
ln -sfn targets/x86_64-linux/include "$CUDA_HOME/include"
ln -sfn targets/x86_64-linux/lib "$CUDA_HOME/lib64"
ln -sf libcudart.so.13 "$target/lib/libcudart.so"

# stub HEADER PREFIX SONAME: a shared library exporting every PREFIX* function the header names,
# both as written (what configure's AC_CHECK_LIB looks for, e.g. nvmlInit) and after the header's
# own #defines (what the compiled code calls, e.g. nvmlInit_v2, cuMemAlloc_v2).
stub() {
  local header=$1 prefix=$2 soname=$3 names
  names=$({ gcc -E -P -I"$CUDA_HOME/include" "$CUDA_HOME/include/$header"; cat "$CUDA_HOME/include/$header"; } \
    | grep -oE "\b${prefix}[A-Z][A-Za-z0-9_]*[[:space:]]*\(" | tr -d ' \t(' | sort -u)
  [ "$(printf '%s\n' "$names" | wc -l)" -gt 50 ] || die "found too few ${prefix}* functions in $header"
  printf '%s\n' "$names" | sed 's/.*/void &(void) {}/' >"$work/${soname%%.*}.c"
  gcc -shared -fPIC -Wl,-soname,"$soname" -o "$CUDA_HOME/lib64/stubs/${soname%.1}" \
    "$work/${soname%%.*}.c" || die "could not build the $soname stub"
  log "stub ${soname%.1} ($(printf '%s\n' "$names" | wc -l) functions of $header)"
}
stub cuda.h cu libcuda.so.1
stub nvml.h nvml libnvidia-ml.so.1

cudart_version=$(sed -n 's/^#define CUDART_VERSION[[:space:]]*\([0-9]*\).*/\1/p' "$CUDA_HOME/include/cuda_runtime_api.h")
[ "$cudart_version" = "$(echo "$CUDA_VERSION" | awk -F. '{print $1 * 1000 + $2 * 10}')" ] \
  || die "the headers say CUDART_VERSION $cudart_version, versions.env pins CUDA $CUDA_VERSION"
nvcc_release=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
[ "$nvcc_release" = "$(echo "$CUDA_VERSION" | cut -d. -f1-2)" ] \
  || die "nvcc says release ${nvcc_release:-?}, versions.env pins CUDA $CUDA_VERSION"

# The compiler works: a kernel for every architecture Horovod's kernels are built for, linked
# against the runtime (run here it finds no driver, which is all it can do without a GPU).
gencode=()
for cc in ${CUDA_ARCHS//,/ }; do gencode+=(-gencode "arch=compute_$cc,code=sm_$cc"); done
cat >"$work/probe.cu" <<'EOF'
#include <cstdio>
__global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
int main() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  std::printf("probe: %d device(s): %s\n", n, cudaGetErrorString(e));
  return 0;
}
EOF
"$CUDA_HOME/bin/nvcc" "${gencode[@]}" -o "$work/probe" "$work/probe.cu" \
  || die "nvcc could not compile a kernel for CUDA_ARCHS=$CUDA_ARCHS"
"$work/probe" || true

cat >"$CUDA_HOME/version.json" <<EOF
{"cuda": "$CUDA_VERSION", "cudart_version": $cudart_version, "nvcc": "$nvcc_release",
 "wheels": [$(cut -d' ' -f1 "$reqs" | sed 's/.*/"&"/' | paste -sd, | sed 's/,/, /g')],
 "archs": "$CUDA_ARCHS",
 "stubs": ["lib64/stubs/libcuda.so", "lib64/stubs/libnvidia-ml.so"]}
EOF
python3 -m json.tool "$CUDA_HOME/version.json" >/dev/null || die "version.json is not JSON"
log "CUDA $CUDA_VERSION (nvcc $nvcc_release, runtime and headers from PyPI's wheels) in $CUDA_HOME"
