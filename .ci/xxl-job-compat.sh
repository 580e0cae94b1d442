#!/usr/bin/env bash
# Builds the XXL-JOB executor the compatibility test starts (examples/xxl-job-compat) against
# every xxl-job-core version the test covers: 3.2.0 and 2.4.2. The jars land in
# examples/xxl-job-compat/target/{version}/xxl-job-compat-executor.jar, where
# tests/tests/xxl_job_compat.rs finds them; xxl-job-core and its dependencies are fetched by
# Maven into $XJOB_CI_CACHE/m2 (outside the clone) once, later runs only build.
#
# Needs java and mvn (part of this machine kind). Called from .ci/run; runs from anywhere.
set -euo pipefail
cd "$(dirname "$0")/../examples/xxl-job-compat"

cache=${XJOB_CI_CACHE:-/var/cache/xjob-ci}
mkdir -p "$cache"
for tool in java mvn; do
  command -v "$tool" >/dev/null || { echo "$tool is required (part of this machine kind)" >&2; exit 1; }
done
for version in 3.2.0 2.4.2; do
  started=$(date +%s)
  mvn -B -q -Dstyle.color=never "-Dmaven.repo.local=$cache/m2" "-Dxxl.job.version=$version" package
  ls -l "target/$version/xxl-job-compat-executor.jar"
  echo "== XXL-JOB executor on xxl-job-core $version: built in $(($(date +%s) - started)) s"
done
