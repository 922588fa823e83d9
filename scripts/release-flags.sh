# Sourced by scripts/release.sh, Benchmarks/run.sh and Benchmarks/import.sh: how the release `gatehouse` is built, in one place.
#
# - The Swift runtime and Foundation linked statically (one file that runs without a toolchain).
# - Every Swift function in a section of its own (`-function-sections`, for every module, the dependencies too), and
#   the functions a request runs laid out together, hottest first (gold's `--section-ordering-file`, from
#   scripts/hot-functions.txt, which `Benchmarks/hot_functions.py` writes). Swift otherwise keeps a module's
#   functions in one section, and a request's 1.35 MB of code lies across 1,380 pages of a 35 MB text section; packed,
#   across 648. A request on SQLite then costs 5–10% less CPU, most where the caches are cold: an idle server's request, a
#   login after its hash (Benchmarks/PROFILING.md). A name the file lists and the binary lacks is ignored, so a stale
#   file costs only the gain.
release_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
release_flags=(
    -c release --static-swift-stdlib
    -Xswiftc -Xfrontend -Xswiftc -function-sections
    -Xlinker "--section-ordering-file=$release_root/scripts/hot-functions.txt"
)
