#!/usr/bin/env bash
# Debian's Chromium and its WebDriver for tests/test_assess_page.py (the offline assessment page
# driven by Selenium). Needs root (or sudo) and the Debian package mirrors.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y chromium chromium-driver
