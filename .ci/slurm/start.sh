#!/usr/bin/env bash
# Start a real Slurm cluster on this host (root only), idempotently; print its SLURM_CONF path.
#
#   .ci/slurm/start.sh one   # one node (this host): sbatch, srun, srun --mpi=pmix
#   .ci/slurm/start.sh two   # two emulated nodes n1, n2 on this host (docs/testing.md): srun -N2 works,
#                            # srun -N2 --mpi=pmix does not (two PMIx servers on one host collide)
#   .ci/slurm/start.sh four  # four nodes node0..node3 of a standing `fabbench emulate up` cluster:
#                            # one slurmd per node in its own network namespace, with its own
#                            # address (198.18.x.y), hostname and PMIx server, so
#                            # srun -N4 --mpi=pmix works; slurmctld listens on the bridge
#                            # ($FABBENCH, default .venv/bin/fabbench, makes the cluster;
#                            # FABBENCH_SLURM_LINK, default 1gbit, is each node's link and
#                            # FABBENCH_SLURM_SLOW_NODE=NODE:RATE, e.g. 3:250mbit, one node's)
#
# Each cluster lives in its own directory ($FABBENCH_SLURM_DIR, default /var/tmp/fabbench-slurm/<mode>)
# with its own ports, so both can run at once; nothing under /etc is changed: commands find the
# cluster through SLURM_CONF=<dir>/slurm.conf. munged is shared (the Debian key in /etc/munge).
# Running it again while the cluster answers does nothing. Stop with .ci/slurm/stop.sh <mode>.
set -euo pipefail

mode=${1:-one}
case $mode in
  one) ctld_port=16817; node_port=16818 ;;
  two) ctld_port=16827; node_port=0 ;;
  four) ctld_port=${FABBENCH_SLURM_PORT:-16837}; node_port=$((ctld_port + 1)) ;;  # a second
        # four-node cluster (its own FABBENCH_SLURM_DIR) needs a port of its own
  *) echo "usage: $0 one|two|four" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "start.sh: Slurm daemons need root" >&2; exit 3; }
# The daemons started below outlive this script: they must not inherit its caller's descriptors
# (`flock LOCK .ci/slurm/start.sh` would otherwise stay locked by munged for ever).
for fd in "/proc/$$/fd"/*; do
  fd=${fd##*/}
  case $fd in 0|1|2|255) ;; *) eval "exec $fd>&-" 2>/dev/null || true ;; esac
done
for tool in munged slurmctld slurmd scontrol sinfo; do
  command -v "$tool" >/dev/null || { echo "start.sh: $tool not installed (.ci/apt-packages.txt)" >&2; exit 3; }
done

dir=${FABBENCH_SLURM_DIR:-/var/tmp/fabbench-slurm/$mode}
conf=$dir/slurm.conf
export SLURM_CONF=$conf
host=$(hostname -s)
cpus=$(nproc)
[ "$cpus" -ge 4 ] || cpus=4   # SlurmdParameters=config_overrides lets a node claim more

log() { printf '[slurm-%s] %s\n' "$mode" "$*" >&2; }

# 1. munge (shared by both clusters)
if ! timeout 10 munge -n </dev/null 2>/dev/null | timeout 10 unmunge >/dev/null 2>&1; then
  # a munged that is running but slow to answer (a loaded host) is waited for, not started twice
  if ! pgrep -x munged >/dev/null; then
    log "starting munged"
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    timeout 30 runuser -u munge -- /usr/sbin/munged
  else
    log "munged is running but did not answer within 10 s: waiting for it"
  fi
  for _ in $(seq 50); do
    timeout 5 munge -n </dev/null 2>/dev/null | timeout 5 unmunge >/dev/null 2>&1 && break
    sleep 0.2
  done
  timeout 10 munge -n </dev/null | timeout 10 unmunge >/dev/null || { log "munged does not answer"; exit 1; }
fi

# 2. already up?
if [ -f "$conf" ] && timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' \
   && timeout 10 sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
  echo "$conf"
  exit 0
fi

# 3. configuration
mkdir -p "$dir/state"
ctld_addr=127.0.0.1
if [ "$mode" = one ]; then
  nodes="NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Port=$node_port State=UNKNOWN"
  names=("$host")
elif [ "$mode" = four ]; then
  # a fresh emulated cluster (a stale one of ours is stopped first)
  here=$(cd "$(dirname "$0")/../.." && pwd)
  fabbench=${FABBENCH:-$here/.venv/bin/fabbench}
  if [ -f "$dir/emulation" ]; then
    old=$(dirname "$(cat "$dir/emulation")")
    timeout 90 "$fabbench" emulate down --pid "$(basename "$old")" >/dev/null 2>&1 || true
  fi
  slow=()
  [ -z "${FABBENCH_SLURM_SLOW_NODE:-}" ] || slow=(--slow-node "$FABBENCH_SLURM_SLOW_NODE")
  emulation=$(timeout 150 "$fabbench" emulate up --nodes 4 --link "${FABBENCH_SLURM_LINK:-1gbit}" \
                "${slow[@]}" 2>/dev/null | sed -n 's/^FABBENCH_EMULATION=//p')
  [ -n "$emulation" ] || { log "fabbench emulate up failed"; exit 1; }
  echo "$emulation" >"$dir/emulation"
  edir=$(dirname "$emulation")
  agent=$edir/bin/ssh
  ctld_addr=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bridge_address"])' "$emulation")
  nodes=""
  names=()
  for i in 0 1 2 3; do
    addr=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nodes"][int(sys.argv[2])]["address"])' "$emulation" "$i")
    nodes+="NodeName=node$i NodeHostname=node$i NodeAddr=$addr CPUs=$cpus Port=$node_port State=UNKNOWN"$'\n'
    names+=("node$i")
  done
else
  nodes="NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus Port=17001 State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus Port=17002 State=UNKNOWN"
  names=(n1 n2)
fi
cat >"$conf" <<CONF
# written by .ci/slurm/start.sh $mode
ClusterName=fabbench-$mode
SlurmctldHost=$host($ctld_addr)
SlurmctldPort=$ctld_port
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=3600
$nodes
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF

# 4. daemons: stop stale ones of this cluster (by their pid files), start fresh
for pidfile in "$dir"/slurmctld.pid "$dir"/slurmd-*.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile" 2>/dev/null || true)
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -f "$pidfile"
done
sleep 0.5
# slurmstepd's PMIx server (PMIx 4.2) offers its clients only the security modules it activated
# (PMIX_SECURITY_MODE, munge,native by default), and its `none` module activates only when named
# in PMIX_MCA_psec. Named here, after the defaults: a rank keeps munge/native unless it asks for
# none itself (PMIX_MCA_psec=none in its environment), as the tests' Apptainer ranks must: the job
# runs as root, the ranks as the unprivileged user, so native's uid check refuses them.
export PMIX_MCA_psec=munge,native,none
log "starting slurmctld (port $ctld_port)"
timeout 30 slurmctld -f "$conf" -c
for name in "${names[@]}"; do
  mkdir -p "$dir/spool-$name"
  log "starting slurmd $name"
  case $mode in
    one) timeout 30 slurmd -f "$conf" ;;
    two) timeout 30 slurmd -f "$conf" -N "$name" ;;
    # inside the node: its namespace, hostname and /etc/hosts (the emulation's agent)
    # its own configuration directory: mpi.conf there gives its PMIx clients their own
    # temporary directory (the default, /tmp/spmix_appdir_<uid>_<job>.<step>, is shared by
    # all nodes of this one host)
    four) mkdir -p "$dir/$name/pmix-tmp"
          ln -sf ../slurm.conf "$dir/$name/slurm.conf"
          echo "PMIxCliTmpDirBase=$dir/$name/pmix-tmp" >"$dir/$name/mpi.conf"
          timeout 30 "$agent" "$name" slurmd -f "$dir/$name/slurm.conf" -N "$name" ;;
  esac
done

# 5. wait for every node to be usable (deadline 60 s)
end=$((SECONDS + 60))
while :; do
  states=$(timeout 10 sinfo -h -N -o '%t' 2>/dev/null || true)
  if [ -n "$states" ] && ! grep -qvE '^(idle|mix|alloc)$' <<<"$states" \
     && [ "$(wc -l <<<"$states")" -eq "${#names[@]}" ]; then
    break
  fi
  if [ $SECONDS -ge $end ]; then
    log "nodes not ready: $(tr '\n' ' ' <<<"$states")"; tail -n 20 "$dir"/*.log >&2 || true; exit 1
  fi
  sleep 0.5
done
log "ready: ${names[*]}"
echo "$conf"
