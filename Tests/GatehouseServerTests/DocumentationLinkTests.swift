import Foundation
import GatehouseDomain
@testable import GatehouseServer
import Testing

/// The documentation's links hold: every relative link in the README, the changelog and `docs/` names a file of the
/// repository, and every `#anchor` a heading of its page (GitHub's anchor rules).
@Suite struct DocumentationLinkTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The pages: the README, the changelog, and every Markdown file under `docs/`.
    static var pages: [URL] {
        let docs = (try? FileManager.default.contentsOfDirectory(at: root.appendingPathComponent("docs"), includingPropertiesForKeys: nil)) ?? []
        return [root.appendingPathComponent("README.md"), root.appendingPathComponent("CHANGELOG.md")]
            + docs.filter { $0.pathExtension == "md" }.sorted { $0.path < $1.path }
    }

    /// GitHub's anchor for a heading: lowercased, punctuation other than `-` and `_` dropped, spaces as `-`.
    static func anchor(_ heading: String) -> String {
        let lowered = heading.trimmingCharacters(in: .whitespaces).lowercased()
        let kept = lowered.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" || $0 == " " }
        return String(String.UnicodeScalarView(kept)).replacingOccurrences(of: " ", with: "-")
    }

    /// The anchors of a page's headings, outside code blocks.
    static func anchors(of page: URL) throws -> Set<String> {
        var found: Set<String> = []
        var inCode = false
        for line in try String(contentsOf: page, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode, let match = line.wholeMatch(of: /#{1,6} (.+)/) else { continue }
            found.insert(anchor(String(match.output.1)))
        }
        return found
    }

    /// The relative links of a page, outside code blocks: (target file or nil for the page itself, anchor or nil).
    static func links(of page: URL) throws -> [(text: String, file: URL?, anchor: String?)] {
        var result: [(String, URL?, String?)] = []
        var inCode = false
        for line in try String(contentsOf: page, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode else { continue }
            for match in line.matches(of: /\]\(([^)\s]+)\)/) {
                let target = String(match.output.1)
                if target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("mailto:") { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let path = String(parts[0])
                let file = path.isEmpty ? nil : page.deletingLastPathComponent().appendingPathComponent(path).standardizedFileURL
                result.append((target, file, parts.count > 1 ? String(parts[1]) : nil))
            }
        }
        return result
    }

    @Test func everyPageExistsAndLinksSomewhere() throws {
        let pages = Self.pages
        #expect(pages.count >= 8, "expected the README, the changelog and the guides under docs/")
        for page in pages { #expect(FileManager.default.fileExists(atPath: page.path), "\(page.path)") }
        #expect(try Self.links(of: pages[0]).count > 5, "the README links its guides")
    }

    @Test(arguments: pages.map(\.lastPathComponent)) func everyRelativeLinkAndAnchorResolves(_ name: String) throws {
        let page = try #require(Self.pages.first { $0.lastPathComponent == name })
        for link in try Self.links(of: page) {
            let target = link.file ?? page
            #expect(FileManager.default.fileExists(atPath: target.path), "\(name): \(link.text) names no file")
            if let anchor = link.anchor, target.pathExtension == "md", FileManager.default.fileExists(atPath: target.path) {
                #expect(try Self.anchors(of: target).contains(anchor), "\(name): \(link.text) names no heading")
            }
        }
    }

    @Test func theAnchorRuleIsGitHubs() {
        #expect(Self.anchor("Native auth: sign-up, sign-in and reset inside the app") == "native-auth-sign-up-sign-in-and-reset-inside-the-app")
        #expect(Self.anchor("Operations: timeouts, limits and faults") == "operations-timeouts-limits-and-faults")
        #expect(Self.anchor("From realm-swift and Atlas App Services") == "from-realm-swift-and-atlas-app-services")
    }

    @Test func theProductDocsSpeakOfFeaturesNotIssueNumbers() throws {
        for page in Self.pages {
            let text = try String(contentsOf: page, encoding: .utf8)
            #expect(text.firstMatch(of: /(?i)\bissue\s*#?\d+/) == nil, "\(page.lastPathComponent) names an issue number")
        }
    }
}
