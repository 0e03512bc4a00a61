{{/* The scheduler configuration file (Volcano's volcano-scheduler.conf format) from values. */}}
{{- define "tephra.scheduler.conf" -}}
{{- $c := .Values.scheduler.config -}}
actions: {{ join ", " $c.actions | quote }}
tiers:
{{ toYaml $c.tiers }}
{{- with $c.configurations }}
configurations:
{{ toYaml . }}
{{- end }}
{{- with $c.metrics }}
metrics:
{{ toYaml . | indent 2 }}
{{- end }}
{{- end -}}
