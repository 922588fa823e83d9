# Sourced by the benchmark scripts: `nice` (the array to prefix a command with) and `niced`.
# Everything runs under `nice -n ${BENCH_NICE:-19}` (the build machines are shared); BENCH_NICE=0 runs at normal
# priority on a machine of its own.
nice=(nice -n "${BENCH_NICE:-19}")

descendants() {
    local p
    for p in $(ps -o pid= --ppid "$1"); do
        echo "$p"
        descendants "$p"
    done
}

# Runs "$@" niced and keeps its descendants niced too: swift-build starts its compilers at nice 0 whatever its
# own priority is.
niced() {
    "${nice[@]}" "$@" &
    local pid=$! pids
    while kill -0 "$pid" 2>/dev/null; do
        if [ "${BENCH_NICE:-19}" != "0" ]; then
            pids=$(descendants "$pid")
            [ -z "$pids" ] || renice -n "${BENCH_NICE:-19}" -p $pids >/dev/null 2>&1 || true
        fi
        sleep 1
    done
    wait "$pid"
}
