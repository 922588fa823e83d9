#!/usr/bin/env python3
"""Writes scripts/hot-functions.txt: the functions a request runs, hottest first, for the release link's layout.

    python3 Benchmarks/hot_functions.py [--gatehouse BIN] [--databases sqlite,postgres] [--requests 100]
                                        [--out scripts/hot-functions.txt]

scripts/release-flags.sh builds every Swift function into a section of its own and has gold lay out the sections
this file names first, in its order, so that the code a request runs sits on few pages instead of being spread over
the whole text section (Benchmarks/PROFILING.md measured 1,380 pages against 648, and what that saved).

How: the release binary (without its debug information, which Debian's valgrind cannot read) runs under callgrind
with the benchmark's configuration (Benchmarks/gatehouse-bench.yaml) and a 64 KiB password hash, so that a login
takes milliseconds under valgrind (the code a login runs is the same at any memory cost). It serves, one at a time,
`--requests` of each: a password login, a refresh, a profile read and a health check, after as many unmeasured ones,
on SQLite and then on a throwaway PostgreSQL cluster (scripts/postgres-env.sh), adding up both databases' counts.
Every function with instructions in those requests is listed as the section the compiler gives it
(`.text.` + its mangled name), ordered by instructions, most first. Functions of the C++ runtime, which callgrind
names demangled, are found by address in the symbol table. Names the link does not find (C code, one section per
file; functions gone since) are ignored by gold, so the file only needs writing again when the request path has
changed much; run it on a release binary (`bash Benchmarks/run.sh` builds one in .build-release).

Standard library only, besides valgrind, objcopy and nm; uses run.py's server and per_request.py's driver.
"""
import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import per_request  # noqa: E402
import run  # noqa: E402

SCENARIOS = ("login", "refresh", "profile", "healthz")


def self_instructions(dump: Path) -> collections.Counter:
    """Instructions by function (its own, not its callees') in a callgrind dump, names as callgrind wrote them."""
    names, counts, current, skip = {}, collections.Counter(), None, False
    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith("fn="):
            m = re.match(r"fn=\((\d+)\)(?: (.*))?", line)
            if m[2]:
                names[m[1]] = m[2]
            current = m[1]
        elif line.startswith("cfn="):
            m = re.match(r"cfn=\((\d+)\)(?: (.*))?", line)
            if m and m[2]:
                names[m[1]] = m[2]
        elif line.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost, not this function's own
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            if skip:
                skip = False
                continue
            parts = line.split()
            if len(parts) >= 2 and current:
                counts[current] += int(parts[1])
    total = collections.Counter()
    for key, count in counts.items():
        if count > 0:
            total[re.sub(r"'\d+$", "", names.get(key, key))] += count  # callgrind's recursion suffix
    return total


def symbols(binary: Path, demangle: bool) -> dict[str, int]:
    """Function symbols of `binary` by name (mangled, or as `nm -C` demangles them), with their addresses."""
    argv = ["nm", "--defined-only"] + (["-C"] if demangle else []) + [str(binary)]
    out = {}
    for line in subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            out.setdefault(parts[2], int(parts[0], 16))
    return out


def measure(binary: Path, workdir: Path, url: str, requests: int) -> collections.Counter:
    server = run.Gatehouse(workdir, url, per_request.without_debug_info(binary, workdir))
    config = server.config.read_text()
    assert "memoryKiB: 19456" in config, "Benchmarks/gatehouse-bench.yaml's password hash changed"
    server.config.write_text(config.replace("memoryKiB: 19456", "memoryKiB: 64"))
    try:
        per_request.start_under_callgrind(server, workdir)
        access, refresh = run.prepare(server, 4, 8, workdir)
        tokens = {"refresh": refresh.read_text().split(), "profile": access.read_text().split()}
        total = collections.Counter()
        for scenario in SCENARIOS:
            driver = per_request.OneAtATime(server.port, scenario, tokens.get(scenario, []), users=4)
            driver.run(requests)
            counts = self_instructions(per_request.counted(server, driver, requests, scenario, workdir))
            run.log(f"{scenario}: {len(counts)} functions, {sum(counts.values()) // requests:,} instructions a request")
            total.update(counts)
        return total
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gatehouse", type=Path, default=ROOT / ".build-release" / "release" / "gatehouse")
    p.add_argument("--requests", type=int, default=100, help="measured requests of each scenario")
    p.add_argument("--databases", default="sqlite,postgres", help="each adds the functions its requests run")
    p.add_argument("--out", type=Path, default=ROOT / "scripts" / "hot-functions.txt")
    args = p.parse_args()
    counts = collections.Counter()
    for database in args.databases.split(","):
        run.log(f"{database}:")
        with tempfile.TemporaryDirectory(prefix="gatehouse-hot-") as folder:
            if database == "sqlite":
                counts.update(measure(args.gatehouse.resolve(), Path(folder), f"sqlite:{folder}/gatehouse.sqlite", args.requests))
                continue
            with run.Postgres(Path(folder)) as pg:
                url = pg.url("gatehouse_bench") + "?sslmode=disable"
                counts.update(measure(args.gatehouse.resolve(), Path(folder), url, args.requests))
    mangled = symbols(args.gatehouse, demangle=False)
    by_address = {}
    for name, address in mangled.items():
        by_address.setdefault(address, name)
    demangled = symbols(args.gatehouse, demangle=True)
    sections, unknown = [], 0
    for name, _ in counts.most_common():
        symbol = name if name in mangled else by_address.get(demangled.get(name, -1))
        # A section name with a glob character would be read as a pattern by gold.
        if symbol is None or re.search(r"[*?\[\]\s]", symbol):
            unknown += 1
            continue
        sections.append(f".text.{symbol}")
    # No header: gold reads every line as a section name.
    args.out.write_text("".join(f"{s}\n" for s in dict.fromkeys(sections)))
    run.log(f"wrote {args.out}: {len(sections)} functions ({unknown} without a section of their own to name)")


if __name__ == "__main__":
    main()
