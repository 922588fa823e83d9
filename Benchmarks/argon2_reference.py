#!/usr/bin/env python3
"""Reference Argon2 for Gatehouse's tests and benchmark.

Runs the reference C implementation of Argon2 (RFC 9106) bundled with
argon2-cffi; `bash scripts/argon2-reference.sh` prints an interpreter that has it.

Hash mode (default), used by the differential test in Tests/GatehouseArgon2Tests:
    stdin:  {"cases": [{"password": HEX, "salt": HEX, "secret": HEX, "ad": HEX,
                        "m": KiB, "t": passes, "p": lanes, "length": bytes,
                        "type": "d" | "i" | "id", "version": 16 | 19, "phc": bool}, ...]}
            ("secret" and "ad" may be omitted; "type" defaults to "id", "version" to 19, "phc" to false)
    stdout: {"tags": [HEX, ...],     (one per case, same order)
             "phc": [STRING | null, ...],
             "passlib": [STRING | null, ...]}
            For a case with "phc": true (and no secret or associated data), "phc" holds the PHC string
            argon2-cffi writes (argon2.low_level.hash_secret, e.g. $argon2i$v=16$m=..,t=..,p=..$salt$tag) and
            "passlib" the same hash as passlib writes it (no v= field for version 16); null otherwise.

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
TYPES = {"d": Type.D, "i": Type.I, "id": Type.ID}
VERSIONS = {16: 0x10, 19: 0x13}


def argon2id(password: bytes, salt: bytes, secret: bytes, ad: bytes,
             m: int, t: int, p: int, length: int, threads: int = 1,
             type: Type = Type.ID, version: int = ARGON2_VERSION_13) -> bytes:
    """Raw Argon2 tag (Argon2id version 0x13 unless told) through argon2_ctx, which (unlike
    hash_secret_raw) takes a secret and associated data."""
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
        version=version,
        allocate_cbk=ffi.NULL, free_cbk=ffi.NULL,
        flags=lib.ARGON2_DEFAULT_FLAGS,
    ))
    status = core(ctx, type.value)
    if status != lib.ARGON2_OK:
        raise ValueError(error_to_str(status))
    return bytes(ffi.buffer(out, length))


def phc_strings(case: dict, type: Type, version: int) -> tuple:
    """(argon2-cffi's PHC string, passlib's) for a case without secret or associated data."""
    from argon2.low_level import hash_secret
    try:
        from passlib.hash import argon2 as passlib_argon2
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ValueError(f"cannot import passlib ({error}); use the interpreter printed by "
                         "`bash scripts/argon2-reference.sh`") from error
    if case.get("secret") or case.get("ad"):
        raise ValueError("PHC strings carry no secret or associated data")
    phc = hash_secret(
        bytes.fromhex(case["password"]), bytes.fromhex(case["salt"]),
        time_cost=int(case["t"]), memory_cost=int(case["m"]), parallelism=int(case["p"]),
        hash_len=int(case["length"]), type=type, version=version,
    ).decode("ascii")
    # passlib parses the string and writes it back in its own form.
    return phc, passlib_argon2.from_string(phc).to_string()


def hash_mode() -> None:
    request = json.load(sys.stdin)
    tags, phcs, passlibs = [], [], []
    for index, case in enumerate(request["cases"]):
        try:
            type = TYPES[case.get("type", "id")]
            version = VERSIONS[int(case.get("version", 19))]
            tag = argon2id(
                bytes.fromhex(case["password"]), bytes.fromhex(case["salt"]),
                bytes.fromhex(case.get("secret", "")), bytes.fromhex(case.get("ad", "")),
                int(case["m"]), int(case["t"]), int(case["p"]), int(case["length"]),
                type=type, version=version,
            )
            phc, passlib = phc_strings(case, type, version) if case.get("phc") else (None, None)
        except (KeyError, ValueError) as error:
            sys.exit(f"argon2_reference.py: case {index}: {error!r}")
        tags.append(tag.hex())
        phcs.append(phc)
        passlibs.append(passlib)
    json.dump({"tags": tags, "phc": phcs, "passlib": passlibs}, sys.stdout)
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
