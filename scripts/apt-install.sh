#!/usr/bin/env bash
# scripts/apt-install.sh WHO PACKAGE... — installs Debian packages that a test or benchmark needs and the machine
# lacks. As root: apt-get update and install, quietly, output on stderr. Otherwise: says which command to run and
# fails, so that nothing asks for a password halfway through a run. WHO names the caller in the messages.
set -euo pipefail

who=$1
shift
if [ "$(id -u)" != "0" ]; then
    echo "$who: missing $*; install with: sudo apt-get install -y $*" >&2
    exit 1
fi
echo "$who: installing $*" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q "$@" >&2
