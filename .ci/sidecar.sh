#!/usr/bin/env bash
# Steps the sidecar work (issue 14) adds to CI, for .ci/run to call (source it, then call the
# functions; the lead wires them in):
#   xjob_install_sidecar_tools   apt-installs the script interpreters the glue tests run
#                                (bash, python3, node, php) and PyYAML for deploy/check.py;
#                                PowerShell is not in Debian: its glue test is skipped with a
#                                printed reason
#   xjob_check_deploy            builds the workspace binaries (xjob-executor among them) and
#                                checks deploy/ offline
#                                (.ci/deploy-check.sh: hadolint, helm lint/template,
#                                kubeconform against strict schemas, deploy/check.py); its
#                                tools are built into $XJOB_CI_CACHE on the first run
#                                (about 5 minutes), a warm run takes a few seconds
# The glue tests are part of `cargo test --workspace` (sidecar/tests/sidecar.rs); a language
# whose interpreter is missing is skipped there with a printed reason, so installing them is
# what makes CI cover every language.

xjob_install_sidecar_tools() {
  local missing=()
  command -v bash >/dev/null 2>&1 || missing+=(bash)
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v php >/dev/null 2>&1 || missing+=(php-cli)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # PyYAML for the `python3` on PATH (which may be a pyenv one, not Debian's), from PyPI.
  python3 -c 'import yaml' >/dev/null 2>&1 ||
    python3 -m pip install -q --disable-pip-version-check --cache-dir "${XJOB_CI_CACHE:-/var/cache/xjob-ci}/pip" pyyaml
  # aiosmtpd: the real SMTP server the alarm e-mail test (tests/tests/e2e/alarms.rs) mails to.
  python3 -c 'import aiosmtpd' >/dev/null 2>&1 ||
    python3 -m pip install -q --disable-pip-version-check --cache-dir "${XJOB_CI_CACHE:-/var/cache/xjob-ci}/pip" aiosmtpd
}

xjob_check_deploy() {
  # The whole workspace's binaries, as the benchmark stage after it builds them: one feature set
  # for both (building xjob-sidecar alone resolves other features and recompiles its dependencies).
  cargo build -q --workspace --bins
  bash .ci/deploy-check.sh
}
