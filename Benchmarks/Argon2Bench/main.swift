// argon2-bench: times GatehouseArgon2's Argon2id against the reference C implementation.
//
//   swift run -c release --scratch-path .build-argon2 argon2-bench \
//       [--memory KiB] [--iterations N] [--parallelism N] [--runs N] [--warmup N] [--python PATH] [--threads N]
//
// Defaults: m=19456 KiB, t=2, p=1 (OWASP), 20 timed hashes after 2 warm-ups. The reference
// (argon2-cffi, through Benchmarks/argon2_reference.py in serve mode, one thread) is timed too
// when --python or GATEHOUSE_ARGON2_REFERENCE names a Python interpreter that has argon2-cffi:
// its hashes alternate with ours, so a busy machine slows both alike. Prints median wall-clock
// and CPU ms per hash and the ratios Swift/reference. With --threads N (N > 1), it then times N threads hashing at
// once, as the server's hashing pool does under load (one thread per core): CPU ms per hash at that concurrency,
// which is what a login costs at least when N run together (they share caches and memory bandwidth).

import Foundation
import GatehouseArgon2
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

struct Options {
    var memory: UInt32 = 19456
    var iterations: UInt32 = 2
    var parallelism: UInt32 = 1
    var runs = 20
    var warmup = 2
    var threads = 1
    var python: String? = ProcessInfo.processInfo.environment["GATEHOUSE_ARGON2_REFERENCE"].flatMap {
        $0.isEmpty ? nil : $0
    }
}

func usage(_ message: String?) -> Never {
    let text = """
        usage: argon2-bench [--memory KiB] [--iterations N] [--parallelism N] [--runs N] [--warmup N] [--python PATH]
                            [--threads N]
          defaults: --memory 19456 --iterations 2 --parallelism 1 --runs 20 --warmup 2 --threads 1,
          --python defaults to $GATEHOUSE_ARGON2_REFERENCE (see scripts/argon2-reference.sh)

        """
    guard let message else {
        print(text, terminator: "")
        exit(0)
    }
    FileHandle.standardError.write(Data("argon2-bench: \(message)\n\(text)".utf8))
    exit(2)
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = CommandLine.arguments.dropFirst()
    while let flag = arguments.popFirst() {
        if flag == "--help" || flag == "-h" { usage(nil) }
        guard let value = arguments.popFirst() else { usage("missing value for \(flag)") }
        func number<T: FixedWidthInteger>(_: T.Type) -> T {
            guard let n = T(value), n >= 0 else { usage("\(flag) needs a non-negative integer, not \(value)") }
            return n
        }
        switch flag {
        case "--memory": options.memory = number(UInt32.self)
        case "--iterations": options.iterations = number(UInt32.self)
        case "--parallelism": options.parallelism = number(UInt32.self)
        case "--runs": options.runs = max(1, number(Int.self))
        case "--warmup": options.warmup = number(Int.self)
        case "--python": options.python = value
        case "--threads": options.threads = max(1, number(Int.self))
        default: usage("unknown flag \(flag)")
        }
    }
    return options
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

func milliseconds(_ duration: Duration) -> Double {
    let (seconds, attoseconds) = duration.components
    return Double(seconds) * 1000 + Double(attoseconds) / 1e15
}

/// Path of Benchmarks/argon2_reference.py, found from this source file or the working directory.
func referenceScript() -> String {
    let besideSource = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("argon2_reference.py").path
    if FileManager.default.fileExists(atPath: besideSource) { return besideSource }
    return FileManager.default.currentDirectoryPath + "/Benchmarks/argon2_reference.py"
}

/// CPU time of this process, in ms.
func cpuMilliseconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) * 1000 + Double(time.tv_nsec) / 1e6
}

/// One timed hash: (wall ms, CPU ms).
struct Sample {
    var wall: Double
    var cpu: Double
}

/// The reference implementation in serve mode: one hash per request, timed by Python.
final class Reference {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var pending = Data()

    init(python: String, options: Options) throws {
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [
            referenceScript(), "--serve",
            "--memory", "\(options.memory)", "--iterations", "\(options.iterations)",
            "--parallelism", "\(options.parallelism)",
        ]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    /// Times one reference hash; nil if the process failed.
    func sample() -> Sample? {
        do {
            try input.fileHandleForWriting.write(contentsOf: Data("hash\n".utf8))
        } catch {
            return nil
        }
        while !pending.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            pending.append(chunk)
        }
        let end = pending.firstIndex(of: UInt8(ascii: "\n"))!
        let line = String(decoding: pending[pending.startIndex..<end], as: UTF8.self)
        pending = Data(pending[pending.index(after: end)...])
        let fields = line.split(separator: " ").compactMap { Double($0) }
        guard fields.count == 2 else { return nil }
        return Sample(wall: fields[0], cpu: fields[1])
    }

    func close() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

let options = parseOptions()
signal(SIGPIPE, SIG_IGN)  // a reference that dies must not take the benchmark with it
let parameters = Argon2Parameters(
    memoryKiB: options.memory, iterations: options.iterations, parallelism: options.parallelism
)
guard parameters.isValid else { usage("invalid parameters: need p ≥ 1, m ≥ 8p, t ≥ 1") }

let password = Array("correct horse battery staple".utf8)
let salt = Array(0..<16 as Range<UInt8>)
let clock = ContinuousClock()
var sink: UInt8 = 0

@MainActor
func swiftSample() throws -> Sample {
    let cpu = cpuMilliseconds()
    let start = clock.now
    let tag = try Argon2.hash(password: password, salt: salt, parameters: parameters)
    let sample = Sample(wall: milliseconds(clock.now - start), cpu: cpuMilliseconds() - cpu)
    sink ^= tag[0]
    return sample
}

/// One byte per thread, each written by its own thread only (kept so that the hashes are not optimised away).
final class ThreadBytes: @unchecked Sendable {
    private let bytes: UnsafeMutableBufferPointer<UInt8>
    init(count: Int) { bytes = .allocate(capacity: count); bytes.initialize(repeating: 0) }
    deinit { bytes.deallocate() }
    func xor(_ thread: Int, _ byte: UInt8) { bytes[thread] ^= byte }
    var all: UInt8 { bytes.reduce(0, ^) }
}

var reference: Reference?
var referenceFailed = false
if let python = options.python {
    do {
        reference = try Reference(python: python, options: options)
    } catch {
        print("reference: cannot run \(python): \(error)")
        referenceFailed = true
    }
}

print("Argon2id m=\(options.memory) KiB, t=\(options.iterations), p=\(options.parallelism): "
    + "\(options.runs) runs after \(options.warmup) warm-ups"
    + (reference == nil ? "" : ", alternating with the reference"))

// Warm up, then alternate Swift and reference hashes so both see the same machine load.
var swiftSamples: [Sample] = []
var referenceSamples: [Sample] = []
for round in 0..<(options.warmup + options.runs) {
    let ours = try swiftSample()
    let theirs = reference?.sample()
    if reference != nil, theirs == nil {
        print("reference: the script failed; see its message above")
        reference = nil
        referenceFailed = true
    }
    if round >= options.warmup {
        swiftSamples.append(ours)
        if let theirs { referenceSamples.append(theirs) }
    }
}
reference?.close()

let swiftWall = median(swiftSamples.map(\.wall))
let swiftCPU = median(swiftSamples.map(\.cpu))
print(String(format: "swift:     median %.2f ms/hash wall (min %.2f, max %.2f), %.2f ms CPU",
             swiftWall, swiftSamples.map(\.wall).min()!, swiftSamples.map(\.wall).max()!, swiftCPU))
if !referenceSamples.isEmpty, !referenceFailed {
    let referenceWall = median(referenceSamples.map(\.wall))
    let referenceCPU = median(referenceSamples.map(\.cpu))
    print(String(format: "reference: median %.2f ms/hash wall (min %.2f, max %.2f), %.2f ms CPU (argon2-cffi, 1 thread)",
                 referenceWall, referenceSamples.map(\.wall).min()!, referenceSamples.map(\.wall).max()!, referenceCPU))
    print(String(format: "ratio swift/reference: %.3f (wall), %.3f (CPU)", swiftWall / referenceWall, swiftCPU / referenceCPU))
} else if options.python == nil {
    print("reference: skipped (set GATEHOUSE_ARGON2_REFERENCE or pass --python PATH; "
        + "see scripts/argon2-reference.sh)")
}
// N threads at once, each `runs` hashes after its warm-ups: CPU per hash over the whole process.
if options.threads > 1 {
    let threads = options.threads
    let tags = ThreadBytes(count: threads)
    func hashOnEveryThread(_ times: Int) {
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for _ in 0..<times { tags.xor(thread, (try? Argon2.hash(password: password, salt: salt, parameters: parameters))?[0] ?? 0) }
        }
    }
    hashOnEveryThread(options.warmup)
    let cpu = cpuMilliseconds()
    let start = clock.now
    hashOnEveryThread(options.runs)
    let (wall, spent) = (milliseconds(clock.now - start), cpuMilliseconds() - cpu)
    let hashes = Double(threads * options.runs)
    print(String(format: "swift x%d:  %.2f ms CPU/hash, %.2f hashes per CPU-second, %.1f hashes/s (%d threads at once, %d hashes each)",
                 threads, spent / hashes, 1000 * hashes / spent, 1000 * hashes / wall, threads, options.runs))
    sink ^= tags.all
}
if sink == 0x5A { print("", terminator: "") }  // keep the results alive
exit(referenceFailed ? 1 : 0)
