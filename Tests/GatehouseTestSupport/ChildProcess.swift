import Foundation

/// A program a test starts (the `gatehouse` binary, a Python tool, openssl).
///
/// Two rules keep a test run from hanging on one:
/// - its input and output are files, never pipes: nothing can fill up and block either side, and no end-of-file
///   has to wait for every process that might hold a pipe's other end;
/// - every wait suspends (it polls with `Task.sleep`) and has a deadline. A test that blocked a thread in
///   `waitUntilExit()` or `readDataToEndOfFile()` would hold one of the few threads that run every Swift task,
///   including those of the in-process server the program may be talking to; on a 2-core machine two such waits
///   stop the whole run.
public final class ChildProcess: @unchecked Sendable {
    public let process: Process
    /// Holds the output files; removed by ``stop()`` or once the process has been waited for.
    private let folder: URL
    private let output: URL
    private let errors: URL

    /// The write end of its stdin when it was started with `holdingInputOpen`.
    private let inputPipe: Pipe?

    /// Starts `executable`. `environment` nil inherits the test process's; `input` is what it reads on stdin.
    /// `holdingInputOpen` gives it a stdin that stays open until ``stop()`` or until the test process ends, for the
    /// tools that exit when their stdin closes (so none outlives a run, however it ends).
    public init(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, directory: URL? = nil, input: Data? = nil,
        holdingInputOpen: Bool = false
    ) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        output = folder.appendingPathComponent("stdout")
        errors = folder.appendingPathComponent("stderr")
        let inputFile = folder.appendingPathComponent("stdin")
        try (input ?? Data()).write(to: inputFile)
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let directory { process.currentDirectoryURL = directory }
        if holdingInputOpen {
            let pipe = Pipe()
            inputPipe = pipe
            process.standardInput = pipe
        } else {
            inputPipe = nil
            process.standardInput = try FileHandle(forReadingFrom: inputFile)
        }
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errors)
        do {
            try process.run()
        } catch {
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
    }

    public var processIdentifier: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// What it has printed on stdout so far.
    public var standardOutput: String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }
    /// What it has printed on stderr so far.
    public var standardError: String { (try? String(contentsOf: errors, encoding: .utf8)) ?? "" }

    /// Waits until it has exited and returns its status (its signal's number when a signal ended it). Past
    /// `limit` it is killed and ``ChildProcessTimeout`` names it.
    @discardableResult
    public func waitForExit(within limit: Duration = .seconds(120)) async throws -> Int32 {
        let deadline = ContinuousClock.now + limit
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                kill(process.processIdentifier, SIGKILL)
                throw ChildProcessTimeout(description: "\(name) did not exit within \(limit); its stderr:\n\(standardError)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return process.terminationStatus
    }

    /// Waits until stdout contains `text` and returns the output so far. Throws when the process exits
    /// first or `limit` passes.
    public func waitForOutput(_ text: String, within limit: Duration = .seconds(60)) async throws -> String {
        try await waitForOutput(within: limit) { $0.contains(text) ? $0 : nil }
    }

    /// Waits until stdout matches `pattern` and returns its capture (a `READY (\d+)` line's port, say).
    public func waitForOutput(_ pattern: Regex<(Substring, Substring)>, within limit: Duration = .seconds(60)) async throws -> String {
        try await waitForOutput(within: limit) { printed in printed.firstMatch(of: pattern).map { String($0.output.1) } }
    }

    private func waitForOutput<T>(within limit: Duration, _ found: (String) -> T?) async throws -> T {
        let deadline = ContinuousClock.now + limit
        while true {
            let printed = standardOutput
            if let value = found(printed) { return value }
            guard process.isRunning else {
                throw ChildProcessTimeout(description: "\(name) exited (\(process.terminationStatus)) before printing what was awaited: \(printed)\n\(standardError)")
            }
            guard ContinuousClock.now < deadline else {
                throw ChildProcessTimeout(description: "\(name) did not print what was awaited within \(limit): \(printed)\n\(standardError)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Sends `signal` (SIGKILL unless told otherwise).
    public func signal(_ signal: Int32 = SIGKILL) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    /// Kills it if it still runs, waits for it, and removes its files.
    public func stop() async {
        try? inputPipe?.fileHandleForWriting.close()
        signal(SIGKILL)
        _ = try? await waitForExit(within: .seconds(30))
        try? FileManager.default.removeItem(at: folder)
    }

    /// Removes its files once it has exited (after ``waitForExit(within:)``).
    public func removeFiles() {
        try? FileManager.default.removeItem(at: folder)
    }

    private var name: String { ([process.executableURL?.lastPathComponent ?? "?"] + (process.arguments ?? []).prefix(2)).joined(separator: " ") }

    /// Runs `executable` to its end: status, stdout and stderr.
    public static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, directory: URL? = nil, input: Data? = nil,
        within limit: Duration = .seconds(120)
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try ChildProcess(executable, arguments, environment: environment, directory: directory, input: input)
        defer { child.removeFiles() }
        let status = try await child.waitForExit(within: limit)
        return (status, child.standardOutput, child.standardError)
    }
}

/// A child process that did not do in time what a test waited for.
public struct ChildProcessTimeout: Error, CustomStringConvertible {
    public var description: String
}
