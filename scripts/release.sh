#!/usr/bin/env bash
# Builds the release `gatehouse`: optimised, with the Swift runtime and Foundation linked statically, SQLite and the
# server's resources compiled in. The result is one file that runs on a Linux host of the same architecture without
# a Swift toolchain (docs/deployment.md, "The release binary", says what it still needs from the host). The build's
# flags, with the layout of the code a request runs, are in scripts/release-flags.sh.
#
#   bash scripts/release.sh [OUTPUT_FOLDER]      (default: dist)
#
# Writes OUTPUT_FOLDER/gatehouse, OUTPUT_FOLDER/gatehouse.debug (the debug info, which gdb and lldb find through the
# binary's debug link; the binary keeps its symbol table, so a crash report still names functions) and
# OUTPUT_FOLDER/SHA256SUMS. A build from nothing takes about 12 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-dist}"

source scripts/release-flags.sh
swift build "${release_flags[@]}" --product gatehouse
built="$(swift build "${release_flags[@]}" --show-bin-path)/gatehouse"

# The toolchain's llvm-objcopy when there is one (it always understands the objects the toolchain made), else binutils'.
objcopy="$(dirname "$(readlink -f "$(command -v swift)")")/llvm-objcopy"
[ -x "$objcopy" ] || objcopy="$(command -v objcopy)"

mkdir -p "$out"
rm -f "$out/gatehouse" "$out/gatehouse.debug"
"$objcopy" --only-keep-debug "$built" "$out/gatehouse.debug"
(cd "$out" && "$objcopy" --strip-debug --add-gnu-debuglink=gatehouse.debug "$built" gatehouse)
chmod 0755 "$out/gatehouse"
chmod 0644 "$out/gatehouse.debug"
(cd "$out" && sha256sum gatehouse gatehouse.debug > SHA256SUMS)

echo "release binary: $out/gatehouse ($(du -m "$out/gatehouse" | cut -f1) MB; debug info $(du -m "$out/gatehouse.debug" | cut -f1) MB beside it)"
# What it asks of the host: the shared libraries it links (all from the C library and the C++ runtime) and the
# newest glibc symbol version it uses.
echo "needs from the host: $(ldd "$out/gatehouse" | awk '{print $1}' | grep -v '^/' | tr '\n' ' ')"
echo "newest glibc symbol: $("$(dirname "$objcopy")/llvm-objdump" -T "$out/gatehouse" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 || true)"
