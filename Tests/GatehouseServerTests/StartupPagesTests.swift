import Foundation
import GatehouseServer
import Testing

/// `gatehouse serve` drops its mappings of the executable's code once it listens (``StartupPages``); here the test
/// process drops its own, which must leave it resident in fewer pages and still running.
@Suite struct StartupPagesTests {
    @Test func droppingTheCodeMappingShrinksItsResidentPagesAndTheProcessRunsOn() throws {
        #if canImport(Glibc)
        let before = try #require(StartupPages.residentCode())
        #expect(StartupPages.release() > 0, "the executable's code mapping was found and dropped")
        let after = try #require(StartupPages.residentCode())
        #expect(after < before, "resident code \(before) kB before, \(after) kB after")
        // Code runs on: its pages come back as it is used.
        #expect(TokenClaimsJSONTests.encoder().outputFormatting.contains(.sortedKeys))
        #endif
    }
}
