#!/usr/bin/env python3
"""Reference Argon2id for Gatehouse's tests and benchmark.

Runs the reference C implementation of Argon2 (RFC 9106) bundled with
argon2-cffi; `bash scripts/argon2-reference.sh` prints an interpreter that has it.

Hash mode (default), used by the differential test in Tests/GatehouseArgon2Tests:
    stdin:  {"cases": [{"password": HEX, "salt": HEX, "secret": HEX, "ad": HEX,
                        "m": KiB, "t": passes, "p": lanes, "length": bytes}, ...]}
            ("secret" and "ad" may be omitted)
    stdout: {"tags": [HEX, ...]}   (one per case, same order)

Timing mode (standalone; Benchmarks/Argon2Bench uses serve mode below):
    argon2_reference.py --time --memory 19456 --iterations 2 --parallelism 1 --runs 20 --warmup 2
    stdout: {"median_ms": float, "runs_ms": [float, ...], "median_cpu_ms": float, "cpu_ms": [...], "threads": int}
    The reference runs on one thread (like Gatehouse) unless --threads is given.

Serve mode, used by Benchmarks/Argon2Bench (timing driven one hash at a time, so the
benchmark can interleave its own runs with the reference's and both see the same machine load):
    argon2_reference.py --serve --memory 19456 --iterations 2 --parallelism 1
    Reads a line per hash on stdin; answers each with a line "<wall ms> <cpu ms>".

Errors go to stderr with a non-zero exit status.
"""

import argparse
import json
import statistics
import sys
import time

try:
    from argon2.low_level import Type, core, error_to_str, ffi, lib
except ImportError as error:  # pragma: no cover - depends on the environment
    sys.exit(
        f"argon2_reference.py: cannot import argon2-cffi ({error}); "
        "use the interpreter printed by `bash scripts/argon2-reference.sh`"
    )

ARGON2_VERSION_13 = 0x13


def argon2id(password: bytes, salt: bytes, secret: bytes, ad: bytes,
             m: int, t: int, p: int, length: int, threads: int = 1) -> bytes:
    """Raw Argon2id tag through argon2_ctx, which (unlike hash_secret_raw) takes a secret and associated data."""
    out = ffi.new("uint8_t[]", length)
    # Keep the cdata buffers alive for the duration of the call.
    buffers = {name: ffi.new("uint8_t[]", max(len(value), 1)) for name, value in
               (("pwd", password), ("salt", salt), ("secret", secret), ("ad", ad))}
    for name, value in (("pwd", password), ("salt", salt), ("secret", secret), ("ad", ad)):
        ffi.memmove(buffers[name], value, len(value))
    ctx = ffi.new("argon2_context *", dict(
        out=out, outlen=length,
        pwd=buffers["pwd"], pwdlen=len(password),
        salt=buffers["salt"], saltlen=len(salt),
        secret=buffers["secret"] if secret else ffi.NULL, secretlen=len(secret),
        ad=buffers["ad"] if ad else ffi.NULL, adlen=len(ad),
        t_cost=t, m_cost=m, lanes=p, threads=threads,
        version=ARGON2_VERSION_13,
        allocate_cbk=ffi.NULL, free_cbk=ffi.NULL,
        flags=lib.ARGON2_DEFAULT_FLAGS,
    ))
    status = core(ctx, Type.ID.value)
    if status != lib.ARGON2_OK:
        raise ValueError(error_to_str(status))
    return bytes(ffi.buffer(out, length))


def hash_mode() -> None:
    request = json.load(sys.stdin)
    tags = []
    for index, case in enumerate(request["cases"]):
        try:
            tag = argon2id(
                bytes.fromhex(case["password"]), bytes.fromhex(case["salt"]),
                bytes.fromhex(case.get("secret", "")), bytes.fromhex(case.get("ad", "")),
                int(case["m"]), int(case["t"]), int(case["p"]), int(case["length"]),
            )
        except (KeyError, ValueError) as error:
            sys.exit(f"argon2_reference.py: case {index}: {error}")
        tags.append(tag.hex())
    json.dump({"tags": tags}, sys.stdout)
    sys.stdout.write("\n")


def timed_hash(args: argparse.Namespace) -> tuple:
    """(wall ms, process CPU ms) of one hash with the benchmark's inputs."""
    password, salt = b"correct horse battery staple", bytes(range(16))
    wall, cpu = time.perf_counter(), time.process_time()
    argon2id(password, salt, b"", b"", args.memory, args.iterations, args.parallelism, 32, args.threads)
    return (time.perf_counter() - wall) * 1000.0, (time.process_time() - cpu) * 1000.0


def time_mode(args: argparse.Namespace) -> None:
    for _ in range(args.warmup):
        timed_hash(args)
    runs = [timed_hash(args) for _ in range(args.runs)]
    wall = [run[0] for run in runs]
    cpu = [run[1] for run in runs]
    json.dump({"median_ms": statistics.median(wall), "runs_ms": wall,
               "median_cpu_ms": statistics.median(cpu), "cpu_ms": cpu, "threads": args.threads}, sys.stdout)
    sys.stdout.write("\n")


def serve_mode(args: argparse.Namespace) -> None:
    for _ in sys.stdin:
        wall, cpu = timed_hash(args)
        sys.stdout.write(f"{wall:.6f} {cpu:.6f}\n")
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time", action="store_true", help="time hashes instead of reading cases from stdin")
    parser.add_argument("--serve", action="store_true", help="time one hash per line read from stdin")
    parser.add_argument("--memory", type=int, default=19456, help="memory in KiB (timing and serve modes)")
    parser.add_argument("--iterations", type=int, default=2, help="passes (timing and serve modes)")
    parser.add_argument("--parallelism", type=int, default=1, help="lanes (timing and serve modes)")
    parser.add_argument("--threads", type=int, default=1, help="threads (timing and serve modes)")
    parser.add_argument("--runs", type=int, default=20, help="timed hashes (timing mode)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed hashes first (timing mode)")
    args = parser.parse_args()
    if args.time:
        time_mode(args)
    elif args.serve:
        serve_mode(args)
    else:
        hash_mode()


if __name__ == "__main__":
    main()
