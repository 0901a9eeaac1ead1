#!/usr/bin/env bash
# Stop the cluster .ci/k8s/start.sh started and remove everything it made: its processes (by
# their pid files, then whatever is left in its cgroups: containerd's shims, pods), mounts,
# cgroups, the emulated nodes (`fabbench emulate down`: namespaces, veths, bridge, and with them
# kube-proxy's iptables rules, which live in the nodes' namespaces), the host paths kubelet, CNI
# and containerd created, and its state; / is private again when it was. Idempotent: with
# nothing running it does nothing. Kept: $FABBENCH_K8S_DIR/cache (the registry's storage and the
# image store, so that a next start pushes nothing again); --purge removes it too.
#
#   .ci/k8s/stop.sh [--purge]
#
# Exit 0 when nothing of the cluster is left; 1, naming what is left, otherwise; 124 past its
# deadline (FABBENCH_K8S_STOP_TIMEOUT, default 240 s; each step has its own too).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=.ci/k8s/lib.sh
. "$here/lib.sh"
export LOG_TAG=k8s-stop
purge=0
case ${1:-} in --purge) purge=1 ;; "") ;; *) echo "usage: $0 [--purge]" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "stop.sh: needs root" >&2; exit 3; }
# The whole of it under a deadline (FABBENCH_K8S_STOP_TIMEOUT, default 240 s): what a stopped run
# leaves, the next removes.
if [ -z "${FABBENCH_K8S_STOP_DEADLINE:-}" ]; then
  FABBENCH_K8S_STOP_DEADLINE=1 exec timeout --kill-after=10 "${FABBENCH_K8S_STOP_TIMEOUT:-240}" "$0" "$@"
fi

dir=${FABBENCH_K8S_DIR:-/var/tmp/fabbench-k8s}
[ -d "$dir" ] || exit 0
exec 9>"$dir/lock"
flock -w 120 9 || die "another start.sh or stop.sh held $dir/lock for 120 s"
t0=$SECONDS
step() { log "$1 (+$((SECONDS - t0)) s)"; }

BIN="" FABBENCH="" HOLDER=""
# shellcheck disable=SC1091  # written by start.sh
[ -f "$dir/state.env" ] && . "$dir/state.env"

# stop_pids SECONDS NAME...: end the daemons of pid files NAME (each only when its pid still runs
# the executable the file names): SIGTERM to all, SIGKILL to those left after SECONDS.
stop_pids() {
  local secs=$1 name f pid exe end i state pids=() names=() left=()
  shift
  for name in "$@"; do
    f=$dir/pids/$name.pid
    [ -f "$f" ] || continue
    read -r pid exe <"$f" || true
    if [ -n "${pid:-}" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
      names+=("$name")
    fi
    rm -f "$f"
  done
  end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do
    left=()
    for i in "${!pids[@]}"; do
      state=$(awk '{print $3}' "/proc/${pids[i]}/stat" 2>/dev/null || true)
      case $state in ""|Z|X) ;; *) left+=("$i") ;; esac
    done
    [ "${#left[@]}" -gt 0 ] || return 0
    sleep 0.2
  done
  for i in "${left[@]}"; do
    log "${names[i]} (pid ${pids[i]}) still ran ${secs} s after SIGTERM: SIGKILL"
    kill -KILL "${pids[i]}" 2>/dev/null || true
  done
}

# The cluster's cgroups: fbk-cp (host daemons), fbk-sys-I (node I's daemons and containerd's
# shims), fbk-I (node I's pods), in every hierarchy (runc makes them in cgroup2's too).
cg_roots() { awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts; }
cg_dirs() {
  local h
  for h in $(cg_roots); do
    find "$h" -maxdepth 1 -mindepth 1 -type d \( -name 'fbk-cp' -o -name 'fbk-sys-[0-9]*' -o -name 'fbk-[0-9]*' \)
  done
}
cg_pids() {
  local d
  for d in $(cg_dirs); do find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null; done | sort -u
}
kill_cgroups() {  # SIGKILL what is left in the cluster's cgroups, until none is (20 s)
  local end=$((SECONDS + 20)) pids
  while pids=$(cg_pids) && [ -n "$pids" ]; do
    # shellcheck disable=SC2086  # a list of pids
    kill -KILL $pids 2>/dev/null || true
    [ $SECONDS -lt $end ] || { log "still in the cluster's cgroups after 20 s: $(tr '\n' ' ' <<<"$pids")"; return 0; }
    sleep 0.3
  done
}

# 1. Node daemons: kubelets and kube-proxies first (they would restart pods), then containerd,
# then whatever is left of the nodes (shims, pods).
names() { for f in "$dir"/pids/"$1"-*.pid; do [ -f "$f" ] && basename "$f" .pid; done; }
# shellcheck disable=SC2046  # pid file names
stop_pids 10 $(names kubelet) $(names kube-proxy)
# shellcheck disable=SC2046
stop_pids 10 $(names containerd)
step "node daemons stopped"
# 2. The control plane and the registry.
# (kube-apiserver's graceful shutdown outlasts 10 s here; its state is etcd's)
stop_pids 3 kube-scheduler kube-controller-manager kube-apiserver
stop_pids 10 etcd registry
kill_cgroups

step "control plane stopped, cgroups emptied"
# 3. Mounts under the state folder (pod volumes, container root file systems, pod network
# namespaces, shm), deepest first.
mounts_under() { awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r; }
for _ in 1 2 3; do
  m=$(mounts_under)
  [ -n "$m" ] || break
  while read -r mp; do
    mp=$(printf '%b' "$mp")  # mountinfo escapes spaces as \040
    timeout 20 umount "$mp" 2>/dev/null || timeout 20 umount -l "$mp" 2>/dev/null || true
  done <<<"$m"
done

step "mounts removed"
# 4. The emulated nodes (their namespaces hold kube-proxy's rules; the bridge, the routes).
if [ -n "$HOLDER" ] && [ -n "$FABBENCH" ]; then
  if [ -d "/proc/$HOLDER" ]; then
    timeout 120 "$FABBENCH" emulate down --pid "$HOLDER" >/dev/null 2>>"$dir/logs/emulate.log" \
      || log "fabbench emulate down --pid $HOLDER failed (see $dir/logs/emulate.log)"
  fi
fi

step "emulated nodes down"
# 5. The cgroups, deepest first.
for _ in 1 2 3; do
  cgs=$(cg_dirs)
  [ -n "$cgs" ] || break
  for d in $cgs; do find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; done
  sleep 0.3
done

step "cgroups removed"
# 6. Host paths kubelet, CNI and containerd made outside the state folder (lib.sh's HOST_PATHS):
# those that were not there before are removed. Of those that were, only what is surely the
# cluster's: in kubelet's own folders the files added since; CNI's results of our sandboxes; the
# links into the state folder; nothing in /run/netns or a containerd's folders (others' may be).
before() { grep -qxF "$1" "$dir/before/host-paths" 2>/dev/null; }
sandboxes=$(find "$dir"/nodes/*/containerd/io.containerd.grpc.v1.cri/sandboxes -mindepth 1 -maxdepth 1 \
              -regextype egrep -regex '.*/[0-9a-f]{64}' -printf '%f\n' 2>/dev/null || true)
if [ -f "$dir/before/host-paths" ]; then
  for p in "${HOST_PATHS[@]}"; do
    [ -e "$p" ] || continue
    case $p in
      /run/netns)
        # iproute2 made it a mount point; only when no namespace is left in it
        if ! before "$p" && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
          umount /run/netns 2>/dev/null || true
          rmdir /run/netns 2>/dev/null || true
        fi ;;
      /var/lib/cni)
        for id in $sandboxes; do rm -f /var/lib/cni/results/fbk-"$id"-* /var/lib/cni/results/cni-loopback-"$id"-*; done
        before "$p" || find "$p" -depth -type d -empty -delete 2>/dev/null || true ;;
      /var/log/containers)
        find "$p" -maxdepth 1 -type l -lname "$dir/*" -delete 2>/dev/null || true
        before "$p" || rmdir "$p" 2>/dev/null || true ;;
      /run/containerd|/var/lib/containerd)
        before "$p" || rm -rf "$p" ;;
      *)
        if before "$p"; then
          { find "$p" -xdev -depth 2>/dev/null | grep -vxFf "$dir/before/host-files" || true; } \
            | while read -r f; do rm -f "$f" 2>/dev/null || rmdir "$f" 2>/dev/null || true; done
        else
          rm -rf "$p"
        fi ;;
    esac
  done
fi

step "host paths cleaned"
# 7. / private again when it was (start.sh made it shared).
if grep -qx '/ private' "$dir/before/propagation" 2>/dev/null; then
  timeout 10 mount --make-private /
fi

# 8. What is left? (the cluster's daemons, mounts, cgroups, the emulation, iptables rules)
left=()
if [ -n "$BIN" ]; then
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    # the cluster's daemons (kubectl, helm and ctr are clients others may be running)
    case $exe in "$BIN"/kubectl|"$BIN"/helm|"$BIN"/ctr) ;; "$BIN"/*) left+=("process ${p#/proc/} ($exe)") ;; esac
  done
fi
while read -r mp; do [ -z "$mp" ] || left+=("mount $mp"); done <<<"$(mounts_under)"
while read -r d; do [ -z "$d" ] || left+=("cgroup $d"); done <<<"$(cg_dirs)"
if [ -n "$HOLDER" ]; then
  while read -r ns; do [ -z "$ns" ] || left+=("netns $ns"); done \
    <<<"$(ip netns list 2>/dev/null | awk -v p="fabbench-$HOLDER-" 'index($1, p) == 1 {print $1}')"
  while read -r l; do [ -z "$l" ] || left+=("link $l"); done \
    <<<"$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^fb(br$HOLDER|v${HOLDER}n[0-9]+)$" || true)"
fi
while read -r r; do [ -z "$r" ] || left+=("iptables rule '$r'"); done \
  <<<"$(timeout 20 iptables-save 2>/dev/null | grep -E 'KUBE-|198\.19\.|fbk' || true)"
if [ "${#left[@]}" -gt 0 ]; then
  log "left after $((SECONDS - t0)) s: ${left[*]}"
  exit 1
fi

step "checked: nothing left"
# 9. The state (the cache stays unless --purge).
for f in "$dir"/*; do
  case ${f##*/} in
    cache) [ "$purge" = 1 ] && rm -rf "$f" ;;
    lock|state.env) ;;
    failed-logs) ;;
    *) rm -rf "$f" ;;
  esac
done
rm -f "$dir/state.env"
log "stopped in $((SECONDS - t0)) s"
