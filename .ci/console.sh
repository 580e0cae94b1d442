#!/usr/bin/env bash
# The web console's browser test (admin/tests/it/console_browser.rs) needs Debian's Chromium, node
# and the Playwright driver (npm `playwright-core`, which downloads no browser). Source this
# file, then call xjob_install_console_tools; it is idempotent: apt runs only when Chromium is
# missing, npm ci reuses its cache in $XJOB_CI_CACHE/npm. Under CI the test fails when any of
# them is missing.

xjob_install_console_tools() {
  local cache="${XJOB_CI_CACHE:-/var/cache/xjob-ci}"
  local missing=()
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  # A Chinese font, so the screenshots of the console in Chinese show its characters.
  [ -e /usr/share/fonts/truetype/wqy/wqy-zenhei.ttc ] || missing+=(fonts-wqy-zenhei)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  /usr/bin/chromium --version 2>/dev/null | tail -n 1
  (cd console-tests && npm ci --cache "$cache/npm" --prefer-offline --no-audit --no-fund --loglevel=error)
  export XJOB_CHROMIUM=/usr/bin/chromium
}
