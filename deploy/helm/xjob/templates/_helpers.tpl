{{/* Names and labels shared by every object of the chart. */}}

{{- define "xjob.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "xjob.admin" -}}{{ include "xjob.fullname" . }}-admin{{- end -}}

{{- define "xjob.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: xjob
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "xjob.adminSelector" -}}
app.kubernetes.io/name: xjob-admin
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "xjob.demoSelector" -}}
app.kubernetes.io/name: {{ .Values.demoApp.appName }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The Secret with database-url, bootstrap-token and executor-token. */}}
{{- define "xjob.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "xjob.fullname" .) -}}
{{- end -}}

{{/* Pod-level security context: passes the "restricted" Pod Security Standard. */}}
{{- define "xjob.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "xjob.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The admin's address as executors and clients dial it. */}}
{{- define "xjob.adminUrl" -}}
{{- printf "%s://%s:%v" (ternary "https" "http" .Values.tls.enabled) (include "xjob.admin" .) .Values.admin.grpcPort -}}
{{- end -}}
