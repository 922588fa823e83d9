import Foundation
import GatehouseTestSupport
import GatehouseWire
import Testing

/// The curl walkthroughs of the guides run as written, against `gatehouse serve`, and every answer has the shape the
/// page shows: the same JSON keys (values such as tokens and ids differ from run to run), the same status lines, the
/// same text once long hex runs are masked.
///
/// A page marks what runs with HTML comments, which the rendered page does not show:
/// - `<!-- walkthrough: NAME -->` starts a walkthrough: a fresh `gatehouse serve` in an empty folder, and one bash
///   session for its blocks, so that variables carry from one block to the next;
/// - `<!-- walkthrough: config -->` before a `yaml` block: the server runs with it as `gatehouse.yaml`;
/// - `<!-- walkthrough: skip -->` before a `bash` block: shown, not run (it needs a browser, a provider, …);
/// - `<!-- walkthrough: end -->` ends it.
///
/// Every `bash` block in between runs, with `http://127.0.0.1:9090` replaced by the server's address and
/// `swift run gatehouse` by the built binary. The fenced block right after it, if any, is what it prints.
@Suite(.serialized) struct WalkthroughTests {
    struct Step: Sendable, CustomStringConvertible {
        var code: String
        var expected: String?
        var line: Int
        var description: String { "line \(line)" }
    }

    struct Walkthrough: Sendable, CustomStringConvertible {
        var page: String
        var name: String
        var config: String?
        var steps: [Step] = []
        var description: String { "\(page): \(name)" }
    }

    static let docs = DocumentationLinkTests.root.appendingPathComponent("docs")

    /// The walkthroughs of the guides, in page order.
    static let walkthroughs: [Walkthrough] = {
        let pages = [DocumentationLinkTests.root.appendingPathComponent("README.md")]
            + ["getting-started.md", "native-auth.md", "client-api.md"].map { docs.appendingPathComponent($0) }
        return pages.flatMap { page in
            (try? parse(String(contentsOf: page, encoding: .utf8), page: page.lastPathComponent)) ?? []
        }
    }()

    static func parse(_ text: String, page: String) -> [Walkthrough] {
        let lines = text.components(separatedBy: "\n")
        var result: [Walkthrough] = []
        var current: Walkthrough?
        var pending: String?  // the marker that applies to the next fenced block
        var index = 0
        /// The fenced block starting at `start` (its info string and body) and the line after it.
        func block(at start: Int) -> (info: String, body: String, next: Int) {
            let info = String(lines[start].dropFirst(3)).trimmingCharacters(in: .whitespaces)
            var end = start + 1
            while end < lines.count, !lines[end].hasPrefix("```") { end += 1 }
            return (info, lines[(start + 1)..<min(end, lines.count)].joined(separator: "\n"), end + 1)
        }
        while index < lines.count {
            let line = lines[index]
            if let marker = line.firstMatch(of: /^<!-- walkthrough: (.+) -->$/)?.output.1 {
                switch marker {
                case "config", "skip": pending = String(marker)
                case "end":
                    if let done = current { result.append(done) }
                    current = nil
                default:
                    if let done = current { result.append(done) }
                    current = Walkthrough(page: page, name: String(marker))
                }
                index += 1
                continue
            }
            guard line.hasPrefix("```"), current != nil else {
                index += 1
                continue
            }
            let fenced = block(at: index)
            index = fenced.next
            defer { pending = nil }
            if pending == "config" {
                current?.config = fenced.body
                continue
            }
            guard fenced.info == "bash" else { continue }
            // Its output: the next fenced block, after blank lines only, unless it is code of its own.
            var next = index
            while next < lines.count, lines[next].trimmingCharacters(in: .whitespaces).isEmpty { next += 1 }
            var expected: String?
            if next < lines.count, lines[next].hasPrefix("```") {
                let output = block(at: next)
                if !["bash", "yaml", "swift"].contains(output.info) {
                    expected = output.body
                    index = output.next
                }
            }
            if pending != "skip" { current?.steps.append(Step(code: fenced.body, expected: expected, line: fenced.next - 1)) }
        }
        if let done = current { result.append(done) }
        return result
    }

    // MARK: Comparing

    /// Long hex runs (tokens, ids) and long digit runs (codes, times) as placeholders.
    static func masked(_ text: String) -> String {
        text.replacing(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/, with: "<time>").replacing(/[0-9a-f]{12,}/, with: "<hex>")
            .replacing(/\d{6,}/, with: "<n>").trimmingCharacters(in: .whitespaces)
    }

    /// The shape of a JSON value: objects by their keys, arrays by their first element, scalars by their kind.
    static func shape(_ value: JSONValue) -> String {
        switch value {
        case .object(let object): "{" + object.keys.sorted().map { "\($0):\(shape(object[$0]!))" }.joined(separator: ",") + "}"
        case .array(let array): "[" + (array.first.map(shape) ?? "") + "]"
        case .null: "null"
        case .bool: "bool"
        case .int, .double: "number"
        case .string: "string"
        }
    }

    static func json(_ line: String) -> JSONValue? {
        guard line.first == "{" || line.first == "[" else { return nil }
        return try? JSONDecoder().decode(JSONValue.self, from: Data(line.utf8))
    }

    /// Whether an actual line answers to a documented one.
    static func matches(_ expected: String, _ actual: String) -> Bool {
        if let documented = json(expected) {
            return json(actual).map { shape($0) == shape(documented) } ?? false
        }
        if let header = expected.firstMatch(of: /^([A-Za-z][A-Za-z0-9-]*):\s/)?.output.1, !expected.hasPrefix("HTTP/") {
            return actual.lowercased().hasPrefix(header.lowercased() + ":")
        }
        return masked(expected) == masked(actual)
    }

    /// The documented lines that no actual line answers to, in order (actual lines may come in between).
    ///
    /// curl prints an answer without a line break after it; a terminal shows the next one on the same line, the page
    /// on the next. So a JSON document is split from whatever follows it on its line.
    static func unmatched(expected: String, actual: String) -> [String] {
        // "\r\n" is one Character in Swift: split it as two line ends would be, by first making it "\n".
        let separated = actual.replacingOccurrences(of: "\r\n", with: "\n").replacing(/([}\]])([\[{0-9])/) { "\($0.output.1)\n\($0.output.2)" }
        let actualLines = separated.components(separatedBy: "\n").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .filter { !$0.isEmpty }
        var position = 0
        var missing: [String] = []
        for line in expected.components(separatedBy: "\n").map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) }) where !line.isEmpty {
            if let found = actualLines[position...].firstIndex(where: { matches(line, $0) }) {
                position = found + 1
            } else {
                missing.append(line)
            }
        }
        return missing
    }

    @Test func theMarkedWalkthroughsAreFound() {
        let names = Self.walkthroughs.map(\.description)
        #expect(names.contains("README.md: five-minutes"), "\(names)")
        #expect(names.contains("getting-started.md: client-api"), "\(names)")
        #expect(names.contains("native-auth.md: native-auth"), "\(names)")
        #expect(names.contains("client-api.md: api-keys"), "\(names)")
        for walkthrough in Self.walkthroughs {
            #expect(!walkthrough.steps.isEmpty, "\(walkthrough)")
            #expect(walkthrough.steps.contains { $0.expected != nil }, "\(walkthrough) shows no output")
        }
    }

    @Test func theShapeComparisonCanFail() {
        #expect(Self.matches(#"{"a":1,"b":"x"}"#, #"{"b":"y","a":2}"#))
        #expect(!Self.matches(#"{"a":1,"b":"x"}"#, #"{"a":1}"#))
        #expect(!Self.matches(#"{"a":1}"#, #"{"a":"1"}"#))
        #expect(Self.matches("HTTP/1.1 204 No Content", "HTTP/1.1 204 No Content"))
        #expect(!Self.matches("HTTP/1.1 204 No Content", "HTTP/1.1 401 Unauthorized"))
        #expect(Self.matches("Date: Sun, 22 Nov 2026 02:39:28 GMT", "date: Tue, 24 Nov 2026 18:00:00 GMT"))
        #expect(Self.matches("token=73368cf8681a30551bfb723b74f0fe88", "token=0123456789abcdef0123456789abcdef"))
        #expect(Self.unmatched(expected: "{}\nHTTP/1.1 201 Created", actual: "HTTP/1.1 201 Created\n{}") == ["HTTP/1.1 201 Created"])
        #expect(Self.unmatched(expected: "{\"a\":1}\n[]\n204", actual: "{\"a\":2}[]204\r\n").isEmpty)
    }

    @Test(arguments: walkthroughs) func aWalkthroughRunsAsWritten(_ walkthrough: Walkthrough) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("walkthrough-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var arguments = ["serve", "--port", "0"]
        if let config = walkthrough.config {
            try config.write(to: folder.appendingPathComponent("gatehouse.yaml"), atomically: true, encoding: .utf8)
            arguments += ["--config", "gatehouse.yaml"]
        }
        let server = try ChildProcess(CLITests.binary, arguments, environment: CLITests.environment, directory: folder)
        let base: String
        do {
            let banner = try await server.waitForOutput("database:", within: .seconds(60))
            base = String(try #require(banner.firstMatch(of: /listening on (http:\/\/127\.0\.0\.1:\d+)/)?.output.1, "\(banner)"))
        } catch {
            await server.stop()
            throw error
        }
        defer { Task { await server.stop() } }

        let marker = "@@walkthrough-step-end@@"
        // What a terminal shows: standard error among the output.
        var script = "cd '\(folder.path)'\nexec 2>&1\n"
        for step in walkthrough.steps {
            let code = step.code.replacingOccurrences(of: "http://127.0.0.1:9090", with: base)
                .replacingOccurrences(of: "swift run gatehouse", with: "'\(CLITests.binary.path)'")
            script += code + "\nprintf '\\n\(marker)\\n'\n"
        }
        let scriptFile = folder.appendingPathComponent("walkthrough.sh")
        try script.write(to: scriptFile, atomically: true, encoding: .utf8)
        let run = try await FaultSuiteTests.spawn(["/bin/bash", scriptFile.path], within: .seconds(120))
        await server.stop()
        let outputs = run.stdout.components(separatedBy: marker + "\n")
        #expect(outputs.count == walkthrough.steps.count + 1, "the script stopped early: \(run.stderr)")
        for (step, printed) in zip(walkthrough.steps, outputs) {
            guard let expected = step.expected else { continue }
            let output = printed.replacingOccurrences(of: base, with: "http://127.0.0.1:9090")
            let missing = Self.unmatched(expected: expected, actual: output)
            #expect(missing.isEmpty, "\(walkthrough.page) \(step): the page shows \(missing), the server printed:\n\(output)\nstderr: \(run.stderr)")
        }
    }
}
