#!/usr/bin/env bash
# Builds grpcurl once into the CI cache, for the test that runs the README's and
# docs/security.md's grpcurl commands against a real admin (tests/tests/e2e/grpcurl.rs). grpcurl
# comes from the Go module proxy with a plain `go install …@version` (it has no replace
# directives); GOMODCACHE/GOCACHE are the ones the Go executor build uses, so the grpc-go modules
# they share are downloaded once. The first build takes about a minute on a 2-core machine; later
# runs reuse the binary. Progress and timing go to stderr; the binary's path is the last line on
# stdout.
set -euo pipefail
GRPCURL_VERSION="${GRPCURL_VERSION:-v1.9.3}"
CACHE="${XJOB_CI_CACHE:-/var/cache/xjob-ci}"
BIN_DIR="$CACHE/grpcurl-$GRPCURL_VERSION"
OUT="$BIN_DIR/grpcurl"
if [ -x "$OUT" ]; then
  echo "grpcurl $GRPCURL_VERSION: cached" >&2
  echo "$OUT"
  exit 0
fi
command -v go >/dev/null || { echo "go is required (part of this machine kind)" >&2; exit 1; }
started=$(date +%s)
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOBIN="$BIN_DIR"
mkdir -p "$BIN_DIR"
# Outside any module, so the repository's go.mod files play no part in the build.
(cd / && go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION" >&2)
echo "grpcurl $GRPCURL_VERSION: built in $(($(date +%s) - started)) s" >&2
echo "$OUT"
