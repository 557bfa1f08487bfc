{{/* The chart's name, or nameOverride. */}}
{{- define "agent-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of every object: fullnameOverride, else the release name if it contains the chart's name, else "<release>-<name>". */}}
{{- define "agent-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "agent-operator.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The operator's ServiceAccount: the chart's own (serviceAccount.name, default the fullname), or an existing one when serviceAccount.create is false. */}}
{{- define "agent-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "agent-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: stable across upgrades. */}}
{{- define "agent-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agent-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "agent-operator.labels" -}}
{{ include "agent-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations of every object, if any. */}}
{{- define "agent-operator.annotations" -}}
{{- with .Values.commonAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Leader election: on when asked, and always with more than one replica. */}}
{{- define "agent-operator.leaderElect" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicaCount) 1) -}}true{{- end -}}
{{- end -}}

{{/* The image reference: digest over tag, tag defaults to appVersion. */}}
{{- define "agent-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
The operator's rules on the resources it reconciles: those of
deploy/overlays/cluster-wide/rbac.yaml, where each is explained (a test
checks that both stay equal).
*/}}
{{- define "agent-operator.rules" -}}
# AgentDeployments: list + watch (the controller's watcher), get (re-read
# before a create and after a delete), patch (the finalizer and the
# annotations). No update: nothing replaces a whole object.
- apiGroups: ["agentserver.dev"]
  resources: ["agentdeployments"]
  verbs: ["get", "list", "watch", "patch"]
# AgentControlPlanes and AgentListeners: their controllers and reflectors
# (list + watch), a plane or listener absent from the store (get); the
# finalizer agentserver.dev/in-use of a plane that AgentDeployments use (patch).
- apiGroups: ["agentserver.dev"]
  resources: ["agentcontrolplanes"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["agentserver.dev"]
  resources: ["agentlisteners"]
  verbs: ["get", "list", "watch"]
# AgentAssistants: their controller (list + watch), the finalizer
# agentserver.dev/assistant-cleanup (patch).
- apiGroups: ["agentserver.dev"]
  resources: ["agentassistants"]
  verbs: ["get", "list", "watch", "patch"]
# AgentCrons: their controller (list + watch), the finalizer
# agentserver.dev/cron-cleanup (patch).
- apiGroups: ["agentserver.dev"]
  resources: ["agentcrons"]
  verbs: ["get", "list", "watch", "patch"]
# Statuses: server-side apply on the status subresource, a patch.
- apiGroups: ["agentserver.dev"]
  resources: ["agentdeployments/status", "agentcontrolplanes/status", "agentlisteners/status", "agentassistants/status", "agentcrons/status"]
  verbs: ["patch"]
# Secrets referenced by the resources, read only: get (the value), list +
# watch (metadata only, to notice a change).
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"]
# ConfigMaps named by spec.verify.suite.configMapRef: get, when the suite
# is due; no list, no watch.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get"]
# Events: one created per transition, through core/v1 so that it carries
# lastTimestamp; never patched into a series.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}
