#!/usr/bin/env bash
# The benchmark, in one command, from a fresh clone:
#
#   bash Benchmarks/run.sh [Benchmarks/run.py options, e.g. --databases sqlite --duration 10]
#
# Installs wrk (Debian's package) when missing, builds gatehouse (as scripts/release.sh does, the Swift runtime
# linked statically) and argon2-bench in release mode in .build-release (incremental when it is there already: 12–25 minutes the first time on 2 cores), sets up the
# peer's virtual environment (Benchmarks/peer/setup.sh), then runs Benchmarks/run.py: Gatehouse and the peer
# on SQLite, then on a throwaway PostgreSQL cluster (scripts/postgres-env.sh installs PostgreSQL when missing).
# Results: Benchmarks/results/DATE-sqlite.json, DATE-postgres.json, latest.md, latest.svg.
#
# Everything runs under `nice -n 19` (the build machines are shared); BENCH_NICE=0 runs at normal priority on
# a machine of its own. BENCH_SKIP_BUILD=1 uses the binaries in .build-release as they are.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

command -v wrk >/dev/null 2>&1 || bash scripts/apt-install.sh bench wrk

# niced: runs a command under BENCH_NICE, its compilers included.
source Benchmarks/niced.sh

if [ "${BENCH_SKIP_BUILD:-0}" != "1" ]; then
    echo "bench: building gatehouse and argon2-bench in release mode (.build-release)" >&2
    # The server as it ships (scripts/release.sh, with scripts/release-flags.sh): argon2-bench with the same flags, so
    # that the two builds share .build-release instead of each rebuilding it for the other.
    source scripts/release-flags.sh
    niced swift build "${release_flags[@]}" --product gatehouse --scratch-path .build-release >&2
    niced swift build "${release_flags[@]}" --product argon2-bench --scratch-path .build-release >&2
fi

mkdir -p .build-bench
bash Benchmarks/peer/setup.sh "sqlite:///$root/.build-bench/peer-setup.sqlite" >/dev/null

exec "${nice[@]}" python3 Benchmarks/run.py "$@"
