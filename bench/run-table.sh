#!/usr/bin/env bash
# Runs every benchmark of the results table in docs/benchmarks.md, one after the other, and
# prints the table. Needs a quiet machine: anything else using the CPU shows up as lateness.
#   bench/run-table.sh [RESULTS_FILE]      (default: bench-table.jsonl; appended to)
# Takes about 35 minutes: W1 at 100 / 1 000 / 10 000 jobs on SQLite and PostgreSQL (10 s
# warm-up, 60 s window), W3-short (300 jobs, 5 minutes) and W4 (10 000 jobs at second 0 of
# each minute, two bursts) on both, and F1 (3 admins on PostgreSQL, 5 kills of the lock
# holder).
set -euo pipefail
cd "$(dirname "$0")/.."
results=${1:-bench-table.jsonl}
cargo build --release --quiet -p xjob-admin -p xjob-bench --bins
bench=target/release/xjob-bench

run() {
  echo "== xjob-bench $*" >&2
  "$bench" --results "$results" "$@" >/dev/null
}

for database in sqlite postgres; do
  for jobs in 100 1000 10000; do
    run --workload w1 --jobs "$jobs" --warmup 10 --duration 60 --drain 5 --database "$database"
  done
  run --workload w3 --warmup 10 --duration 300 --drain 5 --database "$database"
  run --workload w4 --jobs 10000 --warmup 5 --duration 120 --drain 5 --database "$database"
done
run --workload f1 --database postgres --duration 60 --kills 5

# The table, from every line of the results file.
python3 - "$results" <<'PY'
import json, sys
print("| run | database | delivered / expected | dup | p50 / p99 / max ms | fires/s | admin CPU s | db CPU s | admin RSS MB | takeover median / max ms |")
print("|---|---|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    takeover = "–"
    # SQLite runs inside the admin: its CPU is in the admin's figure.
    db_cpu = "–" if r["database"] == "Sqlite" else f"{r['db_cpu_s'] or 0:.1f}"
    if r.get("takeover_median_ms") is not None:
        takeover = f"{r['takeover_median_ms']} / {r['takeover_max_ms']}"
    print(f"| {r['workload']} N={r['n']}, {r['duration_s']} s | {r['database']} "
          f"| {r['delivered']} / {r['expected']} | {r['duplicates']} "
          f"| {r['lateness_p50_ms']} / {r['lateness_p99_ms']} / {r['lateness_max_ms']} "
          f"| {r['throughput_fps']:.0f} | {r['admin_cpu_s']:.1f} | {db_cpu} "
          f"| {r['admin_peak_rss_mb']:.0f} | {takeover} |")
PY
