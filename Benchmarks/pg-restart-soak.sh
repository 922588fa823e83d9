#!/usr/bin/env bash
# A long soak of `gatehouse serve` on PostgreSQL that is stopped, started, killed and whose sessions are ended, at
# random, under load. Not in CI (the fault suite's PostgresRestartFaultTests is its short form there).
#
#   bash Benchmarks/pg-restart-soak.sh        SOAK_MINUTES (10), SOAK_POOL (4), SOAK_CLIENTS (6), GATEHOUSE_BIN
#                                             (.build/debug/gatehouse)
#
# Fails (exit 1) if the server dies, a request gets no answer or a 500, a request takes longer than
# connect_timeout + query_timeout + 2 s (+2 s of slack), registrations do not succeed again within 15 s of the last
# start, or an acknowledged registration cannot log in.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
minutes=${SOAK_MINUTES:-10}; pool=${SOAK_POOL:-4}; clients=${SOAK_CLIENTS:-6}
bin=${GATEHOUSE_BIN:-$root/.build/debug/gatehouse}
work=$(mktemp -d); chmod 755 "$work"
pg() { bash "$root/scripts/postgres-env.sh" "$1" "$work/pg" "${@:2}"; }
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; for p in "${loops[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done; pg stop immediate || true; rm -rf "$work"; }
trap cleanup EXIT
admin=$(pg start)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$work/gatehouse.yaml" <<YAML
database: { url: "$admin?pool=$pool&connect_timeout=2&query_timeout=2" }
apps:
  - id: soak
    providers: { local-userpass: { confirmation: auto } }
    passwordHash: { memoryKiB: 64, iterations: 1, parallelism: 1 }
    rateLimits: { enabled: false }
    loginBackoff: { enabled: false }
YAML
(cd "$work" && exec "$bin" serve --config gatehouse.yaml --port "$port" >"$work/out" 2>"$work/err") & server=$!
base="http://127.0.0.1:$port"
for _ in $(seq 100); do curl -sf "$base/healthz" >/dev/null && break; sleep 0.2; done
register() { curl -s -o /dev/null -m 60 -w '%{http_code} %{time_total}\n' -X POST -H 'Content-Type: application/json' \
    -d "{\"email\":\"$1@example.com\",\"password\":\"correct horse\"}" "$base/api/client/v2.0/app/soak/auth/providers/local-userpass/register"; }
loops=()
for c in $(seq "$clients"); do
    ( n=0; while true; do n=$((n + 1)); echo "c$c-$n $(register "c$c-$n")"; done ) >"$work/load-$c" & loops+=($!)
done
end=$((SECONDS + minutes * 60)); events=0
while [ $SECONDS -lt $end ]; do
    case $((RANDOM % 4)) in
        0) pg stop fast ;; 1) pg stop immediate ;; 2) pg terminate >/dev/null; sleep 1; continue ;;
        3) pg stop immediate; sleep 0.$((RANDOM % 10)); pg restart; sleep 0.$((RANDOM % 5)); pg stop fast ;;
    esac
    sleep $((RANDOM % 9)); pg restart; sleep $((2 + RANDOM % 6)); events=$((events + 1))
    kill -0 "$server" 2>/dev/null || { echo "soak: the server died after $events events:"; grep -m5 -E "Precondition|Fatal|crashed" "$work/err"; exit 1; }
done
for p in "${loops[@]}"; do kill "$p"; done; loops=()
ok=""; for _ in $(seq 150); do [ "$(register "back-$RANDOM$RANDOM" | cut -d' ' -f1)" = 201 ] && { ok=1; break; }; sleep 0.1; done
[ -n "$ok" ] || { echo "soak: registrations did not succeed again within 15 s"; exit 1; }
cat "$work"/load-* | awk '$2 != 201 && $2 != 503 { bad++; print "soak: " $0 } $3 > 8 { slow++; print "soak: slow " $0 }
    { n[$2]++ } END { for (s in n) printf "soak: %d answered %s\n", n[s], s; exit (bad + slow > 0) }'
missing=0
for email in $(awk '$2 == 201 { print $1 }' "$work"/load-*); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        -d "{\"username\":\"$email@example.com\",\"password\":\"correct horse\"}" "$base/api/client/v2.0/app/soak/auth/providers/local-userpass/login")
    [ "$code" = 200 ] || { missing=$((missing + 1)); echo "soak: $email was acknowledged and cannot log in ($code)"; }
done
echo "soak: $events events in $minutes min, pool $pool, $clients clients; $missing acknowledged registrations missing"
[ "$missing" = 0 ]
