#!/usr/bin/env bash
# Flame graphs of the admin and the executor at W1 N = 10 000 (SQLite), as SVG files.
#   bench/flamegraphs.sh OUT_DIR LABEL [BIN_DIR]
# writes OUT_DIR/admin-LABEL.svg and OUT_DIR/executor-LABEL.svg. BIN_DIR holds xjob-bench and
# the binaries next to it (default: target/release; build them first with
# `cargo build --release -p xjob-admin -p xjob-bench --bins`). Needs `perf` (Debian's
# linux-perf) and inferno's `inferno-collapse-perf` / `inferno-flamegraph`
# (`cargo install inferno`). Run it on a quiet machine: it samples each process for
# PROFILE_SECONDS (default 10) in the middle of a 30 s window. With FOLDED_DIR set, the
# folded stacks are kept there too.
set -euo pipefail
out=${1:?OUT_DIR}
label=${2:?LABEL}
bin=${3:-target/release}
seconds=${PROFILE_SECONDS:-10}
jobs=${JOBS:-10000}
mkdir -p "$out"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

"$bin/xjob-bench" --workload w1 --jobs "$jobs" --warmup 10 --duration 30 --drain 5 \
  --results "$scratch/results.jsonl" >"$scratch/out" 2>"$scratch/err" &
bench=$!
# Wait for the measurement window, then 10 s more so the log table is not empty.
until grep -q '^window:' "$scratch/err" 2>/dev/null; do
  kill -0 "$bench" 2>/dev/null || { cat "$scratch/err" >&2; exit 1; }
  sleep 1
done
sleep 10
admin=$(pgrep -P "$bench" -x xjob)
executor=$(pgrep -P "$bench" -f xjob-bench-executor | head -n 1)
echo "profiling admin $admin and executor $executor for $seconds s" >&2
perf record -q -F 199 --call-graph dwarf,16384 -p "$admin" -o "$scratch/admin.data" -- sleep "$seconds" &
admin_perf=$!
perf record -q -F 199 --call-graph dwarf,16384 -p "$executor" -o "$scratch/executor.data" -- sleep "$seconds" &
wait "$admin_perf" $!
wait "$bench"
for role in admin executor; do
  perf script -i "$scratch/$role.data" 2>/dev/null | inferno-collapse-perf >"$scratch/$role.folded"
  # Frames narrower than 1 px are left out: they cannot be read and would make the file large.
  inferno-flamegraph --minwidth 1 --title "xjob $role, W1 N=$jobs, $label" <"$scratch/$role.folded" \
    >"$out/$role-$label.svg"
  # The folded stacks, for comparing shares between two runs (optional).
  [ -n "${FOLDED_DIR:-}" ] && cp "$scratch/$role.folded" "$FOLDED_DIR/$role-$label.folded"
done
tail -n 1 "$scratch/results.jsonl"
