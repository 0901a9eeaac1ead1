#!/usr/bin/env bash
# mpi4py (MPI4PY_VERSION, versions.env) compiled against the MPI whose mpicc is on PATH, as a
# wheel for PYTHON's environment: PyPI's mpi4py wheels are not built against this MPI. Used by
# .ci/setup.sh (the venv) and python-stack.sh (the image), so that the image build reuses the
# wheel `make setup` compiled (minutes on 2 cores: one large translation unit) when it was
# compiled for what the image has.
#
# Environment:
#   PYTHON        interpreter of the target environment (default: python3)
#   WHEEL_DIR     where the wheel goes (default: $FABBENCH_CACHE/wheels, FABBENCH_CACHE
#                 defaulting to ~/.cache/fabbench)
#   MPI4PY_BUILD_TIMEOUT  seconds allowed for the compilation (default: 1800)
#
# Idempotent: a wheel in WHEEL_DIR whose record (WHEEL.abi, containers/wheel-record.sh) names
# this environment (mpi4py, CPython and machine, glibc, the MPI's version and the Debian package
# of its mpicc, or its path when built from source) is used; any other mpi4py wheel for this
# Python is removed, saying why. Its path is the last line printed. Concurrent runs are
# serialised by a lock in WHEEL_DIR.
#   mpi4py.sh --check WHEEL KEY=VALUE...   only tests WHEEL's record against those fields
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=containers/versions.env
. "$here/versions.env"
# shellcheck source=containers/wheel-record.sh
. "$here/wheel-record.sh"  # sha_of, mismatch, find_wheel, mpi_package

log() { printf '[mpi4py] %s\n' "$*" >&2; }
die() { printf '[mpi4py] ERROR: %s\n' "$*" >&2; exit 1; }

: "${MPI4PY_VERSION:?MPI4PY_VERSION must be set in versions.env}"
if [ "${1:-}" = --check ]; then
  [ -f "${2:-}" ] || die "usage: mpi4py.sh --check WHEEL [KEY=VALUE...]"
  mismatch "${@:2}"
  exit 0
fi

PYTHON=${PYTHON:-python3}
WHEEL_DIR=${WHEEL_DIR:-${FABBENCH_CACHE:-$HOME/.cache/fabbench}/wheels}
build_timeout=${MPI4PY_BUILD_TIMEOUT:-1800}
command -v "$PYTHON" >/dev/null 2>&1 || die "PYTHON=$PYTHON is not an executable"
mpicc=$(command -v mpicc) || die "mpicc not found: install an MPI (e.g. libopenmpi-dev)"
read -r pytag python libc < <(timeout 60 "$PYTHON" -c 'import platform, sys
tag = "cp%d%d" % sys.version_info[:2]
print(tag, f"{tag}-{platform.machine()}", "".join(platform.libc_ver()))') \
  || die "$PYTHON does not run"
# "mpicc: Open MPI 4.1.4 (Language: C)" -> "Open MPI 4.1.4"
mpi=$("$mpicc" --showme:version 2>/dev/null | sed -n '1s/^[^:]*: \(.*\) (Language: C)$/\1/p')
[ -n "$mpi" ] || mpi="unidentified $(readlink -f "$mpicc")"
abi_fields=("mpi4py=$MPI4PY_VERSION" "python=$python" "libc=$libc" "mpi=$mpi"
  "mpi_package=$(mpi_package "$mpicc")")
mkdir -p "$WHEEL_DIR"

usable=("$WHEEL_DIR" "mpi4py-$MPI4PY_VERSION-$pytag-*.whl" "${abi_fields[@]}")

if find_wheel "${usable[@]}"; then
  log "using the prebuilt $wheel: its record names this environment"
  printf '%s\n' "$wheel"
  exit 0
fi
exec 9>"$WHEEL_DIR/.mpi4py-$MPI4PY_VERSION-$pytag.lock"
flock -w "$build_timeout" 9 || die "timed out waiting for the lock in $WHEEL_DIR"
if find_wheel "${usable[@]}"; then
  log "wheel built by a concurrent run: $wheel"
  printf '%s\n' "$wheel"
  exit 0
fi
log "compiling mpi4py $MPI4PY_VERSION against $mpi ($mpicc) for $python (at most" \
    "${build_timeout}s)"
out=$(mktemp -d "$WHEEL_DIR/.build.XXXXXX")
trap 'rm -rf -- "$out"' EXIT
start=$SECONDS
MPICC=$mpicc timeout "$build_timeout" "$PYTHON" -m pip wheel --disable-pip-version-check -q \
  --no-deps --no-binary mpi4py -w "$out" "mpi4py==$MPI4PY_VERSION" >&2 \
  || die "pip wheel of mpi4py $MPI4PY_VERSION failed after $((SECONDS - start))s"
built=("$out"/mpi4py-"$MPI4PY_VERSION"-"$pytag"-*.whl)
[ -f "${built[0]}" ] || die "pip wheel produced no mpi4py-$MPI4PY_VERSION wheel for $pytag"
# the record first, then the wheel: a wheel is never there without its record
record=$WHEEL_DIR/${built[0]##*/}.abi
{
  printf '# what containers/mpi4py.sh built this wheel for; compared before it is used\n'
  printf '%s\n' "${abi_fields[@]}" "sha256=$(sha_of "${built[0]}")"
  printf '# built %s on %s\n' "$(date -u +%FT%TZ)" \
    "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
} >"$record.part"
mv -f "$record.part" "$record"
mv -f "${built[0]}" "$WHEEL_DIR/"
log "built in $((SECONDS - start))s: $WHEEL_DIR/${built[0]##*/}"
printf '%s\n' "$WHEEL_DIR/${built[0]##*/}"
