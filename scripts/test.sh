#!/usr/bin/env bash
# The whole Gatehouse test suite, from a fresh clone: it installs what the tests need, runs them, and leaves
# nothing running. `.ci/run` calls exactly this.
#
# What it sets up (each step does nothing when it is already done):
#   - a Python virtual environment at .build-venv with argon2-cffi (the reference Argon2, for the differential
#     tests), aiosmtpd (a real SMTP server the SMTP tests start on loopback), selenium and schemathesis (fuzzes the
#     API) (scripts/python-env.sh);
#   - headless Chromium and chromedriver from Debian's packages, for the browser tests (scripts/browser-env.sh).
#   - a throwaway PostgreSQL cluster on a free loopback port (scripts/postgres-env.sh), stopped and removed at the end.
# Every server a test needs (Gatehouse, SMTP) is started by that test on 127.0.0.1 and stopped by it. The suite runs
# twice: on SQLite, then on PostgreSQL (each test in a database of its own). Between the two, scripts/fuzz.sh fuzzes
# the HTTP API of the built server against openapi.yaml with schemathesis.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GATEHOUSE_PYTHON="$(bash scripts/python-env.sh)"
export GATEHOUSE_PYTHON
export GATEHOUSE_ARGON2_REFERENCE="$GATEHOUSE_PYTHON"
bash scripts/browser-env.sh

# The SDK must not pull a server dependency into its module graph, nor the domain an HTTP, NIO or database one.
swift package describe --type json | python3 scripts/check-module-graphs.py

swift build --build-tests

echo "== tests on SQLite"
swift test --skip-build

echo "== fuzzing the API (schemathesis)"
bash scripts/fuzz.sh

pgdir="$(mktemp -d)"
cleanup() { bash scripts/postgres-env.sh stop "$pgdir"; rm -rf "$pgdir"; }
trap cleanup EXIT
GATEHOUSE_TEST_POSTGRES_URL="$(bash scripts/postgres-env.sh start "$pgdir")"
export GATEHOUSE_TEST_POSTGRES_URL
echo "== tests on PostgreSQL"
swift test --skip-build
