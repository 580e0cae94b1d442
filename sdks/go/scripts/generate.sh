#!/usr/bin/env bash
# Regenerates xjobpb/ (the Go protobuf and gRPC code) from ../../proto/xjob/v1, as Go projects
# check generated code in. `--check` regenerates into a scratch folder and fails when the
# checked-in files differ (CI runs it), so a proto change cannot land without its Go code.
#
# Needs protoc (Debian's protobuf-compiler) and the two Go plugins at the pinned versions below,
# on PATH or in $GOBIN; .ci/executors-go-java.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned so that every machine generates the same bytes (the versions are written into the files).
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
GO_PACKAGE=xjob.dev/sdk/go/xjobpb

if [[ -n "${GOBIN:-}" ]]; then PATH="$GOBIN:$PATH"; fi
PATH="$(go env GOPATH)/bin:$PATH"
for tool in protoc protoc-gen-go protoc-gen-go-grpc; do
  command -v "$tool" >/dev/null || { echo "generate.sh: $tool not found" >&2; exit 1; }
done
protoc-gen-go --version | grep -q "$PROTOC_GEN_GO_VERSION" ||
  { echo "generate.sh: protoc-gen-go must be $PROTOC_GEN_GO_VERSION" >&2; exit 1; }
protoc-gen-go-grpc --version | grep -q "${PROTOC_GEN_GO_GRPC_VERSION#v}" ||
  { echo "generate.sh: protoc-gen-go-grpc must be $PROTOC_GEN_GO_GRPC_VERSION" >&2; exit 1; }

out_dir=xjobpb
if [[ "${1:-}" == "--check" ]]; then
  out_dir=$(mktemp -d)
  trap 'rm -rf "$out_dir"' EXIT
fi

# The proto files carry no go_package option (the contract is language-neutral): M flags map
# each file to this module's package instead.
protos=(xjob/v1/common.proto xjob/v1/admin.proto xjob/v1/executor.proto xjob/v1/registry.proto)
mappings=()
for proto in "${protos[@]}"; do
  mappings+=("--go_opt=M$proto=$GO_PACKAGE" "--go-grpc_opt=M$proto=$GO_PACKAGE")
done
protoc -I ../../proto \
  --go_out="$out_dir" --go_opt=paths=source_relative \
  --go-grpc_out="$out_dir" --go-grpc_opt=paths=source_relative \
  "${mappings[@]}" "${protos[@]}"
# paths=source_relative writes xjob/v1/*.go; the package is flat.
mv "$out_dir"/xjob/v1/*.go "$out_dir"/
rm -rf "${out_dir:?}/xjob"

if [[ "${1:-}" == "--check" ]]; then
  # The protoc version line differs between distributions and says nothing about the code.
  if ! diff -ru -I "^// 	protoc  " xjobpb "$out_dir"; then
    echo "generate.sh: xjobpb/ is out of date; run sdks/go/scripts/generate.sh" >&2
    exit 1
  fi
  echo "generate.sh: xjobpb/ is up to date"
fi
