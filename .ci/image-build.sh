#!/usr/bin/env bash
# Build the fabbench image with podman (chroot isolation, the host's network) or, with
# ENGINE=docker, with a Docker Engine (BuildKit, the host's network), cached by content: the image
# is tagged localhost/fabbench:<flavor>-<hash of Dockerfile, containers/, src/, pyproject.toml,
# README.md, and of the setup's Horovod and mpi4py wheels when reused>, and an image with the
# current tag in the engine's store is not built again. The engine's layer cache (kept in its
# storage between runs) makes a source-only change cheap: only the last layers are rebuilt. The
# Debian base image (containers/base-image.sh) is made once; Docker's is podman's, loaded.
#
#   .ci/image-build.sh            build (or find) the image; its tag is the last line printed
#   .ci/image-build.sh --tag      print the tag the current tree would have; build nothing
#   ENGINE=docker .ci/image-build.sh [--tag]     the same with the Docker Engine of DOCKER_HOST
#                                 (.ci/docker/start.sh starts one of the project's own)
#
# Docker: Debian's docker.io is Docker Engine 20.10, whose default builder is the classic one;
# the build uses BuildKit (DOCKER_BUILDKIT=1, built into the 20.10 client), which the
# Dockerfile's RUN --mount=type=secret needs (the host's trust store, below). DOCKER names the
# client: default /usr/bin/docker, docker.io's own, where it exists (a client of Docker 23 or
# later does BuildKit only through its buildx plugin), else docker from PATH.
#
# Environment: ENGINE (podman|docker, default podman), FLAVOR (cpu|cuda, default cpu),
# IMAGE_REPO (default localhost/fabbench),
# FABBENCH_CACHE (the build context and the wheel folder live under it),
# IMAGE_WHEELS (extra prebuilt wheels to put into the context; a horovod or mpi4py wheel among
# them takes the place of the setup's, under the same check, see below), BUILD_TIMEOUT (seconds: the
# build's deadline; default cpu 1800, twice a cold cpu build on 2 cores, 896 s; cuda 5400),
# KEEP_IMAGES=1 (leave earlier trees' images in the store; by default a build removes them, below),
# NO_CACHE=1 (build every step again, the engine's layer cache unused: what a cold build costs,
# the base image and the context aside; tagged <tag>-nocache only, so that the image the tag
# names, and the SIF and Charliecloud images cached by that tag, stay what they were).
# `make test` builds the cpu image cold inside its first phase's deadline (TOGETHER_TIMEOUT,
# Makefile): tests/unit/test_timeouts.py checks that this deadline and the rest of that phase's
# podman lane fit in it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=containers/versions.env
. "$root/containers/versions.env"
log() { printf '[image-build] %s\n' "$*" >&2; }
die() { printf '[image-build] ERROR: %s\n' "$*" >&2; exit 1; }

FLAVOR=${FLAVOR:-cpu}
ENGINE=${ENGINE:-podman}
case $ENGINE in podman|docker) ;;
  *) printf '[image-build] ENGINE must be podman or docker, not %s\n' "$ENGINE" >&2; exit 2 ;; esac
if [ -z "${DOCKER:-}" ]; then
  DOCKER=docker
  [ -x /usr/bin/docker ] && DOCKER=/usr/bin/docker
fi
export DOCKER
IMAGE_REPO=${IMAGE_REPO:-localhost/fabbench}
cache=${FABBENCH_CACHE:-$HOME/.cache/fabbench}
case $FLAVOR in cpu|cuda) ;; *) die "FLAVOR must be cpu or cuda, not $FLAVOR" ;; esac
CPU_BUILD_TIMEOUT=1800 CUDA_BUILD_TIMEOUT=5400
if [ "$FLAVOR" = cpu ]; then build_timeout=${BUILD_TIMEOUT:-$CPU_BUILD_TIMEOUT}
else build_timeout=${BUILD_TIMEOUT:-$CUDA_BUILD_TIMEOUT}; fi

# Prebuilt wheels: Horovod and mpi4py as `make setup` built them ($cache/wheels, .ci/setup.sh ->
# containers/horovod.sh, containers/mpi4py.sh), or as named in IMAGE_WHEELS, go into the context
# only when their record (WHEEL.abi) names what the image installs and this script can know
# before building: the pinned version, this machine's python3 (the one that fetches the image's
# torch wheel below), Open MPI $OPENMPI_VERSION (bookworm's, containers/distro-fabric.sh; the cuda
# flavour builds the same version), and for Horovod the image's torch and GPU operations. Inside
# the build each script compares every field with the image's own environment (glibc, the
# package of mpicc too) and compiles from the sdist if one differs: the cuda flavour's Open MPI
# is its own build, so its mpi4py is always compiled there. A reused wheel is part of the
# image's identity (its sha256 joins the hash below); without one the identity is that of the
# inputs alone, as the recipe then builds it itself.
# What the image's torch and Horovod are: the cpu flavour's torch is the CPU wheel, the cuda
# flavour's the CUDA build of containers/torch-cuda.lock, with Horovod's NCCL operations.
case $FLAVOR in
  cpu) image_torch=("torch=$TORCH_VERSION+cpu" "gpu_operations=none") ;;
  cuda) image_torch=("torch=$TORCH_VERSION+cu$(echo "$CUDA_VERSION" | cut -d. -f1-2 | tr -d .)"
        "gpu_operations=NCCL") ;;
esac
image_python=$(timeout 60 python3 -c 'import platform, sys
print("cp%d%d-%s" % (*sys.version_info[:2], platform.machine()))')
declare -A prebuilt=() prebuilt_note=()
extra_wheels=()
for w in ${IMAGE_WHEELS:-}; do
  case ${w##*/} in horovod-*) prebuilt[horovod]=$w ;; mpi4py-*) prebuilt[mpi4py]=$w ;;
    *) extra_wheels+=("$w") ;; esac
done
# reuse NAME VERSION FIELD...: keep prebuilt[NAME] (IMAGE_WHEELS' or the setup's wheel) when
# containers/NAME.sh --check passes it with these fields; else empty it, saying why
reuse() {
  local name=$1 version=$2 w why
  shift 2
  if [ -z "${prebuilt[$name]:-}" ]; then
    for w in "$cache"/wheels/"$name"-"$version"-"${image_python%%-*}"-*.whl; do
      [ -f "$w" ] && prebuilt[$name]=$w
    done
  fi
  if [ -z "${prebuilt[$name]:-}" ]; then
    prebuilt_note[$name]="no $name $version wheel in $cache/wheels (make setup)"
  elif ! why=$("$root/containers/$name.sh" --check "${prebuilt[$name]}" "$name=$version" \
      "python=$image_python" "mpi=Open MPI $OPENMPI_VERSION" "$@"); then
    prebuilt_note[$name]="not using ${prebuilt[$name]}: $why"
    prebuilt[$name]=""
  fi
}
reuse horovod "$HOROVOD_VERSION" "${image_torch[@]}"
if [ "$FLAVOR" = cpu ]; then
  reuse mpi4py "$MPI4PY_VERSION"
else
  prebuilt[mpi4py]="" prebuilt_note[mpi4py]="the cuda flavour's Open MPI is built in the image"
fi
prebuilt_shas=()
for name in horovod mpi4py; do
  [ -z "${prebuilt[$name]:-}" ] \
    || prebuilt_shas+=("$name-wheel=$(sha256sum "${prebuilt[$name]}" | cut -d' ' -f1)")
done

inputs=(Dockerfile containers src pyproject.toml README.md)
content_hash() {
  (cd "$root" && find "${inputs[@]}" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' \
     ! -name '.*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; echo "flavor=$FLAVOR"
   [ "${#prebuilt_shas[@]}" -eq 0 ] || printf '%s\n' "${prebuilt_shas[@]}") \
    | sha256sum | cut -c1-12
}
inputs_hash=$(content_hash)
tag="$IMAGE_REPO:$FLAVOR-$inputs_hash"
if [ "${1:-}" = --tag ]; then
  printf '%s\n' "$tag"
  exit 0
fi

if [ "$ENGINE" = docker ]; then
  command -v "$DOCKER" >/dev/null 2>&1 || die "$DOCKER not found (apt-get install docker.io)"
  image_exists() { timeout 60 "$DOCKER" image inspect "$1" >/dev/null 2>&1; }
  timeout 60 "$DOCKER" version --format '{{.Server.Version}}' >/dev/null 2>&1 \
    || die "no Docker Engine answers at ${DOCKER_HOST:-the default socket} (.ci/docker/start.sh)"
else
  command -v podman >/dev/null 2>&1 || die "podman not found (apt-get install podman)"
  image_exists() { timeout 60 podman image exists "$1"; }
fi
aliases=(-t "$IMAGE_REPO:$FLAVOR")
if [ "${NO_CACHE:-0}" = 1 ]; then
  tag=$tag-nocache aliases=()
elif image_exists "$tag"; then
  log "cached: $tag (nothing under ${inputs[*]} changed)"
  printf '%s\n' "$tag"
  exit 0
fi

# Both flavours start from the Debian base (the cuda flavour adds CUDA from PyPI's wheels).
base=$DEBIAN_IMAGE
ENGINE=$ENGINE BASE_IMAGE=$base "$root/containers/base-image.sh" >&2

# The build context: only what the recipe uses (no .venv, no results, no .git); one folder per
# engine, so that two builds at once never rewrite each other's
ctx=$cache/image-context/$FLAVOR
[ "$ENGINE" = podman ] || ctx=$cache/image-context/$ENGINE-$FLAVOR
mkdir -p "$ctx/wheels"
for item in "${inputs[@]}"; do
  rm -rf "${ctx:?}/$item"
  cp -a "$root/$item" "$ctx/$item"
done
find "$ctx/src" -name '__pycache__' -type d -prune -exec rm -rf {} +
if [ "$FLAVOR" = cuda ]; then
  # the cuda flavour installs torch's CUDA build from its lock, inside the build; no torch wheel
  # in the context (a CPU wheel there must never be found)
  rm -f "$ctx"/wheels/torch-*.whl
else
  # PyTorch's CPU wheel (FABBENCH_TORCH_WHEELS or PyTorch's CPU index, checked against its pinned
  # sha256: containers/torch-wheel.sh), kept in the set-up's wheel cache; no other torch wheel
  # may sit beside it in the context
  torch_wheel=$("$root/containers/torch-wheel.sh" "$cache/wheels") || die "no CPU torch wheel"
  find "$ctx/wheels" -name 'torch-*.whl' ! -name "${torch_wheel##*/}" -delete
  cmp -s "$torch_wheel" "$ctx/wheels/${torch_wheel##*/}" || cp -f "$torch_wheel" "$ctx/wheels/"
fi
timeout 60 python3 -c 'import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
  "$root/pyproject.toml" >"$ctx/requirements.txt"
rm -f "$ctx"/wheels/horovod-* "$ctx"/wheels/mpi4py-*
for w in "${extra_wheels[@]}"; do cp -f "$w" "$ctx/wheels/"; done
for name in horovod mpi4py; do
  if [ -n "${prebuilt[$name]:-}" ]; then
    cp -f "${prebuilt[$name]}" "${prebuilt[$name]}.abi" "$ctx/wheels/"
    log "$name: reusing ${prebuilt[$name]} (its record names the image's $name, Python and MPI;" \
        "the build checks the rest)"
  else
    log "$name: built from the sdist inside the image: ${prebuilt_note[$name]}"
  fi
done

cert=/etc/ssl/certs/ca-certificates.crt
secret=()
# pip inside the build reaches PyPI only with this machine's trust store (docs/testing.md): lend it
# as the build secret build-ca, which the Dockerfile mounts where python-stack.sh looks for it in
# the steps that download (never over the image's own store: ca-certificates' postinst rewrites
# that file; never in a layer, never in the cache key), the same for both engines.
[ -f "$cert" ] && secret=(--secret "id=build-ca,src=$cert")
fresh=()
[ "${NO_CACHE:-0}" != 1 ] || fresh=(--no-cache)
vcs_ref=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/pyproject.toml")
build_args=(--build-arg FLAVOR="$FLAVOR" --build-arg VERSION="$version" --build-arg VCS_REF="$vcs_ref"
            --build-arg INPUTS_HASH="$inputs_hash"
            --build-arg BASE_IMAGE="$base" --build-arg DEBIAN_IMAGE="$DEBIAN_IMAGE"
            -t "$tag" "${aliases[@]}" -f "$ctx/Dockerfile" "$ctx")
log "building $tag with $ENGINE (cold: tens of minutes on 2 cores; later: minutes, from the" \
    "engine's layer cache)"
start=$SECONDS
status=0
if [ "$ENGINE" = docker ]; then
  # the client runs with a parent-death signal and under the deadline: when it ends, the daemon's
  # BuildKit cancels the build and its step's containers (nothing is left but the layer cache)
  DOCKER_BUILDKIT=1 setpriv --pdeathsig TERM -- timeout "$build_timeout" "$DOCKER" build \
    --progress plain --network host "${fresh[@]}" "${secret[@]}" "${build_args[@]}" >&2 \
    || status=$?
else
  # .ci/podman-build.sh: podman build under the deadline, and no build container left behind
  # when it is stopped (by a signal to it or its process group, by the deadline, or because this
  # script died: it runs with a parent-death signal); a build stopped by SIGKILL is cleaned by
  # the next.
  setpriv --pdeathsig TERM -- "$root/.ci/podman-build.sh" --timeout "$build_timeout" \
    --isolation chroot --network host --layers "${fresh[@]}" "${secret[@]}" "${build_args[@]}" \
    >&2 || status=$?
fi
[ "$status" -ne 124 ] || die "$ENGINE build did not finish in ${build_timeout}s (BUILD_TIMEOUT)"
[ "$status" -eq 0 ] || die "$ENGINE build failed after $((SECONDS - start))s (exit $status)"
image_exists "$tag" || die "$ENGINE build exited 0 but made no image $tag"
log "built $tag in $((SECONDS - start))s"

# What earlier trees' builds left in the store, 3.4 GB a source change on podman: their tags
# ($IMAGE_REPO:$FLAVOR-<hash>, -nocache too) and their untagged python-build stages (labelled by
# the Dockerfile), removed once two hours old (another clone's `make test` may be using the
# image it just built); this build's and anything another name holds stay (rmi of a name leaves
# an image that other names hold). KEEP_IMAGES=1 keeps them.
if [ "${KEEP_IMAGES:-0}" != 1 ]; then
  engine=podman
  [ "$ENGINE" != docker ] || engine=$DOCKER
  current="$IMAGE_REPO:$FLAVOR-$inputs_hash"
  timeout 60 "$engine" images --filter until=2h --format '{{.Repository}}:{{.Tag}}' \
      --filter "reference=$IMAGE_REPO" 2>/dev/null \
    | grep -E "^$IMAGE_REPO:$FLAVOR-[0-9a-f]{12}(-nocache)?\$" \
    | grep -vxF -e "$current" -e "$current-nocache" \
    | while read -r old; do
        timeout 120 "$engine" rmi "$old" >/dev/null 2>&1 && log "removed $old (an earlier tree's)"
      done || true
  timeout 60 "$engine" images -q --filter until=2h --filter dangling=true \
      --filter label=io.fabbench.stage=python-build --filter "label=io.fabbench.flavor=$FLAVOR" \
      2>/dev/null | sort -u \
    | while read -r id; do
        [ "$(timeout 60 "$engine" image inspect --format '{{index .Labels "io.fabbench.inputs"}}' \
             "$id" 2>/dev/null)" != "$inputs_hash" ] || continue
        timeout 120 "$engine" rmi "$id" >/dev/null 2>&1 \
          && log "removed $id (an earlier tree's python-build stage)"
      done || true
fi
printf '%s\n' "$tag"
