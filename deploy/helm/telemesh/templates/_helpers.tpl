{{- /*
Helpers. The chart uses few template functions on purpose (include, nindent, quote, default,
toYaml, b64enc, randAlphaNum, lookup): tests/tests/deploy.rs renders it without helm, with those
functions implemented, to produce deploy/manifests/telemesh.yaml and to test the chart.
*/ -}}

{{- define "telemesh.labels" -}}
app.kubernetes.io/name: telemesh
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: telemesh
{{- end }}

{{- define "telemesh.agent.selectorLabels" -}}
app.kubernetes.io/name: telemesh
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end }}

{{- define "telemesh.agent.labels" -}}
{{ include "telemesh.labels" . }}
app.kubernetes.io/component: agent
{{- end }}

{{- define "telemesh.coordinator.selectorLabels" -}}
app.kubernetes.io/name: telemesh
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: coordinator
{{- end }}

{{- define "telemesh.coordinator.labels" -}}
{{ include "telemesh.labels" . }}
app.kubernetes.io/component: coordinator
{{- end }}

{{- define "telemesh.gossipSecretName" -}}
{{ .Values.gossip.existingSecret | default (printf "%s-gossip-key" .Release.Name) }}
{{- end }}

{{- /* The agents' headless Service: its DNS name resolves to every agent, the flat mesh's seeds. */ -}}
{{- define "telemesh.gossipSeeds" -}}
{{ .Release.Name }}-agents.{{ .Release.Namespace }}.svc:{{ .Values.agent.ports.gossip }}
{{- end }}

{{- /* The coordinators' gossip headless Service at their base port: cell i is at port + 1 + i. */ -}}
{{- define "telemesh.gossipCellSeeds" -}}
{{ .Release.Name }}-coordinator-gossip.{{ .Release.Namespace }}.svc:{{ .Values.coordinator.ports.gossip }}
{{- end }}
