#!/usr/bin/env python3
"""What one request costs the server, step by step: the figures of the per-request budget in PROFILING.md.

    python3 Benchmarks/per_request.py [--gatehouse BIN] [--databases sqlite,postgres]
                                      [--scenarios healthz,refresh,profile,login] [--requests 3000] [--callgrind] [--strace]
                                      [--verified-token-cache N]

For each database and scenario it starts the release binary with the benchmark's configuration (production limits,
audit and metrics on), makes the users and tokens, warms the server up, and then measures N requests of the scenario
two ways:

- **one at a time** (one connection, the next request sent when the answer arrives: a server that is idle between
  requests, where every request wakes its threads — the case of half load and below): server CPU µs per request
  (utime + stime of every thread, from /proc), the server threads' context switches per request (voluntary: a thread
  went to sleep; involuntary: it was preempted), and with `perf stat` on the server's threads the wake-ups they caused
  and their switches; with `--strace`, the system calls per request by name (a separate pass: strace slows the server
  down, but counts are counts);
- **at saturation** (16 connections through wrk): CPU µs and context switches per request, where threads find work
  queued and sleep less.

`login` (email/password, cycling through the benchmark's users) runs a twentieth of `--requests` one at a time (a
login is a hash, about 18 ms) and also reports its hash's CPU, as the server counts it
(`gatehouse_password_hash_cpu_seconds_total`), and the CPU beyond it: what the login target turns on. It is not run
under callgrind (valgrind would take minutes per hash).

With `--callgrind` (a third pass, under valgrind, one connection) it also counts the instructions the server executes
per request — a figure that does not depend on what else the machine is doing, or on the processor's speed — and
writes the top functions by inclusive instructions to the work folder (callgrind_annotate).

The benchmark's tokens (64 per scenario) are presented again and again, so each is verified once and then found among
the tokens the server remembers as verified; `--verified-token-cache 0` measures a server that verifies every token
at every use, as one whose clients present more tokens than its cache holds.

Prints a table and writes every figure as JSON (`--out`). Standard library only; uses run.py's server and load code.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run  # noqa: E402  Benchmarks/run.py

ROOT = HERE.parent


def thread_switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches summed over every thread of the process, from /proc."""
    vol = invol = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        invol += int(line.split()[1])
        except OSError:
            pass
    return vol, invol


class OneAtATime:
    """N requests of a one-request scenario over one keep-alive connection, each sent when the previous answer
    arrived. Checks every status."""

    def __init__(self, port: int, scenario: str, tokens: list[str], users: int = 16):
        self.port, self.scenario, self.tokens, self.users = port, scenario, tokens, users

    def request(self, k: int) -> tuple[str, str, dict, bytes | None]:
        if self.scenario == "healthz":
            return "GET", "/healthz", {}, None
        if self.scenario == "login":
            body = json.dumps({"username": f"bench-user-{k % self.users}@example.com", "password": run.PASSWORD})
            return ("POST", "/api/client/v2.0/app/bench/auth/providers/local-userpass/login",
                    {"Content-Type": "application/json"}, body.encode())
        token = self.tokens[k % len(self.tokens)]
        if self.scenario == "refresh":
            return "POST", "/api/client/v2.0/auth/session", {"Authorization": "Bearer " + token}, None
        if self.scenario == "profile":
            return "GET", "/api/client/v2.0/auth/profile", {"Authorization": "Bearer " + token}, None
        raise SystemExit(f"per_request.py measures healthz, refresh, profile and login, not {self.scenario}")

    def run(self, count: int, timeout: float = 60) -> None:
        expected = {"healthz": 200, "refresh": 201, "profile": 200, "login": 200}[self.scenario]
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        for k in range(count):
            method, path, headers, body = self.request(k)
            connection.request(method, path, body=body, headers=headers)
            answer = connection.getresponse()
            answer.read()
            if answer.status != expected:
                raise RuntimeError(f"{self.scenario}: HTTP {answer.status}")
        connection.close()


def perf_stat(pid: int) -> subprocess.Popen | None:
    if not shutil.which("perf"):
        return None
    events = "sched:sched_wakeup,sched:sched_switch,task-clock"
    return subprocess.Popen(["perf", "stat", "-x", ",", "-e", events, "-p", str(pid)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def perf_result(process: subprocess.Popen | None) -> dict:
    if process is None:
        return {}
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    out = {}
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].replace(".", "").isdigit():
            out[fields[2]] = float(fields[0])
    return out


def statement_count(server: run.Gatehouse) -> float | None:
    """The statements the server has run, from its `gatehouse_db_statement_duration_seconds` histogram."""
    status, body = run.http("GET", server.base + "/metrics", timeout=10)
    if status != 200:
        return None
    return sum(float(line.split()[-1]) for line in body.decode().splitlines()
               if line.startswith("gatehouse_db_statement_duration_seconds_count"))


def measure(server: run.Gatehouse, scenario: str, tokens: list[str], token_file: Path | None, args) -> dict:
    pid = server.process.pid
    driver = OneAtATime(server.port, scenario, tokens, args.users)
    hashing = scenario == "login"
    requests = max(20, args.requests // 20) if hashing else args.requests
    driver.run(min(500, requests))  # warm-up: connections, first compilations, caches
    out: dict = {}

    # One at a time.
    hash0 = run.hash_counters(server) if hashing else None
    cpu0, (v0, i0) = run.cpu_seconds(pid), thread_switches(pid)
    perf = perf_stat(pid)
    time.sleep(0.2)  # perf attaches
    start = time.monotonic()
    driver.run(requests)
    wall = time.monotonic() - start
    counters = perf_result(perf)
    cpu1, (v1, i1) = run.cpu_seconds(pid), thread_switches(pid)
    hash1 = run.hash_counters(server) if hashing else None
    n = requests
    one = {"requests": n, "wall_us_per_request": round(1e6 * wall / n, 1),
           "cpu_us_per_request": round(1e6 * (cpu1 - cpu0) / n, 1),
           "voluntary_switches_per_request": round((v1 - v0) / n, 2),
           "involuntary_switches_per_request": round((i1 - i0) / n, 2)}
    if hash0 and hash1:
        # Only logins hash: the server's count over the run is these requests' hashes.
        one["hash_cpu_us_per_request"] = round(1e6 * (hash1[0] - hash0[0]) / n, 1)
        one["beyond_hash_cpu_us_per_request"] = round(one["cpu_us_per_request"] - one["hash_cpu_us_per_request"], 1)
    if counters:
        # perf counts the events of the server's threads: wake-ups they caused (of each other and of the client),
        # switches away from them.
        one["perf_wakeups_per_request"] = round(counters.get("sched:sched_wakeup", 0) / n, 2)
        one["perf_switches_per_request"] = round(counters.get("sched:sched_switch", 0) / n, 2)
    out["one_at_a_time"] = one

    # Saturation, through wrk.
    cpu0, (v0, i0) = run.cpu_seconds(pid), thread_switches(pid)
    statements0 = statement_count(server)
    result = run.run_wrk(server, scenario, 16, args.duration, None, token_file, args.users, f"per-request-{scenario}")
    cpu1, (v1, i1) = run.cpu_seconds(pid), thread_switches(pid)
    statements1 = statement_count(server)
    n = result["requests"]
    out["saturation"] = {"requests": n, "requests_per_s": round(result["requests_per_s"], 1),
                         "cpu_us_per_request": round(1e6 * (cpu1 - cpu0) / n, 1),
                         "voluntary_switches_per_request": round((v1 - v0) / n, 2),
                         "involuntary_switches_per_request": round((i1 - i0) / n, 2),
                         "cpu_steal_pct": result["cpu_steal_pct"]}
    if statements0 is not None and statements1 is not None:
        # Statements (and SQLite transactions) the server ran per request: on PostgreSQL, how many reads shared each
        # statement (ReadBatcher) under this run's load.
        out["saturation"]["statements_per_request"] = round((statements1 - statements0) / n, 3)
    if result.get("server_hashes"):
        hashed = 1e6 * result["server_hash_cpu_s"] / n
        out["saturation"]["hash_cpu_us_per_request"] = round(hashed, 1)
        out["saturation"]["beyond_hash_cpu_us_per_request"] = round(out["saturation"]["cpu_us_per_request"] - hashed, 1)

    if args.strace and shutil.which("strace"):
        summary = Path(tempfile.mktemp(prefix="strace-", dir=server.workdir))
        tracer = subprocess.Popen(["strace", "-f", "-c", "-o", str(summary), "-p", str(pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        count = max(20, requests // 5) if hashing else max(200, args.requests // 5)
        driver.run(count)
        tracer.send_signal(signal.SIGINT)
        tracer.wait(30)
        calls = {}
        for line in summary.read_text().splitlines():
            fields = line.split()
            if len(fields) >= 5 and fields[-1].isidentifier() and fields[3].isdigit():
                calls[fields[-1]] = int(fields[3])
        out["syscalls_per_request"] = {name: round(c / count, 2) for name, c in
                                       sorted(calls.items(), key=lambda kv: -kv[1]) if c / count >= 0.05}
    return out


def configure(server: run.Gatehouse, args) -> run.Gatehouse:
    """The benchmark's configuration, with `--verified-token-cache` when given."""
    if args.verified_token_cache is not None:
        text = server.config.read_text()
        marker = "metrics: { enabled: true } }"
        assert marker in text, "Benchmarks/gatehouse-bench.yaml's server line changed"
        server.config.write_text(text.replace(marker, f"metrics: {{ enabled: true }}, verifiedTokenCache: {args.verified_token_cache} }}"))
    return server


def start_under_callgrind(server: run.Gatehouse, workdir: Path) -> run.Gatehouse:
    """`server` (whose binary must be a copy without debug information: ``without_debug_info``) started under
    callgrind, its dumps in `workdir`, ready; the caller stops it."""
    argv, env, cwd = server.command()
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={workdir}/callgrind.out.%p", "--dump-instr=no",
            "--collect-jumps=no"] + argv
    log = open(server.log_path, "ab")
    server.process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    run.wait_ready(server.base + "/readyz", server.process, timeout=300)
    return server


def without_debug_info(binary: Path, workdir: Path) -> Path:
    """A copy of `binary` without its debug information: Valgrind 3.19 (Debian 12) cannot read the DWARF 5 the
    toolchain writes. Its symbols stay, so instructions are still attributed to functions."""
    stripped = workdir / "gatehouse-no-debug"
    subprocess.run(["objcopy", "--strip-debug", str(binary), str(stripped)], check=True)
    return stripped


def counted(server: run.Gatehouse, driver: "OneAtATime", count: int, name: str, workdir: Path) -> Path:
    """Runs `count` requests of `driver` between a zeroing and a dump (named `name`) of callgrind's counters; the dump."""
    pid = str(server.process.pid)
    subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
    driver.run(count)
    subprocess.run(["callgrind_control", "-d", name, pid], check=True, capture_output=True)
    return max(workdir.glob(f"callgrind.out.{pid}.*"), key=lambda p: p.stat().st_mtime)


def callgrind(binary: Path, workdir: Path, db_url: str, scenarios: list[str], args) -> dict:
    """Instructions per request, each scenario measured between a zeroing and a dump of callgrind's counters."""
    if not shutil.which("valgrind"):
        return {}
    server = configure(run.Gatehouse(workdir, db_url, without_debug_info(binary, workdir)), args)
    try:
        start_under_callgrind(server, workdir)
        access, refresh = run.prepare(server, 4, 8, workdir)
        tokens = {"refresh": refresh.read_text().split(), "profile": access.read_text().split(), "healthz": []}
        result = {}
        for scenario in scenarios:
            driver = OneAtATime(server.port, scenario, tokens[scenario])
            driver.run(200)
            dump = counted(server, driver, args.callgrind_requests, scenario, workdir)
            total = 0
            for line in dump.read_text(errors="replace").splitlines():
                if line.startswith("summary:") or line.startswith("totals:"):
                    total = int(line.split()[1])
            annotate = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(dump)], capture_output=True,
                                      text=True).stdout
            top = workdir / f"callgrind-{scenario}.txt"
            top.write_text(annotate)
            result[scenario] = {"requests": args.callgrind_requests,
                                "instructions_per_request": round(total / args.callgrind_requests),
                                "annotated": str(top)}
        return result
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gatehouse", type=Path, default=ROOT / ".build-release" / "release" / "gatehouse")
    p.add_argument("--databases", default="sqlite")
    p.add_argument("--scenarios", default="healthz,refresh,profile")
    p.add_argument("--requests", type=int, default=3000, help="requests one at a time, per scenario")
    p.add_argument("--duration", type=float, default=8, help="seconds at saturation, per scenario")
    p.add_argument("--users", type=int, default=16)
    p.add_argument("--strace", action="store_true", help="also count system calls per request (a slower pass)")
    p.add_argument("--callgrind", action="store_true", help="also count instructions per request under valgrind")
    p.add_argument("--callgrind-requests", type=int, default=1000)
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--verified-token-cache", type=int, default=None,
                   help="the server's server.verifiedTokenCache (0: every token verified at every use, as a server whose "
                        "clients present more tokens than the cache holds; default: the server's default)")
    args = p.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s]
    binary = args.gatehouse.resolve()
    work = Path(tempfile.mkdtemp(prefix="gatehouse-per-request-"))
    os.chmod(work, 0o755)
    report = {"machine": run.machine(), "commit": run.git_commit(), "binary": str(binary), "verified_token_cache": args.verified_token_cache, "databases": {}}
    try:
        for db in [d for d in args.databases.split(",") if d]:
            dbdir = work / db
            dbdir.mkdir()
            os.chmod(dbdir, 0o777)
            pg = run.Postgres(dbdir) if db == "postgres" else None
            if pg:
                pg.__enter__()
            try:
                url = (f"sqlite:{dbdir}/gatehouse.sqlite" if db == "sqlite"
                       else pg.url("gatehouse_bench") + "?sslmode=disable")
                server = configure(run.Gatehouse(dbdir, url, binary), args)
                server.start()
                try:
                    access, refresh = run.prepare(server, args.users, 64, dbdir)
                    files = {"refresh": refresh, "profile": access, "healthz": None, "login": None}
                    figures = {}
                    for scenario in scenarios:
                        tokens = files[scenario].read_text().split() if files[scenario] else []
                        figures[scenario] = measure(server, scenario, tokens, files[scenario], args)
                        run.log(f"{db} {scenario}: {json.dumps(figures[scenario])}")
                finally:
                    server.stop()
                if args.callgrind:
                    cg_dir = dbdir / "callgrind"
                    cg_dir.mkdir()
                    if db == "sqlite":
                        url = f"sqlite:{cg_dir}/gatehouse.sqlite"
                    measured = [s for s in scenarios if s != "login"]
                    for scenario, figures_cg in callgrind(binary, cg_dir, url, measured, args).items():
                        figures[scenario]["callgrind"] = figures_cg
                        run.log(f"{db} {scenario}: {figures_cg['instructions_per_request']:,} instructions per request")
                report["databases"][db] = figures
            finally:
                if pg:
                    pg.__exit__()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            run.log(f"kept {work}")
    print(table(report))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


def instructions(figures: dict) -> str:
    n = figures.get("callgrind", {}).get("instructions_per_request")
    return f"{n:,}" if n else "–"


def table(report: dict) -> str:
    lines = [f"{report['machine']['cpu']}, commit {report['commit']}", "",
             "| database | scenario | one at a time: CPU µs | switches (vol/invol) | wake-ups caused | "
             "saturation: CPU µs | switches (vol/invol) | instructions | of the floor (CPU) |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for db, figures in report["databases"].items():
        floor = figures.get("healthz", {}).get("saturation", {}).get("cpu_us_per_request")
        for scenario, f in figures.items():
            one, sat = f["one_at_a_time"], f["saturation"]
            lines.append(
                f"| {db} | {scenario} | {one['cpu_us_per_request']} | {one['voluntary_switches_per_request']} / "
                f"{one['involuntary_switches_per_request']} | {one.get('perf_wakeups_per_request', '–')} | "
                f"{sat['cpu_us_per_request']} | {sat['voluntary_switches_per_request']} / "
                f"{sat['involuntary_switches_per_request']} | "
                f"{instructions(f)} | "
                f"{(floor / sat['cpu_us_per_request']) if floor else float('nan'):.2f} |")
        for scenario, f in figures.items():
            one, sat = f["one_at_a_time"], f["saturation"]
            if "beyond_hash_cpu_us_per_request" in one:
                lines.append(f"\n{db} {scenario}, CPU beyond the hash: one at a time {one['beyond_hash_cpu_us_per_request']} µs "
                             f"(hash {one['hash_cpu_us_per_request']}), at saturation "
                             f"{sat.get('beyond_hash_cpu_us_per_request', '–')} µs (hash {sat.get('hash_cpu_us_per_request', '–')})")
            if "syscalls_per_request" in f:
                lines.append(f"\n{db} {scenario}, system calls per request (one at a time): "
                             + ", ".join(f"{k} {v}" for k, v in f["syscalls_per_request"].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
