import Foundation
import GatehouseArgon2
@testable import GatehouseServer
import Testing

/// bcrypt hashes as other systems' libraries write them, made at test time by three implementations: pyca/bcrypt
/// (Rust; what Django uses), the C library's `crypt` (libxcrypt, crypt_blowfish's code: PHP's `$2y$`) and passlib
/// (its Django and `bcrypt_sha256` forms, computing with that same `crypt`). Each verifies its password and no other.
@Suite struct BcryptTests {
    /// What the reference script printed for one hash.
    struct Reference: Decodable {
        var password: Int
        var cost: Int
        var form: String
        var hash: String
    }

    static let passwords = [
        "pässwörd ✓ 42",
        "",
        String(repeating: "0123456789", count: 7) + "ab",  // 72 bytes: the whole key, no room for the NUL
        String(repeating: "abcdefghij", count: 7) + "é" + "klmnopqrstuvwxyzABCDEFGHIJKL",  // 100 bytes; byte 72 ends é
    ]

    /// passlib 1.7 cannot load pyca/bcrypt 5 as its backend (its self-test hashes a 255-byte password, which bcrypt 5
    /// refuses), so passlib runs on the C library's `crypt`. pyca/bcrypt 5 refuses passwords over 72 bytes: it is
    /// given the 72 bytes bcrypt uses (what pyca/bcrypt before 5.0 and every other implementation did silently),
    /// while `crypt` and passlib get the whole password. `$2a$` and `$2y$` are also made from pyca's `$2b$` by
    /// changing the label: for passwords under 255 bytes the three compute the same (libxcrypt's, made natively,
    /// show it).
    static let script = #"""
        import json, logging, sys, warnings
        warnings.simplefilter("ignore")
        logging.disable(logging.CRITICAL)
        import bcrypt, crypt
        from passlib.hash import bcrypt as passlib_bcrypt, bcrypt_sha256, django_bcrypt, django_bcrypt_sha256
        for handler in (passlib_bcrypt, bcrypt_sha256, django_bcrypt_sha256):
            handler.set_backend("os_crypt")
        out = []
        for index, password in enumerate(sys.argv[2:]):
            for cost in map(int, sys.argv[1].split(",")):
                add = lambda form, hash: out.append({"password": index, "cost": cost, "form": form, "hash": hash})
                salt = bcrypt.gensalt(cost).decode()
                pyca = bcrypt.hashpw(password.encode()[:72], salt.encode()).decode()
                add("pyca 2b", pyca)
                add("pyca 2a", "$2a$" + pyca[4:])
                add("pyca 2y", "$2y$" + pyca[4:])
                for ident in ("2a", "2b", "2y"):
                    add("crypt " + ident, crypt.crypt(password, "$" + ident + salt[3:]))
                add("django_bcrypt", django_bcrypt.using(rounds=cost).hash(password))
                add("django_bcrypt_sha256", django_bcrypt_sha256.using(rounds=cost).hash(password))
                add("bcrypt_sha256 v2", bcrypt_sha256.using(rounds=cost).hash(password))
                add("bcrypt_sha256 v1 2a", bcrypt_sha256.using(rounds=cost, version=1, ident="2a").hash(password))
                add("bcrypt_sha256 v1 2b", bcrypt_sha256.using(rounds=cost, version=1).hash(password))
        print(json.dumps(out))
        """#

    static let forms: [String: (BcryptHash.Variant, BcryptHash.Prehash)] = [
        "pyca 2b": (.b, .none), "pyca 2a": (.a, .none), "pyca 2y": (.y, .none),
        "crypt 2a": (.a, .none), "crypt 2b": (.b, .none), "crypt 2y": (.y, .none),
        "django_bcrypt": (.b, .none), "django_bcrypt_sha256": (.b, .djangoSHA256),
        "bcrypt_sha256 v2": (.b, .passlibHMACSHA256), "bcrypt_sha256 v1 2a": (.a, .passlibSHA256),
        "bcrypt_sha256 v1 2b": (.b, .passlibSHA256),
    ]

    /// Hashes of `passwords` at each of `costs`, by the reference libraries.
    static func referenceHashes(of passwords: [String], costs: [Int]) async throws -> [Reference] {
        guard let python = ProcessInfo.processInfo.environment["GATEHOUSE_PYTHON"] else {
            throw SMTPTestSetupError(
                description: "GATEHOUSE_PYTHON is not set: run the tests with scripts/test.sh (it makes .build-venv with bcrypt and passlib)"
            )
        }
        let costList = costs.map(String.init).joined(separator: ",")
        let run = try await FaultSuiteTests.spawn([python, "-c", script, costList] + passwords, within: .seconds(60))
        #expect(run.status == 0, "\(run.stderr)")
        return try JSONDecoder().decode([Reference].self, from: Data(run.stdout.utf8))
    }

    @Test func everyFormTheReferenceLibrariesWriteVerifiesItsPasswordOnly() async throws {
        let references = try await Self.referenceHashes(of: Self.passwords, costs: [4, 5])
        #expect(references.count == Self.passwords.count * 2 * Self.forms.count)
        for reference in references {
            let password = Self.passwords[reference.password]
            let context = Comment(rawValue: "\(reference.form), password \(reference.password): \(reference.hash)")
            let parsed = try #require(BcryptHash(reference.hash), context)
            let (variant, prehash) = try #require(Self.forms[reference.form], context)
            #expect(parsed.variant == variant && parsed.prehash == prehash && parsed.cost == reference.cost, context)

            #expect(parsed.verify(password), context)
            let firstCharacterOff = password.isEmpty ? "x" : (password.first == "0" ? "1" : "0") + password.dropFirst()
            #expect(!parsed.verify(firstCharacterOff), context)
            // bcrypt reads 72 bytes of the key: past them, only a digest first (Django's, passlib's) sees a change.
            let truncated = prehash == .none && password.utf8.count >= 72
            #expect(parsed.verify(password + " ") == truncated, context)
            let first72 = String(decoding: password.utf8.prefix(72), as: UTF8.self)
            #expect(parsed.verify(first72 + "anything") == truncated, context)
            if password.utf8.count >= 72 {
                #expect(!parsed.verify(String(first72.dropLast())), context)
            }
            // The password as typed: the same text in another Unicode normalisation is another password.
            if password.decomposedStringWithCanonicalMapping.utf8.count != password.utf8.count {
                #expect(!parsed.verify(password.decomposedStringWithCanonicalMapping), context)
            }
            if reference.form == "pyca 2b" {
                // Gatehouse's encoder (tests only) writes what pyca/bcrypt writes.
                #expect(BcryptHash.hash(password, cost: reference.cost, salt: parsed.salt) == reference.hash, context)
            }
        }
    }

    @Test func libxcryptsNativeVariantsAgreeWithPycasLabelSwap() async throws {
        // For one salt, `crypt` computes $2a$, $2b$ and $2y$ itself: the same checksum, as the prefix swap assumes.
        let references = try await Self.referenceHashes(of: [Self.passwords[0]], costs: [4])
        let byForm = Dictionary(uniqueKeysWithValues: references.map { ($0.form, $0.hash) })
        let native = try ["crypt 2a", "crypt 2b", "crypt 2y", "pyca 2a", "pyca 2b", "pyca 2y"].map { form in
            try #require(byForm[form]).dropFirst(4)
        }
        #expect(Set(native).count == 1, "\(native)")
    }

    @Test func aSaltsUnusedBitsAreIgnoredButNotInPasslibsHMACForm() async throws {
        let references = try await Self.referenceHashes(of: ["correct horse"], costs: [4])
        let pyca = try #require(references.first { $0.form == "pyca 2b" }?.hash)
        let passlib = try #require(references.first { $0.form == "bcrypt_sha256 v2" }?.hash)
        // Every encoder writes the salt's last character with its 4 unused bits zero; setting one changes the text
        // but not the salt's 16 bytes.
        func settingAnUnusedBit(_ hash: String, at offset: Int) throws -> String {
            var bytes = Array(hash.utf8)
            let alphabet = Bcrypt.base64Alphabet
            let value = try #require(alphabet.firstIndex(of: bytes[offset]))
            #expect(value & 0x0F == 0)
            bytes[offset] = alphabet[value | 0x01]
            return String(decoding: bytes, as: UTF8.self)
        }
        let edited = try settingAnUnusedBit(pyca, at: 7 + 21)
        #expect(edited != pyca)
        let parsed = try #require(BcryptHash(edited))
        #expect(parsed.salt == BcryptHash(pyca)?.salt)
        #expect(parsed.verify("correct horse"))
        #expect(!parsed.verify("correct horse "))
        let saltEnd = passlib.utf8.count - 31 - 2  // the salt's last character, before "$" and the checksum
        #expect(BcryptHash(passlib)?.verify("correct horse") == true)
        #expect(BcryptHash(try settingAnUnusedBit(passlib, at: saltEnd)) == nil)
    }

    @Test func aHashThisEncoderWroteVerifiesLikeAReferenceOne() throws {
        let hash = BcryptHash.hash("a test password", cost: 4)
        let parsed = try #require(BcryptHash(hash))
        #expect(parsed.variant == .b && parsed.prehash == .none && parsed.cost == 4)
        #expect(parsed.verify("a test password"))
        #expect(!parsed.verify("a test passwore"))
        #expect(BcryptHash.hash("a test password", cost: 4) != hash)  // a fresh salt each time
    }

    @Test func formsNoSystemWritesAreRefused() throws {
        // OpenBSD's published vector: "" with cost 6.
        let good = "$2a$06$DCq7YPn5Rq63x1Lad4cll.TV4S6ytwfsfvkgY8jIucDrjc8deX1s."
        let body = String(good.dropFirst(7))  // salt and checksum
        #expect(BcryptHash(good)?.verify("") == true)
        #expect(BcryptHash("bcrypt$" + good) != nil)
        #expect(BcryptHash("bcrypt_sha256$" + good) != nil)
        #expect(BcryptHash("$2b$16$" + body)?.cost == 16)  // the highest cost accepted (parsed only: ~4 s to verify)
        #expect(BcryptHash("$2y$04$" + body)?.cost == 4)
        let passlibBody = String(body.prefix(22)) + "$" + String(body.dropFirst(22))
        #expect(BcryptHash("$bcrypt-sha256$v=2,t=2b,r=12$" + passlibBody)?.prehash == .passlibHMACSHA256)
        #expect(BcryptHash("$bcrypt-sha256$2a,12$" + passlibBody)?.prehash == .passlibSHA256)

        let lastChecksumCharacterWithAnUnusedBit = String(good.dropLast()) + "/"  // "." is 0, "/" sets an unused bit
        let refused: [String] = [
            "$2b$17$" + body, "$2b$31$" + body,  // past the cap: one login would run for seconds to days
            "$2b$32$" + body, "$2b$03$" + body, "$2b$00$" + body, "$2b$99$" + body,  // past bcrypt's own range
            "$2b$4$" + body, "$2b$004$" + body, "$2b$+4$" + body, "$2b$ 4$" + body,  // the cost is two digits
            "$2x$06$" + body,  // crypt_blowfish's label for its pre-2011 sign-extension bug
            "$2c$06$" + body, "$2$06$" + body, "$3$06$" + body, "$2B$06$" + body, "2b$06$" + body,
            "$2b$06$" + String(body.dropLast()), "$2b$06$" + body + ".", "$2b$06$" + String(body.dropFirst()),  // lengths
            "$2b$06$" + String(body.prefix(22)) + "$" + String(body.dropFirst(22)),  // a separator where none goes
            "$2b$06$" + body.replacingOccurrences(of: "q", with: "+"),  // standard base64, not bcrypt's
            "$2b$06$" + body.replacingOccurrences(of: "q", with: "="),
            "$2b$06$" + body.replacingOccurrences(of: "q", with: "é"),
            lastChecksumCharacterWithAnUnusedBit,
            good + "\n", " " + good, "$2b$06$", "$2b$06$" + body + "$", "",
            "bcrypt$" + "$2x$06$" + body, "bcrypt$$" + good, "bcrypt_sha256$" + "$2b$17$" + body, "bcrypt_sha256" + good,
            "$bcrypt-sha256$v=2,t=2b,r=04$" + passlibBody,  // passlib refuses zero-padded costs
            "$bcrypt-sha256$v=2,t=2b,r=17$" + passlibBody,
            "$bcrypt-sha256$v=2,t=2a,r=12$" + passlibBody,  // version 2 is 2b only
            "$bcrypt-sha256$v=1,t=2b,r=12$" + passlibBody, "$bcrypt-sha256$v=3,t=2b,r=12$" + passlibBody,
            "$bcrypt-sha256$2y,12$" + passlibBody, "$bcrypt-sha256$2b,012$" + passlibBody,
            "$bcrypt-sha256$v=2,t=2b,r=12$" + body,  // no separator between salt and checksum
            "$bcrypt-sha256$v=2,t=2b,r=12,x=1$" + passlibBody, "$bcrypt-sha256$v=2,t=2b,r=12$" + passlibBody + "$",
        ]
        for bad in refused {
            #expect(BcryptHash(bad) == nil, "\(bad)")
        }
    }
}
