#!/usr/bin/env bash
# The README's quick start, walked through as a newcomer would, failing on any deviation from
# what the README shows: build, `xjob serve --demo`, the console page, the README's CLI block
# (run as written, from the README itself), grpcurl list / describe / call, and Ctrl-C.
#
#   scripts/first-hour.sh                      # release build, the README's ports 8080 / 8081
#   FIRST_HOUR_PROFILE=dev scripts/first-hour.sh               # reuse a debug build
#   FIRST_HOUR_GRPC_PORT=9090 FIRST_HOUR_HTTP_PORT=9091 scripts/first-hour.sh
#
# Other ports follow the README's "Other ports" instructions (--listen, --http-listen,
# XJOB_ADMIN). grpcurl is taken from XJOB_GRPCURL_BIN (CI builds it with .ci/grpcurl.sh) or the
# PATH; without it the grpcurl steps are skipped with a message. Everything it starts is
# stopped on exit; the demo's data goes to a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PROFILE="${FIRST_HOUR_PROFILE:-release}"
GRPC_PORT="${FIRST_HOUR_GRPC_PORT:-8080}"
HTTP_PORT="${FIRST_HOUR_HTTP_PORT:-8081}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
WORK=$(mktemp -d)
ADMIN_PID=""

step() { echo "== $*"; }
fail() {
  echo "first-hour: FAILED: $*" >&2
  if [ -f "$WORK/admin.log" ]; then
    echo "--- last lines of the admin's log" >&2
    tail -n 20 "$WORK/admin.log" >&2
  fi
  exit 1
}
cleanup() {
  if [ -n "$ADMIN_PID" ] && kill -0 "$ADMIN_PID" 2>/dev/null; then
    kill -KILL "$ADMIN_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Waits up to $1 seconds for the admin's log to hold the text $2.
wait_for_log() {
  local seconds=$1 text=$2 waited=0
  until grep -qF -- "$text" "$WORK/admin.log"; do
    kill -0 "$ADMIN_PID" 2>/dev/null || fail "the admin exited before logging '$text'"
    [ "$waited" -ge $((seconds * 10)) ] && fail "no '$text' in the admin's log after ${seconds}s"
    sleep 0.1
    waited=$((waited + 1))
  done
}

# Fails unless the file $1 contains the text $2 (what the README promises).
expect_in() {
  grep -qF -- "$2" "$1" || { echo "--- output"; cat "$1"; fail "$3: expected '$2'"; }
}

step "build (cargo build, profile $PROFILE)"
if [ "$PROFILE" = release ]; then
  cargo build --release -p xjob-admin --bin xjob
  BIN_DIR="$TARGET_DIR/release"
else
  cargo build -p xjob-admin --bin xjob
  BIN_DIR="$TARGET_DIR/debug"
fi
[ -x "$BIN_DIR/xjob" ] || fail "no xjob binary at $BIN_DIR/xjob"
# The README's second terminal: export PATH="$PWD/target/release:$PATH".
export PATH="$BIN_DIR:$PATH"
export NO_COLOR=1

step "xjob serve --demo (gRPC 127.0.0.1:$GRPC_PORT, console 127.0.0.1:$HTTP_PORT)"
SERVE=(xjob serve --demo)
if [ "$GRPC_PORT" != 8080 ] || [ "$HTTP_PORT" != 8081 ]; then
  SERVE+=(--listen "127.0.0.1:$GRPC_PORT" --http-listen "127.0.0.1:$HTTP_PORT")
  export XJOB_ADMIN="http://127.0.0.1:$GRPC_PORT"
fi
(cd "$WORK" && exec "${SERVE[@]}" >"$WORK/admin.log" 2>&1) &
ADMIN_PID=$!
wait_for_log 60 "admin started"
wait_for_log 60 "executor registered app=xjob-demo"
expect_in "$WORK/admin.log" "web console listening" "the console is on with --demo"
[ -f "$WORK/xjob-data/xjob.db" ] || fail "the README says the SQLite database is ./xjob-data/xjob.db"

step "the console at http://127.0.0.1:$HTTP_PORT"
CODE=$(curl -s -L -c "$WORK/cookies" -b "$WORK/cookies" -o "$WORK/console.html" \
  -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/") || fail "the console does not answer"
[ "$CODE" = 200 ] || fail "the console answered HTTP $CODE"
expect_in "$WORK/console.html" "<title>Dashboard · xjob</title>" "the console's first page"
expect_in "$WORK/console.html" "needs no login" "the no-login banner the README mentions"

step "the README's CLI block, as written"
# The shell block after <!-- run --> in the README's "Quick start".
awk '/^## Quick start/ {in_section = 1}
     in_section && /^<!-- run -->/ {armed = 1; next}
     armed && /^```sh/ {inside = 1; next}
     inside && /^```/ {exit}
     inside {print}' README.md >"$WORK/quickstart.sh"
[ -s "$WORK/quickstart.sh" ] || fail "no runnable shell block in the README's Quick start"
sed "s/127.0.0.1:8080/127.0.0.1:$GRPC_PORT/g" "$WORK/quickstart.sh" >"$WORK/quickstart-run.sh"
cat "$WORK/quickstart-run.sh"
(cd "$WORK" && bash -euo pipefail quickstart-run.sh) >"$WORK/cli.out" 2>&1 \
  || { cat "$WORK/cli.out"; fail "the README's CLI block exited non-zero (a --follow that ends RUNNING is fixed on branch cli-logs)"; }
cat "$WORK/cli.out"
expect_in "$WORK/cli.out" "demo: hello every 3 seconds" "xjob jobs list shows the demo's jobs"
expect_in "$WORK/cli.out" "Created job 4 'nightly'" "xjob jobs create"
expect_in "$WORK/cli.out" "run end: status=RUN_STATUS_SUCCESS" "xjob jobs trigger --follow prints the run's log"
expect_in "$WORK/cli.out" "ended SUCCESS" "xjob jobs trigger --follow ends with the final status"
expect_in "$WORK/cli.out" "xjob-demo" "xjob executors lists the demo executor"

GRPCURL="${XJOB_GRPCURL_BIN:-$(command -v grpcurl || true)}"
if [ -n "$GRPCURL" ] && [ -x "$GRPCURL" ]; then
  step "grpcurl list, describe, call ($GRPCURL)"
  ADDR="127.0.0.1:$GRPC_PORT"
  "$GRPCURL" -plaintext "$ADDR" list >"$WORK/list.out" || fail "grpcurl list"
  for service in grpc.health.v1.Health xjob.v1.JobAdmin xjob.v1.Registry; do
    expect_in "$WORK/list.out" "$service" "grpcurl list"
  done
  "$GRPCURL" -plaintext "$ADDR" describe xjob.v1.JobAdmin >"$WORK/describe.out" || fail "grpcurl describe"
  expect_in "$WORK/describe.out" "rpc TriggerJob" "grpcurl describe xjob.v1.JobAdmin"
  "$GRPCURL" -plaintext -d '{"appName": "xjob-demo"}' "$ADDR" xjob.v1.JobAdmin/ListGroups \
    >"$WORK/groups.out" || fail "grpcurl ListGroups"
  expect_in "$WORK/groups.out" '"appName": "xjob-demo"' "grpcurl ListGroups"
  expect_in "$WORK/groups.out" '"id": "1"' "the demo's group is id 1 on a fresh data dir"
  "$GRPCURL" -plaintext "$ADDR" grpc.health.v1.Health/Check >"$WORK/health.out" || fail "health"
  expect_in "$WORK/health.out" '"status": "SERVING"' "grpcurl health check"
else
  echo "== grpcurl: SKIPPED (neither XJOB_GRPCURL_BIN nor grpcurl on the PATH; bash .ci/grpcurl.sh builds it)"
fi

step "Ctrl-C stops it"
kill -INT "$ADMIN_PID"
for _ in $(seq 1 300); do
  kill -0 "$ADMIN_PID" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$ADMIN_PID" 2>/dev/null && fail "the admin still runs 30 s after Ctrl-C"
STATUS=0
wait "$ADMIN_PID" || STATUS=$?
ADMIN_PID=""
[ "$STATUS" = 0 ] || fail "the admin exited with status $STATUS after Ctrl-C"
expect_in "$WORK/admin.log" "deregistered from admin" "the demo executor deregisters on Ctrl-C"
expect_in "$WORK/admin.log" "admin stopped" "the admin stops cleanly"

echo "first-hour: the README's quick start works as written"
