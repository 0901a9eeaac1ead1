#!/usr/bin/env bash
# UCX (cuda flavour) with CUDA (cuda_copy, cuda_ipc; gdrcopy is not in this flavour) and verbs
# (rc, ud, dc, mlx5): Open MPI's pml ucx, the `infiniband` fabric profile. Built from Debian's
# source tarball (no configure script in it: autogen.sh) against $CUDA_HOME (cuda-toolkit.sh
# first). Installs into $PREFIX.
set -euo pipefail
# shellcheck source=containers/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_cuda

archive=$(fetch "$UCX_URL" "$UCX_SHA256")
src=$(unpack "$archive")
log "building UCX $UCX_VERSION in $src"
cd "$src"
# UCX compiles with -Werror; the CUDA 13 headers deprecate calls this release makes, which are
# warnings, not errors, for this build.
sed -i 's/^BASE_CFLAGS="-g -Wall -Werror"$/BASE_CFLAGS="-g -Wall"/' config/m4/compiler.m4
grep -q '^BASE_CFLAGS="-g -Wall"$' config/m4/compiler.m4 || die "config/m4/compiler.m4 changed"
# CUDA 13 gave cuCtxCreate a parameters argument (cuCtxCreate_v4); UCX 1.13's own sources never
# create a context, its test program of the CUDA memory hooks does (built by `make`): give it
# the argument (NULL: none) when the headers are CUDA 13's
python3 - test/apps/test_cuda_hook.c <<'PY' || die "test/apps/test_cuda_hook.c changed"
import sys
path = sys.argv[1]
text = open(path).read()
old = "    res = cuCtxCreate(&context, 0, device);\n"
assert text.count(old) == 1
open(path, "w").write(text.replace(old, "#if CUDA_VERSION >= 13000\n"
                                   "    res = cuCtxCreate(&context, NULL, 0, device);\n"
                                   "#else\n" + old + "#endif\n"))
PY
# Debian's tarball keeps upstream's packaging folder as debian.upstream; configure.ac names it
[ -d debian ] || mv debian.upstream debian
./autogen.sh >/dev/null 2>&1 || { ./autogen.sh; die "autogen.sh failed"; }
./contrib/configure-release --prefix="$PREFIX" --enable-mt --disable-doxygen-doc \
  --with-cuda="$CUDA_HOME" --without-gdrcopy --with-verbs --with-rdmacm --with-rc --with-ud \
  --with-dc --with-mlx5-dv --with-dm --enable-cma --without-java --without-go --without-rocm \
  --without-knem --without-xpmem
make -j"$JOBS"
make install
cd / && rm -rf "$src"
"$PREFIX/bin/ucx_info" -v | head -n2
[ -f "$PREFIX/lib/ucx/libuct_cuda.so" ] || die "UCX was built without its CUDA transports"
# the link-time stubs must never be a run-time path
if readelf -d "$PREFIX"/lib/*.so "$PREFIX"/lib/ucx/*.so | grep -E 'R(UN)?PATH' | grep -q stubs; then
  die "a UCX library keeps the CUDA stubs directory as its run-time path"
fi
log "installed UCX $UCX_VERSION (with CUDA) into $PREFIX"
