#!/usr/bin/env bash
# The four executor SDKs as a team installs them: each is built into its ecosystem's artifact
# from a copy of its own folder (so a build that reads ../../proto or any other repository path
# fails), installed into a new, empty project outside the checkout, and run there as an executor
# of a real admin (`xjob serve`) that triggers one job on it:
#
#   Python    a wheel and an sdist (the wheel built from the sdist) -> a fresh venv, pip install
#   Node.js   npm pack                      -> npm init -y + npm install; require() and import
#   Go        the module folder             -> a new module, `replace` to a copy of the folder
#   Java      mvn install of the library and the starter -> a new Maven project on the library,
#             and a Spring Boot app on the starter with an @XjobHandler method
#
# It fails when an installed package lacks its proto or generated files, or names a path into
# the checkout. Everything downloaded lands in $XJOB_CI_CACHE (default /var/cache/xjob-ci), as in
# .ci/executors.sh and .ci/executors-go-java.sh, which .ci/run calls first (their venv, Go and
# Maven caches are reused here). The admin is $XJOB_BIN, else the debug build in the target dir.
# Everything it starts is stopped on exit; its files go to a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

cache=${XJOB_CI_CACHE:-/var/cache/xjob-ci}
mkdir -p "$cache"
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOFLAGS=-buildvcs=false
maven=(mvn -B -q -Dstyle.color=never "-Dmaven.repo.local=$cache/m2")
npm_flags=(--cache "$cache/npm" --prefer-offline --no-audit --no-fund --loglevel=error)
xjob=${XJOB_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/xjob}
work=$(mktemp -d "${TMPDIR:-/tmp}/xjob-sdk-packages.XXXXXX")
case "$work" in "$repo"/*) echo "the work dir must be outside the checkout" >&2; exit 1 ;; esac
pids=()

cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

stage_started=0
stage() {
  local now
  now=$(date +%s)
  if ((stage_started > 0)); then echo "   (${stage_name}: $((now - stage_started)) s)"; fi
  stage_name=$1
  stage_started=$now
  [[ -n "$1" ]] && echo "== SDK packages: $1"
  return 0
}
fail() {
  echo "sdk-packages: FAILED: $*" >&2
  for log in "$work"/*.log; do
    [[ -f "$log" ]] || continue
    echo "--- last lines of $(basename "$log")" >&2
    tail -n 15 "$log" >&2
  done
  exit 1
}
all_started=$(date +%s)

stage "proto copies in the SDKs equal proto/"
scripts/sdk-protos.sh --check
[[ -x "$xjob" ]] || fail "no admin binary at $xjob (set XJOB_BIN or build xjob-admin)"
xjob=$(realpath "$xjob") # the admin starts from the work dir

stage "artifacts, each built from a copy of its SDK folder alone"
# Only the tracked files, so local build leftovers cannot help.
mkdir -p "$work/src" "$work/dist"
git ls-files -z -- sdks/python sdks/node sdks/go sdks/java | tar --null -T - -cf - | tar -xf - -C "$work/src"
venv="$cache/python/venv"
"$venv/bin/python" -c "import build" 2>/dev/null ||
  "$venv/bin/pip" --disable-pip-version-check --cache-dir "$cache/pip" -q install "build>=1.0"
"$venv/bin/python" -m build --no-isolation --sdist --outdir "$work/dist" "$work/src/sdks/python" >"$work/build-python.log" 2>&1 ||
  fail "python sdist"
mkdir -p "$work/sdist" && tar -xzf "$work"/dist/xjob_executor-*.tar.gz -C "$work/sdist"
"$venv/bin/python" -m build --no-isolation --wheel --outdir "$work/dist" "$work"/sdist/xjob_executor-* >>"$work/build-python.log" 2>&1 ||
  fail "python wheel from the sdist"
(cd "$work/src/sdks/node" && npm pack --pack-destination "$work/dist" "${npm_flags[@]}" >/dev/null) || fail "npm pack"
# The library and the starter (with their parent POM); the executors stage ran their tests. Not
# offline: on a fresh cache the install plugin is not there yet (package never needed it).
(cd "$work/src/sdks/java" && "${maven[@]}" -DskipTests -pl xjob-executor,xjob-spring-boot-starter -am install) \
  >"$work/build-java.log" 2>&1 || fail "mvn install"
ls -l "$work/dist"

stage "what the artifacts carry"
wheel=$(ls "$work"/dist/xjob_executor-*.whl)
unzip -l "$wheel" >"$work/wheel.txt"
for file in xjob_executor/py.typed xjob_executor/_pb/executor_pb2_grpc.py xjob_executor/_pb/registry_pb2.pyi; do
  grep -q " $file\$" "$work/wheel.txt" || fail "the wheel lacks $file"
done
! grep -q " xjob/" "$work/wheel.txt" || fail "the wheel installs a top-level xjob package"
tarball=$(ls "$work"/dist/xjob-executor-*.tgz)
tar -tzf "$tarball" >"$work/tarball.txt"
for file in package/proto/xjob/v1/executor.proto package/lib/index.d.ts package/lib/index.mjs; do
  grep -qx "$file" "$work/tarball.txt" || fail "the npm tarball lacks $file"
done
jar=$cache/m2/dev/xjob/xjob-executor/0.1.0/xjob-executor-0.1.0.jar
unzip -l "$jar" >"$work/jar.txt"
grep -q "xjob/v1/ExecutorServiceGrpc.class" "$work/jar.txt" || fail "the library jar lacks the generated gRPC classes"
! grep -q "xjob/example/" "$work/jar.txt" || fail "the library jar contains the example"

# One admin for every consumer, on free loopback ports, its data in the work dir.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
admin_port=$(free_port)
export XJOB_ADMIN="http://127.0.0.1:$admin_port" NO_COLOR=1
mkdir -p "$work/admin"
(cd "$work/admin" && exec "$xjob" serve --listen "127.0.0.1:$admin_port" --data-dir "$work/admin/data") >"$work/admin.log" 2>&1 &
pids+=($!)

# Starts a consumer executor (app $1, command $2..) from its project dir $dir on a free port.
start_executor() {
  local app=$1
  shift
  (cd "$dir" && XJOB_APP_NAME=$app XJOB_EXECUTOR_PORT=$(free_port) XJOB_ADMIN_ADDR=$XJOB_ADMIN \
    XJOB_LOG_DIR="$work/logs/$app" exec "$@") >"$work/$app.log" 2>&1 &
  pids+=($!)
  "$xjob" groups create --app-name "$app" --title "$app" >/dev/null || fail "groups create $app"
}
# Waits up to 60 s for the admin's log to hold the text $1.
wait_for_admin_log() {
  local waited=0
  until grep -qF -- "$1" "$work/admin.log"; do
    ((waited < 600)) || fail "no '$1' in the admin's log after 60 s"
    sleep 0.1
    waited=$((waited + 1))
  done
}

stage "consumers: a fresh venv, an npm project, a Go module, two Maven projects (outside the checkout)"
# docs/executors.md's snippets, each built or loaded in the consumer of its language below.
snippets=$work/snippets
python3 .ci/doc-snippets.py docs/executors.md "$snippets" || fail "extracting the snippets of docs/executors.md"
# Python: a venv with nothing but the wheel (and what it depends on).
dir=$work/python && mkdir -p "$dir"
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" --disable-pip-version-check --cache-dir "$cache/pip" -q install "$wheel" || fail "pip install of the wheel"
cat >"$dir/app.py" <<'EOF'
import asyncio, logging, os
from xjob_executor import Executor, JobContext

logging.basicConfig(level=logging.INFO)

executor = Executor(app_name=os.environ["XJOB_APP_NAME"], admin_addrs=[os.environ["XJOB_ADMIN_ADDR"]],
                    bind="127.0.0.1:" + os.environ["XJOB_EXECUTOR_PORT"], log_dir=os.environ["XJOB_LOG_DIR"])

@executor.handler("greet")
async def greet(ctx: JobContext) -> str:
    ctx.log(f"hello from an installed wheel, {ctx.params}")
    return f"python greeted {ctx.params}"

asyncio.run(executor.run())
EOF

# Node.js: npm init + the packed tarball; one app through require(), one through import.
dir=$work/node && mkdir -p "$dir"
(cd "$dir" && npm init -y >/dev/null && npm install "${npm_flags[@]}" "$tarball" >/dev/null) || fail "npm install of the tarball"
app_js='
const executor = new Executor({ appName: process.env.XJOB_APP_NAME, adminAddrs: [process.env.XJOB_ADMIN_ADDR],
  bind: `127.0.0.1:${process.env.XJOB_EXECUTOR_PORT}`, logDir: process.env.XJOB_LOG_DIR });
executor.handler("greet", async (ctx) => { ctx.log(`hello from an npm tarball, ${ctx.params}`); return `node greeted ${ctx.params}`; });
executor.run();'
printf "const { Executor } = require('xjob-executor');%s\n" "$app_js" >"$dir/app.cjs"
printf "import { Executor } from 'xjob-executor';%s\n" "$app_js" >"$dir/app.mjs"

# Go: a new module requiring the SDK's path, replaced by a copy of its folder.
dir=$work/go && mkdir -p "$dir" && cp -r "$work/src/sdks/go" "$work/go-sdk"
cat >"$dir/main.go" <<'EOF'
package main

import (
	"context"
	"log"
	"os"

	"xjob.dev/sdk/go/executor"
)

func main() {
	exec, err := executor.New(executor.Config{AppName: os.Getenv("XJOB_APP_NAME"),
		AdminAddrs: []string{os.Getenv("XJOB_ADMIN_ADDR")}, Bind: "127.0.0.1:" + os.Getenv("XJOB_EXECUTOR_PORT"),
		LogDir: os.Getenv("XJOB_LOG_DIR")})
	if err != nil {
		log.Fatal(err)
	}
	_ = exec.Handle("greet", func(ctx context.Context, run *executor.Run) (string, error) {
		run.Logf("hello from a Go module, %s", run.Params())
		return "go greeted " + run.Params(), nil
	})
	if err := exec.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
EOF
(cd "$dir" && go mod init consumer >/dev/null 2>&1 && go mod edit -require=xjob.dev/sdk/go@v0.1.0 -replace="xjob.dev/sdk/go=$work/go-sdk" &&
  go mod tidy >/dev/null 2>&1 && go build -o consumer .) || fail "go build of the consumer module"

# Java: a Maven project on the library, and a Spring Boot app on the starter.
sdk_version=0.1.0
dir=$work/java && mkdir -p "$dir/src/main/java/consumer"
sed "s/@SDK_VERSION@/$sdk_version/" "$repo/.ci/sdk-consumers/java-pom.xml" >"$dir/pom.xml"
cp "$repo/.ci/sdk-consumers/Main.java" "$dir/src/main/java/consumer/"
cp "$snippets"/java/*.java "$dir/src/main/java/" # compiled with the consumer
(cd "$dir" && "${maven[@]}" package) >"$work/build-java-consumer.log" 2>&1 || fail "mvn package of the Java consumer"
dir=$work/spring && mkdir -p "$dir/src/main/java/consumer"
sed "s/@SDK_VERSION@/$sdk_version/" "$repo/.ci/sdk-consumers/spring-pom.xml" >"$dir/pom.xml"
cp "$repo/.ci/sdk-consumers/SpringApp.java" "$dir/src/main/java/consumer/"
cp "$snippets"/spring/*.java "$dir/src/main/java/"
(cd "$dir" && "${maven[@]}" package) >"$work/build-spring-consumer.log" 2>&1 || fail "mvn package of the Spring Boot consumer"

stage "docs/executors.md: the Python, Node.js and Go snippets against the installed packages"
# Loaded, not started: the snippets start their executor only as a main program. (The Java ones
# were compiled with the Maven consumers above.)
for file in "$snippets"/python/*.py; do
  (cd "$work/python" && venv/bin/python -c 'import runpy, sys; runpy.run_path(sys.argv[1], run_name="snippet")' "$file") ||
    fail "the Python snippet $(basename "$file") of docs/executors.md"
done
for file in "$snippets"/js/*.cjs; do
  cp "$file" "$work/node/"
  (cd "$work/node" && node -e 'require(process.argv[1])' "./$(basename "$file")") ||
    fail "the Node.js snippet $(basename "$file") of docs/executors.md"
done
cp -r "$snippets/go" "$work/go/snippets"
(cd "$work/go" && go vet ./snippets/...) || fail "the Go snippets of docs/executors.md"

stage "nothing installed names the checkout"
installed=("$work/python/venv" "$work/node/node_modules" "$work/go/go.mod" "$work/java/target/consumer.jar" "$work/spring/target/consumer.jar")
if grep -rlF -- "$repo" "${installed[@]}"; then
  fail "installed files above name the checkout ($repo)"
fi

stage "each consumer runs a job from a real admin"
wait_for_admin_log "admin started"
dir=$work/python start_executor sdk-python "$work/python/venv/bin/python" app.py
dir=$work/node start_executor sdk-node-cjs node app.cjs
dir=$work/node start_executor sdk-node-esm node app.mjs
dir=$work/go start_executor sdk-go ./consumer
dir=$work/java start_executor sdk-java java -jar target/consumer.jar
dir=$work/spring start_executor sdk-spring java -jar target/consumer.jar
for app in sdk-python sdk-node-cjs sdk-node-esm sdk-go sdk-java sdk-spring; do
  wait_for_admin_log "executor registered app=$app"
  job=$("$xjob" jobs create --group "$app" --name "$app greet" --handler greet -o json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])') || fail "jobs create on $app"
  "$xjob" jobs trigger "$job" --params "$app" --follow >"$work/$app-run.txt" 2>&1 ||
    { cat "$work/$app-run.txt"; fail "the run on $app did not succeed"; }
  grep -q "greeted $app" "$work/$app-run.txt" || { cat "$work/$app-run.txt"; fail "no success message from $app"; }
  grep -q "hello from .*, $app" "$work/$app-run.txt" || { cat "$work/$app-run.txt"; fail "no handler log line from $app"; }
  echo "   $app: $(grep -m1 "greeted $app" "$work/$app-run.txt")"
done

stage ""
echo "== SDK packages: done in $(($(date +%s) - all_started)) s"
