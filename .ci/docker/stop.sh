#!/usr/bin/env bash
# Stop the Docker Engine .ci/docker/start.sh started in DIR, and leave nothing of it.
#
#   .ci/docker/stop.sh [DIR] [--keep-dir]   DIR as for start.sh (default $FABBENCH_DOCKER_DIR,
#                                           else /var/tmp/fabbench-docker)
#
# In order: its containers removed (docker rm -f, while it answers); dockerd stopped by the pid
# it wrote (DIR/docker.pid; a dockerd whose --exec-root is DIR/exec when that file is gone),
# SIGTERM then SIGKILL after 30 s; its containerd and containerd's shims (each found by DIR/exec
# in its command line) likewise; every process left in its containers' cgroups killed and the
# cgroups removed; any mount under DIR unmounted (its own mount namespace, where its mounts live,
# ends with its last process); DIR's contents removed, and DIR itself unless --keep-dir. The data
# root (the layer cache) stays. Running it when nothing runs is harmless. Exit 1 (one line) when
# something could not be removed.
set -euo pipefail

log() { printf '[docker-stop] %s\n' "$*" >&2; }
die() { printf '[docker-stop] ERROR: %s\n' "$*" >&2; exit "${2:-1}"; }

keep=0 dir=""
for a in "$@"; do
  case $a in --keep-dir) keep=1 ;; -*) die "unknown option $a (usage: $0 [DIR] [--keep-dir])" 2 ;;
    *) [ -z "$dir" ] || die "usage: $0 [DIR] [--keep-dir]" 2; dir=$a ;; esac
done
dir=${dir:-${FABBENCH_DOCKER_DIR:-/var/tmp/fabbench-docker}}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
[ -d "$dir" ] || exit 0
sock=$dir/docker.sock

# pids_of WORD: the processes whose command line has an argument holding WORD (our folder's)
pids_of() {
  local f
  while read -r f; do
    f=${f#/proc/}
    [ "${f%/cmdline}" = "$$" ] || echo "${f%/cmdline}"
  done < <(grep -lsaF -- "$1" /proc/[0-9]*/cmdline)
  return 0
}
# gone TENTHS PID...: wait up to TENTHS tenths of a second for every PID to end
gone() {
  local tenths=$1 pid t alive
  shift
  for ((t = 0; t <= tenths; t++)); do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && return 0
    sleep 0.1
  done
  return 1
}
# end_pids DEADLINE PID...: SIGTERM, then SIGKILL those alive after DEADLINE seconds
end_pids() {
  local deadline=$1
  shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  gone $((deadline * 10)) "$@" && return 0
  log "still running after ${deadline}s, killed: $*"
  kill -KILL "$@" 2>/dev/null || true
  gone 100 "$@" || die "processes $* survive SIGKILL"
}

# 1. its containers, while it answers
docker_cli=/usr/bin/docker
[ -x "$docker_cli" ] || docker_cli=docker
if [ -S "$sock" ] && command -v "$docker_cli" >/dev/null; then
  export DOCKER_HOST=unix://$sock
  ids=$(timeout 20 "$docker_cli" ps -aq 2>/dev/null || true)
  if [ -n "$ids" ]; then
    log "removing $(wc -w <<<"$ids") container(s)"
    # shellcheck disable=SC2086  # one id per word
    timeout 60 "$docker_cli" rm -f $ids >/dev/null 2>&1 || log "docker rm -f failed: the cgroups below end them"
  fi
fi

# 2. dockerd: the pid it wrote, if that process is ours; else one with our exec root
pid=$(cat "$dir/docker.pid" 2>/dev/null || true)
daemon=()
if [[ $pid =~ ^[0-9]+$ ]] && { tr '\0' '\n' <"/proc/$pid/cmdline"; } 2>/dev/null \
     | grep -qxF -- "--exec-root=$dir/exec"; then
  daemon=("$pid")
else
  mapfile -t daemon < <(pids_of "--exec-root=$dir/exec")
fi
end_pids 30 "${daemon[@]}"
# 3. its containerd and the shims (`-address DIR/exec/containerd/containerd.sock`), if left: a
# dockerd that ended well ended them and its containers (it gives those 10 s), so what is left
# here was orphaned by a dockerd that died, and gets 3 s
mapfile -t left < <(pids_of "$dir/exec/")
end_pids 3 "${left[@]}"
# 4. what still runs in its containers' cgroups, then the cgroups
cgroup=$(cat "$dir/cgroup-parent" 2>/dev/null || true)
if [[ $cgroup =~ ^fabbench-docker-[0-9a-f]{12}$ ]]; then
  mapfile -t left < <(cat /sys/fs/cgroup/*/"$cgroup"/cgroup.procs /sys/fs/cgroup/*/"$cgroup"/*/cgroup.procs 2>/dev/null | sort -u)
  end_pids 3 "${left[@]}"
  for c in /sys/fs/cgroup/*/"$cgroup"; do
    [ -d "$c" ] || continue
    find "$c" -depth -mindepth 1 -type d -exec rmdir {} + 2>/dev/null || true
    rmdir "$c" 2>/dev/null || die "cannot remove the cgroup $c"
  done
fi
# 5. mounts under DIR in this namespace (its own namespace is gone with its last process)
for _ in 1 2 3; do
  mapfile -t mounts < <(awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r)
  [ "${#mounts[@]}" -gt 0 ] || break
  for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done
done
[ "${#mounts[@]}" -eq 0 ] || die "mounts left under $dir: ${mounts[*]}"
# 6. its files (the data root is elsewhere unless one made it so: it is kept)
data=$(cat "$dir/data-root" 2>/dev/null || true)
rm -rf -- "${dir:?}/exec" "${dir:?}/etc" "${dir:?}/run" "$sock" "$dir/docker.pid" "$dir/dockerd.log" \
  "$dir/cgroup-parent" "$dir/data-root"
if [ "$keep" = 0 ]; then
  if [ -n "$data" ] && [ "$data" != "${data#"$dir"/}" ]; then rmdir "$dir" 2>/dev/null || true
  else rmdir "$dir" 2>/dev/null || log "left $dir: it holds files start.sh did not make"; fi
fi
