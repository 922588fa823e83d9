#!/usr/bin/env bash
# Prints the path of a Python interpreter that has argon2-cffi (the reference C
# implementation of Argon2) importable, creating it on first use:
#   GATEHOUSE_ARGON2_REFERENCE=$(bash scripts/argon2-reference.sh) swift test ...
# Idempotent: creates the virtual environment .build-venv at the repository root
# only if it is missing and installs argon2-cffi only if it cannot be imported.
# Everything but the final path goes to stderr, so the command substitution above
# captures just the interpreter.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.build-venv"
python="$venv/bin/python"

# A venv whose interpreter no longer runs (e.g. its base Python was replaced) is rebuilt.
if [ -e "$venv" ] && ! "$python" -c '' >/dev/null 2>&1; then
    echo "argon2-reference: $venv is broken, recreating it" >&2
    rm -rf "$venv"
fi
if [ ! -x "$python" ]; then
    echo "argon2-reference: creating $venv" >&2
    python3 -m venv "$venv" >&2
fi

if ! "$python" -c 'import argon2.low_level' >/dev/null 2>&1; then
    echo "argon2-reference: installing argon2-cffi into $venv" >&2
    "$python" -m pip install -q --disable-pip-version-check argon2-cffi >&2
    "$python" -c 'import argon2.low_level' >&2
fi

echo "$python"
