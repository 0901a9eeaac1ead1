{{/* The health check's pod script (healthcheck.yaml), run by /bin/sh -c with the arguments
FABBENCH OUT PREFIX, then the benchmark's launch ("$@", less its --out): every pod runs the
benchmark; index 0's pod, whose rank 0 wrote OUT, judges it against the floors, then labels the
nodes, sets their condition (healthCheck.conditionType) and taints the failed ones
(healthCheck.taint; healthCheck.dryRun changes nothing). The pod exits with the run's code when
it failed, else verify's (0 every floor met, 1 a floor failed, 2 bad input); a verdict that
could not be labelled fails it too. The values written into it are the schema's: a condition
type's characters, an effect of three, booleans. */}}
{{- define "fabbench.healthCheckScript" -}}
{{- $hc := .Values.healthCheck -}}
set -u
fabbench=$1 out=$2 prefix=$3
shift 3
"$@" --out "$out" || exit
[ "$FABBENCH_NODE_RANK" = 0 ] || exit 0
"$fabbench" floors verify --floors /etc/fabbench/floors.toml "$out" --json /tmp/verdict.json
verdict=$?
[ "$verdict" -le 1 ] || exit "$verdict"
"$fabbench" floors label-nodes /tmp/verdict.json --prefix "$prefix" --condition {{ $hc.conditionType | squote }}
{{- if $hc.taint }} --taint --taint-effect {{ $hc.taintEffect | squote }}{{ end }}
{{- if $hc.dryRun }} --dry-run{{ end }} || exit
exit "$verdict"
{{- end }}

{{/* A node group's CronJob name: at most 48 characters, so that its Jobs (which add
-<minutes>, 9 characters) keep their pods' host names, <job>-<index>, within 63. Takes (list
context group). */}}
{{- define "fabbench.healthCheckName" -}}
{{- $name := include "fabbench.fullname" (index . 0) }}
{{- $group := (index . 1).name }}
{{- printf "%s-%s" ($name | trunc (int (sub 47 (len $group))) | trimSuffix "-") $group }}
{{- end }}
