#!/usr/bin/env bash
# Runs every benchmark of the results table in docs/benchmarks.md, one after the other, and
# prints the table. Needs a quiet machine: anything else using the CPU shows up as lateness.
#   bench/run-table.sh [RESULTS_FILE]          (default: bench-table.jsonl; appended to)
#   bench/run-table.sh --round4 [RESULTS_FILE] (the engine round's targets only, about 30 minutes)
# Takes about an hour: W1 at 100 / 1 000 / 10 000 jobs on SQLite, PostgreSQL and MariaDB
# (10 s warm-up, 60 s window), W3-short (300 jobs, 5 minutes) and W4 (10 000 jobs at second 0
# of each minute, two bursts) on each, F1 (3 admins, 5 kills of the lock holder, default
# node lease) on each, and the memory run: 100 000 jobs every 60 s on SQLite (W2).
set -euo pipefail
cd "$(dirname "$0")/.."
round4=false
if [ "${1:-}" = --round4 ]; then
  round4=true
  shift
fi
results=${1:-bench-table.jsonl}
cargo build --release --quiet -p xjob-admin -p xjob-bench --bins
bench=${CARGO_TARGET_DIR:-target}/release/xjob-bench

run() {
  echo "== xjob-bench $*" >&2
  "$bench" --results "$results" "$@" >/dev/null
}

# The engine round's targets: 10 000 fires/s with runs sent 500 ms ahead (mid-second: a whole
# second's lead sends the next second's runs while the executor starts this second's), W3 the
# same way, the scale-out of 1-3 admins capped at 0.1 core each under 6 000 fires/s, and 10
# kills of F1.
round4_runs() {
  for database in sqlite postgres mariadb; do
    run --workload w1 --jobs 10000 --warmup 10 --duration 60 --drain 5 --database "$database" \
      --send-ahead-ms 500
  done
  for database in postgres mariadb; do
    run --workload s1 --database "$database" --jobs 12000 --period 2 --warmup 5 --duration 20 \
      --drain 5 --admin-cpu 0.1
  done
  run --workload f1 --database postgres --duration 120 --kills 10
  run --workload w3 --warmup 10 --duration 300 --drain 5 --database sqlite --send-ahead-ms 500
}

if $round4; then
  round4_runs
  exit 0
fi

for database in sqlite postgres mariadb; do
  for jobs in 100 1000 10000; do
    run --workload w1 --jobs "$jobs" --warmup 10 --duration 60 --drain 5 --database "$database"
  done
  run --workload w3 --warmup 10 --duration 300 --drain 5 --database "$database"
  run --workload w4 --jobs 10000 --warmup 5 --duration 120 --drain 5 --database "$database"
done
for database in sqlite postgres mariadb; do
  run --workload f1 --database "$database" --duration 60 --kills 5
done
# The memory target: 100 000 running jobs, their fires spread over the minute (1 667 fires/s).
run --workload w2 --jobs 100000 --period 60 --warmup 10 --duration 60 --drain 5 --database sqlite

# The table, from every line of the results file.
python3 - "$results" <<'PY'
import json, sys
print("| run | database | delivered / expected | dup | p50 / p99 / max ms | fires/s | CPU µs per fire: admin / executor / db | RSS MB: admin / executor | takeover median / max ms | not delivered, by log row |")
print("|---|---|---|---|---|---|---|---|---|---|")
def us(value):
    return "–" if value is None else f"{value:.0f}"
for line in open(sys.argv[1]):
    r = json.loads(line)
    takeover = "–"
    # SQLite runs inside the admin: its CPU is in the admin's figure.
    if r.get("takeover_median_ms") is not None:
        takeover = f"{r['takeover_median_ms']} / {r['takeover_max_ms']}"
    cpu = " / ".join(us(r.get(k)) for k in
                     ("admin_cpu_us_per_fire", "executor_cpu_us_per_fire", "db_cpu_us_per_fire"))
    # Every outcome but a success, e.g. "skipped_misfire 12, no_row 3".
    outcomes = ", ".join(f"{k} {v}" for k, v in (r.get("outcomes") or {}).items()
                         if k != "success" and v) or "–"
    locks = "" if r.get("liveness_locks", True) else ", no liveness locks"
    period = f", every {r['period_s']} s" if r.get("period_s", 1) != 1 else ""
    print(f"| {r['workload']} N={r['n']}{period}, {r['duration_s']} s{locks} | {r['database']} "
          f"| {r['delivered']} / {r['expected']} | {r['duplicates']} "
          f"| {r['lateness_p50_ms']} / {r['lateness_p99_ms']} / {r['lateness_max_ms']} "
          f"| {r['throughput_fps']:.0f} | {cpu} "
          f"| {r['admin_peak_rss_mb']:.0f} / {r['executor_peak_rss_mb']:.0f} | {takeover} | {outcomes} |")
PY
