#!/usr/bin/env bash
# The GPU kit's device command (issue 25): install the kit from its folder only, then run every
# GPU step in one go (bench/gpu/drive.py). The machine has no network: nothing is downloaded.
#
#   bash bench/gpu/run.sh                     # on the GPU machine, with .gpukit carried along
#   bash bench/gpu/run.sh --device cpu --scale tiny    # the CPU rehearsal
#
# Results go to $OUT (the device tool's folder) or, when it is not set, bench/out/gpukit.
# Environment: GPUKIT (the folder, default .gpukit), PYTHON (default python3), GPUKIT_SITE (where
# to install, default a new folder under /tmp). Arguments go to drive.py.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kit=${GPUKIT:-$here/.gpukit}
python=${PYTHON:-python3}
out=${OUT:-$here/bench/out/gpukit}

if ! compgen -G "$kit/*.whl" >/dev/null || [ ! -f "$kit/MANIFEST.json" ]; then
  echo "gpukit: error: no kit in $kit: run python bench/gpu/prepare.py first" >&2
  exit 2
fi
site=${GPUKIT_SITE:-$(mktemp -d /tmp/gpukit-site.XXXXXX)}
mkdir -p "$site"
log=$site/.gpukit-install.log
# pip where it works; else unpack: a wheel is a zip archive, and the kit's are all purelib or
# platlib with no scripts needed, so unpacking one into the folder is its install
if ! { "$python" -m pip --version && "$python" -m pip install --no-index --no-deps --no-compile \
       --no-cache-dir --disable-pip-version-check --target "$site" "$kit"/*.whl; } >"$log" 2>&1
then
  echo "pip did not install the kit (above): unpacking the wheels instead" >>"$log"
  for wheel in "$kit"/*.whl; do
    "$python" -m zipfile -e "$wheel" "$site" >>"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  done
fi
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
exec "$python" "$here/bench/gpu/drive.py" --out "$out" --site "$site" --kit "$kit" "$@"
