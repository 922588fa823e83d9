#!/usr/bin/env python3
"""Benchmarks Gatehouse and its peer (django-allauth headless, JWT, gunicorn) side by side. Started by
Benchmarks/run.sh, which builds and installs what this needs; see docs/performance.md.

For each database (SQLite, then PostgreSQL) and each server: start it and time the start-up to a ready /readyz
(a first start that migrates an empty database, then a restart, which is the start-up reported), read its idle
RSS, make the users and tokens the scenarios need, then run each scenario with wrk (Benchmarks/load/driver.lua)
from a separate process on loopback: first at saturation (a fixed number of connections, each sending its next
request as soon as the answer arrives), then at a fixed moderate rate (a fraction of the saturation rate just
measured). For every run: flows/s, flow latency p50/p90/p99, the server's CPU seconds per 1,000 flows (utime +
stime of the server's processes, from /proc/PID/stat) and its peak memory (RSS sampled every 50 ms). Also the
Argon2id hash rate (argon2-bench, Gatehouse's Swift Argon2 and argon2-cffi, the peer's, one thread; and Gatehouse's
with one hash per core at once, as its hashing pool runs them under load, measured again right before each
scenario that hashes) that bounds the scenarios that hash.

Writes RESULTS/DATE-DB.json per database, RESULTS/latest.md (the table) and RESULTS/latest.svg (the chart).
Standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PASSWORD = "correct horse battery staple"
SCENARIOS = ["healthz", "register", "login", "native-signin", "refresh", "profile", "native-signup"]
# Scenarios whose flows hash a password once (register and sign-up hash the new one, logins verify it).
HASHING = {"register", "login", "native-signin", "native-signup"}
# The HTTP floor: Gatehouse's /healthz, no database and no token behind it. Measured at saturation only, in the same
# run as the rest, so that every figure can also be read as a fraction of it (a figure that holds across machines).
FLOOR = "healthz"
# The scenarios whose per-CPU-second figure is a target as a fraction of the floor: the floor is run again at
# saturation right before each, since a shared machine's speed moves between minutes and the run's first /healthz is
# minutes away from them (report.floor picks the floor a scenario is compared to).
FLOOR_RELATIVE = ("refresh", "profile")
# The scenario whose p99 at half load is a target: the floor is also run at its fixed rate, for its latency beside it.
LATENCY_SCENARIO = "refresh"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def log(*parts):
    print("bench:", *parts, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- processes ----------------------------------------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants (gunicorn's workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError):
            continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process tree, plus the children it has reaped."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        except OSError:
            pass
    return total / CLK_TCK


def machine_cpu_ticks() -> tuple[int, int]:
    """The whole machine's CPU time so far, in ticks: (all of it, the part stolen by the hypervisor). Steal is time a
    virtual CPU had work but the host ran something else; on a shared VM it is the one disturbance a run can see."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice, already counted in user and nice]
    return sum(fields[:8]), fields[7] if len(fields) > 7 else 0


def rss_bytes(pid: int) -> int:
    """Resident memory of the process tree (for gunicorn: master and workers, shared pages counted per process)."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except OSError:
            pass
    return total


def rollup_bytes(pid: int, field: str = "Pss") -> int | None:
    """A field of smaps_rollup summed over the tree: Pss (shared pages divided among the processes that share
    them) or Anonymous (the processes' own memory: heap, stacks, written data)."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            return None
    return total


class RSSSampler:
    def __init__(self, pid: int, every: float = 0.05):
        self.pid, self.every, self.peak = pid, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes(self.pid))
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 30):
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def wait_ready(url: str, process: subprocess.Popen, timeout: float = 120) -> float:
    """Seconds until GET url answers 200, polled every 2 ms."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before it was ready")
        try:
            with socket.create_connection(("127.0.0.1", int(url.split(":")[2].split("/")[0])), timeout=1):
                pass
            status, _ = http("GET", url, timeout=2)
            if status == 200:
                return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.002)
    raise RuntimeError(f"{url} not ready after {timeout} s")


# --- servers ------------------------------------------------------------------------------------------------


class Server:
    name = ""
    process: subprocess.Popen | None = None

    def __init__(self, workdir: Path, database_url: str):
        self.workdir, self.database_url = workdir, database_url
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"{self.name}.log"

    def command(self) -> tuple[list[str], dict, Path]:
        raise NotImplementedError

    def start(self) -> float:
        argv, env, cwd = self.command()
        log_file = open(self.log_path, "ab")
        self.process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log_file, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        return wait_ready(self.base + "/readyz", self.process)

    def stop(self):
        if self.process and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def make_user(self, email: str):
        raise NotImplementedError

    def login(self, email: str) -> tuple[str, str]:
        raise NotImplementedError


class Gatehouse(Server):
    name = "gatehouse"

    def __init__(self, workdir: Path, database_url: str, binary: Path):
        super().__init__(workdir, database_url)
        self.binary = binary
        self.config = workdir / "gatehouse-bench.yaml"
        template = (HERE / "gatehouse-bench.yaml").read_text()
        self.config.write_text(template.replace("@PORT@", str(self.port)).replace("@DATABASE@", database_url))

    def command(self):
        env = dict(os.environ)
        return [str(self.binary), "serve", "--config", str(self.config), "--log-level", "warning"], env, self.workdir

    def make_user(self, email):
        status, body = http("POST", f"{self.base}/api/client/v2.0/app/bench/auth/providers/local-userpass/register",
                            json.dumps({"email": email, "password": PASSWORD}).encode(),
                            {"Content-Type": "application/json"})
        if status not in (201, 409):
            raise RuntimeError(f"gatehouse register {email}: {status} {body[:200]!r}")

    def login(self, email):
        status, body = http("POST", f"{self.base}/api/client/v2.0/app/bench/auth/providers/local-userpass/login",
                            json.dumps({"username": email, "password": PASSWORD}).encode(),
                            {"Content-Type": "application/json"})
        if status != 200:
            raise RuntimeError(f"gatehouse login {email}: {status} {body[:200]!r}")
        answer = json.loads(body)
        return answer["access_token"], answer["refresh_token"]


class Peer(Server):
    name = "peer"
    verification = "none"

    def __init__(self, workdir: Path, database_url: str, venv: Path, workers: int):
        super().__init__(workdir, database_url)
        self.venv, self.workers = venv, workers

    def command(self):
        env = dict(os.environ)
        env.update({
            "PEER_DATABASE_URL": self.database_url,
            "PEER_JWT_PRIVATE_KEY_FILE": str(self.venv / "peer-jwt.pem"),
            "PEER_MAILBOX_DIR": str(self.workdir / "peer-mailbox"),
            "PEER_EMAIL_VERIFICATION": self.verification,
            "PEER_BIND": f"127.0.0.1:{self.port}",
            "PEER_WORKERS": str(self.workers),
        })
        return [str(self.venv / "bin" / "gunicorn"), "-c", "gunicorn.conf.py", "peerproject.wsgi"], env, HERE / "peer"

    def make_user(self, email):
        status, body = http("POST", f"{self.base}/_allauth/app/v1/auth/signup",
                            json.dumps({"email": email, "password": PASSWORD}).encode(),
                            {"Content-Type": "application/json"})
        if status != 200 and b"already" not in body:
            raise RuntimeError(f"peer signup {email}: {status} {body[:200]!r}")

    def login(self, email):
        status, body = http("POST", f"{self.base}/_allauth/app/v1/auth/login",
                            json.dumps({"email": email, "password": PASSWORD}).encode(),
                            {"Content-Type": "application/json"})
        if status != 200:
            raise RuntimeError(f"peer login {email}: {status} {body[:200]!r}")
        meta = json.loads(body)["meta"]
        return meta["access_token"], meta["refresh_token"]


# --- load ---------------------------------------------------------------------------------------------------


def run_fixed(server: Server, scenario: str, tokens, label: str, connections: int, rate: float, args, tag: str) -> dict:
    """`scenario` at a fixed `rate` (per second, spread over `connections`), and whether the rate was held."""
    log(f"{server.name} {label}: fixed rate {rate:g} per second, {args.duration:g} s")
    fixed = run_wrk(server, scenario, connections, args.duration, rate, tokens, args.users,
                    f"{tag}-{label.replace(' ', '-')}-fix")
    fixed["rate_held"] = fixed["flows_per_s"] >= 0.95 * rate
    log(f"  {fixed['flows_per_s']:.1f} per second, p99 {fixed['flow_p99_ms']} ms, failed {fixed['flows_failed']}")
    return fixed


def run_wrk(server: Server, scenario: str, connections: int, duration: float, rate: float | None,
            tokens: Path | None, users: int, tag: str) -> dict:
    env = dict(os.environ)
    env.update({
        "BENCH_SERVER": server.name, "BENCH_SCENARIO": scenario, "BENCH_TAG": tag,
        "BENCH_USERS": str(users), "BENCH_CONNECTIONS": str(connections),
        "BENCH_RATE": str(rate or 0), "BENCH_TOKENS": str(tokens or ""),
    })
    argv = ["wrk", "-t", str(connections), "-c", str(connections), "-d", f"{duration:g}s", "--timeout", "10s",
            "-s", str(HERE / "load" / "driver.lua"), server.base]
    pid = server.process.pid
    hashing_before = hash_counters(server)
    cpu_before = cpu_seconds(pid)
    ticks_before, steal_before = machine_cpu_ticks()
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with RSSSampler(pid) as sampler:
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
    cpu = cpu_seconds(pid) - cpu_before
    hashing_after = hash_counters(server)
    ticks_after, steal_after = machine_cpu_ticks()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_cpu = (children.ru_utime + children.ru_stime) - (children_before.ru_utime + children_before.ru_stime)
    line = next((l for l in done.stdout.splitlines() if l.startswith("BENCH_RESULT ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr[-2000:]} {done.stdout[-2000:]}")
    result = json.loads(line[len("BENCH_RESULT "):])
    result["flows_per_s"] = result["flows_ok"] / result["duration_s"]
    result["requests_per_s"] = result["requests"] / result["duration_s"]
    result["connections"] = connections
    result["asked_rate"] = rate
    result["server_cpu_s"] = round(cpu, 3)
    result["load_generator_cpu_s"] = round(load_cpu, 3)  # wrk's own CPU time, on the same cores
    result["cpu_s_per_1000_flows"] = round(1000 * cpu / result["flows_ok"], 4) if result["flows_ok"] else None
    if hashing_before and hashing_after and hashing_after[1] > hashing_before[1]:
        # The server's own count: the CPU time its hashes took on the threads that ran them, in this run.
        result["server_hash_cpu_s"] = round(hashing_after[0] - hashing_before[0], 3)
        result["server_hashes"] = int(hashing_after[1] - hashing_before[1])
        result["server_hashes_per_hash_cpu_s"] = round(result["server_hashes"] / result["server_hash_cpu_s"], 2)
    result["peak_rss_mb"] = round(sampler.peak / 2**20, 1)
    # Share of the machine's CPU time the host took while this ran: figures from runs with much of it are low.
    result["cpu_steal_pct"] = round(100 * (steal_after - steal_before) / max(1, ticks_after - ticks_before), 1)
    return result


def hash_counters(server: Server) -> tuple[float, float] | None:
    """Gatehouse's own count of its password hashing from /metrics: (CPU seconds, hashes); None for the peer."""
    if not isinstance(server, Gatehouse):
        return None
    status, body = http("GET", server.base + "/metrics", timeout=10)
    if status != 200:
        return None
    values = {"gatehouse_password_hash_cpu_seconds_total": 0.0, "gatehouse_password_hash_duration_seconds_count": 0.0}
    for line in body.decode().splitlines():
        name, _, value = line.partition(" ")
        if name.split("{")[0] in values:
            values[name.split("{")[0]] += float(value.split()[0])
    return values["gatehouse_password_hash_cpu_seconds_total"], values["gatehouse_password_hash_duration_seconds_count"]


def prepare(server: Server, users: int, token_count: int, workdir: Path) -> tuple[Path, Path]:
    """Users bench-user-K for login and sign-in; refresh and access tokens for refresh and profile reads."""
    emails = [f"bench-user-{k}@example.com" for k in range(users)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(server.make_user, emails))
        pairs = list(pool.map(server.login, [emails[k % users] for k in range(token_count)]))
    access = workdir / f"{server.name}-access-tokens.txt"
    refresh = workdir / f"{server.name}-refresh-tokens.txt"
    access.write_text("\n".join(a for a, _ in pairs) + "\n")
    refresh.write_text("\n".join(r for _, r in pairs) + "\n")
    return access, refresh


def bench_server(server: Server, args, workdir: Path, tag: str) -> dict:
    out: dict = {"server": server.name, "scenarios": {}}
    log(f"{server.name}: first start (migrates the empty database)")
    out["first_start_s"] = round(server.start(), 4)
    server.stop()
    log(f"{server.name}: start-up")
    out["startup_s"] = round(server.start(), 4)
    time.sleep(args.idle_wait)
    out["idle_rss_mb"] = round(rss_bytes(server.process.pid) / 2**20, 1)
    pss, anon = rollup_bytes(server.process.pid, "Pss"), rollup_bytes(server.process.pid, "Anonymous")
    out["idle_pss_mb"] = round(pss / 2**20, 1) if pss is not None else None
    out["idle_anon_mb"] = round(anon / 2**20, 1) if anon is not None else None
    out["processes"] = len(process_tree(server.process.pid))
    log(f"{server.name}: ready in {out['startup_s'] * 1000:.0f} ms, idle RSS {out['idle_rss_mb']} MB; making users")
    access, refresh = prepare(server, args.users, args.tokens, workdir)
    try:
        for scenario in args.scenarios:
            if isinstance(server, Peer) and scenario == FLOOR:
                continue  # the floor is Gatehouse's own; the peer is compared per CPU-second, not to it
            if isinstance(server, Peer) and scenario == "native-signup" and server.verification != "code":
                server.stop()
                server.verification = "code"  # sign-up proves the address with a code: a restart with it on
                server.start()
            tokens = {"refresh": refresh, "profile": access}.get(scenario)
            results = {}
            if args.warmup > 0:  # first requests import, compile and connect: not measured
                run_wrk(server, scenario, args.connections, args.warmup, None, tokens, args.users,
                        f"{tag}-{scenario}-warm")
            if isinstance(server, Gatehouse) and scenario in HASHING and args.argon2_bench.exists():
                # The hash rate on the machine as it is now: a shared machine's rate moves by a tenth between
                # minutes, more than a scenario's distance to the bound.
                results["hash_bound"] = hash_bound(args, reference=False)
                log(f"  hash bound now: {results['hash_bound'].get('gatehouse_concurrent_hashes_per_cpu_s')} per "
                    f"CPU-second, {results['hash_bound'].get('threads')} at once")
            if isinstance(server, Gatehouse) and scenario in FLOOR_RELATIVE and FLOOR in args.scenarios:
                log(f"{server.name} {FLOOR} before {scenario}: saturation, {args.connections} connections, "
                    f"{args.duration:g} s")
                floor = run_wrk(server, FLOOR, args.connections, args.duration, None, None, args.users,
                                f"{tag}-{FLOOR}-before-{scenario}-sat")
                results["floor_before"] = floor
                log(f"  {floor['flows_per_s']:.1f} requests/s, {floor['cpu_s_per_1000_flows']} CPU s per 1000")
            log(f"{server.name} {scenario}: saturation, {args.connections} connections, {args.duration:g} s")
            sat = run_wrk(server, scenario, args.connections, args.duration, None, tokens, args.users,
                          f"{tag}-{scenario}-sat")
            results["saturation"] = sat
            log(f"  {sat['flows_per_s']:.1f} flows/s, p99 {sat['flow_p99_ms']} ms, failed {sat['flows_failed']}")
            if scenario == FLOOR:
                out["scenarios"][scenario] = results
                continue
            rate = max(1.0, round(sat["flows_per_s"] * args.rate_fraction, 1))
            fixed_connections = max(1, min(args.connections, int(rate)))
            results["fixed"] = run_fixed(server, scenario, tokens, scenario, fixed_connections, rate, args, tag)
            if isinstance(server, Gatehouse) and scenario == LATENCY_SCENARIO and FLOOR in args.scenarios:
                # The floor's latency at the same rate over the same connections: what the HTTP path, the load
                # generator and the scheduler of this machine give a request that does no work, beside the p99 target.
                results["floor_fixed"] = run_fixed(server, FLOOR, None, f"{FLOOR} at the {scenario} rate",
                                                   fixed_connections, rate, args, tag)
            out["scenarios"][scenario] = results
    finally:
        out["rss_after_load_mb"] = round(rss_bytes(server.process.pid) / 2**20, 1) if server.process else None
        server.stop()
    return out


def hash_bound(args, reference: bool = True) -> dict:
    """argon2-bench: Gatehouse's Argon2id and argon2-cffi (the peer's), one thread, ms per hash; and Gatehouse's with
    one thread per core hashing at once (they share caches and memory bandwidth, as the server's hashing pool does)."""
    argv = [str(args.argon2_bench), "--runs", str(args.hash_runs), "--threads", str(os.cpu_count() or 1)]
    if reference and args.peer_python:
        argv += ["--python", str(args.peer_python)]
    done = subprocess.run(argv, capture_output=True, text=True)
    text = done.stdout
    out = {"output": text.strip().splitlines(), "parameters": {"memoryKiB": 19456, "iterations": 2, "parallelism": 1}}
    m = re.search(r"swift:\s+median ([\d.]+) ms/hash wall.*?, ([\d.]+) ms CPU", text)
    if m:
        out["gatehouse_ms_wall"], out["gatehouse_ms_cpu"] = float(m[1]), float(m[2])
        out["gatehouse_hashes_per_cpu_s"] = round(1000 / float(m[2]), 2)
    m = re.search(r"reference:\s+median ([\d.]+) ms/hash wall.*?, ([\d.]+) ms CPU", text)
    if m:
        out["peer_ms_wall"], out["peer_ms_cpu"] = float(m[1]), float(m[2])
        out["peer_hashes_per_cpu_s"] = round(1000 / float(m[2]), 2)
    m = re.search(r"swift x(\d+):\s+([\d.]+) ms CPU/hash", text)
    if m:
        out["threads"], out["gatehouse_concurrent_ms_cpu"] = int(m[1]), float(m[2])
        out["gatehouse_concurrent_hashes_per_cpu_s"] = round(1000 / float(m[2]), 2)
    else:  # one core: the one-thread rate is the rate at once
        out["threads"], out["gatehouse_concurrent_hashes_per_cpu_s"] = 1, out.get("gatehouse_hashes_per_cpu_s")
    return out


def machine() -> dict:
    model = ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
    mhz = next((float(l.split(":", 1)[1]) for l in open("/proc/cpuinfo") if l.startswith("cpu MHz")), None)
    return {"cpu": model, "cpu_mhz": mhz, "virtual_machine": "hypervisor" in flags,
            "cores": os.cpu_count(), "memory_gib": round(mem / 2**20, 1),
            "kernel": platform.release(), "load_average_at_start": os.getloadavg()}


# --- PostgreSQL -----------------------------------------------------------------------------------------------


class Postgres:
    def __init__(self, workdir: Path):
        # Outside the clone: the cluster runs as the postgres user, which cannot enter a clone made in a private
        # folder (mktemp -d makes them 0700). postgres-env.sh wants a path that does not exist yet.
        self.parent = Path(tempfile.mkdtemp(prefix="gatehouse-bench-pg-"))
        os.chmod(self.parent, 0o755)
        self.dir = self.parent / "pg"

    def __enter__(self):
        done = subprocess.run(["bash", str(ROOT / "scripts" / "postgres-env.sh"), "start", str(self.dir)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"scripts/postgres-env.sh start failed:\n{done.stderr}")
        self.admin = done.stdout.strip().splitlines()[-1]
        for db in ("gatehouse_bench", "peer_bench"):
            subprocess.run(["psql", self.admin, "-q", "-c", f"CREATE DATABASE {db}"], check=True)
        return self

    def url(self, db: str) -> str:
        return self.admin.rsplit("/", 1)[0] + "/" + db

    def __exit__(self, *exc):
        subprocess.run(["bash", str(ROOT / "scripts" / "postgres-env.sh"), "stop", str(self.dir)])
        shutil.rmtree(self.parent, ignore_errors=True)


# --- main -----------------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gatehouse", type=Path, default=ROOT / ".build-release" / "release" / "gatehouse")
    p.add_argument("--argon2-bench", type=Path, default=ROOT / ".build-release" / "release" / "argon2-bench")
    p.add_argument("--peer-venv", type=Path, default=ROOT / ".build-bench-venv")
    p.add_argument("--peer-python", type=Path, default=None, help="for argon2-cffi's hash rate (default: the venv's)")
    p.add_argument("--peer-workers", type=int, default=2 * (os.cpu_count() or 1) + 1)
    p.add_argument("--databases", default="sqlite,postgres")
    p.add_argument("--servers", default="gatehouse,peer")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--duration", type=float, default=20, help="seconds per wrk run")
    p.add_argument("--connections", type=int, default=16, help="connections at saturation")
    p.add_argument("--rate-fraction", type=float, default=0.5, help="fixed rate as a fraction of saturation")
    p.add_argument("--warmup", type=float, default=3, help="seconds of unmeasured load before each scenario")
    p.add_argument("--users", type=int, default=32)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--idle-wait", type=float, default=2.0)
    p.add_argument("--hash-runs", type=int, default=20)
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--keep", action="store_true", help="keep the work folder (logs, databases)")
    p.add_argument("--no-readme", action="store_true",
                   help="leave docs/performance.md alone (it is updated only when writing to Benchmarks/results)")
    args = p.parse_args()
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    args.gatehouse, args.argon2_bench, args.peer_venv = (p.resolve() for p in (args.gatehouse, args.argon2_bench, args.peer_venv))
    if args.peer_python is None:
        args.peer_python = args.peer_venv / "bin" / "python"
    servers = args.servers.split(",")

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    workdir = Path(tempfile.mkdtemp(prefix="gatehouse-bench-", dir=ROOT / ".build-bench"
                                    if (ROOT / ".build-bench").is_dir() else None))
    os.chmod(workdir, 0o755)  # the PostgreSQL cluster below it runs as the postgres user
    log(f"work folder {workdir}")
    common = {"date": stamp, "machine": machine(), "method": method(args), "commit": git_commit()}
    notes = HERE / "PROFILING.md"
    if notes.exists():
        # What the profiles of missed targets showed and what was fixed, carried with the figures it explains.
        common["profiling_notes"] = notes.read_text()
    if "peer" in servers:
        common["peer_versions"] = peer_versions(args.peer_python)
        common["peer_version"] = common["peer_versions"].get("django-allauth", "")
    log("hash rate (argon2-bench)")
    common["hash_bound"] = hash_bound(args) if args.argon2_bench.exists() else {"error": f"{args.argon2_bench} missing"}
    log(json.dumps({k: v for k, v in common["hash_bound"].items() if k != "output"}))

    written = []
    try:
        for db in [d for d in args.databases.split(",") if d]:
            dbdir = workdir / db
            dbdir.mkdir()
            os.chmod(dbdir, 0o777)
            result = dict(common, database=db, servers={})
            pg = Postgres(dbdir) if db == "postgres" else None
            if pg:
                pg.__enter__()
            try:
                for name in servers:
                    if name == "gatehouse":
                        url = (f"sqlite:{dbdir}/gatehouse.sqlite" if db == "sqlite"
                               else pg.url("gatehouse_bench") + "?sslmode=disable")
                        server = Gatehouse(dbdir, url, args.gatehouse)
                    else:
                        url = f"sqlite:///{dbdir}/peer.sqlite" if db == "sqlite" else pg.url("peer_bench")
                        subprocess.run(["bash", str(HERE / "peer" / "setup.sh"), url], check=True,
                                       stdout=subprocess.DEVNULL)
                        server = Peer(dbdir, url, args.peer_venv, args.peer_workers)
                    result["servers"][name] = bench_server(server, args, dbdir, f"{stamp}-{db}")
            finally:
                if pg:
                    pg.__exit__()
            add_targets(result)
            path = args.out / f"{stamp}-{db}.json"
            path.write_text(json.dumps(result, indent=2) + "\n")
            written.append(result)
            log(f"wrote {path}")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if written:
        import report  # Benchmarks/report.py

        report.write(written, args.out)
        log(f"wrote {args.out / 'latest.md'} and {args.out / 'latest.svg'}")
        if args.out.resolve() == (HERE / "results").resolve() and not args.no_readme:
            if report.update_readme(written, args.out, ROOT / "docs" / "performance.md"):
                log("updated the figures in docs/performance.md")


def peer_versions(python: Path) -> dict:
    code = ("import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in "
            "('django', 'django-allauth', 'gunicorn', 'argon2-cffi', 'psycopg', 'pyjwt', 'cryptography')}))")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def git_commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip()


def method(args) -> dict:
    return {
        "load": "wrk 4 (Debian) with Benchmarks/load/driver.lua, one connection per wrk thread, on loopback",
        "saturation": f"{args.connections} connections, each sending its next request when the answer arrives",
        "fixed_rate": f"{args.rate_fraction:g} x the saturation flows/s, scheduled per connection by wrk's delay()",
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "latency": "per flow: first request sent to last answer received",
        "cpu": "server utime+stime (all its processes) / flows",
        "floor": "/healthz at saturation at the start of the run, and again right before each of "
                 + ", ".join(FLOOR_RELATIVE) + " (the floor each is compared to)",
        "rss": "RSS of the server's processes, sampled every 50 ms; idle after start-up and a 2 s wait",
        "idle_memory": "PSS (the target), RSS and anonymous memory of the server's processes, from smaps_rollup",
        "peer_workers": args.peer_workers,
    }


KEYCLOAK_REFRESH_PER_VCPU = 120.0  # Keycloak's published sizing figure: refreshes per second per vCPU (reported)
FLOOR_FRACTION = 0.5  # refresh and profile read: at least half of the same server's /healthz per CPU-second
PEER_FACTOR = 10.0
HASH_FRACTION = 0.95  # login and registration: of the server's own Argon2id rate
P99_MS = 2.0  # refresh at half of saturation, SQLite
IDLE_PSS_MB = 30.0


def add_targets(result: dict):
    """The performance targets, each with the measured value and the distance to it (measured / target), stated so
    that they hold on any machine: refresh and profile read per server CPU-second as a fraction of the same server's
    /healthz floor (both databases) and against the peer; the refresh p99 at half load on SQLite; login and
    registration against the server's own hash rate; idle PSS and start-up. Throughput ratios (flows/s) and the
    figure against Keycloak's published sizing are reported, not targets: they depend on the machine."""
    gh = result["servers"].get("gatehouse")
    peer = result["servers"].get("peer")
    hb = result.get("hash_bound", {})
    targets = []
    import report  # Benchmarks/report.py: the floor a scenario is compared to, one definition for both

    def sat(server, scenario, key="flows_per_s"):
        try:
            return server["scenarios"][scenario]["saturation"][key]
        except (KeyError, TypeError):
            return None

    def add(name, measured, target, higher_is_better, unit, note=""):
        ok = None if measured is None else (measured >= target if higher_is_better else measured < target)
        targets.append({"target": name, "goal": (">= " if higher_is_better else "< ") + f"{target:g} {unit}".strip(),
                        "measured": None if measured is None else round(measured, 3),
                        "ratio_to_goal": None if measured is None else round(measured / target, 3),
                        "met": ok, "note": note})

    sqlite = result.get("database") == "sqlite"
    start = report.floor(result)
    for scenario in FLOOR_RELATIVE:
        ca, floor = sat(gh, scenario, "cpu_s_per_1000_flows"), report.floor(result, scenario)
        before = (gh or {}).get("scenarios", {}).get(scenario, {}).get("floor_before")
        where = f"right before {scenario}" if before else "at the start of the run"
        note = (f"floor {floor:,.0f} /healthz per server CPU-second {where}"
                + (f" ({(1000 / ca) / start:.3f} of the run's first, {start:,.0f})" if before and ca and start else "")
                if floor else "floor not measured")
        add(f"{scenario} per CPU-second / the server's /healthz per CPU-second",
            report.of_floor(result, "gatehouse", scenario) if gh else None, FLOOR_FRACTION, True, "", note)
    for scenario in ("refresh", "profile"):
        # per CPU: flows per server CPU-second, which does not depend on what else the machine ran
        ca, cb = sat(gh, scenario, "cpu_s_per_1000_flows"), sat(peer, scenario, "cpu_s_per_1000_flows")
        add(f"{scenario}: Gatehouse / peer per CPU-second", cb / ca if ca and cb else None, PEER_FACTOR, True, "x")
    c = sat(gh, "refresh", "cpu_s_per_1000_flows")
    if c:
        result["refresh_per_cpu_s_vs_keycloak"] = round((1000 / c) / KEYCLOAK_REFRESH_PER_VCPU, 2)
    for scenario, label in (("login", "login"), ("register", "registration")):
        # The bound: Gatehouse's Argon2id as the server itself ran it in this scenario (its hashes' CPU time, counted
        # on the hashing threads: the same process, the same minutes). Beside it, argon2-bench's rate with a hash per
        # core at once measured right before the scenario, and its one-thread rate: a separate process minutes
        # apart, on a shared machine whose speed moves more than a scenario's distance to the bound.
        c = sat(gh, scenario, "cpu_s_per_1000_flows")
        in_server = sat(gh, scenario, "server_hashes_per_hash_cpu_s")
        now = (gh or {}).get("scenarios", {}).get(scenario, {}).get("hash_bound", {})
        rate = now.get("gatehouse_concurrent_hashes_per_cpu_s") or hb.get("gatehouse_concurrent_hashes_per_cpu_s")
        single = now.get("gatehouse_hashes_per_cpu_s") or hb.get("gatehouse_hashes_per_cpu_s")
        threads = now.get("threads") or hb.get("threads") or 1
        bench = (f"argon2-bench right before the scenario, {threads} threads hashing at once: {rate} per CPU-second"
                 + (f" ({(1000 / c) / rate:.3f} of it)" if c and rate else "")
                 + f"; one thread: {single}" + (f" ({(1000 / c) / single:.3f})" if c and single else ""))
        if in_server:
            add(f"{label} per CPU-second / Argon2id hashes per CPU-second in the server", (1000 / c) / in_server if c else None,
                HASH_FRACTION, True, "", f"the server's hashes took {1 / in_server * 1000:.2f} ms CPU each in this scenario; " + bench)
        else:
            add(f"{label} per CPU-second / Argon2id hashes per CPU-second ({threads} at once)",
                (1000 / c) / rate if c and rate else None, HASH_FRACTION, True, "", bench)
    try:
        p99 = gh["scenarios"]["refresh"]["fixed"]["flow_p99_ms"]
    except (KeyError, TypeError):
        p99 = None
    if sqlite:
        try:
            floor_fixed = gh["scenarios"][LATENCY_SCENARIO]["floor_fixed"]
            note = (f"/healthz at the same rate and connections: p50 {floor_fixed['flow_p50_ms']} / p90 "
                    f"{floor_fixed['flow_p90_ms']} / p99 {floor_fixed['flow_p99_ms']} ms")
        except (KeyError, TypeError):
            note = ""
        add("refresh p99 at half of saturation", p99, P99_MS, False, "ms", note)
    add("idle memory (PSS)", gh.get("idle_pss_mb") if gh else None, IDLE_PSS_MB, False, "MB",
        f"RSS {gh.get('idle_rss_mb') if gh else '?'} MB, anonymous {gh.get('idle_anon_mb') if gh else '?'} MB; "
        "docs/performance.md says why PSS")
    add("ready after start", gh["startup_s"] * 1000 if gh else None, 300.0, False, "ms",
        "restart on a migrated database, spawn to first 200 from /readyz")
    result["targets"] = targets


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    # SIGTERM and SIGHUP unwind like Ctrl-C, so that the servers and the PostgreSQL cluster are stopped.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda number, frame: sys.exit(128 + number))
    main()
