#!/usr/bin/env bash
# The whole Gatehouse test suite, from a fresh clone: it installs what the tests need, runs them, and leaves
# nothing running. `.ci/run` calls exactly this.
#
# What it sets up (each step does nothing when it is already done):
#   - a Python virtual environment at .build-venv with argon2-cffi (the reference Argon2, for the differential
#     tests), aiosmtpd (a real SMTP server the SMTP tests start on loopback), selenium and schemathesis (fuzzes the
#     API) (scripts/python-env.sh);
#   - headless Chromium and chromedriver from Debian's packages, for the browser tests (scripts/browser-env.sh), and
#     curl, for the guides' walkthroughs;
#   - a throwaway PostgreSQL cluster on a free loopback port (scripts/postgres-env.sh), stopped and removed at the end.
# Every server a test needs (Gatehouse, SMTP) is started by that test on 127.0.0.1 and stopped by it. The suite runs
# twice: on SQLite, then on PostgreSQL (each test in a database of its own). Between the two, scripts/fuzz.sh fuzzes
# the HTTP API of the built server against openapi.yaml with schemathesis, and scripts/release.sh builds the release
# binary, which ReleaseBinaryTests then runs alone, with no toolchain in its environment.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GATEHOUSE_PYTHON="$(bash scripts/python-env.sh)"
export GATEHOUSE_PYTHON
export GATEHOUSE_ARGON2_REFERENCE="$GATEHOUSE_PYTHON"
bash scripts/browser-env.sh
# The guides' curl walkthroughs run as tests (WalkthroughTests): they need curl.
command -v curl >/dev/null 2>&1 || bash scripts/apt-install.sh walkthroughs curl

# The SDK must not pull a server dependency into its module graph, nor the domain an HTTP, NIO or database one.
swift package describe --type json | python3 scripts/check-module-graphs.py

swift build --build-tests

# The SDK's reference (DocC, Sources/Gatehouse/Gatehouse.docc): builds without a warning, and every public symbol
# has a documentation comment.
swift package generate-documentation --target Gatehouse --warnings-as-errors >/dev/null
python3 scripts/check-docs.py

# One run of the suite under a watchdog. A run takes a few minutes; one still going after GATEHOUSE_TEST_TIMEOUT
# seconds (default 900) is hung: the watchdog prints the tests that started and never ended (from Swift Testing's
# event stream) and the test process's threads, then stops it, so CI fails fast and says where.
run_suite() {
    local events rc limit="${GATEHOUSE_TEST_TIMEOUT:-900}"
    events="$(mktemp)"
    set +e
    swift test --skip-build --event-stream-output-path "$events" --event-stream-version 0 "$@" &
    local runner=$!
    (
        # Polls once a second, so it ends with the run and leaves nothing behind.
        for ((waited = 0; waited < limit; waited++)); do
            sleep 1
            kill -0 "$runner" 2>/dev/null || exit 0
        done
        # Threads first, the names of the hung tests last: the end of a long log is what gets read.
        for pid in $(pgrep -f 'GatehousePackageTests.xctest'); do
            echo "== threads of the test process $pid"
            timeout 60 gdb -p "$pid" -batch -ex 'thread apply all bt 10' 2>/dev/null | grep -E '^(Thread|#)' | cut -c1-180 | head -300
        done
        echo "== the test run did not end within $limit s; tests that started and did not end:"
        python3 scripts/unfinished-tests.py "$events"
        pkill -KILL -f 'GatehousePackageTests.xctest'
        kill -KILL "$runner"
    ) &
    local watchdog=$!
    wait "$runner"
    rc=$?
    wait "$watchdog"
    set -e
    [ -n "${GATEHOUSE_KEEP_EVENTS:-}" ] || rm -f "$events"
    return "$rc"
}

# How many tests run at once. Swift Testing's default starts nearly every test together: on a 2-core machine the
# PostgreSQL run then had hundreds of tests in flight for minutes, and those with real deadlines (a webhook's 5 s,
# a provider's key fetch, the 3-minute time limits) missed them — 3 to 19 failures a run, never the same, and the
# run took longer (240 s), not shorter. Four per core: 548 passed on PostgreSQL in 168 s and on SQLite in 60 s.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-$((4 * $(nproc)))}"

echo "== tests on SQLite"
run_suite

echo "== fuzzing the API (schemathesis)"
bash scripts/fuzz.sh

releasedir="$(mktemp -d)"
pgdir="$(mktemp -d)"
cleanup() { bash scripts/postgres-env.sh stop "$pgdir"; rm -rf "$pgdir" "$releasedir"; }
trap cleanup EXIT

# The release binary: built as scripts/release.sh builds it (about 12 minutes from nothing), then run alone from an
# empty folder by ReleaseBinaryTests, which the other runs skip.
echo "== the release binary"
bash scripts/release.sh "$releasedir"
GATEHOUSE_RELEASE_BINARY="$releasedir/gatehouse" run_suite --filter ReleaseBinaryTests

GATEHOUSE_TEST_POSTGRES_URL="$(bash scripts/postgres-env.sh start "$pgdir")"
export GATEHOUSE_TEST_POSTGRES_URL
echo "== tests on PostgreSQL"
run_suite
