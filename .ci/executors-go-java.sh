#!/usr/bin/env bash
# Builds the Go and Java executor SDKs (sdks/go, sdks/java) and, when the executor
# conformance suite is present (tests/tests/executor_conformance.rs), runs it against both.
#
# Everything downloaded lands outside the clone, under $XJOB_CI_CACHE (default
# /var/cache/xjob-ci): Go's module and build caches and the two protoc plugins, and Maven's local
# repository (protoc and the gRPC plugin for Java come from it as artifacts). Installs are
# idempotent, so a second run only builds. Each stage prints how long it took.
#
# Needs: go and java/mvn (on this machine kind), protoc from Debian's protobuf-compiler (installed
# here when missing). Called from .ci/run; runs from anywhere. XJOB_EXECUTORS_GO_JAVA_SUITE=0
# builds and checks only, for a caller that runs one suite over every language.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

cache=${XJOB_CI_CACHE:-/var/cache/xjob-ci}
mkdir -p "$cache"
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOBIN="$cache/go/bin"
export GOFLAGS=-buildvcs=false
export PATH="$GOBIN:$PATH"
maven=(mvn -B -q -Dstyle.color=never "-Dmaven.repo.local=$cache/m2")

stage_started=0
stage() {
  local now
  now=$(date +%s)
  if ((stage_started > 0)); then echo "   (${stage_name}: $((now - stage_started)) s)"; fi
  stage_name=$1
  stage_started=$now
  [[ -n "$1" ]] && echo "== executors (Go, Java): $1"
  return 0
}
all_started=$(date +%s)

stage "tools: protoc, Go plugins"
for tool in go java mvn; do
  command -v "$tool" >/dev/null || { echo "$tool is required (part of this machine kind)" >&2; exit 1; }
done
if ! command -v protoc >/dev/null; then
  apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null
fi
# The versions generate.sh pins: the generated Go code names them.
gen_go=$(sed -n 's/^PROTOC_GEN_GO_VERSION=//p' sdks/go/scripts/generate.sh)
gen_go_grpc=$(sed -n 's/^PROTOC_GEN_GO_GRPC_VERSION=//p' sdks/go/scripts/generate.sh)
if ! protoc-gen-go --version 2>/dev/null | grep -q "$gen_go"; then
  go install "google.golang.org/protobuf/cmd/protoc-gen-go@$gen_go"
fi
if ! protoc-gen-go-grpc --version 2>/dev/null | grep -q "${gen_go_grpc#v}"; then
  go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$gen_go_grpc"
fi
protoc --version

stage "Go: generated code up to date, vet, test, build"
sdks/go/scripts/generate.sh --check
(cd sdks/go && go vet ./... && go test ./... && go build -o example-executor ./cmd/example-executor)

stage "Java: mvn package (library, Spring Boot starter, example; generates from the library's proto copy)"
(cd sdks/java && "${maven[@]}" package)
ls -l sdks/java/xjob-executor-example/target/xjob-executor-example.jar

# The suite's entries for these two executors (XJOB_CONFORMANCE_EXECUTOR syntax), printed so a
# caller that runs one suite over every language can reuse them.
# NAME@session: the same example in session dispatch (XJOB_DISPATCH=session, no port).
java_example="java -jar $repo/sdks/java/xjob-executor-example/target/xjob-executor-example.jar"
spec="go=$repo/sdks/go/example-executor; go@session=$repo/sdks/go/example-executor"
spec="$spec; java=$java_example; java@session=$java_example"
echo "== executors (Go, Java): conformance entries: $spec"
if [[ "${XJOB_EXECUTORS_GO_JAVA_SUITE:-1}" == 0 ]]; then
  echo "== executors (Go, Java): suite skipped (XJOB_EXECUTORS_GO_JAVA_SUITE=0)"
elif [[ -f tests/tests/executor_conformance.rs ]]; then
  stage "conformance suite against Go and Java"
  export XJOB_CONFORMANCE_EXECUTOR="$spec"
  cargo test -p xjob-tests --test executor_conformance -- --nocapture
else
  echo "== executors (Go, Java): no conformance suite in this tree (tests/tests/executor_conformance.rs); skipped"
fi
stage ""
echo "== executors (Go, Java): done in $(($(date +%s) - all_started)) s"
