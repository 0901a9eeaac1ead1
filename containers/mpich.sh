#!/usr/bin/env bash
# MPICH with CUDA: ch4 over libfabric (embedded) with the posix and gpudirect shared-memory
# modules, and yaksa's CUDA back end, through which MPICH reduces device buffers on the GPU
# (MPIR_CVAR_ENABLE_YAKSA_REDUCTION). Built from Debian's source tarball against $CUDA_HOME
# (cuda-toolkit.sh first), for the one architecture $CUDA_ARCH (yaksa compiles 279 generated
# kernel files a target: one architecture keeps that to about 20 minutes on 2 busy cores), shared
# libraries only. Installs into $PREFIX (default here /opt/mpich: beside, never over, the Open
# MPI of /opt/fabric, whose libmpi.so has the same name). Writes $PREFIX/BUILD.json last: its
# presence means a whole install (bench/gpu/mpich.py builds on the host into $FABBENCH_CACHE).
set -euo pipefail
PREFIX=${PREFIX:-/opt/mpich}
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_cuda
CUDA_ARCH=${CUDA_ARCH:-90}
[[ $CUDA_ARCH =~ ^[0-9]+$ ]] || die "CUDA_ARCH must be one architecture's number, e.g. 90 (got $CUDA_ARCH)"

archive=$(fetch "$MPICH_URL" "$MPICH_SHA256")
src=$(unpack "$archive")
trap 'rm -rf "$(dirname "$src")"' EXIT
log "building MPICH $MPICH_VERSION (CUDA sm_$CUDA_ARCH) in $src"
cd "$src"
# CUDA 13 removed cudaDeviceProp.computeMode; yaksa 0.2 reads it to stay off GPUs in exclusive
# mode. The attribute query gives the same value on every CUDA version.
python3 - modules/yaksa/src/backend/cuda/hooks/yaksuri_cuda_init_hooks.c <<'PY' \
  || die "yaksuri_cuda_init_hooks.c changed"
import sys
path = sys.argv[1]
text = open(path).read()
old = "            if (prop.computeMode != cudaComputeModeDefault) {\n"
new = ("            int mode = cudaComputeModeDefault;\n"
       "            cerr = cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, i);\n"
       "            YAKSURI_CUDAI_CUDA_ERR_CHKANDJUMP(cerr, rc, fn_fail);\n"
       "            if (mode != cudaComputeModeDefault) {\n")
assert text.count(old) == 1
open(path, "w").write(text.replace(old, new))
PY
# yaksa wraps nvcc in cudalt.sh, which writes each kernel's libtool object (.lo) by hand: it
# compiles a non-PIC object too, which a shared-only build never links (half the CUDA build:
# made 'none' here, as libtool itself writes it without static libraries), and stamps the .lo
# with `libtool --version`, a program this host need not have (without it the stamp is empty
# and libtool refuses the object at the link): the module's own configured ./libtool stamps it.
python3 - modules/yaksa/src/backend/cuda/cudalt.sh <<'PY' || die "yaksa's cudalt.sh changed"
import sys
path = sys.argv[1]
text = open(path).read()
edits = [('CMD="${@} -o $NPIC_FILEPATH"\nif test "$verbose" ; then echo "$CMD" ; fi\neval "$CMD"\n',
          ""),
         ("LIBTOOL_VERSION=$(libtool --version | head -n 1)",
          "LIBTOOL_VERSION=$(./libtool --version | head -n 1)"),
         ('non_pic_object="$LOCAL_NPIC_FILEPATH"', "non_pic_object=none")]
for old, new in edits:
    assert text.count(old) == 1, old
    text = text.replace(old, new)
open(path, "w").write(text)
PY
# MPL's configure adds $CUDA_HOME/lib64 to the link path only where LDFLAGS does not already
# hold it as a substring, and the driver stubs' folder is such a substring: name both here.
./configure --prefix="$PREFIX" --with-device=ch4:ofi --with-libfabric=embedded \
  --with-ch4-shmmods=posix,gpudirect --with-cuda="$CUDA_HOME" --with-cuda-sm="$CUDA_ARCH" \
  --with-hwloc=embedded --disable-fortran --disable-cxx --disable-static --enable-shared \
  --enable-fast=O2 --disable-doc \
  LDFLAGS="-L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs" >configure.log 2>&1 \
  || { tail -n 40 configure.log; die "configure failed (its last lines above)"; }
make -j"$JOBS" >make.log 2>&1 || { tail -n 60 make.log; die "make failed (its last lines above)"; }
make install >install.log 2>&1 || { tail -n 40 install.log; die "make install failed"; }
# mpichversion loads libmpi, which loads libcudart and the driver's libcuda.so.1: the toolkit's,
# and its link-time stub under the driver's name, only to be loaded here (nothing of CUDA runs)
driver=$(mktemp -d)
ln -s "$CUDA_HOME/lib64/stubs/libcuda.so" "$driver/libcuda.so.1"
said=$(LD_LIBRARY_PATH="$CUDA_HOME/lib64:$driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$PREFIX/bin/mpichversion" 2>&1) || { rm -rf "$driver"; die "mpichversion failed: $said"; }
rm -rf "$driver"
printf '%s\n' "$said" | head -n 3
printf '%s\n' "$said" | grep -q -- "--with-cuda" || die "MPICH was configured without CUDA"
ls "$PREFIX"/lib/libmpi.so.12* >/dev/null || die "no libmpi.so.12 in $PREFIX/lib"
# the link-time stubs must never be a run-time path
if readelf -d "$PREFIX"/lib/*.so "$PREFIX"/bin/* 2>/dev/null | grep -E 'R(UN)?PATH' | grep -q stubs; then
  die "an MPICH file keeps the CUDA stubs directory as its run-time path"
fi
python3 - "$PREFIX" "$MPICH_VERSION" "$MPICH_URL" "$MPICH_SHA256" "$CUDA_ARCH" "$CUDA_HOME" <<'PY'
import json, sys
prefix, version, url, sha, arch, cuda = sys.argv[1:]
try:
    toolkit = json.load(open(f"{cuda}/version.json"))
except OSError:
    toolkit = None
json.dump({"mpich": version, "source": url, "sha256": sha, "cuda_arch": arch,
           "cuda_toolkit": toolkit, "configure": "ch4:ofi (libfabric embedded), shmmods "
           "posix,gpudirect, hwloc embedded, yaksa CUDA, shared only"},
          open(f"{prefix}/BUILD.json", "w"), indent=1)
PY
log "installed MPICH $MPICH_VERSION (with CUDA, sm_$CUDA_ARCH) into $PREFIX"
