#!/usr/bin/env bash
# Install checkov, the Kubernetes manifest scanner of the tests (tests/integration/test_k8s_scan.py),
# into a venv of its own, $FABBENCH_CACHE/tools/checkov-<version> (FABBENCH_CACHE defaulting to
# ~/.cache/fabbench), with exactly the packages .ci/checkov.lock names: its pinned dependencies
# would downgrade the project venv's (.ci/checkov.lock says which). Run by .ci/setup.sh --all
# (make setup-all, make test). Needs PyPI once; pip's cache makes a second install fast.
#
# Idempotent: when the venv's record (.lock-sha256, written last, once checkov answers with its
# version) matches the lock, it says so and exits; a venv without it (an install that did not
# finish) is made again. Concurrent runs are serialised by a flock in $FABBENCH_CACHE/tools.
# Prints the path of the checkov executable (its only output on stdout; what it does, on stderr).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lock=$here/.ci/checkov.lock
cache=${FABBENCH_CACHE:-$HOME/.cache/fabbench}
python=${PYTHON:-python3}
version=$(sed -n 's/^checkov==//p' "$lock")
[ -n "$version" ] || { echo "[checkov] ERROR: $lock pins no checkov==VERSION" >&2; exit 1; }
dest=$cache/tools/checkov-$version
want=$(sha256sum "$lock" | cut -d' ' -f1)
log() { printf '[checkov] %s\n' "$*" >&2; }

# checkov offline: no mapping or policy download from Prisma Cloud, no look for a newer release
export BC_SKIP_MAPPING=TRUE CKV_SKIP_PACKAGE_UPDATE_CHECK=TRUE

installed() {
  [ "$(cat "$dest/.lock-sha256" 2>/dev/null)" = "$want" ] || return 1
  log "checkov $version is installed: $dest"
  echo "$dest/bin/checkov"
}
installed && exit 0

start=$(date +%s)
mkdir -p "$cache/tools"
exec 9>"$cache/tools/.checkov-install.flock"
flock -w 1800 9 || { log "ERROR: another install holds $cache/tools/.checkov-install.flock"; exit 1; }
installed && exit 0  # the other install was of this lock
rm -rf "$dest"  # a venv without the record: an install that did not finish, or another lock's
log "installing checkov $version (.ci/checkov.lock) into $dest"
"$python" -m venv "$dest"
timeout 1800 "$dest/bin/python" -m pip --disable-pip-version-check -q install --no-deps \
  -r "$lock"
"$dest/bin/python" -m pip --disable-pip-version-check -q check
have=$("$dest/bin/checkov" --version)
[ "$have" = "$version" ] || { log "ERROR: the venv's checkov says '$have', not $version"; exit 1; }
echo "$want" >"$dest/.lock-sha256"
log "checkov $version installed in $(( $(date +%s) - start )) s, $(du -sh "$dest" | cut -f1): $dest"
echo "$dest/bin/checkov"
