#!/usr/bin/env bash
# Builds the tools the offline deploy/ check uses, once, into the CI cache:
#   helm         renders and lints the chart (deploy/helm/xjob)
#   kubeconform  validates every manifest against the Kubernetes JSON schemas
# and fetches the Kubernetes OpenAPI document those schemas are made from. All three come from
# the Go module proxy: the tools with a plain `go install …@version` (neither has replace
# directives), the OpenAPI document as the file api/openapi-spec/swagger.json of the
# k8s.io/kubernetes module at the Kubernetes version we validate against. Nothing else is
# reached. GOMODCACHE/GOCACHE are the ones the other Go builds of CI use.
# Progress goes to stderr; the last three stdout lines are the helm binary, the kubeconform
# binary and the swagger.json path.
set -euo pipefail
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
KUBECONFORM_VERSION="${KUBECONFORM_VERSION:-v0.8.0}"
KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.34.2}"
CACHE="${XJOB_CI_CACHE:-/var/cache/xjob-ci}"
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOFLAGS=-buildvcs=false

# go install PACKAGE VERSION BINARY: builds into $CACHE/BINARY-VERSION unless already there.
build() {
  local package=$1 version=$2 binary=$3
  local dir="$CACHE/$binary-$version"
  if [ ! -x "$dir/$binary" ]; then
    command -v go >/dev/null || { echo "go is required (part of this machine kind)" >&2; exit 1; }
    local started; started=$(date +%s)
    mkdir -p "$dir"
    # Outside any module, so the repository's go.mod files play no part in the build.
    (cd / && GOBIN="$dir" go install "$package@$version" >&2)
    echo "$binary $version: built in $(($(date +%s) - started)) s" >&2
  else
    echo "$binary $version: cached" >&2
  fi
  echo "$dir/$binary"
}

build helm.sh/helm/v3/cmd/helm "$HELM_VERSION" helm
build github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION" kubeconform

swagger="$GOMODCACHE/k8s.io/kubernetes@$KUBERNETES_VERSION/api/openapi-spec/swagger.json"
if [ ! -f "$swagger" ]; then
  started=$(date +%s)
  (cd / && go mod download "k8s.io/kubernetes@$KUBERNETES_VERSION" >&2)
  echo "Kubernetes $KUBERNETES_VERSION OpenAPI: downloaded in $(($(date +%s) - started)) s" >&2
fi
echo "$swagger"
