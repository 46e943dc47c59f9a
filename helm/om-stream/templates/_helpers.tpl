{{- define "om-stream.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "om-stream.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "om-stream.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "om-stream.selectorLabels" -}}
app.kubernetes.io/name: {{ include "om-stream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "om-stream.labels" -}}
helm.sh/chart: {{ include "om-stream.chart" . }}
{{ include "om-stream.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: worker
{{- end }}

{{- define "om-stream.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "om-stream.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "om-stream.secretName" -}}
{{- default (include "om-stream.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* Topic partitions: every worker past this count sits idle (the application's default is 12). */}}
{{- define "om-stream.partitions" -}}
{{- int (default 12 .Values.settings.OM_KAFKA_PARTITIONS) }}
{{- end }}

{{/* "true" when the pod reads a Secret: a secret value is set here, or existingSecret names one. */}}
{{- define "om-stream.hasSecrets" -}}
{{- $found := false }}
{{- range $key, $value := .Values.secrets }}{{- if $value }}{{- $found = true }}{{- end }}{{- end }}
{{- if or $found .Values.existingSecret }}true{{- end }}
{{- end }}
