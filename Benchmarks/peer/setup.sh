#!/usr/bin/env bash
# Sets up the benchmark peer (django-allauth headless + JWT under gunicorn) and migrates a database.
#
#   bash Benchmarks/peer/setup.sh [DATABASE_URL]
#
# Creates the virtual environment .build-bench-venv at the repository root (ignored by git through .build-*/)
# with the pinned requirements, an RSA key for the peer's RS256 JWTs (.build-bench-venv/peer-jwt.pem), and
# migrates DATABASE_URL (default: sqlite:///REPO/.build-bench/peer.sqlite). Idempotent; progress on stderr, and
# the last line of stdout is the venv's python. Serve it afterwards with:
#
#   cd Benchmarks/peer && PEER_DATABASE_URL=… PEER_JWT_PRIVATE_KEY_FILE=../../.build-bench-venv/peer-jwt.pem \
#     ../../.build-bench-venv/bin/gunicorn -c gunicorn.conf.py peerproject.wsgi
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$root/.build-bench-venv"
python="$venv/bin/python"

if [ ! -x "$python" ]; then
    echo "peer/setup: creating $venv" >&2
    python3 -m venv "$venv" >&2
fi
if ! "$python" -m pip freeze --disable-pip-version-check 2>/dev/null | sort > "$venv/.freeze.now" \
    || ! grep -qi '^django-allauth==65.21.1' "$venv/.freeze.now" \
    || ! cmp -s "$here/requirements.txt" "$venv/.requirements.installed"; then
    echo "peer/setup: installing Benchmarks/peer/requirements.txt" >&2
    "$python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
    cp "$here/requirements.txt" "$venv/.requirements.installed"
fi
rm -f "$venv/.freeze.now"

key="$venv/peer-jwt.pem"
if [ ! -s "$key" ]; then
    echo "peer/setup: making an RSA key for RS256 at $key" >&2
    "$python" - "$key" <<'PY'
import sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
open(sys.argv[1], "wb").write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
PY
fi

url="${1:-sqlite:///$root/.build-bench/peer.sqlite}"
case "$url" in sqlite:///*) mkdir -p "$(dirname "${url#sqlite://}")" ;; esac
echo "peer/setup: migrating $url" >&2
(cd "$here" && PEER_DATABASE_URL="$url" PEER_JWT_PRIVATE_KEY_FILE="$key" "$python" manage.py migrate -v 0 >&2)
echo "$python"
