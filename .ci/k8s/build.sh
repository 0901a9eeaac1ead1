#!/usr/bin/env bash
# Build every binary of the project's own Kubernetes cluster from its Go module (versions.env),
# cached by content: into $FABBENCH_CACHE/k8s/<hash of versions.env and this script>/bin, with the
# Go module and build caches under $FABBENCH_CACHE/k8s/go. A binary with its stamp is not built
# again, so a second run builds nothing and takes seconds. Prints the bin folder as its last line.
#
#   .ci/k8s/build.sh            build what is missing; print the bin folder
#   .ci/k8s/build.sh --dir      print the bin folder the current pins would have; build nothing
#
# Cold, 2 cores: about 18-25 minutes, 12 GB of caches (docs/kubernetes-cluster.md). Each component's
# wall time is logged (and appended to <cache>/build-times.log). Debian packages the build needs
# (libseccomp-dev for runc's seccomp, pkg-config, gcc) are installed when missing (as root).
# Environment: FABBENCH_CACHE (default ~/.cache/fabbench), K8S_BUILD_TIMEOUT (seconds per step,
# default 2400).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=.ci/k8s/versions.env
. "$here/versions.env"
# shellcheck source=.ci/k8s/lib.sh
. "$here/lib.sh"
export LOG_TAG=k8s-build

cache=${FABBENCH_CACHE:-$HOME/.cache/fabbench}/k8s
key=$(cat "$here/versions.env" "$here/build.sh" | sha256sum | cut -c1-16)
out=$cache/$key
bin=$out/bin
if [ "${1:-}" = --dir ]; then echo "$bin"; exit 0; fi
step_timeout=${K8S_BUILD_TIMEOUT:-2400}
stamps=$out/stamps
src=$out/src
mkdir -p "$bin" "$stamps" "$src" "$out/share"
export GOMODCACHE=$cache/go/mod GOCACHE=$cache/go/cache GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
times=$out/build-times.log

# A binary is built when it or its stamp is missing; the stamp records its wall time.
built() { [ -x "$bin/$1" ] && [ -f "$stamps/$1" ]; }
timed() {  # NAME CMD...: run CMD, log and record its wall time under NAME
  local name=$1 t0=$SECONDS
  shift
  log "$name: building"
  nice -n 5 timeout "$step_timeout" "$@"
  log "$name: $((SECONDS - t0)) s"
  echo "$(date -u +%FT%TZ) $name $((SECONDS - t0)) s" >>"$times"
}
stamp() { for b in "$@"; do echo "$KUBERNETES_VERSION $(date -u +%FT%TZ)" >"$stamps/$b"; done; }

all=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
     etcd containerd containerd-shim-runc-v2 ctr runc coredns helm mpi-operator pause)
missing=()
for b in "${all[@]}"; do built "$b" || missing+=("$b"); done
if [ "${#missing[@]}" -eq 0 ] && [ -f "$out/share/mpi-operator.yaml" ]; then
  echo "$bin"
  exit 0
fi
# One build at a time (make test starts one in the background; start.sh calls this script too):
# a second waits for the first, then builds what is still missing.
exec 8>"$cache/build.lock"
if ! flock -n 8; then
  log "another build.sh is building: waiting for it (at most $((step_timeout * 2)) s)"
  flock -w $((step_timeout * 2)) 8 || die "another build.sh held $cache/build.lock for $((step_timeout * 2)) s"
  missing=()
  for b in "${all[@]}"; do built "$b" || missing+=("$b"); done
  if [ "${#missing[@]}" -eq 0 ] && [ -f "$out/share/mpi-operator.yaml" ]; then
    echo "$bin"
    exit 0
  fi
fi
log "to build into $bin: ${missing[*]}"
apt_ensure libseccomp-dev pkg-config gcc libc6-dev
t_all=$SECONDS

# 1. Kubernetes, through a wrapper module: k8s.io/kubernetes pins its staging modules at v0.0.0
# with local replaces a dependent module cannot use, so each (exactly v0.0.0, not the v0.0.0-2026...
# pseudo-versions of k8s.io/utils or kube-openapi) is replaced with its tagged release.
kube=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
need_kube=()
for b in "${kube[@]}"; do built "$b" || need_kube+=("$b"); done
if [ "${#need_kube[@]}" -gt 0 ] || ! built pause; then
  w=$src/kube
  if [ ! -f "$w/.tidy" ]; then
    mkdir -p "$w"
    t0=$SECONDS
    modjson=$(timeout 600 go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION")
    kgomod=$(sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p' <<<"$modjson")
    [ -f "$kgomod" ] || die "no go.mod for k8s.io/kubernetes@$KUBERNETES_VERSION"
    {
      echo "module fabbench.local/k8s"
      echo
      sed -n 's/^go \(.*\)/go \1/p' "$kgomod"
      grep '^godebug' "$kgomod" || true
      echo
      echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
      echo
      # the staging modules: required at exactly v0.0.0 and replaced by ./staging/src/k8s.io/X
      sed -n 's/^[[:space:]]*\(k8s\.io\/[^[:space:]]\+\) => \.\/staging\/.*/replace \1 => \1 '"$KUBERNETES_STAGING_VERSION"'/p' "$kgomod"
    } >"$w/go.mod"
    [ "$(grep -c '^replace' "$w/go.mod")" -ge 20 ] || die "too few staging replaces in $w/go.mod"
    {
      echo '//go:build tools'
      echo
      echo '// Package tools names the commands this module builds, so that go mod tidy keeps them.'
      echo 'package tools'
      echo
      echo 'import ('
      for b in "${kube[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$b\""; done
      echo ')'
    } >"$w/tools.go"
    (cd "$w" && timed kubernetes-mod-tidy go mod tidy -e)
    touch "$w/.tidy"
    log "kubernetes module ready in $((SECONDS - t0)) s"
  fi
  kmod=$GOMODCACHE/k8s.io/kubernetes@$KUBERNETES_VERSION
  v=${KUBERNETES_VERSION#v}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=${v%%.*}"
    ldflags+=" -X $pkg.gitMinor=$(cut -d. -f2 <<<"$v") -X $pkg.gitTreeState=clean"
    ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  for b in "${need_kube[@]}"; do
    # All static (CGO_ENABLED=0), as Kubernetes' own release builds are: kubelet too, which
    # then shares the build cache with the others.
    (cd "$src/kube" && CGO_ENABLED=0 GOFLAGS="$GOFLAGS -mod=mod" timed "$b" \
       go build -tags selinux,notest,providerless -trimpath -ldflags "$ldflags" \
       -o "$bin/$b" "k8s.io/kubernetes/cmd/$b")
    stamp "$b"
  done
  # 2. The pause binary from Kubernetes' own source, static.
  if ! built pause; then
    timed pause gcc -Os -Wall -Werror -static -DVERSION="$PAUSE_VERSION" \
      -o "$bin/pause" "$kmod/build/pause/linux/pause.c"
    stamp pause
  fi
fi

# 3. etcd: a 3-line main calling the server's own entry point.
if ! built etcd; then
  w=$src/etcd
  mkdir -p "$w"
  cat >"$w/main.go" <<'GO'
// Command etcd is etcd's server, built from its module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  [ -f "$w/go.mod" ] || (cd "$w" && go mod init fabbench.local/etcd >/dev/null 2>&1)
  (cd "$w" && timed etcd-mod timeout 600 go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" \
     && timed etcd-mod-tidy go mod tidy -e)
  (cd "$w" && CGO_ENABLED=0 timed etcd go build -trimpath -ldflags "-s -w" -o "$bin/etcd" .)
  stamp etcd
fi

# 4. containerd, its runc shim and ctr (no snapshotters needing C libraries).
if ! built containerd || ! built containerd-shim-runc-v2 || ! built ctr; then
  m=github.com/containerd/containerd/v2
  GOBIN=$bin CGO_ENABLED=0 timed containerd go install -tags "no_btrfs no_devmapper no_zfs" -trimpath \
    -ldflags "-s -w -X $m/version.Version=${CONTAINERD_VERSION#v} -X $m/version.Revision=$CONTAINERD_VERSION" \
    "$m/cmd/containerd@$CONTAINERD_VERSION" "$m/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
    "$m/cmd/ctr@$CONTAINERD_VERSION"
  stamp containerd containerd-shim-runc-v2 ctr
fi

# 5. runc with seccomp (Debian's libseccomp; its libpathrs tag needs a Rust library bookworm lacks).
if ! built runc; then
  GOBIN=$bin CGO_ENABLED=1 timed runc go install -tags "seccomp urfave_cli_no_docs" -trimpath \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" "github.com/opencontainers/runc@$RUNC_VERSION"
  stamp runc
fi

# 6. CoreDNS and helm.
if ! built coredns; then
  GOBIN=$bin CGO_ENABLED=0 timed coredns go install -trimpath -ldflags "-s -w" \
    "github.com/coredns/coredns@$COREDNS_VERSION"
  stamp coredns
fi
if ! built helm; then
  GOBIN=$bin CGO_ENABLED=0 timed helm go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  stamp helm
fi

# 7. mpi-operator through a wrapper module (`go install ...@v0.8.0` is refused: the proxy does
# not serve the module's version list, which go install reads for deprecations).
m=github.com/kubeflow/mpi-operator
if ! built mpi-operator || [ ! -f "$out/share/mpi-operator.yaml" ]; then
  w=$src/mpi-operator
  mkdir -p "$w"
  printf 'module fabbench.local/mpiwrap\n\ngo 1.24\n\nrequire %s %s\n' "$m" "$MPI_OPERATOR_VERSION" >"$w/go.mod"
  printf '//go:build tools\n\n// Package tools names the command this module builds.\npackage tools\n\nimport _ "%s/cmd/mpi-operator"\n' \
    "$m" >"$w/tools.go"
  (cd "$w" && timed mpi-operator-mod-tidy go mod tidy -e)
  (cd "$w" && CGO_ENABLED=0 GOFLAGS="$GOFLAGS -mod=mod" timed mpi-operator go build -trimpath \
     -ldflags "-s -w" -o "$bin/mpi-operator" "$m/cmd/mpi-operator")
  cp "$GOMODCACHE/$m@$MPI_OPERATOR_VERSION/deploy/v2beta1/mpi-operator.yaml" "$out/share/mpi-operator.yaml"
  chmod 0644 "$out/share/mpi-operator.yaml"
  stamp mpi-operator
fi

for b in "${all[@]}"; do built "$b" || die "$b was not built"; done
log "built ${missing[*]} in $((SECONDS - t_all)) s"
echo "$(date -u +%FT%TZ) total $((SECONDS - t_all)) s" >>"$times"
echo "$bin"
