#!/usr/bin/env bash
# Prints the path of the project's Python (a virtual environment at .build-venv), creating it and installing
# what the tests use when missing: argon2-cffi (the reference Argon2), aiosmtpd (a real SMTP server),
# selenium (drives Chromium), standardwebhooks (checks webhook signatures independently of Gatehouse), passlib
# (makes the foreign password hashes an import may carry, in Django's and passlib's forms), bcrypt and
# firebase-scrypt (the reference bcrypt and Firebase's modified scrypt, for the same), PyJWT (verifies Gatehouse's
# tokens as a resource server would, from the OpenID discovery document), prometheus-client (the reference parser of
# the text format /metrics answers in) and
# schemathesis (fuzzes the HTTP API against openapi.yaml, scripts/fuzz.sh; pinned, since its checks and CLI change
# between releases).
# Idempotent and quiet when everything is there; progress goes to stderr.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.build-venv"
python="$venv/bin/python"

if [ ! -x "$python" ]; then
    echo "python-env: creating $venv" >&2
    python3 -m venv "$venv" >&2
fi

missing=()
"$python" -c 'import argon2.low_level' >/dev/null 2>&1 || missing+=(argon2-cffi)
"$python" -c 'import aiosmtpd' >/dev/null 2>&1 || missing+=(aiosmtpd)
"$python" -c 'import selenium' >/dev/null 2>&1 || missing+=(selenium)
"$python" -c 'import standardwebhooks' >/dev/null 2>&1 || missing+=(standardwebhooks)
"$python" -c 'import passlib.hash' >/dev/null 2>&1 || missing+=(passlib)
"$python" -c 'import bcrypt' >/dev/null 2>&1 || missing+=(bcrypt)
"$python" -c 'import firebase_scrypt' >/dev/null 2>&1 || missing+=(firebase-scrypt)
"$python" -c 'import jwt, cryptography' >/dev/null 2>&1 || missing+=("pyjwt[crypto]")
"$python" -c 'import prometheus_client.parser' >/dev/null 2>&1 || missing+=(prometheus-client)
schemathesis_version=4.32.5
"$python" -c "import importlib.metadata as m, sys; sys.exit(m.version('schemathesis') != '$schemathesis_version')" >/dev/null 2>&1 \
    || missing+=("schemathesis==$schemathesis_version")
if [ ${#missing[@]} -gt 0 ]; then
    echo "python-env: installing ${missing[*]} into $venv" >&2
    "$python" -m pip install -q --disable-pip-version-check "${missing[@]}" >&2
fi

echo "$python"
