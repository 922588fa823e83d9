#!/usr/bin/env bash
# The whole Gatehouse test suite, from a fresh clone: it installs what the tests need, runs them, and leaves
# nothing running. `.ci/run` calls exactly this.
#
# What it sets up:
#   - a Python virtual environment at .build-venv with argon2-cffi (the reference Argon2 implementation) for the
#     differential Argon2 tests; see scripts/argon2-reference.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GATEHOUSE_ARGON2_REFERENCE="$(bash scripts/argon2-reference.sh)"
export GATEHOUSE_ARGON2_REFERENCE

# The SDK must not pull a server dependency into its module graph.
swift package describe --type json | python3 scripts/check-sdk-dependencies.py

swift build --build-tests
swift test --skip-build
