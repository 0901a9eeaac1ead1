#!/usr/bin/env bash
# Stop a cluster started by .ci/slurm/start.sh (its daemons only, by their pid files).
set -euo pipefail
mode=${1:-one}
dir=${FABBENCH_SLURM_DIR:-/var/tmp/fabbench-slurm/$mode}
for pidfile in "$dir"/slurmd-*.pid "$dir"/slurmctld.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile" 2>/dev/null || true)
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -f "$pidfile"
done
# four: the emulated cluster its slurmds lived in
if [ "$mode" = four ] && [ -f "$dir/emulation" ]; then
  here=$(cd "$(dirname "$0")/../.." && pwd)
  holder=$(basename "$(dirname "$(cat "$dir/emulation")")")
  timeout 90 "${FABBENCH:-$here/.venv/bin/fabbench}" emulate down --pid "$holder" >/dev/null || true
  rm -f "$dir/emulation"
fi
