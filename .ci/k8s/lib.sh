# Helpers shared by .ci/k8s/*.sh (sourced, not run). The caller sets LOG_TAG.
# shellcheck shell=bash

log() { printf '[%s] %s\n' "${LOG_TAG:-k8s}" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "${LOG_TAG:-k8s}" "$*" >&2; exit 1; }

# apt_ensure PKG...: install the Debian packages among PKG that are missing (as .ci/setup.sh does).
apt_ensure() {
  local pkg missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  [ "$(id -u)" -eq 0 ] || die "missing Debian packages (install them as root): ${missing[*]}"
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  timeout 900 apt-get update -qq
  timeout 1800 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Host paths kubelet, CNI and containerd write to outside the folders they are given (kubelet's
# device-plugin socket, CNI's result cache, kubelet's links in /var/log/containers) or might:
# start.sh records which were there, stop.sh removes what the cluster added.
# shellcheck disable=SC2034  # used by start.sh and stop.sh
HOST_PATHS=(/var/lib/kubelet /var/lib/cni /var/log/containers /var/log/pods /usr/libexec/kubernetes
            /run/containerd /var/lib/containerd /opt/containerd /etc/kubernetes /run/netns)
