import Foundation
import GatehouseDomain
@testable import GatehouseServer
import Testing

/// The configuration reference (`docs/configuration.md`) and the loader cannot drift apart: the reference's key table
/// documents exactly the keys the loader accepts, and the example file (`docs/gatehouse.example.yaml`) has every one
/// of them and loads.
///
/// The table's first column names each key by its full dotted path (`apps[].providers.oauth2-google.clientIds`;
/// `KIND` stands for each rate-limit kind). A row whose type column is `{a, b}` (or a list of `{a, b}`) documents
/// those keys under its own. Mappings that only hold other keys need no row of their own.
@Suite struct ConfigurationReferenceTests {
    static let docs = DocumentationLinkTests.root.appendingPathComponent("docs")

    /// What the loader accepted and what the example had, recorded while loading the example file.
    static func loadExample() throws -> (accepted: Set<String>, present: Set<String>) {
        let recorder = ConfigurationKeyRecorder()
        try ConfigurationKeyRecorder.$current.withValue(recorder) {
            _ = try ConfigurationLoader(environment: [:]).load(file: docs.appendingPathComponent("gatehouse.example.yaml").path)
        }
        return (recorder.accepted, recorder.present)
    }

    /// The keys the reference's table documents.
    static func documentedKeys() throws -> Set<String> {
        var keys: Set<String> = []
        let text = try String(contentsOf: docs.appendingPathComponent("configuration.md"), encoding: .utf8)
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let columns = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard columns.count > 3 else { continue }
            let named = columns[1].matches(of: /`([^`]+)`/).map { String($0.output.1) }.filter { $0.first?.isLowercase == true }
            let type = columns[2]
            let children = type.firstMatch(of: /\{([^}]*)\}/).map {
                $0.output.1.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            }
            let isList = type.hasPrefix("list of")
            for key in named {
                let expanded = key.contains("KIND") ? RateLimitSettings.Kind.allCases.map { key.replacingOccurrences(of: "KIND", with: $0.rawValue) } : [key]
                for each in expanded {
                    // `list[]` names the list `list`, whose items' keys are `list[].key`.
                    let name = each.hasSuffix("[]") ? String(each.dropLast(2)) : each
                    keys.insert(name)
                    if let children { keys.formUnion(children.map { "\(name)\(isList ? "[]" : "").\($0)" }) }
                }
            }
        }
        return keys
    }

    /// Keys that only hold other keys.
    static func parents(of keys: Set<String>) -> Set<String> {
        Set(keys.filter { key in keys.contains { $0.hasPrefix(key + ".") || $0.hasPrefix(key + "[].") } })
    }

    @Test func theExampleFileLoadsAndHasEveryKeyTheLoaderAccepts() throws {
        let (accepted, present) = try Self.loadExample()
        #expect(accepted.count > 100, "the example reached only \(accepted.count) keys")
        #expect(accepted.subtracting(present).isEmpty, "keys docs/gatehouse.example.yaml lacks: \(accepted.subtracting(present).sorted())")
    }

    @Test func theReferenceDocumentsExactlyTheKeysTheLoaderAccepts() throws {
        let accepted = try Self.loadExample().accepted
        let documented = try Self.documentedKeys()
        let leaves = accepted.subtracting(Self.parents(of: accepted))
        #expect(leaves.subtracting(documented).isEmpty, "keys the loader accepts that docs/configuration.md does not document: \(leaves.subtracting(documented).sorted())")
        #expect(documented.subtracting(accepted).isEmpty, "keys docs/configuration.md documents that the loader refuses: \(documented.subtracting(accepted).sorted())")
    }

    @Test func anUndocumentedKeyIsRefusedByTheLoader() throws {
        let example = try String(contentsOf: Self.docs.appendingPathComponent("gatehouse.example.yaml"), encoding: .utf8)
        let typo = example.replacingOccurrences(of: "  headerTimeout: 10", with: "  headerTimeOut: 10")
        #expect(typo != example)
        let error = #expect(throws: ConfigurationError.self) { try ConfigurationLoader(environment: [:]).parse(yaml: typo) }
        #expect(error?.key == "server.headerTimeOut")
    }
}
