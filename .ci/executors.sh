#!/usr/bin/env bash
# Builds the Python and Node.js executor SDKs (sdks/python, sdks/node) and runs the
# executor conformance suite (tests/tests/executor_conformance.rs) against the Rust SDK's
# example, the Python one and the Node.js one, printing the scenario x executor table.
#
# Everything downloaded lands outside the clone, under $XJOB_CI_CACHE (default
# /var/cache/xjob-ci): a Python venv with grpcio and grpcio-tools plus pip's cache, and npm's
# cache. Installs are idempotent, so a second run only checks. Each stage prints how long it
# took. Needs python3 (with venv) and node/npm, both part of this machine kind. Called from
# .ci/run; runs from anywhere. XJOB_EXECUTORS_SUITE=0 builds and checks only, for a caller that
# runs one suite over every language.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

cache=${XJOB_CI_CACHE:-/var/cache/xjob-ci}
mkdir -p "$cache"
venv="$cache/python/venv"

stage_started=0
stage() {
  local now
  now=$(date +%s)
  if ((stage_started > 0)); then echo "   (${stage_name}: $((now - stage_started)) s)"; fi
  stage_name=$1
  stage_started=$now
  [[ -n "$1" ]] && echo "== executors (Python, Node.js): $1"
  return 0
}
all_started=$(date +%s)

stage "Python: venv with grpcio and grpcio-tools in $venv"
for tool in python3 node npm; do
  command -v "$tool" >/dev/null || { echo "$tool is required (part of this machine kind)" >&2; exit 1; }
done
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
pip=("$venv/bin/pip" --disable-pip-version-check --cache-dir "$cache/pip" -q)
"$venv/bin/python" -c "import grpc, grpc_tools, setuptools" 2>/dev/null ||
  "${pip[@]}" install "grpcio>=1.60" "grpcio-tools>=1.60" "protobuf>=4.25" "setuptools>=64" wheel

stage "Python: install sdks/python with its tracing extra (generates xjob_executor/_pb from its proto/ with grpcio-tools)"
# The build dependencies are in the venv already, so no isolated build env is downloaded.
"${pip[@]}" install --no-build-isolation -e "sdks/python[tracing]" # the extra: the suite checks spans
(cd / && "$venv/bin/python" -c "import xjob_executor, xjob_executor._pb.executor_pb2_grpc") # importable from anywhere
"$venv/bin/python" -m compileall -q sdks/python/xjob_executor sdks/python/example.py

stage "Python: unit tests (runner, run logs, session dispatch)"
(cd sdks/python && "$venv/bin/python" -m unittest discover -s tests)

stage "Node.js: npm ci (cache in $cache/npm)"
(cd sdks/node && npm ci --cache "$cache/npm" --prefer-offline --no-audit --no-fund --loglevel=error)
for file in sdks/node/example.js sdks/node/lib/*.js; do node --check "$file"; done

stage "Node.js: unit tests (runner, run logs, session dispatch)"
(cd sdks/node && npm test --silent)

# The suite's entries for these executors (XJOB_CONFORMANCE_EXECUTOR syntax), printed so a
# caller that runs one suite over every language can reuse them.
# NAME@session: the same example in session dispatch (XJOB_DISPATCH=session, no port).
spec="python=$venv/bin/python $repo/sdks/python/example.py; python@session=$venv/bin/python $repo/sdks/python/example.py"
spec="$spec; node=node $repo/sdks/node/example.js; node@session=node $repo/sdks/node/example.js"
echo "== executors (Python, Node.js): conformance entries: $spec"
if [[ "${XJOB_EXECUTORS_SUITE:-1}" == 0 ]]; then
  echo "== executors (Python, Node.js): suite skipped (XJOB_EXECUTORS_SUITE=0)"
else
  stage "conformance suite against Rust, Python and Node.js"
  export XJOB_CONFORMANCE_EXECUTOR="rust; $spec"
  cargo test -p xjob-tests --test executor_conformance -- --nocapture
fi

stage ""
echo "== executors (Python, Node.js): done in $(($(date +%s) - all_started)) s"
