#!/usr/bin/env bash
# How fast `gatehouse import --from csv` brings users in, in one command, from a fresh clone:
#
#   bash Benchmarks/import.sh
#
# Builds gatehouse in release mode in .build-release (incremental when it is there already: 12–25 minutes the first
# time on 2 cores), generates a CSV export of IMPORT_USERS users (default 100000) and a smaller one of its first
# IMPORT_USERS_SMALL rows (default 20000), and imports each with the release binary into a fresh database: SQLite (a
# file in a temporary folder), then a throwaway PostgreSQL cluster (scripts/postgres-env.sh installs PostgreSQL when
# missing). On each, it then imports the large file again into the database that has it: every record is skipped
# ("already imported"), which is what an idempotent re-run costs. Each import is timed by GNU time: wall clock, the
# process's CPU (user + system) and its peak RSS (two sizes show whether memory stays flat while the file streams);
# on PostgreSQL also the CPU its server processes spent meanwhile (from /proc), which the wall clock includes.
# The database is migrated before the clock starts (`gatehouse migrate`), so the figures are the import's alone.
# It prints a Markdown table, the machine and its load.
#
# Everything runs under `nice -n 19` (the build machines are shared): wall clock then depends on what else the
# machine runs, CPU seconds much less. BENCH_NICE=0 runs at normal priority on a machine of its own.
# BENCH_SKIP_BUILD=1 uses the binary in .build-release as it is; IMPORT_GATEHOUSE=PATH times another binary (say a
# debug build, to check the script: its figures are not the release's). IMPORT_DATABASES=sqlite skips PostgreSQL.
# IMPORT_KEEP=1 keeps the work folder (the CSV files, the SQLite databases, the logs and the reports).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
users=${IMPORT_USERS:-100000}
small=${IMPORT_USERS_SMALL:-20000}
databases=${IMPORT_DATABASES:-sqlite,postgres}
[ "$small" -lt "$users" ] || small=$((users / 5))
[ -x /usr/bin/time ] || bash scripts/apt-install.sh import-bench time

# niced: runs a command under BENCH_NICE, its compilers included.
source Benchmarks/niced.sh

if [ -z "${IMPORT_GATEHOUSE:-}" ] && [ "${BENCH_SKIP_BUILD:-0}" != "1" ]; then
    echo "import-bench: building gatehouse in release mode (.build-release)" >&2
    source scripts/release-flags.sh  # as it ships, and as Benchmarks/run.sh builds .build-release
    niced swift build "${release_flags[@]}" --product gatehouse --scratch-path .build-release >&2
fi
gatehouse=$(realpath "${IMPORT_GATEHOUSE:-.build-release/release/gatehouse}")
[ -x "$gatehouse" ] || { echo "import-bench: no binary at $gatehouse" >&2; exit 1; }
python=$(bash scripts/python-env.sh)

# The work folder is outside the clone and readable by all: the PostgreSQL cluster below it runs as the postgres
# user when this runs as root, and cannot enter a private folder.
work=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-import-bench-XXXXXX")
chmod 755 "$work"
pg_started=0
cleanup() {
    [ "$pg_started" = "0" ] || bash scripts/postgres-env.sh stop "$work/pg"
    if [ "${IMPORT_KEEP:-0}" = "1" ]; then echo "import-bench: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# The export: email,password_hash,email_verified,custom_data,id. Every row has its own address and id. The hash is
# one real bcrypt hash (cost 10, as most systems that use bcrypt store it), made once and repeated on every row: the
# import only parses a hash to check that a login can verify it (its form, its cost), it never computes one, so a
# distinct hash per row would cost the import nothing more and the generator 100,000 bcrypt runs. Nine users in ten
# have a verified address (the rest are imported pending confirmation); one in five has a small custom_data object.
echo "import-bench: generating $users users ($work/users.csv)" >&2
"${nice[@]}" "$python" - "$users" "$work/users.csv" <<'EOF'
import bcrypt, csv, json, sys

count, path = int(sys.argv[1]), sys.argv[2]
hash = bcrypt.hashpw(b"correct horse battery staple", bcrypt.gensalt(rounds=10)).decode()
plans = ["free", "team", "pro"]
with open(path, "w", newline="") as f:
    out = csv.writer(f)
    out.writerow(["email", "password_hash", "email_verified", "custom_data", "id"])
    for i in range(count):
        data = json.dumps({"plan": plans[i % 3], "seats": i % 7 + 1}) if i % 5 == 0 else ""
        out.writerow([f"user{i:07d}@example.com", hash, "false" if i % 10 == 9 else "true", data, f"src-{i:07d}"])
EOF
head -n "$((small + 1))" "$work/users.csv" > "$work/users-small.csv"

# The CPU time the hypervisor gave to other machines (steal), as a share of all CPU time, between two snapshots
# of /proc/stat's cpu line: on a shared VM, what makes one run's wall clock differ from the next.
# Fields 2-9: user, nice, system, idle, iowait, irq, softirq, steal (guest time is counted in user already).
cpu_snapshot() { awk '/^cpu / { total = 0; for (i = 2; i <= 9; i++) total += $i; print total, $9; exit }' /proc/stat; }
steal_share() {
    awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); d = y[1] - x[1];
        share = d > 0 ? 100 * (y[2] - x[2]) / d : 0; printf "%.1f", share }'
}

# The PostgreSQL cluster's CPU seconds so far: the postmaster's own and its reaped children's (backends that have
# exited), plus its live children's (the background processes). Zero without a cluster (SQLite runs in the process).
server_cpu() {
    [ "$pg_started" = "1" ] || { echo 0; return; }
    local postmaster
    postmaster=$(head -n 1 "$work/pg/data/postmaster.pid")
    { cat "/proc/$postmaster/stat"; for child in $(ps -o pid= --ppid "$postmaster"); do cat "/proc/$child/stat" 2>/dev/null || true; done; } \
        | awk -v tick="$(getconf CLK_TCK)" -v postmaster="$postmaster" \
            '{ sum += $14 + $15; if ($1 == postmaster) sum += $16 + $17 } END { printf "%.2f", sum / tick }'
}

rows=()

# run_import NAME CONFIG FILE IMPORTED SKIPPED: imports FILE, checks the summary line and the report, adds a row.
run_import() {
    local name=$1 config=$2 file=$3 expect_imported=$4 expect_skipped=$5 log="$work/$1.log" before after server_before server_after
    local records=$((expect_imported + expect_skipped))
    echo "import-bench: $name ($records records)" >&2
    before=$(cpu_snapshot)
    server_before=$(server_cpu)
    # GNU time measures the gatehouse process itself: elapsed s, user s, system s, peak RSS KiB.
    "${nice[@]}" /usr/bin/time -f "%e %U %S %M" -o "$work/$name.time" \
        "$gatehouse" import --config "$config" --from csv --app bench --report "$work/$name.report" "$file" \
        >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
    after=$(cpu_snapshot)
    sleep 1  # the backends exit once the connections close; then the postmaster has their CPU time
    server_after=$(server_cpu)
    local summary="imported: $records records: $expect_imported users imported"
    grep -q "$summary" "$log" && grep -q ", $expect_skipped skipped" "$log" \
        || { echo "import-bench: $name: expected \"$summary … $expect_skipped skipped\":" >&2; cat "$log" >&2; exit 1; }
    [ "$(wc -l < "$work/$name.report")" -eq "$expect_skipped" ] \
        || { echo "import-bench: $name: the report does not have $expect_skipped lines" >&2; exit 1; }
    read -r wall user sys rss < "$work/$name.time"
    rows+=("$(awk -v name="$name" -v n="$records" -v wall="$wall" -v user="$user" -v sys="$sys" -v rss="$rss" \
        -v server="$(awk -v a="$server_before" -v b="$server_after" 'BEGIN { print b - a }')" -v pg="$pg_started" \
        -v steal="$(steal_share "$before" "$after")" '
        function group(x,   s, out) {  # 100000 -> 100,000
            s = sprintf("%d", x); out = ""
            while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
            return s out
        }
        BEGIN {
            # (No comparison inside printf: awk would take its ">" for a redirection to a file.)
            cpu = user + sys; rate = n / (wall > 0 ? wall : 0.01); per_cpu = n / (cpu > 0 ? cpu : 0.01)
            db = pg ? sprintf("%.1f", server) : "–"
            printf "| %s | %s | %.1f | %s | %.1f | %s | %s | %.1f | %.1f |", name, group(n), wall, group(rate), cpu, group(per_cpu), db, rss / 1024, steal
        }')")
}

# config NAME URL: a gatehouse.yaml with the one app the users join, on the database at URL, migrated.
config() {
    local yaml="$work/$1.yaml"
    cat > "$yaml" <<EOF
database: { url: "$2" }
apps:
  - id: bench
    providers: { local-userpass: { confirmation: email } }
EOF
    "${nice[@]}" "$gatehouse" migrate --config "$yaml" >"$work/$1-migrate.log" 2>&1 || { cat "$work/$1-migrate.log" >&2; exit 1; }
    echo "$yaml"
}

load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
if [[ ",$databases," == *",sqlite,"* ]]; then
    yaml=$(config sqlite-small "sqlite:$work/small.sqlite")
    run_import "sqlite, $small users" "$yaml" "$work/users-small.csv" "$small" 0
    yaml=$(config sqlite-large "sqlite:$work/large.sqlite")
    run_import "sqlite, $users users" "$yaml" "$work/users.csv" "$users" 0
    run_import "sqlite, re-run (all skipped)" "$yaml" "$work/users.csv" 0 "$users"
fi
if [[ ",$databases," == *",postgres,"* ]]; then
    # postgres-env.sh wants a folder that does not exist yet; it prints the admin URL on its last line.
    admin=$(bash scripts/postgres-env.sh start "$work/pg" | tail -n 1)
    pg_started=1
    for db in import_small import_large; do psql "$admin" -q -c "CREATE DATABASE $db"; done
    base=${admin%/*}
    yaml=$(config pg-small "$base/import_small?sslmode=disable")
    run_import "postgres, $small users" "$yaml" "$work/users-small.csv" "$small" 0
    yaml=$(config pg-large "$base/import_large?sslmode=disable")
    run_import "postgres, $users users" "$yaml" "$work/users.csv" "$users" 0
    run_import "postgres, re-run (all skipped)" "$yaml" "$work/users.csv" 0 "$users"
fi

model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
memory=$(awk '/^MemTotal/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)
echo
echo "\`gatehouse import --from csv\`, $(date -u +%Y-%m-%dT%H%M%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'),"
echo "$model ($(nproc) cores, $memory GiB), load average $load_at_start at the start, nice ${BENCH_NICE:-19}."
echo "Binary: ${gatehouse#"$root"/}."
echo
echo "| import | records | seconds | records/s | CPU s | records per CPU-s | PostgreSQL CPU s | peak RSS MiB | CPU steal % |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
printf '%s\n' "${rows[@]}"
