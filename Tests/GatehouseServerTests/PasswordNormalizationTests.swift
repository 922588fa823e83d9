import GatehouseArgon2
import Crypto
import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import GatehouseTestSupport
import NIOPosix
import Testing

/// Passwords are compared in Unicode NFC: the same characters typed as composed or decomposed code points match.
@Suite struct PasswordNormalizationTests {
    @Test func composedAndDecomposedPasswordsMatch() async throws {
        try await withGatehouse { _, client in
            let decomposed = "cafe\u{301} au lait"  // e + combining acute
            let composed = "caf\u{E9} au lait"
            #expect(decomposed.unicodeScalars.count != composed.unicodeScalars.count)
            _ = try await client.signUp("nfc@example.com", decomposed)
            #expect(try await client.login("nfc@example.com", composed).status == .ok)
            #expect(try await client.login("nfc@example.com", "cafe au lait").status == .unauthorized)
        }
    }

    @Test func aStoredHashAskingForHugeMemoryIsRefusedWithoutHashing() async throws {
        // A hasher whose thread pool never started: any hash it tried would fail with the pool's error.
        let idle = NIOThreadPool(numberOfThreads: 1)
        let hasher = Argon2PasswordHasher(pool: idle)
        let tampered = "$argon2id$v=19$m=4000000000,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"
        #expect(try await hasher.verify("anything", against: tampered) == false)
        // The control: a hash within the limit is computed, on the pool, which throws here.
        let fine = try Argon2.hashPHC(password: "anything", parameters: Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1))
        await #expect(throws: (any Error).self) { try await hasher.verify("anything", against: fine) }
    }
}

enum Argon2ParametersForTests {
    static let stronger = Argon2Parameters(memoryKiB: 128, iterations: 2, parallelism: 1)
}
