{{/* Chart name. */}}
{{- define "fabbench.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the release name (with the chart's name unless it holds it), at most 52
characters so the MPI operator's and the Job's pod names stay within 63. */}}
{{- define "fabbench.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "fabbench.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels. */}}
{{- define "fabbench.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fabbench.name" . | quote }}
app.kubernetes.io/instance: {{ include "fabbench.fullname" . | quote }}
{{- end }}

{{/* Standard labels. */}}
{{- define "fabbench.labels" -}}
{{ include "fabbench.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: "benchmark"
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ include "fabbench.chart" . | quote }}
{{- end }}

{{/* The primitive registry's data (files/primitives.yaml, generated from fabbench.comm.primitives). */}}
{{- define "fabbench.primitives" -}}
{{- .Files.Get "files/primitives.yaml" | fromYaml | toJson }}
{{- end }}

{{/* The primitive: unless given, the registry's default rule (files/primitives.yaml "default"):
nccl with GPUs, else mpi. */}}
{{- define "fabbench.primitive" -}}
{{- $d := (include "fabbench.primitives" . | fromJson).default }}
{{- if .Values.primitive }}{{ .Values.primitive }}{{ else if gt (int .Values.gpusPerNode) 0 }}{{ $d.gpu }}{{ else }}{{ $d.cpu }}{{ end }}
{{- end }}

{{/* The registry's entry of the primitive as JSON: backend (the profile section; horovod runs
over mpi), launch (mpi: an MPIJob; rendezvous: an Indexed Job), over, gpuOnly. */}}
{{- define "fabbench.primitiveSpec" -}}
{{- $all := (include "fabbench.primitives" . | fromJson).primitives }}
{{- $p := include "fabbench.primitive" . }}
{{- $spec := get $all $p }}
{{- if not $spec }}{{ fail (printf "primitive %q is not in files/primitives.yaml" $p) }}{{ end }}
{{- toJson $spec }}
{{- end }}

{{/* The profile section the primitive uses. */}}
{{- define "fabbench.backend" -}}
{{- (include "fabbench.primitiveSpec" . | fromJson).backend }}
{{- end }}

{{/* How the ranks start: mpi (an MPIJob) or rendezvous (an Indexed Job and a Service). A
study always runs as an MPIJob: its launcher starts each cell with mpirun over the workers. */}}
{{- define "fabbench.launch" -}}
{{- if .Values.study }}mpi{{ else }}{{ (include "fabbench.primitiveSpec" . | fromJson).launch }}{{ end }}
{{- end }}

{{/* The fabric's profile data (files/fabrics.yaml, generated from the fabric profiles). */}}
{{- define "fabbench.profile" -}}
{{- $profiles := .Files.Get "files/fabrics.yaml" | fromYaml }}
{{- $fabric := get $profiles .Values.fabric }}
{{- if not $fabric }}{{ fail (printf "fabric %q is not in files/fabrics.yaml" .Values.fabric) }}{{ end }}
{{- toJson $fabric }}
{{- end }}

{{- define "fabbench.ranksPerNode" -}}
{{- max 1 (int .Values.gpusPerNode) }}
{{- end }}

{{/* The fabric profile's section as JSON {"env": {...}, "mca": {...}}, with its gpudirect.on|off
settings over it when gpudirect is not auto, placeholders filled from iface/rdmaDevice; a
variable whose placeholder has no value is left out (each rank fills it in), the rule of
fabbench.render.fabric. */}}
{{- define "fabbench.fabric" -}}
{{- $fabric := include "fabbench.profile" . | fromJson }}
{{- $wire := get $fabric.wires .Values.wire }}
{{- if not $wire }}{{ fail (printf "fabric %q has no wire %q" .Values.fabric .Values.wire) }}{{ end }}
{{- $section := get $wire (include "fabbench.backend" .) }}
{{- $gdr := dict "env" dict "mca" dict }}
{{- if ne .Values.gpudirect "auto" }}
{{- $gdr = get (get $section "gpudirect") .Values.gpudirect | default $gdr }}
{{- if and (eq .Values.gpudirect "on") (not (hasKey (get $section "gpudirect") "on")) }}
{{- fail (printf "fabric %q (wire %s) has no GPUDirect for %s: gpudirect on is not possible (use auto or off)" .Values.fabric .Values.wire (include "fabbench.backend" .)) }}
{{- end }}
{{- end }}
{{- $fill := dict "{iface}" .Values.iface "{rdma_device}" .Values.rdmaDevice }}
{{- $out := dict "env" dict "mca" dict }}
{{- range $kind := list "env" "mca" }}
{{- range $key, $raw := merge (deepCopy (get $gdr $kind | default dict)) (get $section $kind) }}
{{- $value := toString $raw }}
{{- range $ph, $given := $fill }}
{{- if $given }}{{ $value = replace $ph $given $value }}{{ end }}
{{- end }}
{{- if not (regexMatch "\\{[a-z_]+\\}" $value) }}
{{- $_ := set (get $out $kind) $key $value }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* The image the pods run: repository@digest when image.digest pins it, else
repository:tag, the tag by default the chart's appVersion in the flavour the job needs
(<appVersion>-cuda with GPUs, else <appVersion>-cpu), as fabbench.render.context.default_image
names it. */}}
{{- define "fabbench.image" -}}
{{- $i := .Values.image }}
{{- if $i.digest }}
{{- printf "%s@%s" $i.repository $i.digest }}
{{- else }}
{{- $flavour := ternary "cuda" "cpu" (gt (int .Values.gpusPerNode) 0) }}
{{- printf "%s:%s" $i.repository ($i.tag | default (printf "%s-%s" .Chart.AppVersion $flavour)) }}
{{- end }}
{{- end }}

{{/* What every rank is told of the image it runs: FABBENCH_IMAGE_REF (its results record the
reference, and the digest when the reference holds one), as a JSON object. */}}
{{- define "fabbench.imageEnv" -}}
{{- dict "FABBENCH_IMAGE_REF" (include "fabbench.image" .) | toJson }}
{{- end }}

{{/* Whether the results volume is an emptyDir (neither results.claim nor results.hostPath):
"true" or "". */}}
{{- define "fabbench.resultsEphemeral" -}}
{{- if and (not .Values.results.claim) (not .Values.results.hostPath) }}true{{ end }}
{{- end }}

{{/* What fabbench tells every rank beyond the fabric's settings, as a JSON object: the image
(fabbench.imageEnv), and FABBENCH_RESULTS_TO_LOG=1 when the results volume is an emptyDir, gone
with the pod: rank 0 then writes its finished results file into its log, between markers that
`fabbench from-log` reads (launch.results_log). With a claim or a hostPath the file stays and
the log stays short (a sweep of many ranks writes megabytes of records, past the kubelet's log
rotation). */}}
{{- define "fabbench.runEnv" -}}
{{- $env := include "fabbench.imageEnv" . | fromJson }}
{{- if include "fabbench.resultsEphemeral" . }}{{ $_ := set $env "FABBENCH_RESULTS_TO_LOG" "1" }}{{ end }}
{{- toJson $env }}
{{- end }}

{{/* Every variable the ranks get, MCA parameters as OMPI_MCA_*, and fabbench's own
(fabbench.runEnv), as a JSON object. */}}
{{- define "fabbench.env" -}}
{{- $f := include "fabbench.fabric" . | fromJson }}
{{- $env := deepCopy $f.env }}
{{- range $k, $v := $f.mca }}{{ $_ := set $env (printf "OMPI_MCA_%s" $k) $v }}{{ end }}
{{- toJson (merge $env (include "fabbench.runEnv" . | fromJson)) }}
{{- end }}

{{/* The variable that names the Kubernetes node a pod runs on (the downward API's
spec.nodeName): the records name each rank's host by it (launch.world.host_name), so the
health check labels the nodes it judged. */}}
{{- define "fabbench.nodeNameEnv" -}}
- name: FABBENCH_NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- end }}

{{/* The environment of an Indexed Job's rank container (and of its check before the job): its
index, node, world size, rendezvous at index 0's pod, and every variable of fabbench.env. Takes
a dict: ctx, name (the job's), ranks. */}}
{{- define "fabbench.indexedEnv" -}}
- name: FABBENCH_NODE_RANK
  valueFrom:
    fieldRef:
      fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"
{{ include "fabbench.nodeNameEnv" .ctx }}
- name: FABBENCH_WORLD_SIZE
  value: {{ .ranks | toString | toJson }}
- name: MASTER_ADDR
  value: {{ printf "%s-0.%s" .name .name | toJson }}
- name: MASTER_PORT
  value: {{ .ctx.Values.masterPort | toString | toJson }}
{{- include "fabbench.envList" (include "fabbench.env" .ctx | fromJson) }}
{{- end }}

{{/* `fabbench run`'s arguments: per field of the run configuration (files/run-options.yaml,
generated from fabbench.config), its value when it differs from the field's default, written as
RunConfig.to_argv writes it (whole numbers as such, other numbers as Go's %v, which is Python's
fabbench.config.number_text); then benchmark.extraArgs (none of them an option it declares:
`fabbench render` refuses those too), then --out. The primitive, Horovod's
controller and the device are decided here, as `fabbench render k8s` decides them. */}}
{{- define "fabbench.runArgs" -}}
{{- $spec := include "fabbench.primitiveSpec" . | fromJson }}
{{- $decided := dict "primitive" (include "fabbench.primitive" .) "over" $spec.over "device" (ternary "cuda" "cpu" (gt (int .Values.gpusPerNode) 0)) }}
{{- $args := list "run" }}
{{- $options := (.Files.Get "files/run-options.yaml" | fromYaml).options }}
{{- range $options }}
{{- $v := "" }}
{{- if .decided }}{{ $v = get $decided .decided }}
{{- else if .in }}{{ $v = index $.Values .in .value }}
{{- else }}{{ $v = index $.Values .value }}{{ end }}
{{- $default := "" }}
{{- if not (kindIs "invalid" .default) }}{{ $default = toString .default }}{{ end }}
{{- if not (kindIs "invalid" $v) }}
{{- if eq .kind "switch" }}
{{- if ne (toString $v) $default }}{{ $args = append $args (ternary .flag .negative $v) }}{{ end }}
{{- else }}
{{- $text := toString $v }}
{{- if and (eq .kind "int") (ne $text "") }}{{ $text = printf "%d" (int64 $v) }}{{ end }}
{{- if and (ne $text "") (ne $text $default) }}{{ $args = concat $args (list .flag $text) }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- $b := .Values.benchmark }}
{{- range $arg := $b.extraArgs }}
{{- $flag := regexReplaceAll "=.*" $arg "" }}
{{- range $options }}
{{- if or (eq $flag .flag) (eq $flag (.negative | default "")) }}
{{- fail (printf "benchmark.extraArgs: %s is an option fabbench declares: set its value (%s) instead" $flag (.value | default .decided)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $args = concat $args $b.extraArgs }}
{{- $out := printf "%s/%s-%s.jsonl" (trimSuffix "/" .Values.results.path) (include "fabbench.fullname" .) ($b.label | default $b.workload | default "collectives") }}
{{- toJson (concat $args (list "--out" $out)) }}
{{- end }}

{{/* What a pod runs, as fabbench's launchers.pod.Pod.launch composes it (files/launchers.yaml,
generated from the launchers): the render family's line, unless a pod of one rank runs the program
bare, with {name} filled in and each group written per MCA parameter or exported variable (in
name order), then the program. As JSON, every word in Kubernetes' syntax: the line's words as
the file holds them, the values filled in and the program's words with a '$' as '$$'. Takes a
dict: ctx (the chart's context), family, program (words), mca (name -> value), exports (a dict
whose names are exported). */}}
{{- define "fabbench.podLaunch" -}}
{{- $data := .ctx.Files.Get "files/launchers.yaml" | fromYaml }}
{{- $pod := get $data.pods .family }}
{{- if not $pod }}{{ fail (printf "render family %q is not in files/launchers.yaml" .family) }}{{ end }}
{{- $perNode := include "fabbench.ranksPerNode" .ctx | int }}
{{- $nodes := int .ctx.Values.nodes }}
{{- $values := dict "hostfile" $data.hostfile "ranks" (mul $nodes $perNode) "nodes" $nodes "per_node" $perNode }}
{{- $lists := dict "mca" list "exports" list }}
{{- range $k, $v := .mca }}{{ $_ := set $lists "mca" (append $lists.mca (dict "key" $k "value" $v)) }}{{ end }}
{{- range $k, $_ := .exports }}{{ $_ := set $lists "exports" (append $lists.exports (dict "key" $k)) }}{{ end }}
{{- $out := list }}
{{- if not (and $pod.bareWhenOne (eq $perNode 1)) }}
{{- range $part := $pod.line }}
{{- if kindIs "string" $part }}
{{- $out = append $out (include "fabbench.fillWord" (list $part $values)) }}
{{- else }}
{{- range $item := get $lists $part.each }}
{{- range $word := $part.words }}{{ $out = append $out (include "fabbench.fillWord" (list $word $item)) }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- range .program }}{{ $out = append $out (replace "$" "$$" (toString .)) }}{{ end }}
{{- toJson $out }}
{{- end }}

{{/* A word of files/launchers.yaml with each {name} of the dict given filled in (the value
with a '$' as '$$'). Takes (list word dict). */}}
{{- define "fabbench.fillWord" -}}
{{- $word := index . 0 }}
{{- range $name, $value := index . 1 }}{{ $word = replace (printf "{%s}" $name) (replace "$" "$$" (toString $value)) $word }}{{ end }}
{{- $word }}
{{- end }}

{{/* Words already in Kubernetes' syntax, one list item each. */}}
{{- define "fabbench.wordList" -}}
{{- range . }}
- {{ toString . | toJson }}
{{- end }}
{{- end }}

{{/* Container arguments: Kubernetes expands $(VAR), so a literal '$' is written '$$'. */}}
{{- define "fabbench.argList" -}}
{{- range . }}
- {{ replace "$" "$$" (toString .) | toJson }}
{{- end }}
{{- end }}

{{- define "fabbench.envList" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | toJson }}
{{- end }}
{{- end }}

{{- define "fabbench.resources" -}}
{{- $r := dict }}
{{- if gt (int .Values.gpusPerNode) 0 }}{{ $_ := set $r .Values.gpuResource (int .Values.gpusPerNode) }}{{ end }}
{{- if .Values.rdma.resource }}{{ $_ := set $r .Values.rdma.resource (int .Values.rdma.perNode) }}{{ end }}
{{- toJson $r }}
{{- end }}

{{/* Whether the ranks register memory with the NIC (RDMA: a fabric whose native wire has
device files, files/fabrics.yaml "devices"): "true" or "". Only they get IPC_LOCK, which no
Pod Security level but privileged admits (docs/security.md). */}}
{{- define "fabbench.registersMemory" -}}
{{- if include "fabbench.devices" . | fromJsonArray }}true{{ end }}
{{- end }}

{{/* The Pod Security Standard the release's pods need, and why, as JSON {"level", "why"}: the
strictest level that admits every pod (docs/security.md). */}}
{{- define "fabbench.podSecurity" -}}
{{- if .Values.healthCheck.enabled }}{{ dict "level" "privileged" "why" "the health check's pods run on the nodes' network (hostNetwork)" | toJson }}
{{- else if .Values.hostNetwork }}{{ dict "level" "privileged" "why" "hostNetwork: the pods run on the nodes' network" | toJson }}
{{- else if .Values.results.hostPath }}{{ dict "level" "privileged" "why" "results.hostPath mounts a directory of the node (a hostPath volume)" | toJson }}
{{- else if include "fabbench.registersMemory" . }}{{ dict "level" "privileged" "why" (printf "the %s fabric registers memory with the NIC: its ranks add the capability IPC_LOCK" .Values.fabric) | toJson }}
{{- else if eq (include "fabbench.launch" .) "mpi" }}{{ dict "level" "baseline" "why" "the MPIJob's workers run the image's sshd as root" | toJson }}
{{- else }}{{ dict "level" "restricted" "why" "the ranks run as a user, with no capability, on a read-only root filesystem" | toJson }}
{{- end }}
{{- end }}

{{/* The pod securityContext of pods whose ranks run as the image's user (securityContext
values): what Pod Security restricted asks of a pod. */}}
{{- define "fabbench.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: {{ int .Values.securityContext.runAsUser }}
  runAsGroup: {{ int .Values.securityContext.runAsGroup }}
  fsGroup: {{ int .Values.securityContext.fsGroup }}
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{/* The pod securityContext of the MPIJob's pods, root (sshd, the operator's keys at
/root/.ssh): what Pod Security baseline admits. */}}
{{- define "fabbench.rootSecurityContext" -}}
securityContext:  # root: sshd, and the operator's keys at /root/.ssh
  runAsUser: 0
  runAsGroup: 0
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{/* A container's securityContext. Takes a dict: ctx, root (the MPIJob's sshd and mpirun:
root's default capabilities and a writable root filesystem), ipcLock (the ranks' containers:
IPC_LOCK when the fabric registers memory). */}}
{{- define "fabbench.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  {{- if not .root }}
  readOnlyRootFilesystem: true
  {{- end }}
  {{- if or (not .root) (and .ipcLock (include "fabbench.registersMemory" .ctx)) }}
  capabilities:
    {{- if not .root }}
    drop: ["ALL"]
    {{- end }}
    {{- if and .ipcLock (include "fabbench.registersMemory" .ctx) }}
    add: ["IPC_LOCK"]
    {{- end }}
  {{- end }}
{{- end }}

{{/* A container's resources: the values' requests and limits (resources, or helperResources
for the containers that hold no rank, or those given), the GPUs and RDMA devices of the ranks'
containers among the limits. Takes a dict: ctx, ranks (bool), given (when there: the requests
and limits of a container of its own, healthCheck.judgeResources). */}}
{{- define "fabbench.containerResources" -}}
{{- $v := .ctx.Values }}
{{- $given := ternary .given (ternary $v.resources $v.helperResources .ranks) (hasKey . "given") | default dict }}
{{- $requests := dict }}{{ range $k, $q := ($given.requests | default dict) }}{{ $_ := set $requests $k (toString $q) }}{{ end }}
{{- $limits := dict }}{{ range $k, $q := ($given.limits | default dict) }}{{ $_ := set $limits $k (toString $q) }}{{ end }}
{{- if .ranks }}{{ range $k, $n := include "fabbench.resources" .ctx | fromJson }}{{ $_ := set $limits $k (int $n) }}{{ end }}{{ end }}
{{- if or $requests $limits }}
resources:
  {{- with $requests }}
  requests:
    {{- range $k, $q := . }}
    {{ $k }}: {{ $q | toJson }}
    {{- end }}
  {{- end }}
  {{- with $limits }}
  limits:
    {{- range $k, $q := . }}
    {{ $k }}: {{ $q | toJson }}
    {{- end }}
  {{- end }}
{{- end }}
{{- end }}

{{/* What a container whose root filesystem is read-only is told: HOME and TMPDIR on the /tmp
emptyDir. */}}
{{- define "fabbench.tmpEnv" -}}
- name: HOME
  value: "/tmp"
- name: TMPDIR
  value: "/tmp"
{{- end }}

{{/* The rank container's security, resources and mounts. Takes a dict: ctx, root (the MPIJob's
workers). */}}
{{- define "fabbench.containerTail" -}}
{{ include "fabbench.containerSecurity" (dict "ctx" .ctx "root" .root "ipcLock" true) }}
{{- include "fabbench.containerResources" (dict "ctx" .ctx "ranks" true) }}
volumeMounts:
  - name: dshm
    mountPath: /dev/shm
  - name: tmp
    mountPath: /tmp
  - name: results
    mountPath: {{ .ctx.Values.results.path | toJson }}
{{- end }}

{{/* The pods that hold ranks (the Job's, the MPIJob's workers) carry fabbench.dev/role: ranks and
go one to a node: a node's ranks are the ones the run places there, and a run asking for more nodes
than the cluster has waits unscheduled (and says so) instead of doubling ranks up on one node. */}}
{{- define "fabbench.onePerNode" -}}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "fabbench.selectorLabels" . | nindent 12 }}
            fabbench.dev/role: "ranks"
{{- end }}

{{/* Pod settings shared by the Job, the MPIJob's workers and the health check: no service
account token (the ranks talk to no Kubernetes API), the volumes. */}}
{{- define "fabbench.podCommon" -}}
{{- if .Values.hostNetwork }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
automountServiceAccountToken: false
volumes:
  - name: dshm
    emptyDir:
      medium: Memory
      sizeLimit: {{ .Values.shmSize | toJson }}
  - name: tmp
    emptyDir: {}
  - name: results
    {{- if .Values.results.claim }}
    persistentVolumeClaim:
      claimName: {{ .Values.results.claim | toJson }}
    {{- else if .Values.results.hostPath }}
    hostPath:
      path: {{ .Values.results.hostPath | toJson }}
      type: DirectoryOrCreate
    {{- else }}
    emptyDir: {}
    {{- end }}
{{- end }}

{{/* What fabbench render k8s refuses, decided by the profile and registry data. */}}
{{- define "fabbench.check" -}}
{{- if and .Values.results.claim .Values.results.hostPath }}
{{- fail "results.claim and results.hostPath name two places for the results: set one" }}
{{- end }}
{{- if and (include "fabbench.profile" . | fromJson).singleHost (gt (int .Values.nodes) 1) }}
{{- fail (printf "fabric %s works within one host only: set nodes=1" .Values.fabric) }}
{{- end }}
{{- if and (include "fabbench.primitiveSpec" . | fromJson).gpuOnly (eq (int .Values.gpusPerNode) 0) }}
{{- fail (printf "%s moves GPU buffers only: set gpusPerNode" (include "fabbench.primitive" .)) }}
{{- end }}
{{- if and (ne .Values.gpudirect "auto") (eq (int .Values.gpusPerNode) 0) }}
{{- fail (printf "gpudirect %s is about GPU buffers: set gpusPerNode" .Values.gpudirect) }}
{{- end }}
{{- with .Values.preflight }}{{ if .enabled }}
{{- if $.Values.healthCheck.enabled }}
{{- fail "preflight checks a job before it starts, and healthCheck runs no job of its own: enable one of them" }}
{{- end }}
{{- if or $.Values.study (ne (include "fabbench.launch" $) "rendezvous") }}
{{- fail (printf "preflight runs in the Indexed Job's pods: %s runs as an MPIJob; set primitive gloo (or nccl with gpusPerNode)" (ternary "a study" (include "fabbench.primitive" $) (not (empty $.Values.study)))) }}
{{- end }}
{{- if not (trim .floors) }}
{{- fail "preflight.floors is empty: give the floors file's content (--set-file preflight.floors=site.toml, docs/floors.md)" }}
{{- end }}
{{- end }}{{ end }}
{{- end }}

{{/* The check before the job (preflight.enabled): an init container's script, run by /bin/sh
-c with the launch of a short allreduce judged against the floors ("$@": `fabbench run ...
--floors`, rank 0 judging, every rank ending with the verdict). Its output goes to the log as it
comes; on a failure the FAIL line (else fabbench's error, or the line naming rank 0) is the
container's termination message, which `kubectl describe` and the pod's status show.
`fabbench render k8s --preflight` writes the same (render/k8s.py PREFLIGHT_SCRIPT). */}}
{{- define "fabbench.preflightScript" -}}
set -u
{ "$@"; echo "$?" > /tmp/preflight.code; } 2>&1 | tee /tmp/preflight.log
code=$(cat /tmp/preflight.code)
[ "$code" = 0 ] && exit 0
{ grep '^FAIL' /tmp/preflight.log || grep 'fabbench: error\|missed the floors' /tmp/preflight.log; } | head -c 4096 > /dev/termination-log
exit "$code"
{{- end }}

{{/* The device files the fabric needs on its native wire (the profile's "devices"), as JSON. */}}
{{- define "fabbench.devices" -}}
{{- if eq .Values.wire "native" }}{{ (include "fabbench.profile" . | fromJson).devices | toJson }}{{ else }}[]{{ end }}
{{- end }}
