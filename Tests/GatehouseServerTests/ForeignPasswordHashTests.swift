import Foundation
import GatehouseArgon2
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Testing

/// Password hashes of other systems, as their own libraries make them (passlib, run from the test venv), verify as
/// they are; an imported user signs in with the password they had, and that first login stores Argon2id.
@Suite struct ForeignPasswordHashTests {
    static let password = "pässwörd ✓ 42"

    /// Hashes of `password` made by passlib, one per form Gatehouse reads: (handler name, hash).
    static func referenceHashes(of password: String, rounds: Int = 1000) async throws -> [(String, String)] {
        guard let python = ProcessInfo.processInfo.environment["GATEHOUSE_PYTHON"] else {
            throw SMTPTestSetupError(description: "GATEHOUSE_PYTHON is not set: run the tests with scripts/test.sh (it makes .build-venv with passlib)")
        }
        let script = """
            import base64, hashlib, os, sys
            from passlib.hash import django_pbkdf2_sha256, django_pbkdf2_sha1, pbkdf2_sha256, pbkdf2_sha512, pbkdf2_sha1, scrypt
            for h in [django_pbkdf2_sha256, django_pbkdf2_sha1, pbkdf2_sha256, pbkdf2_sha512, pbkdf2_sha1]:
                print(h.name, h.using(rounds=int(sys.argv[2])).hash(sys.argv[1]))
            print(scrypt.name, scrypt.using(rounds=10).hash(sys.argv[1]))
            # The PHC form Auth0 takes for pbkdf2, by hashlib: $pbkdf2-<digest>$i=<rounds>,l=<key length>$<salt>$<key>.
            b64 = lambda data: base64.b64encode(data).decode().rstrip("=")
            for digest, length in [("sha1", 20), ("sha256", 32), ("sha512", 64)]:
                salt = os.urandom(16)
                key = hashlib.pbkdf2_hmac(digest, sys.argv[1].encode(), salt, int(sys.argv[2]), length)
                print(f"phc_pbkdf2_{digest}", f"$pbkdf2-{digest}$i={sys.argv[2]},l={length}${b64(salt)}${b64(key)}")
            """
        let run = try await FaultSuiteTests.spawn([python, "-c", script, password, String(rounds)], within: .seconds(60))
        #expect(run.status == 0, "\(run.stderr)")
        return run.stdout.split(separator: "\n").map { line in
            let parts = line.split(separator: " ", maxSplits: 1)
            return (String(parts[0]), String(parts[1]))
        }
    }

    @Test func everyFormPasslibWritesVerifiesTheRightPasswordOnly() async throws {
        let hashes = try await Self.referenceHashes(of: Self.password)
        #expect(
            hashes.map(\.0) == [
                "django_pbkdf2_sha256", "django_pbkdf2_sha1", "pbkdf2_sha256", "pbkdf2_sha512", "pbkdf2_sha1", "scrypt",
                "phc_pbkdf2_sha1", "phc_pbkdf2_sha256", "phc_pbkdf2_sha512",
            ]
        )
        let hasher = Argon2PasswordHasher()
        for (name, hash) in hashes {
            let parsed = try #require(ForeignPasswordHash(hash), "\(name): \(hash)")
            switch parsed.scheme {
            case .pbkdf2(_, let rounds): #expect(rounds == 1000)
            case .scrypt(let cost, let blockSize, let parallelism): #expect(cost == 1024 && blockSize == 8 && parallelism == 1)
            default: Issue.record("\(name) read as \(parsed.scheme)")
            }
            #expect(try await hasher.verify(Self.password, against: hash), "\(name)")
            #expect(try await hasher.verify(Self.password + " ", against: hash) == false, "\(name)")
            #expect(try await hasher.verify("pässwörd ✓ 43", against: hash) == false, "\(name)")
            #expect(hasher.needsRehash(hash, parameters: .init(memoryKiB: 64, iterations: 1, parallelism: 1)))
        }
    }

    @Test func hashesNoSystemWritesAreNotRead() {
        let good = "pbkdf2_sha256$1000$CWGuXEJcdQH4$T+7jp7ibE/NPeUfCAGu4mS1R5hJz1VHcTfime3IBC7I="
        #expect(ForeignPasswordHash(good) != nil)
        #expect(ForeignPasswordHash("$scrypt$ln=4,r=8,p=1$ScnZm9N6D8E4pxQCoPT+Hw$uX1yNBrDQdIziCWexRp475av1Jvk/Z0IWxAb9Php3oM") != nil)
        for bad in [
            "pbkdf2_sha256$100000000$CWGuXEJcdQH4$T+7jp7ibE/NPeUfCAGu4mS1R5hJz1VHcTfime3IBC7I=",  // rounds past the cap
            "pbkdf2_sha256$0$CWGuXEJcdQH4$T+7jp7ibE/NPeUfCAGu4mS1R5hJz1VHcTfime3IBC7I=",
            "pbkdf2_sha256$1000$CWGuXEJcdQH4$T+7jp7ibE/NPeUfCAGu4mS1R5hJz1VHcTfime3I=",  // a checksum too short
            "pbkdf2_md5$1000$salt$T+7jp7ibE/NPeUfCAGu4mS1R5hJz1VHcTfime3IBC7I=",
            "pbkdf2_sha256$1000$$T+7jp7ibE/NPeUfCAGu4mS1R5hJz1VHcTfime3IBC7I=",  // no salt
            "$pbkdf2-sha256$1000$CIGQUgrhHEMoZYyxNmZsTQ",
            "$scrypt$ln=30,r=8,p=1$ScnZm9N6D8E4pxQCoPT+Hw$uX1yNBrDQdIziCWexRp475av1Jvk/Z0IWxAb9Php3oM",  // 1 TiB of memory
            "$scrypt$ln=4,r=8$ScnZm9N6D8E4pxQCoPT+Hw$uX1yNBrDQdIziCWexRp475av1Jvk/Z0IWxAb9Php3oM",
            "md5$salt$hash", "",
        ] {
            #expect(ForeignPasswordHash(bad) == nil, "\(bad)")
        }
    }

    /// The export file of a deployment with one confirmed user, `email`, whose password hash is then replaced by
    /// `hash`: the file another system's converter would write.
    static func exportOfOneUser(_ email: String, withHash hash: String, in folder: URL, clock: ManualClock) async throws -> [String] {
        let source = testConfiguration(database: .sqliteFile(folder.appendingPathComponent("source.sqlite").path))
        try await withGatehouse(source, clock: clock) { _, client in
            _ = try await client.signUp(email, "a gatehouse password")
        }
        let exported = try await TransferTests.export(source, clock: clock, sessions: false)
        let file = exported.map { $0.replacing(/"passwordHash":"[^"]+"/, with: "\"passwordHash\":\"\(hash)\"") }
        #expect(file != exported)
        return file
    }

    @Test func anImportedUserSignsInWithTheirOldPasswordOnceAfterWhichTheHashIsArgon2id() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let clock = ManualClock()
        let legacy = try #require(try await Self.referenceHashes(of: "the password from before").first { $0.0 == "django_pbkdf2_sha256" }?.1)
        let file = try await Self.exportOfOneUser("legacy@example.com", withHash: legacy, in: folder, clock: clock)
        let (target, drop) = try await TransferTests.target(in: folder.appendingPathComponent("target"))
        _ = try await TransferTests.importLines(file, into: target)
        try await withGatehouse(target, clock: clock) { gatehouse, client in
            let before = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "legacy@example.com"))
            #expect(before.passwordHash == legacy)
            #expect(try await client.login("legacy@example.com", "a gatehouse password").status == .unauthorized)
            // Whoever read the old system's hash cannot pass it off as the password.
            #expect(try await client.login("legacy@example.com", legacy).status == .unauthorized)
            #expect(try await client.login("legacy@example.com", "the password from before").status == .ok)
            let after = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "legacy@example.com"))
            #expect(after.passwordHash.hasPrefix("$argon2id$"))
            #expect(try await client.login("legacy@example.com", "the password from before").status == .ok)
            #expect(try await client.login("legacy@example.com", "the password from after").status == .unauthorized)
        }
        await drop()
    }

    @Test func aNativeSignInWithTheOldPasswordVerifiesAndRehashesToo() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let clock = ManualClock()
        let legacy = try #require(try await Self.referenceHashes(of: "the old one").first { $0.0 == "scrypt" }?.1)
        let file = try await Self.exportOfOneUser("native-legacy@example.com", withHash: legacy, in: folder, clock: clock)
        var (target, drop) = try await TransferTests.target(in: folder.appendingPathComponent("target"))
        target.apps = nativeConfiguration().apps
        _ = try await TransferTests.importLines(file, into: target)
        try await withGatehouse(target, clock: clock) { gatehouse, client in
            func signIn(_ password: String) async throws -> Reply {
                let started = try await client.nativeStep(.signInInitiate, ["username": "native-legacy@example.com", "challenge_type": "password redirect"])
                let challenged = try await client.nativeStep(
                    .signInChallenge, ["continuation_token": try #require(started.continuationToken), "challenge_type": "password redirect"]
                )
                #expect(challenged.challengeType == .password)
                return try await client.native(
                    .token,
                    [
                        "continuation_token": try #require(challenged.continuationToken), "grant_type": "password",
                        "username": "native-legacy@example.com", "password": password, "scope": "openid profile offline_access",
                    ]
                )
            }
            expectNativeError(try await signIn(legacy), .invalidGrant)
            #expect(try await signIn("the old one").status == .ok)
            let after = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "native-legacy@example.com"))
            #expect(after.passwordHash.hasPrefix("$argon2id$"))
            #expect(try await client.login("native-legacy@example.com", "the old one").status == .ok)
        }
        await drop()
    }

    @Test func anImportWithAHashNoLoginCanVerifyIsRefusedWhole() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let clock = ManualClock()
        let file = try await Self.exportOfOneUser("unknown-hash@example.com", withHash: "md5$salt$0123456789abcdef", in: folder, clock: clock)
        let (target, drop) = try await TransferTests.target(in: folder.appendingPathComponent("target"))
        await #expect(throws: (any Error).self) { _ = try await TransferTests.importLines(file, into: target) }
        try await withGatehouse(target, clock: clock) { gatehouse, _ in
            let account = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "unknown-hash@example.com")
            #expect(account == nil)
        }
        await drop()
    }
}
