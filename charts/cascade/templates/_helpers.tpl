{{/*
Names, labels and the RBAC rule sets shared by the templates.
*/}}

{{- define "cascade.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: release-chart, or just the release name when it already contains the chart name.
*/}}
{{- define "cascade.fullname" -}}
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

{{- define "cascade.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "cascade.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cascade.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The operator pods' selector labels as `k=v,...` (env CASCADE_OPERATOR_POD_LABELS): the
NetworkPolicies the operator builds name its pods by them.
*/}}
{{- define "cascade.operatorPodLabels" -}}
{{- printf "app.kubernetes.io/name=%s,app.kubernetes.io/instance=%s,app.kubernetes.io/component=operator" (include "cascade.name" .) .Release.Name }}
{{- end }}

{{- define "cascade.labels" -}}
helm.sh/chart: {{ include "cascade.chart" . }}
{{ include "cascade.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: cascade
{{- end }}

{{- define "cascade.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "cascade.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
An image reference from {repository, tag}; an empty tag means the chart's appVersion.
Usage: include "cascade.image" (list .Values.image.worker .Chart.AppVersion)
*/}}
{{- define "cascade.image" -}}
{{- $image := index . 0 }}
{{- $appVersion := index . 1 }}
{{- printf "%s:%s" $image.repository (default $appVersion $image.tag) }}
{{- end }}

{{/*
Rules on namespaced resources: granted cluster-wide (ClusterRole) when watchNamespaces is
empty, else per watched namespace (Role). No wildcards: every verb is listed.
*/}}
{{- define "cascade.namespacedRules" -}}
# kopf lists and watches what it handles and patches its finalizer and annotations onto
# ModelDeployments; the operator reads one (get), writes status and /scale (autoscaler).
- apiGroups: ["cascade.dev"]
  resources: ["modeldeployments"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["cascade.dev"]
  resources: ["modeldeployments/status", "modeldeployments/scale", "scaleplans/status"]
  verbs: ["patch"]
- apiGroups: ["cascade.dev"]
  resources: ["scaleplans"]
  verbs: ["list", "watch", "create", "delete", "deletecollection"]
# get: the gateway's Role grants get/list/watch on pods, and RBAC lets a subject grant
# only what it holds itself.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "create", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["create", "patch", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["create", "patch", "delete"]
- apiGroups: [""]
  resources: ["secrets"]  # each deployment's peer token: made once, read each reconcile
  verbs: ["get", "create", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["list", "create", "patch"]
# Where the Gateway API Inference Extension is installed: one InferencePool per
# deployment, read each reconcile, made once, its spec put back when changed (owner
# references delete it). Its members carry a pod label (pods patch, above).
- apiGroups: ["inference.networking.k8s.io"]
  resources: ["inferencepools"]
  verbs: ["get", "create", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end }}

{{/*
Rules on cluster-scoped resources, always in the ClusterRole: kopf scans CRDs to discover
its resources and lists/watches namespaces (for watchNamespaces globs); the planner and
the node-loss rule list nodes. Trimmed to what an audit of the operator's ServiceAccount
shows it uses (tests/integration/test_chart_install.py).
*/}}
{{- define "cascade.clusterRules" -}}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list"]
{{- end }}

{{/* The imagePullSecrets' names, comma-separated (CASCADE_IMAGE_PULL_SECRETS). */}}
{{- define "cascade.pullSecretNames" -}}
{{- $names := list -}}
{{- range .Values.imagePullSecrets }}{{- $names = append $names .name -}}{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{/* workers.annotations as k=v,k2=v2 (CASCADE_WORKER_ANNOTATIONS), sorted by key. */}}
{{- define "cascade.workerAnnotations" -}}
{{- $pairs := list -}}
{{- range $k, $v := .Values.workers.annotations }}{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}{{- end -}}
{{- join "," $pairs -}}
{{- end -}}
