{{/* The name of every object: the release name if it contains the chart's name, else "<release>-<chart>". */}}
{{- define "agent-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: stable across upgrades. */}}
{{- define "agent-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
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
# AgentControlPlanes: their controller and reflectors (list + watch), a
# plane absent from the store (get), the in-use finalizer
# agentserver.dev/in-use (patch). AgentListeners: their controller (list +
# watch), a listener absent from the store (get).
- apiGroups: ["agentserver.dev"]
  resources: ["agentcontrolplanes"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["agentserver.dev"]
  resources: ["agentlisteners"]
  verbs: ["get", "list", "watch"]
# Statuses: server-side apply on the status subresource, a patch.
- apiGroups: ["agentserver.dev"]
  resources: ["agentdeployments/status", "agentcontrolplanes/status", "agentlisteners/status"]
  verbs: ["patch"]
# Secrets referenced by the resources, read only: get (the value), list +
# watch (metadata only, to notice a change).
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"]
# Events: one created per transition; a fresh Recorder per event never
# patches a series.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}
