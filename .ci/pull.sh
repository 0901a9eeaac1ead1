#!/usr/bin/env bash
# Pull a published fabbench image (.ci/publish.sh) with one runtime, as a site does, and leave
# either the whole image or nothing: a failed pull leaves no half-pulled image behind.
#
#   .ci/pull.sh podman       REF                [--cert-dir DIR] [--timeout S]
#   .ci/pull.sh apptainer    docker://REF  OUT  [--cert-dir DIR] [--timeout S]  OUT: a sandbox directory
#   .ci/pull.sh apptainer    oras://REF    OUT  [--cert-dir DIR] [--timeout S] [--verify-key PUB.pem]
#                                                                                OUT: a SIF
#   .ci/pull.sh charliecloud REF           OUT  [--cert-dir DIR] [--timeout S]  OUT: a directory image (ch-run)
#
# REF names the image by digest (HOST/fabbench@sha256:...) or tag. --cert-dir: a folder with the
# registry's CA certificate, ca.crt (podman --cert-dir; Apptainer SSL_CERT_FILE; ch-image
# REQUESTS_CA_BUNDLE). --verify-key: the SIF must carry a signature by this key (apptainer verify)
# or it is removed. Apptainer runs as the unprivileged user of .ci/apptainer.sh (OUT's folder must
# be writable by that user); a docker:// image becomes a sandbox, not a SIF: squashing 1.3 GB
# took 8 minutes on these 2 cores, and a user here cannot mount a SIF anyway (/dev/fuse is
# root-only), so `apptainer run` would unpack it again. Charliecloud's ch-image comes from
# .ci/ch-image.sh; it checks no digest (0.31 keeps a cut-off or changed layer as if whole), so this
# script checks what it downloaded against the manifest (sizes, sha256) and the manifest against
# REF's digest before the image is kept. --timeout: the whole pull's deadline (default 1800 s);
# podman retries a failed transfer 3 times, 1 s apart, the others not at all, and none of them
# gives up on a registry that stops sending mid-transfer: the deadline ends that.
#
# Prints the pulled image (podman: its reference; else OUT). A failed pull: one line
# `[pull] ERROR: <why> (REF): <the runtime's last word>`, exit 1, nothing of the image left
# (docs/faults-setup.md lists the causes); bad arguments: one line, exit 2.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { printf '[pull] %s\n' "$*" >&2; exit 2; }
die() { printf '[pull] ERROR: %s\n' "$*" >&2; exit 1; }
USAGE="usage: $0 podman|apptainer|charliecloud REF [OUT] [--cert-dir DIR] [--timeout S] [--verify-key PUB.pem]"

[ $# -ge 2 ] || usage "$USAGE"
runtime=$1 ref=$2; shift 2
out=""
if [ "$runtime" != podman ]; then
  [ $# -ge 1 ] && [ "${1#--}" = "$1" ] || usage "$runtime needs OUT ($USAGE)"
  out=$1; shift
fi
cert_dir="" key="" deadline=1800
while [ $# -gt 0 ]; do
  case $1 in
    --cert-dir) cert_dir=${2:-}; shift 2 || usage "--cert-dir needs a value" ;;
    --timeout) deadline=${2:-}; shift 2 || usage "--timeout needs a value" ;;
    --verify-key) key=${2:-}; shift 2 || usage "--verify-key needs a value" ;;
    *) usage "unknown argument $1 ($USAGE)" ;;
  esac
done
[ -z "$cert_dir" ] || [ -f "$cert_dir/ca.crt" ] || usage "--cert-dir $cert_dir has no ca.crt"
[ -z "$key" ] || [ -f "$key" ] || usage "--verify-key $key: no such file"
[[ $deadline =~ ^[1-9][0-9]*$ ]] || usage "--timeout $deadline: not a whole number of seconds"
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

# fail STATUS [WHY DETAIL]: why the pull failed, in one line, from the runtime's own messages
# (its exit STATUS; 124: the deadline), or WHY when this script found it itself (DETAIL: what)
fail() {
  local status=$1 why=${2:-} found=${3:-} text word
  text=$(tr -d '\r' <"$log")
  if [ -n "$why" ]; then :
  elif [ "$status" -eq 124 ]; then why="the pull did not finish in ${deadline}s (--timeout)"
  else
    case $text in
      *x509*|*CERTIFICATE_VERIFY_FAILED*|*"certificate verify failed"*|*"certificate signed by unknown"*)
        why="the registry's certificate does not verify" ;;
      *"connection refused"*|*"Connection refused"*|*"no route to host"*)
        why="the registry does not answer" ;;
      # a connection that ended mid-transfer: Go's net (podman, apptainer), urllib3 (ch-image)
      *"connection reset by peer"*|*"unexpected EOF"*|*"Connection broken"*|*"IncompleteRead"*|*"Connection reset by peer"*)
        why="the transfer was cut off" ;;
      # containers/image (podman), oras-go and Apptainer's conveyor
      *"Digest did not match"*|*"error verifying sha256 checksum"*|*"digest mismatch"*)
        why="a blob does not match its digest" ;;
      *"manifest unknown"*|*"MANIFEST_UNKNOWN"*|*"not in registry"*|*"not found"*|*"Not Found"*)
        why="the registry has no such image" ;;
      *"signature"*|*"verify"*) why="the signature does not match" ;;
      *) why="$runtime pull failed" ;;
    esac
  fi
  # the runtime's own error line (not a hint after it), else its last line
  word=$(grep -E '^(error|Error|ERROR|FATAL)' "$log" | tail -n1 | cut -c1-300) || true
  [ -n "$word" ] || word=$(grep -v '^\s*$' "$log" | tail -n1 | cut -c1-300) || true
  [ "$status" -ne 0 ] || word="${tool:-$runtime} reported success"
  [ -z "$found" ] || word="${word:+$word; }$found"
  die "$why ($ref): ${word:-$runtime said nothing (exit $status)}"
}

# check_download STORAGE: ch-image's downloads (STORAGE/dlcache) against the manifest it got, and
# the manifest against REF's digest; prints `cut|changed DETAIL` for the first that is not whole
check_download() {
  timeout 600 python3 - "$1/dlcache" "$ref" <<'PY'
import glob, hashlib, json, os, sys
cache, ref = sys.argv[1:]
def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()
if "@sha256:" in ref:
    want = ref.split("@", 1)[1]
    got = [sha(p) for p in glob.glob(f"{cache}/*.fat.json")]
    if got and want not in got:
        sys.exit(print(f"changed the manifest hashes to {got[0]}, not {want}"))
for manifest in glob.glob(f"{cache}/*%skinny.manifest.json"):
    with open(manifest) as f:
        m = json.load(f)
    blobs = [("config", m["config"], ".json")] + [(f"layer {i}", b, ".tar.gz")
                                                  for i, b in enumerate(m["layers"], 1)]
    for what, blob, ext in blobs:
        path = f"{cache}/{blob['digest'].split(':')[1]}{ext}"
        if not os.path.exists(path):
            continue
        size = os.path.getsize(path)
        if size < blob["size"]:
            sys.exit(print(f"cut {what} {blob['digest'][:19]}: {size} of {blob['size']} bytes arrived"))
        if sha(path) != blob["digest"]:
            sys.exit(print(f"changed {what} {blob['digest'][:19]}: its bytes hash to "
                           f"{sha(path)[:19]} (ch-image does not check digests; this script does)"))
PY
}

ca_env=()
case $runtime in
  podman)
    tls=(); [ -n "$cert_dir" ] && tls=(--cert-dir "$cert_dir")
    # podman downloads a blob into $TMPDIR/storage*/ (default /var/tmp) and, stopped by the
    # deadline, leaves it there: here that folder is this pull's own, removed on exit
    partial=$(mktemp -d /var/tmp/.partial-podman.XXXXXX)
    TMPDIR=$partial timeout "$deadline" podman pull -q "${tls[@]}" "$ref" >"$log" 2>&1 || fail $?
    printf '%s\n' "$ref" ;;

  apptainer)
    parent=$(dirname "$out") name=$(basename "$out")
    partial=$parent/.partial-$name
    binds=(--bind "$parent:/fabbench/pull")
    if [ -n "$cert_dir" ]; then
      binds+=(--bind "$cert_dir:/fabbench/certs"); ca_env=(SSL_CERT_FILE=/fabbench/certs/ca.crt)
    fi
    inroot() {
      timeout "$deadline" "$here/.ci/apptainer.sh" exec "${binds[@]}" --cwd /fabbench/pull -- \
        env "${ca_env[@]}" "$@" >>"$log" 2>&1
    }
    if [[ $ref == docker://* ]]; then
      inroot apptainer build --disable-cache --sandbox ".partial-$name" "$ref" || fail $?
    else
      inroot apptainer pull --disable-cache ".partial-$name" "$ref" || fail $?
      if [ -n "$key" ]; then
        cp "$key" "$parent/.key-$name.pem"
        inroot apptainer verify --key ".key-$name.pem" ".partial-$name" \
          || { status=$?; rm -f -- "$parent/.key-$name.pem"; fail "$status"; }
        rm -f -- "$parent/.key-$name.pem"
      fi
    fi
    mv -- "$partial" "$out"; partial=""
    printf '%s\n' "$out" ;;

  charliecloud)
    ch_image=$("$here/.ci/ch-image.sh") tool=ch-image
    partial=$(mktemp -d "$(dirname "$out")/.partial-ch.XXXXXX")
    rmdir "$partial"  # ch-image makes its storage itself
    [ -n "$cert_dir" ] && ca_env=(REQUESTS_CA_BUNDLE="$cert_dir/ca.crt" CURL_CA_BUNDLE="$cert_dir/ca.crt")
    status=0
    USER=${USER:-$(id -un)} timeout "$deadline" env "${ca_env[@]}" "$ch_image" --no-cache \
      -s "$partial" pull "$ref" >"$log" 2>&1 || status=$?
    found=""
    [ "$status" -eq 124 ] || found=$(check_download "$partial" 2>>"$log") || true
    case $found in
      cut*) fail "$status" "the transfer was cut off" "${found#cut }" ;;
      changed*) fail "$status" "a blob does not match its digest" "${found#changed }" ;;
    esac
    [ "$status" -eq 0 ] || fail "$status"
    pulled=("$partial"/img/*)
    [ "${#pulled[@]}" -eq 1 ] && [ -d "${pulled[0]}" ] || die "ch-image pull left no image in $partial"
    mv -- "${pulled[0]}" "$out"
    printf '%s\n' "$out" ;;
esac
