{{/*
Names, labels and small shared fragments for the Tephra chart.
*/}}

{{- define "tephra.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tephra.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of a component's objects: tephra.componentName (dict "root" $ "component" "scheduler") */}}
{{- define "tephra.componentName" -}}
{{- printf "%s-%s" (include "tephra.fullname" .root | trunc 50 | trimSuffix "-") .component -}}
{{- end -}}

{{- define "tephra.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tephra.labels" -}}
helm.sh/chart: {{ include "tephra.chart" . }}
app.kubernetes.io/name: {{ include "tephra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tephra
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of a component: tephra.componentLabels (dict "root" $ "component" "scheduler") */}}
{{- define "tephra.componentLabels" -}}
{{ include "tephra.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tephra.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tephra.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* ServiceAccount name of a component. */}}
{{- define "tephra.serviceAccountName" -}}
{{- $sa := index .root.Values .component "serviceAccount" -}}
{{- if $sa.create -}}
{{- default (include "tephra.componentName" .) $sa.name -}}
{{- else -}}
{{- default "default" $sa.name -}}
{{- end -}}
{{- end -}}

{{- define "tephra.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Environment every component gets: its own pod and namespace (used for the leader Lease). */}}
{{- define "tephra.commonEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
- name: PYTHONUNBUFFERED
  value: "1"
{{- end -}}

{{/* Pod-level scheduling fields of a component: nodeSelector, affinity, tolerations, ... */}}
{{- define "tephra.podPlacement" -}}
{{- $c := index .root.Values .component -}}
{{- with $c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Webhook names. */}}
{{- define "tephra.webhook.serviceName" -}}
{{- include "tephra.componentName" (dict "root" . "component" "webhook") -}}
{{- end -}}

{{- define "tephra.webhook.secretName" -}}
{{- printf "%s-tls" (include "tephra.componentName" (dict "root" . "component" "webhook")) -}}
{{- end -}}

{{- define "tephra.webhook.certificateName" -}}
{{- printf "%s-cert" (include "tephra.componentName" (dict "root" . "component" "webhook")) -}}
{{- end -}}

{{/*
The ledger source: "secret" (existing Secret), "url" (value stored in a chart Secret) or "sqlite".
*/}}
{{- define "tephra.ledger.mode" -}}
{{- if .Values.ledger.existingSecret.name -}}
secret
{{- else if .Values.ledger.url -}}
url
{{- else -}}
sqlite
{{- end -}}
{{- end -}}

{{- define "tephra.ledger.secretName" -}}
{{- if .Values.ledger.existingSecret.name -}}
{{- .Values.ledger.existingSecret.name -}}
{{- else -}}
{{- printf "%s-ledger" (include "tephra.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "tephra.ledger.secretKey" -}}
{{- if .Values.ledger.existingSecret.name -}}
{{- .Values.ledger.existingSecret.key -}}
{{- else -}}
url
{{- end -}}
{{- end -}}

{{- define "tephra.ledger.claimName" -}}
{{- default (printf "%s-ledger" (include "tephra.fullname" .)) .Values.ledger.sqlite.persistence.existingClaim -}}
{{- end -}}

{{/* True ("true") when the SQLite file sits on a volume only one node may mount. */}}
{{- define "tephra.ledger.sqliteSingleNode" -}}
{{- $p := .Values.ledger.sqlite.persistence -}}
{{- if and (eq (include "tephra.ledger.mode" .) "sqlite") $p.enabled (not (has "ReadWriteMany" $p.accessModes)) -}}
true
{{- end -}}
{{- end -}}

{{/* Fail early on contradictory values (the schema checks types; this checks combinations). */}}
{{- define "tephra.validateValues" -}}
{{- if and .Values.ledger.existingSecret.name .Values.ledger.url -}}
{{- fail "ledger: set either ledger.existingSecret.name or ledger.url, not both" -}}
{{- end -}}
{{- if and .Values.webhook.enabled (not .Values.webhook.certManager.enabled) .Values.webhook.certManager.issuerRef -}}
{{- fail "webhook.certManager.issuerRef is set but webhook.certManager.enabled is false" -}}
{{- end -}}
{{- if and .Values.scheduler.enabled (not .Values.scheduler.leaderElect) (gt (int .Values.scheduler.replicas) 1) -}}
{{- fail "scheduler: more than one replica needs scheduler.leaderElect=true (two active schedulers would double-book nodes)" -}}
{{- end -}}
{{- if and .Values.controller.enabled (not .Values.controller.leaderElect) (gt (int .Values.controller.replicas) 1) -}}
{{- fail "controller: more than one replica needs controller.leaderElect=true" -}}
{{- end -}}
{{- end -}}

{{/* Fields shared by every webhook entry: dict "v" webhook values, "svc", "ns", "path". */}}
{{- define "tephra.webhook.common" -}}
admissionReviewVersions: ["v1"]
sideEffects: None
timeoutSeconds: {{ .v.timeoutSeconds }}
clientConfig:
  {{- with .caBundle }}
  caBundle: {{ . }}
  {{- end }}
  service:
    name: {{ .svc }}
    namespace: {{ .ns }}
    path: {{ .path }}
    port: 443
{{- end -}}

{{/*
The CA bundle of the self-signed webhook certificate when its Secret already exists (upgrades), so
that a re-applied webhook configuration keeps trusting the webhook; empty on a first install (the
post-install hook writes it) and under `helm template`. cert-manager's cainjector fills it otherwise.
*/}}
{{- define "tephra.webhook.caBundle" -}}
{{- if not .Values.webhook.certManager.enabled -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "tephra.webhook.secretName" .) -}}
{{- if and $secret $secret.data -}}
{{- index $secret.data "ca.crt" | default "" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* logLevel as the scheduler's and controller's -v flags (none = warnings and errors). */}}
{{- define "tephra.verbosityArgs" -}}
{{- if eq .Values.logLevel "debug" -}}
- -vv
{{- else if eq .Values.logLevel "info" -}}
- -v
{{- end -}}
{{- end -}}
