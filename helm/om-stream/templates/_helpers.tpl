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

{{- define "om-stream.commonLabels" -}}
helm.sh/chart: {{ include "om-stream.chart" . }}
{{ include "om-stream.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "om-stream.labels" -}}
{{ include "om-stream.commonLabels" . }}
app.kubernetes.io/component: worker
{{- end }}

{{- define "om-stream.migrateLabels" -}}
{{ include "om-stream.commonLabels" . }}
app.kubernetes.io/component: migrations
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


{{- define "om-stream.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The OM_* variables the chart sets itself from other values: a settings key of the same name would be written
twice (the generated schema leaves out the ones settings_doc.CHART_MANAGED lists; this guard covers the rest). */}}
{{- define "om-stream.checkChartManaged" -}}
{{- range $key := list "OM_WORKER_WEB_HOST" "OM_WORKER_WEB_PORT" "OM_WORKER_METRICS_HOST" "OM_WORKER_METRICS_PORT" "OM_WORKER_ALLOW_UNAUTHENTICATED" "OM_KAFKA_GROUP_INSTANCE_ID" "OM_WORKER_API_TOKEN" "OM_WORKER_ROLE" }}
{{- if hasKey $.Values.settings $key }}
{{- fail (printf "settings.%s is set by the chart (service.port, metrics.port, apiAuth, staticMembership, secrets.OM_WORKER_API_TOKEN, models/recall.enabled): remove it from settings" $key) }}
{{- end }}
{{- end }}
{{- end }}

{{/* "true" unless the API runs without a bearer token (apiAuth.allowUnauthenticated). */}}
{{- define "om-stream.authRequired" -}}
{{- if not .Values.apiAuth.allowUnauthenticated }}true{{- end }}
{{- end }}

{{/* The data of the chart's own Secret as JSON (plain values; b64-encoded where rendered): every secrets.* value
set, plus OM_WORKER_API_TOKEN. A token given in secrets.OM_WORKER_API_TOKEN wins; else, with
apiAuth.generateToken, the token the release's Secret already holds (lookup: the cluster's copy survives
upgrades), else a new random one. Computed once per render (memoised in .Values) so the migration hook's copy of
the Secret holds the same token as the release's. Empty under existingSecret. */}}
{{- define "om-stream.secretData" -}}
{{- if not (hasKey .Values "omStreamSecretDataMemo") }}
{{- $data := dict }}
{{- if not .Values.existingSecret }}
{{- range $key, $value := .Values.secrets }}{{- if $value }}{{- $_ := set $data $key ($value | toString) }}{{- end }}{{- end }}
{{- if .Values.apiAuth.allowUnauthenticated }}
{{- if hasKey $data "OM_WORKER_API_TOKEN" }}
{{- fail "apiAuth.allowUnauthenticated is true but secrets.OM_WORKER_API_TOKEN is set: choose one" }}
{{- end }}
{{- else if not (hasKey $data "OM_WORKER_API_TOKEN") }}
{{- if not .Values.apiAuth.generateToken }}
{{- fail "the worker API needs a bearer token: set secrets.OM_WORKER_API_TOKEN (or existingSecret), or apiAuth.generateToken=true, or apiAuth.allowUnauthenticated=true (then only the NetworkPolicy guards /v1/*)" }}
{{- end }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "om-stream.fullname" .) }}
{{- $kept := "" }}
{{- if $existing }}{{- $kept = index (default (dict) $existing.data) "OM_WORKER_API_TOKEN" | default "" | b64dec }}{{- end }}
{{- $_ := set $data "OM_WORKER_API_TOKEN" (default (randAlphaNum 48) $kept) }}
{{- end }}
{{- end }}
{{- $_ := set .Values "omStreamSecretDataMemo" $data }}
{{- end }}
{{- toJson .Values.omStreamSecretDataMemo }}
{{- end }}

{{/* "true" when the pod reads a Secret: the chart renders one, or existingSecret names one. */}}
{{- define "om-stream.hasSecrets" -}}
{{- if or .Values.existingSecret (include "om-stream.secretData" . | fromJson) }}true{{- end }}
{{- end }}

{{/* The plain settings of the ConfigMap (the worker's and the migration hook's copy), as JSON. */}}
{{- define "om-stream.configData" -}}
{{- include "om-stream.checkChartManaged" . }}
{{- $data := dict }}
{{- range $key, $value := .Values.settings }}
{{- if not (kindIs "invalid" $value) }}{{- $_ := set $data $key ($value | toString) }}{{- end }}
{{- end }}
{{- $_ := set $data "OM_WORKER_WEB_HOST" "0.0.0.0" }}
{{- $_ := set $data "OM_WORKER_WEB_PORT" (.Values.service.port | toString) }}
{{- $_ := set $data "OM_WORKER_METRICS_HOST" "0.0.0.0" }}
{{- $_ := set $data "OM_WORKER_METRICS_PORT" (.Values.metrics.port | toString) }}
{{- $_ := set $data "OM_WORKER_ALLOW_UNAUTHENTICATED" (.Values.apiAuth.allowUnauthenticated | toString) }}
{{- if .Values.memoryConfig }}
{{- $_ := set $data "OM_MEMORY_CONFIG_FILE" "/etc/om-stream/memory.yaml" }}
{{- end }}
{{- with .Values.tracing }}
{{- if .endpoint }}
{{- $_ := set $data "OTEL_EXPORTER_OTLP_ENDPOINT" .endpoint }}
{{- $_ := set $data "OTEL_TRACES_SAMPLER" .sampler }}
{{- if .samplerArg }}{{- $_ := set $data "OTEL_TRACES_SAMPLER_ARG" .samplerArg }}{{- end }}
{{- if .resourceAttributes }}{{- $_ := set $data "OTEL_RESOURCE_ATTRIBUTES" .resourceAttributes }}{{- end }}
{{- end }}
{{- end }}
{{- if .Values.tracing.endpoint }}
{{- $_ := set $data "OTEL_SERVICE_NAME" (default (include "om-stream.fullname" .) .Values.tracing.serviceName) }}
{{- end }}
{{- toJson $data }}
{{- end }}

{{/* Cassandra migrations run as a pre-install/pre-upgrade hook Job. */}}
{{- define "om-stream.migrationsEnabled" -}}
{{- if and .Values.cassandraMigrations.enabled (eq (default "cassandra" .Values.settings.OM_MEMORY_STORE | toString) "cassandra") }}true{{- end }}
{{- end }}

{{/* envFrom + env of a container: the settings ConfigMap, the Secret, extraEnvFrom, the API token, extraEnv.
Arguments: dict "ctx" $ "configMap" NAME "secret" NAME ["groupInstance" true: the worker's pod name as its
static group member id] ["role" ROLE: OM_WORKER_ROLE] ["loopbackApi" true: OM_WORKER_WEB_HOST=127.0.0.1, for a
role without the /v1 API (its web server never starts; the exposure check still reads the host)]. */}}
{{- define "om-stream.containerEnv" -}}
{{- $ctx := .ctx -}}
envFrom:
  - configMapRef:
      name: {{ .configMap }}
  {{- if include "om-stream.hasSecrets" $ctx }}
  - secretRef:
      name: {{ .secret }}
  {{- end }}
  {{- with $ctx.Values.extraEnvFrom }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- $groupInstance := and .groupInstance $ctx.Values.staticMembership.enabled }}
{{- if or (include "om-stream.authRequired" $ctx) $ctx.Values.extraEnv $groupInstance .role }}
env:
  {{- with .role }}
  # the agents and consumer group of this workload (chart-managed: models.enabled splits the worker)
  - name: OM_WORKER_ROLE
    value: {{ . | quote }}
  {{- end }}
  {{- if .loopbackApi }}
  # no /v1 API in this role: explicit env wins over the ConfigMap's 0.0.0.0
  - name: OM_WORKER_WEB_HOST
    value: "127.0.0.1"
  {{- end }}
  {{- if include "om-stream.authRequired" $ctx }}
  # explicit (not only envFrom): a Secret without the key stops the pod with a message naming it
  - name: OM_WORKER_API_TOKEN
    valueFrom:
      secretKeyRef:
        name: {{ .secret }}
        key: OM_WORKER_API_TOKEN
  {{- end }}
  {{- if $groupInstance }}
  # static group membership: a restarted pod rejoins as itself and keeps its partitions without a rebalance,
  # when it is back within OM_KAFKA_SESSION_TIMEOUT_S
  - name: OM_KAFKA_GROUP_INSTANCE_ID
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
  {{- end }}
  {{- with $ctx.Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* volumeMounts of a container (the /tmp scratch, the memory options file, extraVolumeMounts). */}}
{{- define "om-stream.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.memoryConfig }}
- name: memory-config
  mountPath: /etc/om-stream
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* volumes behind om-stream.commonVolumeMounts. Arguments: dict "ctx" $ "memoryConfigMap" NAME. */}}
{{- define "om-stream.commonVolumes" -}}
- name: tmp
  emptyDir: {}
{{- if .ctx.Values.memoryConfig }}
- name: memory-config
  configMap:
    name: {{ .memoryConfigMap }}
{{- end }}
{{- with .ctx.Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* terminationGracePeriodSeconds: the preStop sleep, the drain of in-flight calls (OM_WORKER_DRAIN_TIMEOUT_S),
the shutdown (OM_WORKER_SHUTDOWN_TIMEOUT_S) and a margin, so the kubelet never SIGKILLs a worker that keeps its
promises. */}}
{{- define "om-stream.terminationGracePeriodSeconds" -}}
{{- $drain := default 45 .Values.settings.OM_WORKER_DRAIN_TIMEOUT_S | float64 }}
{{- $shutdown := default 30 .Values.settings.OM_WORKER_SHUTDOWN_TIMEOUT_S | float64 }}
{{- $sum := addf .Values.lifecycle.preStopSleepSeconds $drain $shutdown .Values.lifecycle.terminationMarginSeconds }}
{{- ceil $sum | int }}
{{- end }}

{{/* The startup probe's failureThreshold: enough periods to cover probes.startup.recoverySeconds. */}}
{{- define "om-stream.startupFailureThreshold" -}}
{{- $probe := .Values.probes.startup }}
{{- max 1 (ceil (divf $probe.recoverySeconds $probe.periodSeconds) | int) }}
{{- end }}

{{/* The HPA behaviour (also KEDA's) of an autoscaling block (.Values.autoscaling, models.autoscaling, ...):
every scale step is a consumer-group rebalance (and, for the worker, a table recovery), so steps are bounded and
stabilised both ways. */}}
{{- define "om-stream.scaleBehavior" -}}
{{- $a := . }}
scaleUp:
  stabilizationWindowSeconds: {{ $a.scaleUp.stabilizationWindowSeconds }}
  selectPolicy: Max
  policies:
    - {type: Pods, value: {{ $a.scaleUp.pods }}, periodSeconds: {{ $a.scaleUp.periodSeconds }}}
scaleDown:
  stabilizationWindowSeconds: {{ $a.scaleDown.stabilizationWindowSeconds }}
  selectPolicy: Min
  policies:
    - {type: Pods, value: {{ $a.scaleDown.pods }}, periodSeconds: {{ $a.scaleDown.periodSeconds }}}
{{- end }}

{{/* The worker StatefulSet's role: memory beside a models Deployment, else all (every agent in one group). */}}
{{- define "om-stream.workerRole" -}}
{{- if .Values.models.enabled }}memory{{ else }}all{{ end }}
{{- end }}

{{/* The components split off the worker (models, recall) that are enabled, as a JSON list. recall needs models:
beside an `all` worker every recall request would be answered twice (two consumer groups). */}}
{{- define "om-stream.components" -}}
{{- if and .Values.recall.enabled (not .Values.models.enabled) }}
{{- fail "recall.enabled needs models.enabled: the worker runs role all (recall included) unless the models are split off, and every recall request would be answered twice" }}
{{- end }}
{{- $on := list }}
{{- range $c := list "models" "recall" }}{{- if (index $.Values $c).enabled }}{{- $on = append $on $c }}{{- end }}{{- end }}
{{- toJson $on }}
{{- end }}

{{/* Selector labels of a component's pods. The name differs from the worker's (om-stream-<component>) so that
none of the worker's selectors (StatefulSet, Services, PDB, NetworkPolicy) picks them up: the StatefulSet's
selector cannot change on upgrade. Arguments: dict "ctx" $ "component" NAME. */}}
{{- define "om-stream.componentSelectorLabels" -}}
app.kubernetes.io/name: {{ include "om-stream.name" .ctx }}-{{ .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "om-stream.componentLabels" -}}
helm.sh/chart: {{ include "om-stream.chart" .ctx }}
{{ include "om-stream.componentSelectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end }}

{{/* Prometheus' job label of every scraped pod (the metrics Services' names), as a PromQL matcher. */}}
{{- define "om-stream.jobMatcher" -}}
{{- $full := include "om-stream.fullname" . }}
{{- $jobs := list (printf "%s-headless" $full) }}
{{- range $c := include "om-stream.components" . | fromJsonArray }}{{- $jobs = append $jobs (printf "%s-%s-metrics" $full $c) }}{{- end }}
{{- if eq (len $jobs) 1 }}job={{ first $jobs | quote }}{{ else }}job=~{{ join "|" $jobs | quote }}{{ end }}
{{- end }}

{{/* Startup, readiness and liveness probes on the metrics port, and the preStop sleep. */}}
{{- define "om-stream.probesAndLifecycle" -}}
startupProbe:
  httpGet: {path: /healthz, port: metrics}
  periodSeconds: {{ .Values.probes.startup.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.startup.timeoutSeconds }}
  failureThreshold: {{ include "om-stream.startupFailureThreshold" . }}
readinessProbe:
  httpGet: {path: /readyz, port: metrics}
  {{- toYaml .Values.probes.readiness | nindent 2 }}
livenessProbe:
  httpGet: {path: /livez, port: metrics}
  {{- toYaml .Values.probes.liveness | nindent 2 }}
lifecycle:
  preStop:
    # the pod is already out of the Services' endpoints; let kube-proxy and clients notice before SIGTERM
    exec:
      command: ["sleep", {{ .Values.lifecycle.preStopSleepSeconds | toString | quote }}]
{{- end }}

{{/* affinity + topologySpreadConstraints of a pod: the user's, else pods of the same workload preferably on
different nodes and spread over zones (never blocking scheduling). Arguments: dict "affinity" MAP "spread" LIST
"selector" YAML (matchLabels of the workload's pods). */}}
{{- define "om-stream.scheduling" -}}
affinity:
  {{- if .affinity }}
  {{- toYaml .affinity | nindent 2 }}
  {{- else }}
  # default: on different nodes when possible (a node loss then moves as few partitions as possible)
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- .selector | nindent 14 }}
  {{- end }}
topologySpreadConstraints:
  {{- if .spread }}
  {{- toYaml .spread | nindent 2 }}
  {{- else }}
  # default: spread over zones, never blocking scheduling (single-zone clusters still schedule)
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- .selector | nindent 8 }}
  {{- end }}
{{- end }}

{{/* The egress rules of a NetworkPolicy (networkPolicy.egress.restrict): DNS, then only egress.to. */}}
{{- define "om-stream.networkPolicyEgress" -}}
{{- if .Values.networkPolicy.egress.restrict -}}
egress:
  # DNS, then only what egress.to lists (Kafka, Cassandra, Qdrant, the model APIs)
  - ports:
      - {port: 53, protocol: UDP}
      - {port: 53, protocol: TCP}
  {{- with .Values.networkPolicy.egress.to }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end }}
