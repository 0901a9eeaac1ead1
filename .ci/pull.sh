#!/usr/bin/env bash
# Pull a published fabbench image (.ci/publish.sh) with one runtime, as a site does, and leave
# either the whole image or nothing: a failed pull leaves no half-pulled image behind.
#
#   .ci/pull.sh podman       REF                [--cert-dir DIR]
#   .ci/pull.sh apptainer    docker://REF  OUT  [--cert-dir DIR]   OUT: a sandbox directory
#   .ci/pull.sh apptainer    oras://REF    OUT  [--cert-dir DIR] [--verify-key PUB.pem]  OUT: a SIF
#   .ci/pull.sh charliecloud REF           OUT  [--cert-dir DIR]   OUT: a directory image (ch-run)
#
# REF names the image by digest (HOST/fabbench@sha256:...) or tag. --cert-dir: a folder with the
# registry's CA certificate, ca.crt (podman --cert-dir; Apptainer SSL_CERT_FILE; ch-image
# REQUESTS_CA_BUNDLE). --verify-key: the SIF must carry a signature by this key (apptainer verify)
# or it is removed. Apptainer runs as the unprivileged user of .ci/apptainer.sh (OUT's folder must
# be writable by that user); a docker:// image becomes a sandbox, not a SIF: squashing 1.3 GB
# took 8 minutes on these 2 cores, and a user here cannot mount a SIF anyway (/dev/fuse is
# root-only), so `apptainer run` would unpack it again. Charliecloud's ch-image comes from
# .ci/ch-image.sh.
#
# Prints the pulled image (podman: its reference; else OUT). A failed pull: one line
# `[pull] ERROR: <why>: <the runtime's last word>`, exit 1; bad arguments: one line, exit 2.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { printf '[pull] %s\n' "$*" >&2; exit 2; }
die() { printf '[pull] ERROR: %s\n' "$*" >&2; exit 1; }
USAGE="usage: $0 podman|apptainer|charliecloud REF [OUT] [--cert-dir DIR] [--verify-key PUB.pem]"

[ $# -ge 2 ] || usage "$USAGE"
runtime=$1 ref=$2; shift 2
out=""
if [ "$runtime" != podman ]; then
  [ $# -ge 1 ] && [ "${1#--}" = "$1" ] || usage "$runtime needs OUT ($USAGE)"
  out=$1; shift
fi
cert_dir="" key=""
while [ $# -gt 0 ]; do
  case $1 in
    --cert-dir) cert_dir=${2:-}; shift 2 || usage "--cert-dir needs a value" ;;
    --verify-key) key=${2:-}; shift 2 || usage "--verify-key needs a value" ;;
    *) usage "unknown argument $1 ($USAGE)" ;;
  esac
done
[ -z "$cert_dir" ] || [ -f "$cert_dir/ca.crt" ] || usage "--cert-dir $cert_dir has no ca.crt"
[ -z "$key" ] || [ -f "$key" ] || usage "--verify-key $key: no such file"
case $runtime in
  podman|charliecloud) [[ $ref =~ ^[A-Za-z0-9.:-]+/[a-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$ ]] \
      || usage "$ref: not HOST/NAME@sha256:DIGEST or HOST/NAME:TAG" ;;
  apptainer) [[ $ref =~ ^(docker|oras)://[A-Za-z0-9.:-]+/[a-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$ ]] \
      || usage "$ref: not docker://HOST/NAME@sha256:DIGEST or oras://... (or :TAG)" ;;
  *) usage "$USAGE" ;;
esac
[ -z "$key" ] || [[ $ref == oras://* ]] || usage "--verify-key: only a SIF (oras://) carries a signature"
if [ -n "$out" ]; then
  [ ! -e "$out" ] || usage "$out exists (a pull never replaces an image)"
  [ -d "$(dirname "$out")" ] || usage "$(dirname "$out"): no such folder"
  out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
fi

log=$(mktemp /tmp/fabbench-pull.XXXXXX)
partial=""
cleanup() { rm -f -- "$log"; [ -z "$partial" ] || rm -rf -- "$partial"; }
trap cleanup EXIT

fail() {  # why the runtime failed, in one line, from its own messages
  local text why word
  text=$(tr -d '\r' <"$log")
  case $text in
    *x509*|*CERTIFICATE_VERIFY_FAILED*|*"certificate verify failed"*|*"certificate signed by unknown"*)
      why="the registry's certificate does not verify" ;;
    *"connection refused"*|*"Connection refused"*|*"no route to host"*)
      why="the registry does not answer" ;;
    *"manifest unknown"*|*"MANIFEST_UNKNOWN"*|*"not in registry"*|*"not found"*|*"Not Found"*)
      why="the registry has no such image" ;;
    *"signature"*|*"verify"*) why="the signature does not match" ;;
    *) why="$runtime pull failed" ;;
  esac
  # the runtime's own error line (not a hint after it), else its last line
  word=$(grep -E '^(error|Error|ERROR|FATAL)' "$log" | tail -n1 | cut -c1-300)
  [ -n "$word" ] || word=$(grep -v '^\s*$' "$log" | tail -n1 | cut -c1-300)
  die "$why ($ref): $word"
}

ca_env=()
case $runtime in
  podman)
    tls=(); [ -n "$cert_dir" ] && tls=(--cert-dir "$cert_dir")
    timeout 1800 podman pull -q "${tls[@]}" "$ref" >"$log" 2>&1 || fail
    printf '%s\n' "$ref" ;;

  apptainer)
    parent=$(dirname "$out") name=$(basename "$out")
    partial=$parent/.partial-$name
    binds=(--bind "$parent:/fabbench/pull")
    if [ -n "$cert_dir" ]; then
      binds+=(--bind "$cert_dir:/fabbench/certs"); ca_env=(SSL_CERT_FILE=/fabbench/certs/ca.crt)
    fi
    inroot() {
      timeout 1800 "$here/.ci/apptainer.sh" exec "${binds[@]}" --cwd /fabbench/pull -- \
        env "${ca_env[@]}" "$@" >>"$log" 2>&1
    }
    if [[ $ref == docker://* ]]; then
      inroot apptainer build --disable-cache --sandbox ".partial-$name" "$ref" || fail
    else
      inroot apptainer pull --disable-cache ".partial-$name" "$ref" || fail
      if [ -n "$key" ]; then
        cp "$key" "$parent/.key-$name.pem"
        inroot apptainer verify --key ".key-$name.pem" ".partial-$name" \
          || { rm -f -- "$parent/.key-$name.pem"; fail; }
        rm -f -- "$parent/.key-$name.pem"
      fi
    fi
    mv -- "$partial" "$out"; partial=""
    printf '%s\n' "$out" ;;

  charliecloud)
    ch_image=$("$here/.ci/ch-image.sh")
    partial=$(mktemp -d "$(dirname "$out")/.partial-ch.XXXXXX")
    rmdir "$partial"  # ch-image makes its storage itself
    [ -n "$cert_dir" ] && ca_env=(REQUESTS_CA_BUNDLE="$cert_dir/ca.crt" CURL_CA_BUNDLE="$cert_dir/ca.crt")
    USER=${USER:-$(id -un)} timeout 1800 env "${ca_env[@]}" "$ch_image" --no-cache -s "$partial" \
      pull "$ref" >"$log" 2>&1 || fail
    pulled=("$partial"/img/*)
    [ "${#pulled[@]}" -eq 1 ] && [ -d "${pulled[0]}" ] || die "ch-image pull left no image in $partial"
    mv -- "${pulled[0]}" "$out"
    printf '%s\n' "$out" ;;
esac
