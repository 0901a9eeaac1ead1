{{/* The health check's judge (healthcheck.yaml: the pod's container, after the benchmark's
init container), run by /bin/sh -c with the arguments FABBENCH OUT PREFIX: on index 0's pod,
whose rank 0 wrote OUT, it judges the results against the floors, then labels the nodes, sets
their condition (healthCheck.conditionType) and taints the failed ones (healthCheck.taint;
healthCheck.dryRun changes nothing), with the labeller's token, which only this container
holds; other indexes end at once. It exits with verify's code (0 every floor met, 1 a floor
failed, 2 bad input); a verdict that could not be labelled fails it too. (A failed run fails
the init container, and the pod, before this starts.) The values written into it are the
schema's: a condition type's characters, an effect of three, booleans. */}}
{{- define "fabbench.healthCheckScript" -}}
{{- $hc := .Values.healthCheck -}}
set -u
fabbench=$1 out=$2 prefix=$3
[ "$FABBENCH_NODE_RANK" = 0 ] || exit 0
"$fabbench" floors verify --floors /etc/fabbench/floors.toml "$out" --json /tmp/verdict.json
verdict=$?
[ "$verdict" -le 1 ] || exit "$verdict"
"$fabbench" floors label-nodes /tmp/verdict.json --prefix "$prefix" --condition {{ $hc.conditionType | squote }}
{{- if $hc.taint }} --taint --taint-effect {{ $hc.taintEffect | squote }}{{ end }}
{{- if $hc.dryRun }} --dry-run{{ end }} || exit
exit "$verdict"
{{- end }}

{{/* The environment of a health check's benchmark (its init container): its index, node,
job, world size, rendezvous at index 0's pod of this Job, and every variable of fabbench.env.
Takes a dict: ctx (the group's), name (the release's full name). */}}
{{- define "fabbench.healthCheckEnv" -}}
- name: FABBENCH_NODE_RANK
  valueFrom:
    fieldRef:
      fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"
{{ include "fabbench.nodeNameEnv" .ctx }}
- name: FABBENCH_JOB_NAME
  valueFrom:
    fieldRef:
      fieldPath: "metadata.labels['batch.kubernetes.io/job-name']"
- name: FABBENCH_WORLD_SIZE
  value: {{ mul .ctx.Values.nodes (include "fabbench.ranksPerNode" .ctx | int) | toString | toJson }}
- name: MASTER_ADDR
  value: {{ printf "$(FABBENCH_JOB_NAME)-0.%s" .name | toJson }}
- name: MASTER_PORT
  value: {{ .ctx.Values.masterPort | toString | toJson }}
{{- include "fabbench.envList" (include "fabbench.env" .ctx | fromJson) }}
{{- end }}

{{/* What the health check refuses at install: floors whose rules can never be judged, each
rule's workload (its `workload = "..."` line) one the check does not run (healthCheck.workload;
all runs collectives then train), or no rule at all: the check would end "nothing was judged"
every time. */}}
{{- define "fabbench.healthCheckFloors" -}}
{{- $hc := .Values.healthCheck }}
{{- $runs := ternary (list "collectives" "train") (list $hc.workload) (eq $hc.workload "all") }}
{{- $named := list }}
{{- range $line := regexFindAll "(?m)^[ \t]*workload[ \t]*=[ \t]*[\"'][^\"'\n]*[\"']" $hc.floors -1 }}
{{- $named = append $named (regexReplaceAll "^[^=]*=[ \t]*[\"']([^\"']*)[\"']$" $line "${1}") }}
{{- end }}
{{- $never := list }}
{{- range $named }}{{ if not (has . $runs) }}{{ $never = append $never . }}{{ end }}{{ end }}
{{- if not $named }}
{{- fail (printf "healthCheck.floors has no rule (no workload = \"...\" line): the check, which runs the %s workload, would judge nothing (docs/floors.md)" $hc.workload) }}
{{- else if $never }}
{{- fail (printf "healthCheck.floors: its rules of workload %s can never be judged: the check runs the %s workload (healthCheck.workload); set healthCheck.workload or give rules of %s" (join ", " (uniq $never)) $hc.workload (join " or " $runs)) }}
{{- end }}
{{- end }}

{{/* A node group's CronJob name: at most 48 characters, so that its Jobs (which add
-<minutes>, 9 characters) keep their pods' host names, <job>-<index>, within 63. Takes (list
context group). */}}
{{- define "fabbench.healthCheckName" -}}
{{- $name := include "fabbench.fullname" (index . 0) }}
{{- $group := (index . 1).name }}
{{- printf "%s-%s" ($name | trunc (int (sub 47 (len $group))) | trimSuffix "-") $group }}
{{- end }}
