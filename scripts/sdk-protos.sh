#!/usr/bin/env bash
# Copies the executor's part of the wire contract (proto/xjob/v1/{common,registry,executor}.proto)
# into the Python, Node.js and Java SDKs, so each builds from its own folder alone (a wheel or an
# sdist, an npm tarball, a Maven artifact carry their proto files with them). The Go SDK checks
# in its generated code instead (sdks/go/scripts/generate.sh).
#
#   scripts/sdk-protos.sh           # copy after editing a .proto
#   scripts/sdk-protos.sh --check   # fail when a copy differs from proto/ (CI runs this)
set -euo pipefail
cd "$(dirname "$0")/.."

files=(common registry executor)
targets=(sdks/python/proto sdks/node/proto sdks/java/xjob-executor/src/main/proto)
stale=0
for target in "${targets[@]}"; do
  for name in "${files[@]}"; do
    source="proto/xjob/v1/$name.proto" copy="$target/xjob/v1/$name.proto"
    if [[ "${1:-}" == "--check" ]]; then
      if ! cmp -s "$source" "$copy"; then
        echo "sdk-protos: $copy differs from $source; run scripts/sdk-protos.sh" >&2
        stale=1
      fi
    else
      mkdir -p "$(dirname "$copy")"
      cp "$source" "$copy"
    fi
  done
done
exit "$stale"
