#!/usr/bin/env bash
# OpenSSH for MPIJobs of the Kubeflow MPI Operator (kubeflow.org/v2beta1; checked against
# v0.8.0's controller): the workers run sshd, the launcher's mpirun reaches them with ssh (Open
# MPI's plm rsh) through the hostfile the operator writes, /etc/mpi/hostfile, whose names are
# <job>-worker-N.<job>.<ns>.svc. The operator mounts a Secret at the MPIJob's sshAuthMountPath
# (the chart's: /root/.ssh, so its pods run as root) on the launcher and on every worker:
# id_rsa (an ECDSA P-521 key, whatever the name says), id_rsa.pub and authorized_keys, mode
# 0600 at /root/.ssh, each a symlink into the volume's ..data, the directory a 0777 volume.
#
#   sshd.sh install        (the Dockerfile's runtime stages) openssh-server, the settings below,
#                          and this script as /usr/local/sbin/fabbench-sshd. No host key is kept
#                          in the image: every image would share it
#   fabbench-sshd serve    (an MPIJob worker's command) host keys made for this container, the
#                          privilege-separation directory, then sshd in the foreground on port
#                          $SSHD_PORT, its sessions given this container's environment
#
# Server (/etc/ssh/sshd_config.d/fabbench.conf): keys only, root by key; StrictModes off (the
# Secret's directory is group- and world-writable, and sshd would refuse authorized_keys in it);
# no PAM (a container has no login session: pam_loginuid fails without CAP_AUDIT_CONTROL).
# Client (/etc/ssh/ssh_config.d/fabbench.conf), for the operator's *.svc names only: port
# $SSHD_PORT (not 22, which a hostNetwork worker would share with the node's own sshd), no host
# key check and no known_hosts file (the host keys are new in every pod; /root/.ssh is
# read-only), and no "Permanently added" warning on mpirun's output.
#
# sshd gives a session only its own few variables (PATH as the server's default), so the ranks
# mpirun starts on a worker would lack the image's PATH (fabbench, and the cuda flavour's
# orted in /opt/fabric/bin), its LD_LIBRARY_PATH and the worker's downward-API variables
# (FABBENCH_NODE_NAME: the Kubernetes node). `serve` hands the container's environment to every
# session with sshd's SetEnv, less what describes a login (HOME, HOSTNAME, PWD, ...) and
# Kubernetes' service links (FOO_SERVICE_HOST, FOO_PORT_80_TCP, ...), and says which variables it
# passed on.
set -euo pipefail

SSHD_PORT=2222
me=fabbench-sshd
log() { printf '[%s] %s\n' "$me" "$*"; }
die() { printf '[%s] ERROR: %s\n' "$me" "$*" >&2; exit 1; }

install_sshd() {
  export DEBIAN_FRONTEND=noninteractive
  log "installing openssh-server openssh-client"
  timeout 900 apt-get update -qq
  if ! timeout 1800 apt-get install -y -q --no-install-recommends openssh-server \
      openssh-client >/tmp/apt.log 2>&1; then
    tail -n 40 /tmp/apt.log >&2
    die "apt-get install failed"
  fi
  rm -f /tmp/apt.log
  apt-get clean
  rm -rf /var/lib/apt/lists/*
  # the package made host keys at install: they would be every container's
  rm -f /etc/ssh/ssh_host_*
  grep -q '^Include /etc/ssh/sshd_config.d/\*.conf' /etc/ssh/sshd_config \
    || die "/etc/ssh/sshd_config does not include sshd_config.d"
  grep -q '^Include /etc/ssh/ssh_config.d/\*.conf' /etc/ssh/ssh_config \
    || die "/etc/ssh/ssh_config does not include ssh_config.d"
  cat >/etc/ssh/sshd_config.d/fabbench.conf <<EOF
# fabbench (containers/sshd.sh): sshd of an MPIJob's workers, started by fabbench-sshd serve
Port $SSHD_PORT
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
PrintMotd no
X11Forwarding no
EOF
  cat >/etc/ssh/ssh_config.d/fabbench.conf <<EOF
# fabbench (containers/sshd.sh): mpirun's ssh to the workers of an MPIJob, named
# <job>-worker-N.<job>.<ns>.svc in the operator's hostfile
Host *.svc *.svc.*
    Port $SSHD_PORT
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
EOF
  install -m 0755 "${BASH_SOURCE[0]}" /usr/local/sbin/fabbench-sshd
  /usr/sbin/sshd -V 2>&1 | head -n1
}

serve() {
  [ "$(id -u)" = 0 ] || die "sshd for the MPI Operator's workers runs as root (the chart's MPIJob sets runAsUser 0); this is uid $(id -u)"
  ssh-keygen -A >/dev/null
  install -d -m 0755 /run/sshd
  local name value pairs=() names=()
  while IFS= read -r name; do
    value=${!name}
    case $name in
      HOME|HOSTNAME|PWD|OLDPWD|SHLVL|_|TERM|USER|LOGNAME|SHELL|MAIL) continue ;;
      # Kubernetes' service links (one set per Service of the namespace): nothing a rank needs
      *_SERVICE_HOST|*_SERVICE_PORT|*_SERVICE_PORT_*|*_PORT_[0-9]*_TCP*|*_PORT_[0-9]*_UDP*|\
      *_PORT_[0-9]*_SCTP*) continue ;;
      *_PORT) case $value in tcp://*|udp://*|sctp://*) continue ;; esac ;;
    esac
    case $value in
      *[\"\\]*|*$'\n'*)
        log "not passed to sessions: $name (its value holds a quote, a backslash or a newline)"
        continue ;;
    esac
    pairs+=("$name=\"$value\"")
    names+=("$name")
  done < <(compgen -e)
  log "host keys made for this container; sshd on port $SSHD_PORT; sessions get ${names[*]}"
  log "FABBENCH_NODE_NAME=${FABBENCH_NODE_NAME:-(not set: ranks name their node by hostname)}"
  exec /usr/sbin/sshd -D -e -o "SetEnv=${pairs[*]}"
}

case ${1:-} in
  install) install_sshd ;;
  serve) serve ;;
  *) die "usage: sshd.sh install | fabbench-sshd serve" ;;
esac
