#!/usr/bin/env bash
# Makes sure headless Chromium and its driver are installed (Debian's chromium and chromium-driver), for the
# browser tests. Installs them with apt-get when missing and this runs as root; otherwise says what to do.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
bash "$(dirname "$0")/apt-install.sh" browser-env chromium chromium-driver
