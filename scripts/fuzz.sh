#!/usr/bin/env bash
# Fuzzes the HTTP API against openapi.yaml with schemathesis (pinned in scripts/python-env.sh; settings it cannot take
# on the command line are in scripts/fuzz.toml). scripts/test.sh runs it after the SQLite test pass.
#
# It starts the already-built debug server (.build/debug/gatehouse serve; run `swift build` first) on 127.0.0.1 with a
# free port, a throwaway SQLite file and a temporary configuration whose app `gatehouse-dev` has everything first-party
# on: email/password with `confirmation: auto`, anonymous users, API keys, native auth (client id `dev-client`) and the
# dev mailbox. Once /readyz answers 200 it runs schemathesis over every operation of the spec, with a bounded number
# of cases per operation (examples, coverage and fuzzing phases; positive and negative data) and a fixed seed, so a
# run is repeatable. It fails on any 5xx, on a status code, content type, header or body the spec does not describe
# for that operation, on a request error, and when the server has died by the end. The server is always stopped.
#
# Authentication: the bearer tokens are real. Before the first authenticated request, schemathesis logs an anonymous
# user in (scripts/fuzz.toml) and sends its access token to the `accessToken` operations and its refresh token to the
# `refreshToken` ones; when a request answers 401 (the fuzzer logged that session out, deleted the user, or sent a
# mutated token) it logs in again and replays the request once. So the authenticated paths (profile, session, API
# keys, …) are exercised with valid tokens, and negative cases still cover the 401 paths.
#
# schemathesis' warnings do not fail the run: "Authentication failed … 403" is the hosted forms' CSRF check refusing the
# negative cases that drop the cookie or the field, and "Schema validation mismatch" counts operations whose generated
# tokens, codes and continuation tokens the server rightly refuses (a fuzzer cannot guess a valid one). One worker:
# several share Hypothesis state across threads and fail with internal errors, and one keeps a run repeatable.
#
# Environment: GATEHOUSE_PYTHON (the project's Python, as scripts/test.sh exports it; made by scripts/python-env.sh
# when unset), GATEHOUSE_FUZZ_EXAMPLES (cases per operation and phase, default 50), GATEHOUSE_FUZZ_SEED (default
# 20261122). The report of a failing run (the failing requests, replayable as curl commands) is printed; the server's
# log is printed too, and every request and response is kept in .build-fuzz/ for a look afterwards.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="${GATEHOUSE_PYTHON:-$(bash scripts/python-env.sh)}"
st="$(dirname "$python")/st"
binary=.build/debug/gatehouse
spec=Sources/GatehouseServer/Resources/openapi.yaml
examples="${GATEHOUSE_FUZZ_EXAMPLES:-50}"
seed="${GATEHOUSE_FUZZ_SEED:-20261122}"

if [ ! -x "$binary" ]; then
    echo "fuzz: $binary is missing: run \`swift build\` first" >&2
    exit 1
fi

work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/gatehouse.yaml" <<EOF
server: { host: 127.0.0.1, port: 0 }
database: { url: "sqlite:$work/gatehouse.sqlite" }
dev: { mailbox: true }
apps:
  - id: gatehouse-dev
    # The fuzzer sends thousands of requests, its logins among them, from one address: limits and login delays
    # would answer most of them 429 (documented, and tested in AbuseTests) instead of exercising the routes.
    rateLimits: { enabled: false }
    loginBackoff: { enabled: false }
    providers:
      local-userpass: { confirmation: auto }
      anon-user: { enabled: true }
      api-key: { enabled: true }
    nativeAuth:
      enabled: true
      clientIds: [dev-client]
      attributes:
        - { name: displayName, type: string, required: false }
EOF

"$binary" serve --config "$work/gatehouse.yaml" --log-level warning >"$work/server.out" 2>"$work/server.log" &
server_pid=$!

server_log() {
    echo "---- server log (tail)" >&2
    tail -n 60 "$work/server.log" >&2 || true
}

# Port 0: the server picks a free port and prints its URL.
base=""
for _ in $(seq 1 600); do
    base="$(sed -n 's/^Gatehouse is listening on \(http:[^ ]*\)$/\1/p' "$work/server.out")"
    [ -n "$base" ] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "fuzz: the server exited before listening" >&2
        server_log
        exit 1
    fi
    sleep 0.1
done
if [ -z "$base" ]; then
    echo "fuzz: the server did not start listening within 60 s" >&2
    server_log
    exit 1
fi
case "$base" in
http://127.0.0.1:*) ;;
*)
    echo "fuzz: the server listens on $base, not on loopback" >&2
    exit 1
    ;;
esac

ready=""
for _ in $(seq 1 300); do
    if "$python" -c 'import sys, urllib.request; sys.exit(urllib.request.urlopen(sys.argv[1], timeout=5).status != 200)' \
        "$base/readyz" >/dev/null 2>&1; then
        ready=1
        break
    fi
    sleep 0.1
done
if [ -z "$ready" ]; then
    echo "fuzz: $base/readyz did not answer 200 within 30 s" >&2
    server_log
    exit 1
fi

echo "fuzz: schemathesis $("$st" --version | sed 's/.* //') against $base ($examples cases per operation and phase, seed $seed)"
mkdir -p .build-fuzz
status=0
# Hypothesis (under schemathesis) keeps its caches here rather than in .hypothesis/ at the top of the work tree.
HYPOTHESIS_STORAGE_DIRECTORY="$PWD/.build-fuzz/hypothesis" "$st" --config-file scripts/fuzz.toml run "$spec" \
    --url "$base" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance \
    --phases examples,coverage,fuzzing \
    --mode all \
    --max-examples "$examples" \
    --seed "$seed" \
    --generation-database none \
    --workers 1 \
    --request-timeout 20 \
    --no-color \
    --report ndjson --report-dir .build-fuzz \
    || status=$?

if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "fuzz: the server died during the run" >&2
    server_log
    exit 1
fi
if [ "$status" -ne 0 ]; then
    echo "fuzz: schemathesis failed (exit $status)" >&2
    server_log
    exit "$status"
fi
echo "fuzz: passed"
