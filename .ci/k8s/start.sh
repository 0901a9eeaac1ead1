#!/usr/bin/env bash
# Start a real Kubernetes cluster of N nodes on this host (root), built from source
# (.ci/k8s/build.sh): the nodes are fabbench's own emulated nodes (`fabbench emulate up`: a
# network namespace each, tc-shaped veth links to a bridge), each running its own containerd,
# kubelet and kube-proxy; the control plane (etcd, kube-apiserver, controller-manager, scheduler)
# and a TLS registry run on the host, bound to the bridge's address. Every address is in
# 198.18.0.0/15: nodes are the emulation's, pods 198.19.0.0/17 (a /24 per node), services
# 198.19.128.0/20, cluster DNS (CoreDNS) 198.19.128.10. The mpi-operator is deployed, and
# fabbench's cpu image is pushed to the registry and named by digest.
#
#   .ci/k8s/start.sh 3 [--link 1gbit] [--slow-node 2:250mbit]...
#
# Prints FABBENCH_K8S_ENV=<file> as its last line: a shell file exporting KUBECONFIG, KUBECTL,
# HELM, IMAGE_REPOSITORY, IMAGE_DIGEST, FABBENCH_EMULATION, FABBENCH_K8S_NODES, ... (see the end).
# Node i (counted from 0, as emulate counts) is Kubernetes node fbk-i. A second start while a
# cluster runs is refused in one line (exit 1); a failure midway tears down what was made.
# Stop with .ci/k8s/stop.sh. Environment: FABBENCH_K8S_DIR (state, default /var/tmp/fabbench-k8s),
# FABBENCH (default <repo>/.venv/bin/fabbench), FABBENCH_K8S_IMAGE (the fabbench image to push;
# default the tag `.ci/image-build.sh --tag` names, built when missing; FABBENCH_TORCH_WHEELS is
# then needed), FABBENCH_CACHE (binaries, .ci/k8s/build.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=.ci/k8s/versions.env
. "$here/versions.env"
# shellcheck source=.ci/k8s/lib.sh
. "$here/lib.sh"
export LOG_TAG=k8s-start

usage() { echo "usage: $0 NODES [--link RATE] [--slow-node I:RATE]..." >&2; exit 2; }
[ $# -ge 1 ] || usage
nodes=$1
shift
[[ $nodes =~ ^[1-9][0-9]?$ ]] || usage
link=1gbit
slow=() slow_specs=()
while [ $# -gt 0 ]; do
  case $1 in
    --link) [ $# -ge 2 ] || usage; link=$2; shift 2 ;;
    --slow-node) [ $# -ge 2 ] || usage; slow+=(--slow-node "$2"); slow_specs+=("$2"); shift 2 ;;
    *) usage ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "start.sh: a Kubernetes cluster's nodes need root" >&2; exit 3; }

dir=${FABBENCH_K8S_DIR:-/var/tmp/fabbench-k8s}
fabbench=${FABBENCH:-$repo/.venv/bin/fabbench}
[ -x "$fabbench" ] || die "no fabbench at $fabbench (make setup, or set FABBENCH)"

# The daemons started below outlive this script: they must not inherit its caller's descriptors
# (a caller reading our stdout through a pipe would otherwise wait for them).
for fd in "/proc/$$/fd"/*; do
  fd=${fd##*/}
  case $fd in 0|1|2|255) ;; *) eval "exec $fd>&-" 2>/dev/null || true ;; esac
done

# One start at a time, and none while a cluster runs.
mkdir -p "$dir"
exec 9>"$dir/lock"
flock -n 9 || { echo "start.sh: a cluster is being started or stopped in $dir; wait, or .ci/k8s/stop.sh" >&2; exit 1; }
if [ -f "$dir/state.env" ]; then
  apiserver_pid=$(cut -d' ' -f1 "$dir/pids/kube-apiserver.pid" 2>/dev/null || true)
  if [ -n "$apiserver_pid" ] && [ -d "/proc/$apiserver_pid" ]; then
    echo "start.sh: a cluster is already running in $dir (kube-apiserver pid $apiserver_pid); stop it first: .ci/k8s/stop.sh" >&2
    exit 1
  fi
  log "a stopped cluster's state is in $dir: removing it first"
  exec 9>&-
  FABBENCH_K8S_DIR=$dir timeout 300 "$here/stop.sh" >&2 || die "could not remove the old cluster's state"
  exec 9>"$dir/lock"
  flock -n 9 || { echo "start.sh: a cluster is being started or stopped in $dir" >&2; exit 1; }
fi

t_start=$SECONDS
stage() { log "$1 (+$((SECONDS - t_start)) s)"; }
ok=0
cleanup() {
  [ "$ok" = 1 ] && return
  log "start failed: tearing down what was made (logs kept in $dir/failed-logs)"
  rm -rf "$dir/failed-logs"
  cp -r "$dir/logs" "$dir/failed-logs" 2>/dev/null || true
  exec 9>&-
  FABBENCH_K8S_DIR=$dir timeout 300 "$here/stop.sh" >&2 || log "stop.sh failed too"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# 0. Debian packages the cluster runs with, the binaries, fabbench's image.
apt_ensure containernetworking-plugins nftables iptables docker-registry buildah skopeo openssl \
  util-linux iproute2 curl
bin=$("$here/build.sh" | tail -n1)
[ -x "$bin/kubelet" ] || die "build.sh did not give a bin folder ($bin)"
export PATH=$bin:$PATH
stage "binaries in $bin"
image=${FABBENCH_K8S_IMAGE:-}
if [ -z "$image" ]; then
  image=$(timeout 120 "$repo/.ci/image-build.sh" --tag | tail -n1)
  if ! timeout 60 podman image exists "$image"; then
    log "fabbench's image $image is not in podman's storage: building it (.ci/image-build.sh)"
    image=$(timeout 3600 "$repo/.ci/image-build.sh" | tail -n1)
  fi
fi
timeout 60 podman image exists "$image" || die "fabbench's image $image is not in podman's storage"
image_tag=${image##*:}
stage "fabbench image $image"

# Everything stop.sh needs is recorded in state.env as soon as it exists.
mkdir -p "$dir"/{pids,logs,pki/trust,kubeconfigs,manifests,before,cache}
record() { echo "$1=$(printf '%q' "$2")" >>"$dir/state.env"; }
: >"$dir/state.env"
record DIR "$dir"
record BIN "$bin"
record FABBENCH "$fabbench"
record NODES "$nodes"

# 1. What this host had before (stop.sh removes only what the cluster added).
findmnt -rno TARGET,PROPAGATION >"$dir/before/propagation"  # all private here
for p in "${HOST_PATHS[@]}"; do
  if [ -e "$p" ]; then
    echo "$p" >>"$dir/before/host-paths"
    find "$p" -xdev 2>/dev/null >>"$dir/before/host-files" || true
  fi
done
touch "$dir/before/host-paths" "$dir/before/host-files"
timeout 20 iptables-save 2>/dev/null | grep -v '^#' >"$dir/before/iptables" || true
# kubelet's and containerd's mounts (pod volumes, pod network namespaces, all under $dir) must
# propagate: / shared, not recursively (rshared would also change mounts that others cover, such as
# a stacked /dev/shm, which no path reaches afterwards to make private again)
mount --make-shared /

# 2. The nodes: fabbench's emulated cluster.
emulation=$(timeout 150 "$fabbench" emulate up --nodes "$nodes" --link "$link" "${slow[@]}" \
              </dev/null 2>"$dir/logs/emulate.log" 9>&- | sed -n 's/^FABBENCH_EMULATION=//p')
[ -n "$emulation" ] && [ -f "$emulation" ] || { cat "$dir/logs/emulate.log" >&2; die "fabbench emulate up failed"; }
{ read -r holder bridge addr subnet iface; read -ra node_ns; read -ra node_ip; read -ra node_veth; } \
  < <(python3 - "$emulation" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
print(c["owner_pid"], c["bridge"], c["bridge_address"], c["subnet"], c["iface"])
for key in ("netns", "address", "veth"):
    print(" ".join(n[key] for n in c["nodes"]))
PY
)
[ "${#node_ip[@]}" = "$nodes" ] || die "the emulation has ${#node_ip[@]} nodes, not $nodes"
record EMULATION "$emulation"
record HOLDER "$holder"
record BRIDGE "$bridge"
record ADDR "$addr"
names=()
for ((i = 0; i < nodes; i++)); do names+=("fbk-$i"); done
stage "emulated nodes ${node_ip[*]} on $bridge ($addr, $subnet), link $link ${slow[*]}"

# Addresses (all in 198.18.0.0/15).
pod_cidr=198.19.0.0/17
svc_cidr=198.19.128.0/20
svc_kubernetes=198.19.128.1
dns_ip=198.19.128.10
registry=$addr:5000

# 3. PKI: a throwaway CA (3 days) and a certificate per identity.
pki=$dir/pki
openssl_q() { timeout 60 openssl "$@" 2>>"$dir/logs/openssl.log"; }
openssl_q req -x509 -new -nodes -newkey rsa:2048 -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 3 \
  -subj "/CN=fabbench-k8s-ca" -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign"
cp "$pki/ca.crt" "$pki/trust/ca.crt"
cert() {  # NAME SUBJECT USAGE [SAN]
  local name=$1 subj=$2 usage=$3 san=${4:-} ext
  ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$usage"
  [ -z "$san" ] || ext+=$'\n'"subjectAltName=$san"
  openssl_q req -new -nodes -newkey rsa:2048 -keyout "$pki/$name.key" -out "$pki/$name.csr" -subj "$subj"
  openssl_q x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3 -out "$pki/$name.crt" -extfile <(echo "$ext")
  rm -f "$pki/$name.csr"
}
cert apiserver "/CN=kube-apiserver" serverAuth \
  "IP:$addr,IP:$svc_kubernetes,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=fabbench-admin" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kube-proxy "/CN=system:kube-proxy" clientAuth
cert registry "/CN=fabbench-k8s-registry" serverAuth "IP:$addr"
for ((i = 0; i < nodes; i++)); do
  cert "node-$i" "/O=system:nodes/CN=system:node:fbk-$i" clientAuth
  cert "kubelet-$i" "/CN=fbk-$i" serverAuth "IP:${node_ip[i]},DNS:fbk-$i"
done
openssl_q genrsa -out "$pki/sa.key" 2048
openssl_q rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
chmod 0600 "$pki"/*.key
kubeconfig() {  # NAME CERT
  cat >"$dir/kubeconfigs/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: fabbench-k8s
  cluster: {server: "https://$addr:6443", certificate-authority: "$pki/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$pki/$2.crt", client-key: "$pki/$2.key"}
contexts:
- name: fabbench-k8s
  context: {cluster: fabbench-k8s, user: $2}
current-context: fabbench-k8s
EOF
}
for id in admin controller-manager scheduler kube-proxy; do kubeconfig "$id" "$id"; done
for ((i = 0; i < nodes; i++)); do kubeconfig "node-$i" "node-$i"; done
admin=$dir/kubeconfigs/admin.kubeconfig
kc() { timeout 60 kubectl --kubeconfig "$admin" --request-timeout=30s "$@"; }
stage "PKI and kubeconfigs"

# Daemons: started in their own session with a pid file ("PID EXE") and a log, inside a pids
# cgroup of the cluster's (fbk-cp for the host's, fbk-sys-I for node I's: stop.sh ends what is
# left in them, containerd's shims included: containerd 2.x writes no shim pid file).
cg_v1() { awk '$3 == "cgroup" {print $2}' /proc/self/mounts; }
cg_make() {  # NAME: the cgroup NAME in every v1 hierarchy (cpuset: the parent's cpus and mems)
  local h
  for h in $(cg_v1); do
    mkdir -p "$h/$1"
    if [ -f "$h/cpuset.cpus" ]; then
      cat "$h/cpuset.cpus" >"$h/$1/cpuset.cpus"
      cat "$h/cpuset.mems" >"$h/$1/cpuset.mems"
    fi
  done
}
daemon() {  # NAME CGROUP EXE ARGS...: EXE (a path) runs in CGROUP's pids controller
  local name=$1 cg=$2 exe=$3
  shift 3
  # shellcheck disable=SC2016  # $0, $$ and $@ are the inner shell's
  setsid sh -c 'echo $$ >"/sys/fs/cgroup/pids/$0/cgroup.procs" && exec "$@"' "$cg" "$exe" "$@" \
    </dev/null >>"$dir/logs/$name.log" 2>&1 9>&- &
  echo "$! $exe" >"$dir/pids/$name.pid"
}
node_daemon() {  # NAME I EXE ARGS...: as daemon, inside node I's network namespace
  local name=$1 i=$2 exe=$3
  shift 3
  # shellcheck disable=SC2016  # $0, $$ and $@ are the inner shell's
  setsid sh -c 'echo $$ >"/sys/fs/cgroup/pids/$0/cgroup.procs" && ns=$1 && shift && exec nsenter --net="$ns" -- "$@"' \
    "fbk-sys-$i" "/run/netns/${node_ns[i]}" "$exe" "$@" </dev/null >>"$dir/logs/$name.log" 2>&1 9>&- &
  echo "$! $exe" >"$dir/pids/$name.pid"
}
alive() { local pid; pid=$(cut -d' ' -f1 "$dir/pids/$1.pid"); [ -d "/proc/$pid" ]; }
wait_for() {  # WHAT SECONDS CMD...: until CMD succeeds, or fail naming WHAT
  local what=$1 secs=$2 end=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || die "$what: not ready within $secs s (logs: $dir/logs)"
    sleep 0.5
  done
}
cg_make fbk-cp

# 4. The registry (Debian's docker-registry), TLS with the throwaway CA; its storage is kept
# between clusters ($dir/cache/registry), so an image pushed once is not pushed again.
mkdir -p "$dir/cache/registry"
cat >"$dir/registry.yml" <<EOF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $dir/cache/registry}
  delete: {enabled: true}
http:
  addr: $registry
  tls: {certificate: $pki/registry.crt, key: $pki/registry.key}
EOF
daemon registry fbk-cp /usr/bin/docker-registry serve "$dir/registry.yml"
certs_d=$dir/certs.d
mkdir -p "$certs_d/$registry"
cat >"$certs_d/$registry/hosts.toml" <<EOF
server = "https://$registry"

[host."https://$registry"]
  capabilities = ["pull", "resolve"]
  ca = "$pki/ca.crt"
EOF

# 5. The control plane, on the host, bound to the bridge's address.
daemon etcd fbk-cp "$bin/etcd" --name fbk --data-dir "$dir/etcd" \
  --listen-client-urls "http://$addr:2379" --advertise-client-urls "http://$addr:2379" \
  --listen-peer-urls "http://$addr:2380" --initial-advertise-peer-urls "http://$addr:2380" \
  --initial-cluster "fbk=http://$addr:2380" --listen-metrics-urls "http://$addr:2381" \
  --log-level warn
wait_for "etcd" 60 curl -sf "http://$addr:2381/health"
stage "etcd"
daemon kube-apiserver fbk-cp "$bin/kube-apiserver" \
  --etcd-servers="http://$addr:2379" --advertise-address="$addr" --bind-address="$addr" \
  --secure-port=6443 --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$pki/apiserver-kubelet-client.key" --kubelet-certificate-authority="$pki/ca.crt" \
  --kubelet-preferred-address-types=InternalIP \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --service-cluster-ip-range="$svc_cidr" --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction --allow-privileged=true --profiling=false -v=1
wait_for "kube-apiserver" 90 curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" \
  --key "$pki/admin.key" "https://$addr:6443/readyz"
stage "kube-apiserver"
daemon kube-controller-manager fbk-cp "$bin/kube-controller-manager" \
  --kubeconfig="$dir/kubeconfigs/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$dir/kubeconfigs/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$dir/kubeconfigs/controller-manager.kubeconfig" \
  --bind-address="$addr" --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
  --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
  --allocate-node-cidrs --cluster-cidr="$pod_cidr" --node-cidr-mask-size=24 \
  --service-cluster-ip-range="$svc_cidr" --use-service-account-credentials --leader-elect=false \
  --flex-volume-plugin-dir="$dir/flexvolume" --profiling=false -v=1
daemon kube-scheduler fbk-cp "$bin/kube-scheduler" \
  --kubeconfig="$dir/kubeconfigs/scheduler.kubeconfig" \
  --authentication-kubeconfig="$dir/kubeconfigs/scheduler.kubeconfig" \
  --authorization-kubeconfig="$dir/kubeconfigs/scheduler.kubeconfig" \
  --bind-address="$addr" --leader-elect=false --profiling=false -v=1

# 6. Images: pause, CoreDNS and the mpi-operator built with buildah (scratch + the binary) into
# a store of the cluster's own (vfs: no overlay mounts; never the machine's podman store),
# pushed to the registry; fabbench's image copied from podman's storage. Each by digest.
store=(--root "$dir/cache/images" --runroot "$dir/run/images" --storage-driver vfs)
wait_for "registry" 30 curl -sf --cacert "$pki/ca.crt" "https://$registry/v2/"
digest_of() {  # REF: the registry's digest of REF, or nothing
  timeout 60 skopeo inspect --cert-dir "$pki/trust" --format '{{.Digest}}' "docker://$registry/$1" 2>/dev/null \
    || true
}
small_image() {  # NAME TAG ENTRYPOINT BINARY: built once per binary, pushed when missing
  local name=$1 tag=$2 entry=$3 binary=$4 c ref
  ref=localhost/fbk/$name:$tag
  if ! timeout 60 buildah "${store[@]}" inspect --type image "$ref" >/dev/null 2>&1; then
    c=$(timeout 60 buildah "${store[@]}" from --quiet scratch)
    timeout 120 buildah "${store[@]}" copy --quiet "$c" "$binary" "$entry" >/dev/null
    timeout 60 buildah "${store[@]}" config --entrypoint "[\"$entry\"]" --user 0:0 \
      --label "org.opencontainers.image.title=$name" "$c"
    timeout 300 buildah "${store[@]}" commit --quiet --rm "$c" "$ref" >/dev/null
  fi
  if [ -z "$(digest_of "fbk/$name:$tag")" ]; then
    timeout 300 skopeo copy --quiet --dest-cert-dir "$pki/trust" \
      "containers-storage:[vfs@$dir/cache/images+$dir/run/images]$ref" "docker://$registry/fbk/$name:$tag"
  fi
  digest_of "fbk/$name:$tag"
}
# tags name the binary, so a rebuilt binary is a new image
bintag() { sha256sum "$1" | cut -c1-12; }
pause_ref=$registry/fbk/pause:$PAUSE_VERSION-$(bintag "$bin/pause")
pause_digest=$(small_image pause "${pause_ref##*:}" /pause "$bin/pause")
coredns_digest=$(small_image coredns "${COREDNS_VERSION#v}-$(bintag "$bin/coredns")" /coredns "$bin/coredns")
mpiop_digest=$(small_image mpi-operator "${MPI_OPERATOR_VERSION#v}-$(bintag "$bin/mpi-operator")" \
  /opt/mpi-operator "$bin/mpi-operator")
[ -n "$pause_digest" ] && [ -n "$coredns_digest" ] && [ -n "$mpiop_digest" ] || die "an image push failed"
stage "pause, coredns and mpi-operator images in $registry"
image_digest=$(digest_of "fabbench:$image_tag")
if [ -z "$image_digest" ]; then
  log "pushing $image to $registry/fabbench:$image_tag"
  timeout 900 skopeo copy --quiet --dest-cert-dir "$pki/trust" --digestfile "$dir/fabbench.digest" \
    "containers-storage:$image" "docker://$registry/fabbench:$image_tag"
  image_digest=$(digest_of "fabbench:$image_tag")
fi
[ -n "$image_digest" ] || die "fabbench's image is not in the registry"
stage "fabbench image $registry/fabbench@$image_digest"

wait_for "kube-controller-manager" 60 curl -sfk "https://$addr:10257/healthz"
wait_for "kube-scheduler" 60 curl -sfk "https://$addr:10259/healthz"
stage "control plane"

# 7. Node daemons: containerd, kubelet, kube-proxy per node, in the node's network namespace,
# with their own state folders and cgroups.
for ((i = 0; i < nodes; i++)); do
  n=$dir/nodes/$i
  r=$dir/run/$i
  mkdir -p "$n"/{containerd,kubelet,pod-logs,cni,cni-ipam,opt} "$r"/{s,runc}
  cg_make "fbk-$i"
  cg_make "fbk-sys-$i"
  nsenter --net="/run/netns/${node_ns[i]}" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
    net.bridge.bridge-nf-call-iptables=1
  cat >"$n/containerd.toml" <<EOF
version = 4
root = "$n/containerd"
state = "$r/containerd"
imports = []

[plugins.'io.containerd.server.v1.grpc']
  address = "$r/containerd.sock"

[plugins.'io.containerd.server.v1.ttrpc']
  address = "$r/containerd.sock.ttrpc"

[plugins.'io.containerd.server.v1.debug']
  address = ""

[plugins.'io.containerd.internal.v1.opt']
  path = "$n/opt"

[plugins.'io.containerd.image-verifier.v1.bindir']
  bin_dir = "$n/opt/image-verifier/bin"

[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.shim.v1.manager']
  socket_dir = "$r/s"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "$pause_ref"

[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = "$certs_d"

[plugins.'io.containerd.transfer.v1.local']
  config_path = "$certs_d"

[plugins.'io.containerd.cri.v1.runtime']
  # no CAP_SYS_RESOURCE on these machines: nothing may lower its oom_score_adj
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = []

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "$n/cni"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "$bin/runc"
  Root = "$r/runc"
  SystemdCgroup = false
EOF
  cat >"$n/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /fbk-$i
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://$r/containerd.sock
address: ${node_ip[i]}
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
tlsCertFile: $pki/kubelet-$i.crt
tlsPrivateKeyFile: $pki/kubelet-$i.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
clusterDNS: [$dns_ip]
clusterDomain: cluster.local
resolvConf: ""
podLogsDir: $n/pod-logs
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
volumePluginDir: $dir/flexvolume
EOF
  cat >"$n/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: fbk-$i
clientConnection: {kubeconfig: $dir/kubeconfigs/kube-proxy.kubeconfig}
clusterCIDR: $pod_cidr
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  node_daemon "containerd-$i" "$i" "$bin/containerd" --config "$n/containerd.toml"
done
for ((i = 0; i < nodes; i++)); do
  wait_for "containerd of fbk-$i" 60 ctr -a "$dir/run/$i/containerd.sock" version
  node_daemon "kubelet-$i" "$i" "$bin/kubelet" --config="$dir/nodes/$i/kubelet.yaml" \
    --kubeconfig="$dir/kubeconfigs/node-$i.kubeconfig" --root-dir="$dir/nodes/$i/kubelet" \
    --cert-dir="$dir/nodes/$i/kubelet/pki" --hostname-override="fbk-$i" --node-ip="${node_ip[i]}" -v=1
  node_daemon "kube-proxy-$i" "$i" "$bin/kube-proxy" --config="$dir/nodes/$i/kube-proxy.yaml" -v=1
done
stage "node daemons started"

pod_cidr_of() {  # I: node fbk-I's pod CIDR (fails while it has none)
  local c
  c=$(kc get node "fbk-$1" -o jsonpath='{.spec.podCIDR}' 2>/dev/null) && [ -n "$c" ] && echo "$c"
}
nodes_ready() {
  local s n
  s=" $(kc get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}') "
  for n in "${names[@]}"; do [[ $s == *" $n=True "* ]] || return 1; done
}

# 8. CNI per node once it has its pod /24; routes so that pod traffic between nodes crosses the
# emulated (shaped) links; in the root namespace (apiserver -> pods) through the bridge.
cidr=()
for ((i = 0; i < nodes; i++)); do
  wait_for "node fbk-$i's pod CIDR" 120 pod_cidr_of "$i"
  cidr[i]=$(pod_cidr_of "$i")
  cat >"$dir/nodes/$i/cni/10-fbk.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "fbk", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "${cidr[i]}"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$dir/nodes/$i/cni-ipam"}},
  {"type": "loopback"}]}
EOF
  ip route replace "${cidr[i]}" via "${node_ip[i]}" dev "$bridge"
done
for ((i = 0; i < nodes; i++)); do
  for ((j = 0; j < nodes; j++)); do
    [ "$i" = "$j" ] || ip -n "${node_ns[i]}" route replace "${cidr[j]}" via "${node_ip[j]}" dev "$iface"
  done
  # Service addresses from the node's own network (hostNetwork pods: the health check's): a
  # socket needs a route before kube-proxy's OUTPUT rules can rewrite the address, and the
  # node namespaces have no default route ("Network is unreachable" for CoreDNS otherwise)
  ip -n "${node_ns[i]}" route replace "$svc_cidr" dev "$iface"
done
wait_for "nodes Ready" 180 nodes_ready
stage "nodes Ready: ${names[*]}"

# 9. CoreDNS (no upstream: the host's resolver is outside 198.18.0.0/15) and the mpi-operator.
cat >"$dir/manifests/coredns.yaml" <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      containers:
      - name: coredns
        image: $registry/fbk/coredns@$coredns_digest
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {containerPort: 53, name: dns, protocol: UDP}
        - {containerPort: 53, name: dns-tcp, protocol: TCP}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /health, port: 8080}, initialDelaySeconds: 10}
        resources: {requests: {cpu: 10m, memory: 32Mi}}
      volumes:
      - name: config
        configMap: {name: coredns, items: [{key: Corefile, path: Corefile}]}
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: $dns_ip
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF
kc apply -f "$dir/manifests/coredns.yaml" >/dev/null
sed "s#image: mpioperator/mpi-operator:.*#image: $registry/fbk/mpi-operator@$mpiop_digest#" \
  "$(dirname "$bin")/share/mpi-operator.yaml" >"$dir/manifests/mpi-operator.yaml"
grep -q "$mpiop_digest" "$dir/manifests/mpi-operator.yaml" || die "no mpi-operator image line to replace"
kc apply --server-side -f "$dir/manifests/mpi-operator.yaml" >/dev/null
kc -n kube-system rollout status deployment/coredns --timeout=120s >/dev/null \
  || die "CoreDNS did not become ready within 120 s"
stage "CoreDNS ready"
kc -n mpi-operator rollout status deployment/mpi-operator --timeout=120s >/dev/null \
  || die "the mpi-operator did not become ready within 120 s"
stage "mpi-operator ready"

# 10. The environment file tests source.
env_file=$dir/env
mkdir -p "$dir/client/helm" "$dir/client/kube-cache"
{
  printf 'export %s=%q\n' KUBECONFIG "$admin" KUBECTL "$bin/kubectl" HELM "$bin/helm" \
    KUBECACHEDIR "$dir/client/kube-cache" HELM_CACHE_HOME "$dir/client/helm/cache" \
    HELM_CONFIG_HOME "$dir/client/helm/config" HELM_DATA_HOME "$dir/client/helm/data" \
    IMAGE_REPOSITORY "$registry/fabbench" IMAGE_TAG "$image_tag" IMAGE_DIGEST "$image_digest" \
    IMAGE_SOURCE "$image" \
    MPI_OPERATOR_IMAGE "$registry/fbk/mpi-operator@$mpiop_digest" \
    FABBENCH_EMULATION "$emulation" FABBENCH_K8S_DIR "$dir" FABBENCH_K8S_BIN "$bin" \
    FABBENCH_K8S_NODES "${names[*]}" FABBENCH_K8S_NODE_ADDRESSES "${node_ip[*]}" \
    FABBENCH_K8S_NODE_VETHS "${node_veth[*]}" FABBENCH_K8S_POD_CIDRS "${cidr[*]}" \
    FABBENCH_K8S_LINK "$link" FABBENCH_K8S_SLOW_NODES "${slow_specs[*]}" \
    FABBENCH_K8S_REGISTRY "$registry" FABBENCH_K8S_CA "$pki/ca.crt" \
    FABBENCH_K8S_API_SERVER "https://$addr:6443" FABBENCH_K8S_BRIDGE "$bridge" \
    FABBENCH_K8S_BRIDGE_ADDRESS "$addr" FABBENCH_K8S_EMULATION_HOLDER "$holder" \
    FABBENCH_K8S_POD_CIDR "$pod_cidr" FABBENCH_K8S_SERVICE_CIDR "$svc_cidr" \
    FABBENCH_K8S_DNS "$dns_ip" FABBENCH_K8S_VERSION "$KUBERNETES_VERSION"
} >"$env_file"
ok=1
stage "ready: ${names[*]}"
echo "FABBENCH_K8S_ENV=$env_file"
