#!/usr/bin/env bash
# Start a Docker Engine of the project's own (root only); print `DOCKER_HOST=unix://<its socket>`.
#
#   .ci/docker/start.sh [DIR]     DIR: its folder (default $FABBENCH_DOCKER_DIR, else
#                                 /var/tmp/fabbench-docker); stop it with .ci/docker/stop.sh DIR
#
# Debian's docker.io (Docker Engine 20.10, .ci/apt-packages.txt), started without systemd and
# touching nothing a daemon of the machine uses: its socket (DIR/docker.sock), pid file, exec
# root (DIR/exec: its containerd's socket and state, network namespaces) and log are in DIR, its
# data root (images, layers, the build cache) in $FABBENCH_DOCKER_DATA (default
# $FABBENCH_CACHE/docker, so that a second start reuses every layer). It runs in a mount namespace
# of its own, where DIR/etc is /etc/docker (its key.json; certs.d/HOST:PORT/ca.crt, the CA of a
# registry it pushes to, as a site puts it in /etc/docker/certs.d) and DIR/run is /run (where
# containerd 1.6 puts its shims' sockets, /run/containerd/s, whatever its state folder): every
# mount it makes (image layers, the nsfs of DIR/exec/netns) is in that namespace and ends with
# it. No network of its own: --bridge none, --iptables=false, --ip-masq=false (containers and
# builds use --network none or --network host; no address is made, no iptables rule written).
# Containers' cgroups go under fabbench-docker-<hash of DIR> (stop.sh removes them).
# --oom-score-adjust 0: these machines lack CAP_SYS_RESOURCE (docs/containers.md).
#
# Running it again while its daemon answers prints the same line and starts nothing. A data root
# that another daemon uses is refused: two daemons on one data root corrupt it.
# Exit: 0 ready; 2 bad arguments; 3 cannot run here (not root, docker.io missing, no overlay
# filesystem); 1 the daemon did not come up (the last lines of its log are shown).
set -euo pipefail

log() { printf '[docker-start] %s\n' "$*" >&2; }
die() { printf '[docker-start] ERROR: %s\n' "$*" >&2; exit "${2:-1}"; }

[ $# -le 1 ] || die "usage: $0 [DIR]" 2
dir=${1:-${FABBENCH_DOCKER_DIR:-/var/tmp/fabbench-docker}}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
cache=${FABBENCH_CACHE:-$HOME/.cache/fabbench}
data=${FABBENCH_DOCKER_DATA:-$cache/docker}
READY_DEADLINE_S=${DOCKER_READY_DEADLINE_S:-60}
[[ $READY_DEADLINE_S =~ ^[1-9][0-9]*$ ]] \
  || die "DOCKER_READY_DEADLINE_S=$READY_DEADLINE_S: not a whole number of seconds" 2

[ "$(id -u)" -eq 0 ] || die "a Docker Engine needs root" 3
for tool in dockerd containerd runc unshare; do
  command -v "$tool" >/dev/null || die "$tool not found (apt-get install docker.io: .ci/apt-packages.txt)" 3
done
grep -qw overlay /proc/filesystems || die "the kernel has no overlay filesystem (overlay2 needs it)" 3
# containerd's socket, DIR/exec/containerd/containerd.sock, must fit a unix socket's 107 bytes
[ "${#dir}" -le 70 ] || die "DIR $dir is ${#dir} characters: at most 70 (its sockets' paths)" 2
case $data/ in "$dir"/*) ;; *) case $dir/ in "$data"/*)
  die "DIR $dir is inside the data root $data" 2 ;; esac ;; esac

sock=$dir/docker.sock
docker_cli=/usr/bin/docker
[ -x "$docker_cli" ] || docker_cli=docker
answers() { DOCKER_HOST=unix://$sock timeout 10 "$docker_cli" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

mkdir -p "$data"
if [ -S "$sock" ] && answers; then
  echo "DOCKER_HOST=unix://$sock"
  exit 0
fi

# One start at a time for this data root; none while another daemon uses it.
exec 9>"$data/.start.lock"
flock -w 120 9 || die "another start.sh holds $data/.start.lock for 120 s"
while read -r f; do
  args=$({ tr '\0' '\n' <"$f"; } 2>/dev/null) || continue
  [[ $(head -n1 <<<"$args") =~ (^|/)dockerd$ ]] || continue
  if grep -qxF -- "--data-root=$data" <<<"$args" || grep -qxF -- "$data" <<<"$args"; then
    f=${f#/proc/}
    die "dockerd ${f%/cmdline} already uses the data root $data (stop it: .ci/docker/stop.sh with its folder)"
  fi
done < <(grep -lsaF -- "$data" /proc/[0-9]*/cmdline)

# what a stopped daemon of this folder left (stop.sh): never two daemons on one folder
"$(dirname "${BASH_SOURCE[0]}")/stop.sh" "$dir" --keep-dir >&2 || die "could not clean $dir"
mkdir -p "$dir/exec" "$dir/etc" "$dir/run"
chmod 0700 "$dir/etc"
cgroup=fabbench-docker-$(printf '%s' "$dir" | sha256sum | cut -c1-12)
echo "$cgroup" >"$dir/cgroup-parent"
echo "$data" >"$dir/data-root"

log "starting dockerd $(dockerd --version | sed 's/^Docker version //'): folder $dir, data root $data"
start=$SECONDS
# shellcheck disable=SC2016  # the inner script's own arguments
# setsid: its own session, not the caller's; the descriptors above 2 stay here (the lock)
setsid unshare --mount --propagation private -- /bin/sh -c '
  mount --bind "$1/etc" /etc/docker && mount --bind "$1/run" /run || exit 97
  shift
  exec "$@"' sh "$dir" \
  dockerd --data-root="$data" --exec-root="$dir/exec" --host="unix://$sock" \
    --pidfile="$dir/docker.pid" --bridge=none --iptables=false --ip6tables=false \
    --ip-masq=false --ip-forward=false --userland-proxy=false --oom-score-adjust=0 \
    --containerd-namespace=fabbench-docker --containerd-plugins-namespace=fabbench-docker-plugins \
    --cgroup-parent="/$cgroup" --storage-driver=overlay2 --log-level=warn \
  </dev/null >"$dir/dockerd.log" 2>&1 9>&- &
launcher=$!
exec 9>&-
end=$((SECONDS + READY_DEADLINE_S))
until [ -S "$sock" ] && answers; do
  if ! kill -0 "$launcher" 2>/dev/null; then
    tail -n 15 "$dir/dockerd.log" >&2 || true
    die "dockerd exited during its start (log: $dir/dockerd.log)"
  fi
  if [ $SECONDS -ge $end ]; then
    tail -n 15 "$dir/dockerd.log" >&2 || true
    "$(dirname "${BASH_SOURCE[0]}")/stop.sh" "$dir" --keep-dir >&2 || true
    die "dockerd did not answer on $sock within ${READY_DEADLINE_S}s (DOCKER_READY_DEADLINE_S)"
  fi
  sleep 0.3
done
[ "$(cat "$dir/docker.pid")" = "$launcher" ] \
  || log "note: dockerd's pid file says $(cat "$dir/docker.pid"), the launcher was $launcher"
log "ready in $((SECONDS - start))s (pid $(cat "$dir/docker.pid"))"
echo "DOCKER_HOST=unix://$sock"
