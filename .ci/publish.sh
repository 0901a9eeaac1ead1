#!/usr/bin/env bash
# Publish the fabbench image and its SIF to an OCI registry: build (or find, by content:
# .ci/image-build.sh, .ci/apptainer.sh sif), test, push; one script for the workflow
# (.github/workflows/images.yml) and the tests (tests/integration/test_registry.py).
#
#   .ci/publish.sh --registry HOST[:PORT][/PATH] [--flavor cpu|cuda] [--cert-dir DIR]
#                  [--sign-key KEY.pem] [--release] [--no-sif]
#
# Tags (immutable: a tag that already names another image is never overwritten, the script stops):
#   HOST/fabbench:<version>-<flavor>     and  HOST/fabbench:<flavor>-<commit>
#   oras://HOST/fabbench-sif:<version>-<flavor>  and  ...:<flavor>-<commit>   (the SIF, signed with
#                                         --sign-key, `apptainer sign --key`, verified before push)
# and, with --release only (HEAD must carry the tag v<version>), the moving tag <flavor> on both.
# Every push prints a line `pushed oci|sif REF DIGEST`; the last two lines are the references
# by digest: `oci HOST/fabbench@sha256:...` and `sif oras://HOST/fabbench-sif@sha256:...`.
#
# The test before any push: the image's own entrypoint in podman (`version`, then a 2-rank run
# over shared memory), and for the SIF `apptainer verify` of its signature when one is made.
# --cert-dir: a folder with the registry's CA certificate (ca.crt), for a registry whose
# certificate the machine's trust store does not know (podman/skopeo --cert-dir; Apptainer gets
# it as SSL_CERT_FILE). Credentials: log in before (podman login; apptainer registry login).
# Bad arguments: one line, exit 2; a failed step: one line, exit 1.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { printf '[publish] %s\n' "$*" >&2; }
die() { printf '[publish] ERROR: %s\n' "$*" >&2; exit 1; }
usage() { printf '[publish] %s\n' "$*" >&2; exit 2; }

registry="" flavor=cpu cert_dir="" sign_key="" release=0 sif=1
while [ $# -gt 0 ]; do
  case $1 in
    --registry) registry=${2:-}; shift 2 || usage "--registry needs a value" ;;
    --flavor) flavor=${2:-}; shift 2 || usage "--flavor needs a value" ;;
    --cert-dir) cert_dir=${2:-}; shift 2 || usage "--cert-dir needs a value" ;;
    --sign-key) sign_key=${2:-}; shift 2 || usage "--sign-key needs a value" ;;
    --release) release=1; shift ;;
    --no-sif) sif=0; shift ;;
    *) usage "unknown argument $1 (usage: $0 --registry HOST[:PORT] [--flavor cpu|cuda] [--cert-dir DIR] [--sign-key KEY.pem] [--release] [--no-sif])" ;;
  esac
done
[ -n "$registry" ] || usage "--registry HOST[:PORT][/PATH] is required"
[[ $registry =~ ^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] \
  || usage "--registry $registry: not HOST[:PORT][/PATH]"
case $flavor in cpu|cuda) ;; *) usage "--flavor must be cpu or cuda, not $flavor" ;; esac
[ -z "$cert_dir" ] || [ -f "$cert_dir/ca.crt" ] || usage "--cert-dir $cert_dir has no ca.crt"
[ -z "$sign_key" ] || [ -f "$sign_key" ] || usage "--sign-key $sign_key: no such file"
[ "$flavor" = cpu ] || [ "$sif" = 0 ] || usage "the SIF is made of the cpu flavour only (use --no-sif)"
for tool in podman skopeo; do command -v "$tool" >/dev/null || die "$tool not found (.ci/apt-packages.txt)"; done

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/pyproject.toml")
commit=$(git -C "$here" rev-parse --short=12 HEAD) || die "not a git checkout: no commit to tag"
immutable=("$version-$flavor" "$flavor-$commit")
moving=()
if [ "$release" = 1 ]; then
  git -C "$here" tag --points-at HEAD | grep -qx "v$version" \
    || die "--release: HEAD does not carry the tag v$version"
  moving=("$flavor")
fi
tls=(); [ -n "$cert_dir" ] && tls=(--cert-dir "$cert_dir")
src_tls=(); dst_tls=()
[ -n "$cert_dir" ] && { src_tls=(--src-cert-dir "$cert_dir"); dst_tls=(--dest-cert-dir "$cert_dir"); }
log "version $version commit $commit"
oci_repo=$registry/fabbench
sif_repo=$registry/fabbench-sif

# ---- build (cached by content) and test --------------------------------------------------------
tag=$(FLAVOR=$flavor "$here/.ci/image-build.sh" | tail -n1) || die "the image build failed"
log "image $tag"
runtime=(); command -v runc >/dev/null && runtime=(--runtime runc)  # crun fails here (NOTES)
in_image() {
  timeout 600 podman "${runtime[@]}" run --rm --network none --ulimit nofile=1024:1024 \
    --ulimit nproc=4096:4096 "$tag" "$@"
}
in_image version >&2 || die "test: \`fabbench version\` in $tag failed"
in_image run --fabric shm --ranks 2 --sizes 8,4K --budget 0.02 --out /tmp/selftest.jsonl >&2 \
  || die "test: a 2-rank run over shared memory in $tag failed"
log "tested $tag"

# ---- the registry's view of a tag --------------------------------------------------------------
manifest_of() {  # REPO:TAG -> its raw manifest into FILE ($2); exit 3 when the tag does not exist
  local err; err=$(mktemp)
  if timeout 120 skopeo inspect --raw "${tls[@]}" "docker://$1" >"$2" 2>"$err"; then
    rm -f "$err"; return 0
  fi
  if grep -qiE 'manifest unknown|not found|name unknown' "$err"; then rm -f "$err"; return 3; fi
  local why; why=$(tail -n1 "$err"); rm -f "$err"
  die "the registry did not answer for $1: $why"
}
digest_of() {  # REPO:TAG -> sha256:... of its manifest (the bytes the registry serves)
  local raw; raw=$(mktemp)
  manifest_of "$1" "$raw" || { rm -f "$raw"; return 1; }
  printf 'sha256:%s' "$(sha256sum "$raw" | cut -c1-64)"; rm -f "$raw"
}
config_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["config"]["digest"])' "$1"; }
layer_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][0]["digest"])' "$1"; }

# ---- the OCI image ------------------------------------------------------------------------------
image_config="sha256:$(podman image inspect --format '{{.Id}}' "$tag")"
scratch=$(mktemp -d /tmp/fabbench-publish.XXXXXX)
trap 'rm -rf -- "$scratch"' EXIT
raw=$scratch/manifest.json
first=""
for t in "${immutable[@]}"; do
  if manifest_of "$oci_repo:$t" "$raw"; then
    have=$(config_of "$raw")
    [ "$have" = "$image_config" ] || die "$oci_repo:$t already names another image (config $have, this one $image_config): immutable tags are never overwritten"
    log "$oci_repo:$t already names this image"
    first=${first:-$t}
  else
    [ $? -eq 3 ] || exit 1
  fi
done
if [ -z "$first" ]; then
  first=${immutable[0]}
  log "pushing $tag to $oci_repo:$first"
  start=$SECONDS
  timeout 3600 skopeo copy -q "${dst_tls[@]}" --dest-compress-level 1 \
    "containers-storage:$tag" "docker://$oci_repo:$first" >&2 || die "skopeo copy to $oci_repo:$first failed"
  log "pushed in $((SECONDS - start))s"
fi
for t in "${immutable[@]}" "${moving[@]}"; do
  [ "$t" = "$first" ] && continue
  timeout 600 skopeo copy -q "${src_tls[@]}" "${dst_tls[@]}" \
    "docker://$oci_repo:$first" "docker://$oci_repo:$t" >&2 || die "skopeo copy to $oci_repo:$t failed"
done
oci_digest=$(digest_of "$oci_repo:$first")
for t in "${immutable[@]}" "${moving[@]}"; do
  d=$(digest_of "$oci_repo:$t")
  [ "$d" = "$oci_digest" ] || die "$oci_repo:$t is $d, not $oci_digest"
  printf 'pushed oci %s %s\n' "$oci_repo:$t" "$d"
done

# ---- the SIF ------------------------------------------------------------------------------------
if [ "$sif" = 1 ]; then
  sif_host=$("$here/.ci/apptainer.sh" sif "$tag" | tail -n1) || die "the SIF build failed"
  user=${FABBENCH_APPTAINER_USER:-fabbench-user}
  work=$scratch/sif
  mkdir "$work"
  cp "$sif_host" "$work/fabbench.sif"
  env_args=()
  if [ -n "$cert_dir" ]; then
    cp "$cert_dir/ca.crt" "$work/ca.crt"; env_args=(SSL_CERT_FILE=/fabbench/publish/ca.crt)
  fi
  [ -n "$sign_key" ] && cp "$sign_key" "$work/key.pem"
  chown -R "$user:" "$work"
  apptainer() {
    timeout 1800 "$here/.ci/apptainer.sh" exec --bind "$work:/fabbench/publish" \
      --cwd /fabbench/publish -- env "${env_args[@]}" apptainer "$@"
  }
  if [ -n "$sign_key" ]; then
    apptainer sign --key key.pem fabbench.sif >&2 || die "apptainer sign failed"
    openssl pkey -in "$work/key.pem" -pubout -out "$work/pub.pem" 2>/dev/null \
      || die "--sign-key $sign_key: not a private key openssl reads"
    chown "$user:" "$work/pub.pem"
    apptainer verify --key pub.pem fabbench.sif >&2 || die "the signed SIF does not verify"
    rm -f "$work/key.pem"
  fi
  sif_layer="sha256:$(sha256sum "$work/fabbench.sif" | cut -c1-64)"
  sif_digest=""
  for t in "${immutable[@]}" "${moving[@]}"; do
    if manifest_of "$sif_repo:$t" "$raw"; then
      have=$(layer_of "$raw")
      if [ "$have" = "$sif_layer" ]; then log "$sif_repo:$t already names this SIF"
      elif [[ " ${moving[*]} " != *" $t "* ]]; then
        die "$sif_repo:$t already names another SIF ($have, this one $sif_layer): immutable tags are never overwritten"
      else apptainer push fabbench.sif "oras://$sif_repo:$t" >&2 || die "apptainer push to oras://$sif_repo:$t failed"
      fi
    else
      [ $? -eq 3 ] || exit 1
      apptainer push fabbench.sif "oras://$sif_repo:$t" >&2 || die "apptainer push to oras://$sif_repo:$t failed"
    fi
    d=$(digest_of "$sif_repo:$t")
    manifest_of "$sif_repo:$t" "$raw" || exit 1
    have=$(layer_of "$raw")
    [ "$have" = "$sif_layer" ] || die "oras://$sif_repo:$t holds $have, not the SIF pushed ($sif_layer)"
    printf 'pushed sif %s %s\n' "oras://$sif_repo:$t" "$d"
    sif_digest=${sif_digest:-$d}
  done
fi
printf 'oci %s@%s\n' "$oci_repo" "$oci_digest"
[ "$sif" = 1 ] && printf 'sif oras://%s@%s\n' "$sif_repo" "$sif_digest"
exit 0
