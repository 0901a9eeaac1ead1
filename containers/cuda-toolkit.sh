#!/usr/bin/env bash
# The part of CUDA that the cuda flavour's fabric stack builds against, from PyPI's nvidia-*
# wheels (pinned with their sha256 in versions.env; NVIDIA's base images need Docker Hub / NGC):
#   $CUDA_HOME/include        cuda.h, cuda_runtime.h, ... (nvidia-cuda-runtime-cu12), crt/*.h
#                             (nvidia-cuda-nvcc-cu12's headers only) and nvml.h
#                             (nvidia-nvml-dev-cu12)
#   $CUDA_HOME/lib64          libcudart.so.12 (+ the libcudart.so link for -lcudart)
#   $CUDA_HOME/lib64/stubs    libcuda.so and libnvidia-ml.so: link-time stubs made here from the
#                             headers' function names (sonames libcuda.so.1, libnvidia-ml.so.1),
#                             so that UCX links against the driver API. They never go into the
#                             runtime image: there the host's driver provides both (the nvidia
#                             container toolkit, apptainer --nv), and no stub can shadow it.
#   $CUDA_HOME/version.json   what was installed, from which wheels
#   cuda-toolkit.sh           install (in the cuda-build stage; needs gcc and python3)
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
printf '%s --hash=sha256:%s\n' \
  "$CUDA_RUNTIME_WHEEL" "$CUDA_RUNTIME_WHEEL_SHA256" \
  "$CUDA_NVML_WHEEL" "$CUDA_NVML_WHEEL_SHA256" \
  "$CUDA_NVCC_WHEEL" "$CUDA_NVCC_WHEEL_SHA256" >"$reqs"
log "downloading $CUDA_RUNTIME_WHEEL $CUDA_NVML_WHEEL $CUDA_NVCC_WHEEL (hash-checked)"
timeout 1200 python3 -m pip download -q --no-deps --require-hashes --only-binary :all: \
  --platform manylinux2014_x86_64 --python-version 3 -d "$work/wheels" -r "$reqs" \
  || die "could not download the CUDA wheels (pip's message above)"

for wheel in "$work"/wheels/*.whl; do
  python3 -m zipfile -e "$wheel" "$work/tree" || die "could not unpack $wheel"
done
runtime=$work/tree/nvidia/cuda_runtime
[ -f "$runtime/include/cuda.h" ] && [ -f "$runtime/lib/libcudart.so.12" ] \
  || die "$CUDA_RUNTIME_WHEEL has no include/cuda.h or lib/libcudart.so.12"
[ -f "$work/tree/nvidia/nvml_dev/include/nvml.h" ] || die "$CUDA_NVML_WHEEL has no include/nvml.h"
[ -f "$work/tree/nvidia/cuda_nvcc/include/crt/host_config.h" ] \
  || die "$CUDA_NVCC_WHEEL has no include/crt/host_config.h"

mkdir -p "$CUDA_HOME/include" "$CUDA_HOME/lib64/stubs"
cp -a "$runtime/include/." "$CUDA_HOME/include/"
cp -a "$work/tree/nvidia/nvml_dev/include/nvml.h" "$CUDA_HOME/include/"
cp -a "$work/tree/nvidia/cuda_nvcc/include/." "$CUDA_HOME/include/"
find "$CUDA_HOME/include" -name '__init__.py' -delete
install -m 0755 "$runtime/lib/libcudart.so.12" "$CUDA_HOME/lib64/"
ln -sf libcudart.so.12 "$CUDA_HOME/lib64/libcudart.so"

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
cat >"$CUDA_HOME/version.json" <<EOF
{"cuda": "$CUDA_VERSION", "cudart_version": $cudart_version,
 "wheels": ["$CUDA_RUNTIME_WHEEL", "$CUDA_NVML_WHEEL", "$CUDA_NVCC_WHEEL (headers)"],
 "stubs": ["lib64/stubs/libcuda.so", "lib64/stubs/libnvidia-ml.so"]}
EOF
log "CUDA $CUDA_VERSION (runtime and headers from PyPI's wheels) in $CUDA_HOME"
