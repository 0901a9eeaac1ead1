#!/usr/bin/env bash
# Apptainer for this project's tests, from Debian's own package, run the way sites run it: as an
# unprivileged user, in user namespaces (sid's apptainer has no setuid starter).
#
# Debian bookworm has no apptainer and sid's binaries need glibc >= 2.38 (bookworm: 2.36), so
# apptainer lives in a Debian sid root under the cache, made once with debootstrap. A command is
# run in that root with a private mount namespace and pivot_root (not chroot: a chrooted process
# may not create the user namespaces apptainer needs), with /proc, /dev, /sys, a tmpfs /tmp, the
# user's home and the image folder bound in, in a PID namespace of its own (when the command ends
# or is killed, every process it started ends with it and every mount goes with the namespace).
#
#   .ci/apptainer.sh root        make (or find) the sid root and the user; prints the root
#   .ci/apptainer.sh sif TAG     build (or find) the SIF of the podman image TAG from Apptainer.def
#                                exactly as its header says; prints the SIF's path inside the root
#                                (/fabbench/images/...), then its path on this host
#   .ci/apptainer.sh exec [--bind SRC[:DST]]... [--cwd DIR] [--host-tmp] [--fuse] -- CMD...
#                                run CMD (e.g. `apptainer run ...`) in the root as the user;
#                                --host-tmp: this host's /tmp (a launcher's session files);
#                                --fuse: a /dev/fuse the user may open (0666, as Debian makes
#                                it elsewhere; here it is root-only), in the command's mount
#                                namespace only, so that apptainer mounts the SIF with
#                                squashfuse (seconds) instead of extracting it (--unsquash)
#
# The user is $FABBENCH_APPTAINER_USER (default fabbench-user), created on this host (its home,
# /home/<user>, is bound into the root at the same path) and copied into the root's passwd. As root
# apptainer stops on its capability check; sites run it as users, and so do the tests.
# Debian sid moves: the root gets whatever apptainer sid has the day it is made. The version the
# tests were run with is pinned (SID_APPTAINER_VERSION, below, beside the root's recipe: not in
# containers/versions.env, which every stage of the image copies first, so that an edit there
# rebuilds the whole image, and the image has no Apptainer); every call
# compares the root's (recorded when it was made, `apptainer --version`) with the pin and, when
# they differ, stops with one line saying both and what to do (run the Apptainer tests with the
# new version, e.g. FABBENCH_SID_APPTAINER_VERSION=<new> to let this script use it, then update
# the pin), instead of a test breaking somewhere downstream.
# Environment: FABBENCH_CACHE (default ~/.cache/fabbench; the root is <cache>/apptainer/sid-*,
# the SIF <cache>/apptainer/images/), DEBIAN_MIRROR (default http://deb.debian.org/debian),
# FABBENCH_SID_APPTAINER_VERSION (instead of the pin).
# `exec` passes through only a launcher's and fabbench's variables (OMPI_*, PMIX_*, SLURM_*,
# FABBENCH_*, APPTAINER*, ...), the way a job's environment reaches its ranks.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${FABBENCH_CACHE:-$HOME/.cache/fabbench}
base=$cache/apptainer
images=$base/images
user=${FABBENCH_APPTAINER_USER:-fabbench-user}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The root's recipe; a change to it makes a new root (the old one is removed).
INCLUDE=apptainer,ca-certificates,squashfuse,fuse3
RECIPE="debootstrap --variant=minbase --include=$INCLUDE sid (v1)"
# The apptainer the tests were run with: Debian sid's 1.4.5 (package 1.4.5-2, checked 2026-11-26).
SID_APPTAINER_VERSION=1.4.5
key=$(printf '%s' "$RECIPE" | sha256sum | cut -c1-12)
root=$base/sid-$key
log() { printf '[apptainer] %s\n' "$*" >&2; }
die() { printf '[apptainer] ERROR: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, and a mount namespace to enter the sid root)"
pinned=$SID_APPTAINER_VERSION pin_source="SID_APPTAINER_VERSION in .ci/apptainer.sh"
if [ -n "${FABBENCH_SID_APPTAINER_VERSION:-}" ]; then
  pinned=$FABBENCH_SID_APPTAINER_VERSION pin_source=FABBENCH_SID_APPTAINER_VERSION
fi

check_version() {  # the root's apptainer is the version the tests were run with (cheap: a file)
  local made have
  have=$(sed -n 's/^apptainer version //p' "$root/.fabbench-done")
  [ "$have" != "$pinned" ] || return 0
  made=$(date -u -r "$root/.fabbench-done" +%Y-%m-%d)
  die "Debian sid gave apptainer ${have:-?} (the sid root made $made, $root), the tests were" \
      "run with $pinned ($pin_source): run the Apptainer tests" \
      "with ${have:-it} (FABBENCH_SID_APPTAINER_VERSION=${have:-?} lets this script use it) and" \
      "update the pin, or remove $root to make it again"
}

locked() {  # one maker at a time (pytest-xdist may ask from several workers)
  mkdir -p "$base"
  exec 9>"$base/.lock"
  timeout 3600 flock 9 || die "waited an hour for $base/.lock"
}

ensure_user() {
  if ! id "$user" >/dev/null 2>&1; then
    log "creating the unprivileged user $user"
    useradd --create-home --user-group --shell /bin/bash "$user" \
      || id "$user" >/dev/null 2>&1 || die "useradd $user failed"
  fi
  local home
  home=$(getent passwd "$user" | cut -d: -f6)
  [ -d "$home" ] || { mkdir -p "$home"; chown "$user:" "$home"; }
  # the same user in the root, and this host's names
  for db in passwd group; do
    grep -v "^$user:" "$root/etc/$db" >"$root/etc/$db.new" || true
    getent "$db" "$user" >>"$root/etc/$db.new"
    chmod 644 "$root/etc/$db.new"
    mv -f "$root/etc/$db.new" "$root/etc/$db"
  done
  cp -f /etc/hosts "$root/etc/hosts"
}

make_root() {
  locked
  if [ ! -f "$root/.fabbench-done" ]; then
    command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
    for old in "$base"/sid-*; do [ -e "$old" ] && [ "$old" != "$root" ] && rm -rf -- "$old"; done
    rm -rf -- "$root"
    local start=$SECONDS
    log "debootstrap --variant=minbase --include=$INCLUDE sid $root ($mirror)"
    timeout 1800 debootstrap --variant=minbase --include="$INCLUDE" sid "$root" "$mirror" \
      >"$base/debootstrap.log" 2>&1 \
      || { tail -n 30 "$base/debootstrap.log" >&2; rm -rf -- "$root"; die "debootstrap failed"; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    mkdir -p "$root/.oldroot" "$root/fabbench/images"
    [ -f /etc/resolv.conf ] && cp -fL /etc/resolv.conf "$root/etc/resolv.conf"
    chroot "$root" apptainer --version 2>/dev/null >"$root/.fabbench-done" || die "apptainer does not start"
    log "made the sid root in $((SECONDS - start))s: $(cat "$root/.fabbench-done")"
  fi
  check_version
  ensure_user
  exec 9>&-
}

# ---- exec: CMD inside the root, as the user ------------------------------------------------
PASS='^(OMPI_|PMIX_|PMI_|SLURM_|FABBENCH_|APPTAINER|SINGULARITY|UCX_|FI_|MASTER_ADDR=|MASTER_PORT=|RANK=|WORLD_SIZE=|LOCAL_RANK=|LOCAL_WORLD_SIZE=|HOROVOD_|TERM=|COLUMNS=|NO_COLOR=)'

run_in_root() {
  local binds=() cwd="" host_tmp=0 fuse=0
  while [ $# -gt 0 ]; do
    case $1 in
      --bind) binds+=("$2"); shift 2 ;;
      --cwd) cwd=$2; shift 2 ;;
      --host-tmp) host_tmp=1; shift ;;
      --fuse) fuse=1; shift ;;
      --) shift; break ;;
      *) die "exec: unknown option $1 (usage: exec [--bind SRC[:DST]]... [--cwd DIR] [--host-tmp] [--fuse] -- CMD...)" ;;
    esac
  done
  [ $# -gt 0 ] || die "exec: no command"
  [ -f "$root/.fabbench-done" ] || die "no sid root yet: run $0 root first"
  check_version
  local home uid gid
  home=$(getent passwd "$user" | cut -d: -f6) || die "no user $user: run $0 root first"
  uid=$(id -u "$user"); gid=$(id -g "$user")
  mkdir -p "$images"
  local env_args=()
  while IFS= read -r -d '' kv; do
    [[ $kv =~ $PASS ]] && env_args+=("$kv")
  done < <(env -0)
  # Everything below runs in new mount and PID namespaces: the mounts live as long as the command
  # (pid 1 of its namespace); --kill-child ends the namespace when this script is killed.
  exec unshare --mount --propagation private --pid --fork --kill-child -- \
    bash -euo pipefail -c '
      root=$1 home=$2 images=$3 host_tmp=$4 cwd=$5 uid=$6 gid=$7 fuse=$8 nb=$9; shift 9
      binds=("${@:1:nb}"); shift "$nb"
      ne=$1; shift; envs=("${@:1:ne}"); shift "$ne"
      mount --bind "$root" "$root"
      mount -t proc proc "$root/proc"
      mount --rbind /dev "$root/dev"
      mount --rbind /sys "$root/sys"
      if [ "$fuse" = 1 ]; then  # a /dev/fuse the user may open, in this namespace only
        fdir=$(mktemp -d /run/fabbench-fuse.XXXXXX)
        mount -t tmpfs -o size=64k tmpfs "$fdir"
        mknod -m 666 "$fdir/fuse" c 10 229
        mount --bind "$fdir/fuse" "$root/dev/fuse"
        umount -l "$fdir"; rmdir "$fdir"
      fi
      if [ "$host_tmp" = 1 ]; then mount --bind /tmp "$root/tmp"
      else mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"; fi
      mkdir -p "$root$home"; mount --bind "$home" "$root$home"
      mount --bind -o ro "$images" "$root/fabbench/images"
      for b in "${binds[@]}"; do
        src=${b%%:*}; dst=${b#*:}
        mkdir -p "$root$dst"; mount --bind "$src" "$root$dst"
      done
      cd "$root"
      pivot_root . .oldroot
      umount -l /.oldroot
      cd "${cwd:-$home}"
      exec setpriv --reuid="$uid" --regid="$gid" --init-groups -- \
        env -i HOME="$home" USER="$USER_NAME" LOGNAME="$USER_NAME" LANG=C.UTF-8 \
        PATH=/usr/local/bin:/usr/bin:/bin "${envs[@]}" "$@"
    ' fabbench-apptainer "$root" "$home" "$images" "$host_tmp" "$cwd" "$uid" "$gid" "$fuse" \
    "${#binds[@]}" "${binds[@]}" "${#env_args[@]}" "${env_args[@]}" "$@"
}

# ---- sif: the image from Apptainer.def, cached by the podman image's content tag -------------
make_sif() {
  local tag=${1:?usage: $0 sif IMAGE-TAG}
  local name
  name=fabbench-$(printf '%s' "${tag##*:}" | tr -c 'A-Za-z0-9._-' '_').sif
  make_root
  locked
  if [ ! -f "$images/$name" ]; then
    command -v podman >/dev/null || die "podman not found"
    timeout 120 podman image exists "$tag" || die "no podman image $tag (.ci/image-build.sh)"
    mkdir -p "$images"
    find "$images" -mindepth 1 -maxdepth 1 ! -name "$name" -exec rm -rf -- {} +  # one at a time
    local work=$images/build.tmp start=$SECONDS
    rm -rf -- "$work"; mkdir -p "$work"
    log "podman save --format docker-archive $tag"
    timeout 1200 podman save --format docker-archive -o "$work/fabbench-cpu.tar" "$tag" >&2 \
      || die "podman save failed"
    cp "$here/Apptainer.def" "$work/Apptainer.def"
    chown -R "$user:" "$work"
    log "apptainer build --build-arg image_archive=fabbench-cpu.tar fabbench.sif Apptainer.def"
    # the user builds it (as sites do), in the build folder bound read-write; its temporary
    # rootfs goes to /tmp, a tmpfs that ends with the command (deleting a 1 GB tree from this
    # disk takes minutes: ext4 with discard)
    timeout 2400 "$0" exec --bind "$work:/fabbench/build" --cwd /fabbench/build -- \
      apptainer build --build-arg \
      image_archive=fabbench-cpu.tar fabbench.sif Apptainer.def >&2 \
      || { rm -rf -- "$work"; die "apptainer build failed"; }
    chown root:root "$work/fabbench.sif"; chmod 644 "$work/fabbench.sif"
    mv -f "$work/fabbench.sif" "$images/$name"
    rm -rf -- "$work"
    log "built $images/$name in $((SECONDS - start))s ($(du -h "$images/$name" | cut -f1))"
  fi
  exec 9>&-
  printf '%s\n%s\n' "/fabbench/images/$name" "$images/$name"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  root) make_root; printf '%s\n' "$root" ;;
  sif) make_sif "$@" ;;
  exec) USER_NAME=$user; export USER_NAME; run_in_root "$@" ;;
  *) die "usage: $0 root | sif IMAGE-TAG | exec [--bind SRC[:DST]]... [--cwd DIR] [--host-tmp] [--fuse] -- CMD..." ;;
esac
