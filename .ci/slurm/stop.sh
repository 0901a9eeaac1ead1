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
