#!/usr/bin/env bash
# Builds Jaeger v2 (OTLP receiver + query API, in-memory storage) once into the CI cache, for
# the tracing tests. Jaeger comes from the Go module proxy: `go install …@version` is refused
# because of its replace directives, so it is built inside a throw-away module that pins it as a
# tool. The first build takes tens of minutes on a 2-core machine; later runs reuse the binary.
# Prints the binary's path on its last line.
set -euo pipefail
JAEGER_VERSION="${JAEGER_VERSION:-v1.76.0}"
CACHE="${XJOB_CI_CACHE:-/var/cache/xjob-ci}"
OUT="$CACHE/jaeger-$JAEGER_VERSION/jaeger"
if [ -x "$OUT" ]; then
  echo "$OUT"
  exit 0
fi
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOFLAGS=-mod=mod
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$OUT")"
(
  cd "$work"
  go mod init xjob-jaeger-build >/dev/null 2>&1
  go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION" >&2
  go build -o "$OUT.tmp" github.com/jaegertracing/jaeger/cmd/jaeger >&2
)
mv "$OUT.tmp" "$OUT"
echo "$OUT"
