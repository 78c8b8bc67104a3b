#!/usr/bin/env bash
# Debian's Chromium and its WebDriver for tests/test_assess_page.py (the offline assessment page
# driven by Selenium). Needs root (or sudo) and the Debian package mirrors. In CI (CI=true) a
# failed install fails the run; elsewhere it warns, and the browser test is skipped.
set -uo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if $SUDO apt-get update -q && $SUDO apt-get install -y -q chromium chromium-driver; then
    exit 0
fi
if [ "${CI:-}" = "true" ]; then
    echo "error: could not install chromium and chromium-driver with apt-get" >&2
    exit 1
fi
echo "warning: chromium not installed (needs root or sudo); the browser test will be skipped" >&2
exit 0
