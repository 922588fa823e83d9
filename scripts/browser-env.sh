#!/usr/bin/env bash
# Makes sure headless Chromium and its driver are installed (Debian's chromium and chromium-driver), for the
# browser tests. Installs them with apt-get when missing and this runs as root; otherwise says what to do.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != "0" ]; then
    echo "browser-env: Chromium is missing; install it with: sudo apt-get install -y chromium chromium-driver" >&2
    exit 1
fi
echo "browser-env: installing chromium and chromium-driver" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q chromium chromium-driver >&2
