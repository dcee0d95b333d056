#!/usr/bin/env bash
# Debian's Chromium and its WebDriver, for the head explorer's browser test (tests/test_explorer.py).
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends chromium chromium-driver
