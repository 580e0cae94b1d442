#!/usr/bin/env bash
# The offline check of deploy/, run by .ci/run (xjob_check_deploy) and runnable alone:
#   bash .ci/deploy-check.sh
# 1. hadolint lints both Dockerfiles;
# 2. helm lints the chart and renders it with four sets of values (defaults with the demo app;
#    TLS, console, hard anti-affinity and an existing Secret; metrics and NetworkPolicy off;
#    the PrometheusRule on, which deploy/check.py compares with deploy/monitoring's rules);
# 3. kubeconform validates deploy/kubernetes/*.yaml and every rendering against the strict
#    Kubernetes schemas (unknown fields fail);
# 4. deploy/check.py checks what schemas cannot (on the manifests and the first two renderings;
#    the third turns off on purpose what it requires): the manifests against the binaries (flags,
#    variables, config keys, ports, probes), references between objects, the restricted Pod
#    Security rules, stable node ids, PDB and anti-affinity, NetworkPolicies, scrape
#    annotations, the app's preStop, matching tokens, compose, and .dockerignore.
# Needs the tools of .ci/deploy-tools.sh (installed on the first run) and, for the sidecar
# configs' `xjob-executor --check`, a built xjob-executor (cargo build -p xjob-sidecar).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
# Assigned first, so a failed install stops the check (set -e does not see into eval's argument).
tools=$(bash .ci/deploy-tools.sh)
eval "$tools"
out="${CARGO_TARGET_DIR:-target}/deploy-check"
mkdir -p "$out"

"$HADOLINT" deploy/docker/admin.Dockerfile deploy/docker/executor.Dockerfile
echo "hadolint: both Dockerfiles clean"

chart=deploy/helm/xjob
url=postgres://xjob:secret@postgres:5432/xjob
"$HELM" lint --quiet --strict "$chart" --kube-version "$KUBERNETES_VERSION" --set database.url="$url" >/dev/null
render() {
  local name=$1; shift
  "$HELM" template xjob "$chart" --kube-version "$KUBERNETES_VERSION" "$@" >"$out/$name.yaml"
}
render defaults --set database.url="$url" --set demoApp.enabled=true
render tls --set secrets.existingSecret=xjob-own --set demoApp.enabled=true \
  --set tls.enabled=true --set tls.secretName=xjob-tls --set tls.clientAuth=executors \
  --set admin.console.enabled=true --set admin.antiAffinity=hard --set admin.replicas=3
render minimal --set database.url="$url" --set metrics.enabled=false \
  --set networkPolicy.enabled=false --set admin.replicas=1
# The PrometheusRule is a CRD kubeconform has no schema for: deploy/check.py checks it instead.
render rules --set database.url="$url" --set metrics.prometheusRule.enabled=true \
  --set metrics.prometheusRule.labels.release=prometheus
echo "helm: chart linted and rendered four ways"

"$KUBECONFORM" -strict -summary -schema-location "$KUBE_SCHEMAS/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
  deploy/kubernetes/*.yaml "$out"/defaults.yaml "$out"/tls.yaml "$out"/minimal.yaml

python3 deploy/check.py \
  "--rendered=defaults=$out/defaults.yaml" \
  "--rendered=tls=$out/tls.yaml:xjob-own=database-url,bootstrap-token,executor-token" \
  "--prometheus-rule=$out/rules.yaml"
echo "deploy check: $(($(date +%s) - started)) s"
