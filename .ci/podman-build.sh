#!/usr/bin/env bash
# `podman build`, and no build container left behind however the build ends.
#
#   .ci/podman-build.sh [--timeout SECONDS] PODMAN-BUILD-ARGUMENTS...
#
# Why: podman 4.3's build, stopped by a signal, leaves its working containers in storage
# (`buildah containers`, `podman ps --external`: each a mounted copy of the image so far), the
# RUN step's processes running (chrooted into such a copy, reparented to init), and the step's
# run folder (${TMPDIR:-/var/tmp}/buildah*/); on SIGTERM it even exits 0, as if it had built.
#
# How: the build is tagged with --build-arg FABBENCH_BUILD_ID=<this script's pid>-<its start
# time>-<random> (a name no recipe declares, so it reaches no layer and no cache key, and podman
# says it was "not consumed"; buildah keeps it in each working container's state, buildah.json).
#  - When the build ends in any way (done, failed, SIGTERM/SIGINT/SIGHUP to this script or its
#    process group, its deadline), the containers carrying its id are removed: the processes
#    rooted in them killed first, their run folders removed.
#  - podman runs with a parent-death signal (setpriv --pdeathsig KILL), so a SIGKILL of this
#    script ends podman too; what that build left is removed by the next call of this script
#    (its id names a pid that is gone), which says so in one line.
#  - After podman exits 0, every -t/--tag of the arguments must name an image.
# Exit: podman's status; 124 past the deadline; 128+N when stopped by signal N (one line says
# why); 2 for bad arguments.
set -euo pipefail

usage() { printf '[podman-build] %s\n' "$*" >&2; exit 2; }
log() { printf '[podman-build] %s\n' "$*" >&2; }
die() { printf '[podman-build] ERROR: %s\n' "$*" >&2; exit 1; }

deadline=5400
if [ "${1:-}" = --timeout ]; then
  deadline=${2:-}; shift 2 || usage "--timeout needs a value"
fi
[[ $deadline =~ ^[1-9][0-9]*$ ]] || usage "--timeout $deadline: not a whole number of seconds"
[ $# -gt 0 ] || usage "usage: $0 [--timeout SECONDS] PODMAN-BUILD-ARGUMENTS..."
tags=() prev=""
for a in "$@"; do
  case $prev in -t|--tag) tags+=("$a") ;; esac
  case $a in --tag=*) tags+=("${a#--tag=}") ;; esac
  prev=$a
done
command -v podman >/dev/null || die "podman not found (apt-get install podman)"
command -v buildah >/dev/null || die "buildah not found (apt-get install buildah)"
store=$(timeout 60 podman info --format '{{.Store.GraphRoot}}/{{.Store.GraphDriverName}}-containers') \
  || die "podman info failed"

# reap MODE [ID]: remove the build containers of build ID (MODE mine) or of every build whose
# script is gone (MODE dead); prints the names removed, one per line.
reap() {
  timeout 300 python3 - "$store" "${TMPDIR:-/var/tmp}" "$@" <<'PY'
import glob, json, os, signal, subprocess, sys, time

store, tmp, mode = sys.argv[1:4]
mine = sys.argv[4] if len(sys.argv) > 4 else None

def alive(build_id):  # the script that started the build: same pid, same start time
    pid, start = build_id.split("-")[:2]
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19] == start
    except (OSError, IndexError):
        return False

def dev_ino(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino

for state in glob.glob(f"{store}/*/userdata/buildah.json"):
    try:
        with open(state) as f:
            b = json.load(f)
    except (OSError, ValueError):
        continue
    build_id = (b.get("Args") or {}).get("FABBENCH_BUILD_ID", "")
    if not build_id or (build_id != mine if mode == "mine" else alive(build_id)):
        continue
    mount = b.get("mountpoint") or ""
    if mount and os.path.isdir(mount):
        root = dev_ino(mount)
        for _ in range(50):  # its RUN step's processes, chrooted into the container
            pids = []
            for p in glob.glob("/proc/[0-9]*"):
                try:
                    if dev_ino(p + "/root") == root:
                        pids.append(int(p[6:]))
                except OSError:
                    pass
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        for cfg in glob.glob(f"{tmp}/buildah*/config.json"):  # its run folder
            try:
                with open(cfg) as f:
                    if json.load(f)["root"]["path"] == mount:
                        subprocess.run(["rm", "-rf", "--", os.path.dirname(cfg)], check=False)
            except (OSError, ValueError, KeyError):
                pass
    rm = subprocess.run(["buildah", "rm", b["container-id"]], capture_output=True, text=True,
                        timeout=120, check=False)
    if rm.returncode != 0:
        sys.exit(f"buildah rm {b['container-name']} failed: {rm.stderr.strip()}")
    print(f"{b['container-name']} (build {build_id})")
PY
}

left=$(reap dead) || die "could not remove what a stopped build left: $left"
if [ -n "$left" ]; then
  log "removed $(wc -l <<<"$left") build container(s) that stopped builds left: $(paste -sd, <<<"$left")"
fi

start_time=$(cut -d')' -f2- /proc/$$/stat | cut -d' ' -f21)
id=$$-$start_time-$RANDOM$RANDOM
builder="" timer=""
stop_build() {  # podman (SIGTERM, then SIGKILL), then this build's containers
  [ -z "$timer" ] || kill "$timer" 2>/dev/null || true
  if [ -n "$builder" ] && kill -TERM "$builder" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$builder" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$builder" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  builder="" timer=""
  local out
  out=$(reap mine "$id" 2>&1) || log "ERROR: $out"
}
# shellcheck disable=SC2329  # invoked by the traps below
stopped() {
  trap '' TERM INT HUP
  log "stopped by SIG$1 after $((SECONDS - start))s: podman build ended, its build containers removed"
  stop_build
  exit "$2"
}

start=$SECONDS
trap 'stopped TERM 143' TERM
trap 'stopped INT 130' INT
trap 'stopped HUP 129' HUP
setpriv --pdeathsig KILL -- podman build --build-arg "FABBENCH_BUILD_ID=$id" "$@" & builder=$!
setpriv --pdeathsig KILL -- sleep "$deadline" & timer=$!
ended=""
set +e
wait -n -p ended "$builder" "$timer"
rc=$?
set -e
if [ "$ended" = "$timer" ]; then
  timer=""
  log "podman build did not finish in ${deadline}s (--timeout): stopped, its build containers removed"
  stop_build
  exit 124
fi
builder=""
stop_build
if [ "$rc" -eq 0 ]; then
  for t in "${tags[@]}"; do
    timeout 60 podman image exists "$t" \
      || die "podman build exited 0 but made no image $t (was podman itself stopped?)"
  done
fi
exit "$rc"
