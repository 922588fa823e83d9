#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on 127.0.0.1 for the tests.
#
#   bash scripts/postgres-env.sh start DIR   installs PostgreSQL from Debian's packages if missing, creates a cluster in
#                                            DIR, starts it on a free loopback port, and prints the admin URL
#                                            (postgres://gatehouse:gatehouse@127.0.0.1:PORT/postgres); it takes TLS too
#                                            (a self-signed certificate made here), for the tests that ask for it
#   bash scripts/postgres-env.sh stop DIR [MODE]
#                                            stops it (the caller removes DIR); MODE is pg_ctl's shutdown mode, `fast`
#                                            (the default: sessions are told, SQLSTATE 57P01) or `immediate` (the
#                                            postmaster kills its children: sessions just drop)
#   bash scripts/postgres-env.sh terminate DIR
#                                            ends every client session but its own (`pg_terminate_backend`) and
#                                            prints how many
#   bash scripts/postgres-env.sh restart DIR starts a stopped cluster again on its port (the fault tests stop a cluster
#                                            of their own with `pg_ctl stop -m fast` and bring it back)
#
# The server listens on loopback only, trusts no one without the password, and runs as the `postgres` user when
# started as root (initdb refuses root).
set -euo pipefail

command=${1:?usage: postgres-env.sh start|stop DIR}
dir=${2:?usage: postgres-env.sh start|stop DIR}

bindir() {
    local found
    # The server's binaries (initdb), not just the client that may be installed alone.
    found=$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$found" ] && dirname "$found"
}

as_owner() {
    if [ "$(id -u)" = "0" ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi
}

case "$command" in
start)
    [ -n "$(bindir)" ] || bash "$(dirname "$0")/apt-install.sh" postgres-env postgresql
    bin=$(bindir)
    mkdir -p "$dir"
    [ "$(id -u)" = "0" ] && chown postgres "$dir"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    echo gatehouse > "$dir/password"
    [ "$(id -u)" = "0" ] && chown postgres "$dir/password"
    as_owner "'$bin/initdb' -D '$dir/data' -U gatehouse --pwfile='$dir/password' --auth=scram-sha-256 -E UTF8 --no-locale" >/dev/null
    command -v openssl >/dev/null || bash "$(dirname "$0")/apt-install.sh" postgres-env openssl
    as_owner "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj /CN=127.0.0.1 -keyout '$dir/data/server.key' -out '$dir/data/server.crt' && chmod 600 '$dir/data/server.key'" >/dev/null 2>"$dir/openssl.log" || { cat "$dir/openssl.log" >&2; exit 1; }
    as_owner "'$bin/pg_ctl' -D '$dir/data' -o \"-p $port -k '$dir' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=1000 -c ssl=on\" -l '$dir/log' -w start" >/dev/null
    echo "$port" > "$dir/port"
    echo "postgres://gatehouse:gatehouse@127.0.0.1:$port/postgres"
    ;;
restart)
    bin=$(bindir)
    port=$(cat "$dir/port")
    as_owner "'$bin/pg_ctl' -D '$dir/data' -o \"-p $port -k '$dir' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=1000 -c ssl=on\" -l '$dir/log' -w start" >/dev/null
    ;;
stop)
    bin=$(bindir)
    mode=${3:-fast}
    case "$mode" in fast|immediate) ;; *) echo "stop mode: fast or immediate" >&2; exit 2 ;; esac
    [ -d "$dir/data" ] && as_owner "'$bin/pg_ctl' -D '$dir/data' -m $mode -w stop" >/dev/null 2>&1 || true
    ;;
terminate)
    bin=$(bindir)
    PGPASSWORD=gatehouse "$bin/psql" -h 127.0.0.1 -p "$(cat "$dir/port")" -U gatehouse -d postgres -Atc \
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
    ;;
*)
    echo "usage: postgres-env.sh start|stop|restart|terminate DIR" >&2
    exit 2
    ;;
esac
