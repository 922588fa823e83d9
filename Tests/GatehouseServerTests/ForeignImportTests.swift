import Foundation
import GatehouseArgon2
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import HummingbirdTesting
import Testing

/// `gatehouse import --from`: the export files of Firebase, Supabase, Auth0 and Keycloak and a plain CSV, made with
/// those systems' own hash libraries (firebase-scrypt, bcrypt, hashlib, passlib, argon2-cffi — never Gatehouse's code),
/// bring users whose old passwords work at once.
@Suite struct ForeignImportTests {
    /// Export files of every format, written by Python with the reference libraries. Keys: the format's name, and
    /// `firebaseKey`/`firebaseSeparator` (the project's hash parameters Firebase keeps apart).
    static func exports() async throws -> [String: String] {
        guard let python = ProcessInfo.processInfo.environment["GATEHOUSE_PYTHON"] else {
            throw SMTPTestSetupError(description: "GATEHOUSE_PYTHON is not set: run the tests with scripts/test.sh")
        }
        let script = #"""
            import base64, hashlib, hmac, json, os, csv, io
            import bcrypt
            import argon2.low_level as a2
            from firebase_scrypt import firebasescrypt as fs
            from passlib.hash import django_pbkdf2_sha256, pbkdf2_sha256, django_argon2

            b64 = lambda b: base64.b64encode(b).decode()
            b64n = lambda b: b64(b).rstrip("=")
            out = {}

            # Firebase: `firebase auth:export --format=json`, SCRYPT with the project's signer key and separator.
            signer, separator = os.urandom(64), b"\x07"
            def firebase(password):
                salt = os.urandom(16)
                key = fs.generate_derived_key(password, salt, separator, 8, 12)
                return {"passwordHash": b64(fs.encrypt(signer, key)), "salt": b64(salt)}
            out["firebase"] = json.dumps({"users": [
                {"localId": "fb-ada", "email": "Ada@Example.com", "emailVerified": True, "displayName": "Ada L",
                 "createdAt": "1600000000000", "customAttributes": "{\"role\":\"admin\"}", **firebase("firebase one")},
                {"localId": "fb-bob", "email": "bob@example.com", "emailVerified": False, **firebase("firebase two")},
                {"localId": "fb-cy", "email": "cy@example.com", "emailVerified": True, "disabled": True, **firebase("firebase three")},
                {"localId": "fb-phone", "phoneNumber": "+15555550100"},
                {"localId": "fb-google", "email": "google-only@example.com", "emailVerified": True,
                 "providerUserInfo": [{"providerId": "google.com", "rawId": "1234"}]},
            ]}, indent=2)
            out["firebaseKey"], out["firebaseSeparator"] = b64(signer), b64(separator)
            # The other algorithms `firebase auth:import` takes, one file each.
            hmac_key = os.urandom(32)
            def firebase_hmac(password):
                salt = os.urandom(8)
                return {"passwordHash": b64(hmac.new(hmac_key, salt + password.encode(), hashlib.sha256).digest()), "salt": b64(salt)}
            def firebase_pbkdf2(password):
                salt = os.urandom(16)
                return {"passwordHash": b64(hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 1000)), "salt": b64(salt)}
            out["firebaseHMAC"] = json.dumps({"users": [{"localId": "h", "email": "hmac@example.com", "emailVerified": True, **firebase_hmac("by hmac")}]})
            out["firebaseHMACKey"] = b64(hmac_key)
            out["firebasePBKDF2"] = json.dumps({"users": [{"localId": "p", "email": "pbkdf2@example.com", "emailVerified": True, **firebase_pbkdf2("by pbkdf2")}]})
            out["firebaseBCRYPT"] = json.dumps({"users": [{"localId": "b", "email": "bcrypt@example.com", "emailVerified": True,
                "passwordHash": b64(bcrypt.hashpw(b"by bcrypt", bcrypt.gensalt(4)))}]})

            # Auth0: JSON lines, bcrypt and custom_password_hash shapes.
            def sha256_prefix(password, salt):
                return {"algorithm": "sha256", "hash": {"value": hashlib.sha256((salt + password).encode()).hexdigest(), "encoding": "hex"},
                        "salt": {"value": salt, "encoding": "utf8", "position": "prefix"}}
            def hmac_suffix(password, salt, key):
                mac = hmac.new(key.encode(), password.encode() + salt, hashlib.sha512).digest()
                return {"algorithm": "hmac", "hash": {"value": b64(mac), "encoding": "base64", "digest": "sha512",
                        "key": {"value": key, "encoding": "utf8"}}, "salt": {"value": salt.hex(), "encoding": "hex", "position": "suffix"}}
            def pbkdf2_phc(password):
                salt = os.urandom(16)
                return {"algorithm": "pbkdf2", "hash": {"value": "$pbkdf2-sha512$i=1000,l=64$" + b64n(salt) + "$" +
                        b64n(hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 1000, 64))}}
            out["auth0"] = "\n".join(json.dumps(u) for u in [
                {"user_id": "auth0|dee", "email": "dee@example.com", "email_verified": True, "name": "Dee",
                 "custom_password_hash": sha256_prefix("auth0 one", "NaCl"), "user_metadata": {"plan": "pro"}},
                {"user_id": "auth0|eve", "email": "eve@example.com", "email_verified": True,
                 "custom_password_hash": hmac_suffix("auth0 two", os.urandom(8), "pepper")},
                {"user_id": "auth0|fay", "email": "fay@example.com", "email_verified": True, "custom_password_hash": pbkdf2_phc("auth0 three"),
                 "app_metadata": {"roles": ["editor"]}},
                {"_id": {"$oid": "60a1b2c3d4e5f60718293a4b"}, "email": "gil@example.com", "email_verified": True,
                 "passwordHash": bcrypt.hashpw(b"auth0 four", bcrypt.gensalt(4)).decode()},
                {"user_id": "auth0|hal", "email": "hal@example.com", "email_verified": True, "blocked": True},
                {"user_id": "auth0|ian", "email": "ian@example.com", "custom_password_hash": {"algorithm": "ldap", "hash": {"value": "{SSHA}x"}}},
            ]) + "\n"

            # Keycloak: a realm export; users after other keys whose values hold brackets and quotes.
            def keycloak_pbkdf2(password, digest, length):
                salt = os.urandom(16)
                value = hashlib.pbkdf2_hmac(digest, password.encode(), salt, 1000, length)
                return {"type": "password", "secretData": json.dumps({"value": b64(value), "salt": b64(salt), "additionalParameters": {}}),
                        "credentialData": json.dumps({"hashIterations": 1000, "algorithm": "pbkdf2-" + digest, "additionalParameters": {}})}
            def keycloak_argon2(password, kind):
                salt = os.urandom(16)
                value = a2.hash_secret_raw(password.encode(), salt, time_cost=2, memory_cost=256, parallelism=1, hash_len=32,
                                           type={"id": a2.Type.ID, "i": a2.Type.I}[kind])
                return {"type": "password", "secretData": json.dumps({"value": b64(value), "salt": b64(salt), "additionalParameters": {}}),
                        "credentialData": json.dumps({"hashIterations": 2, "algorithm": "argon2", "additionalParameters": {
                            "hashLength": ["32"], "memory": ["256"], "type": [kind], "version": ["1.3"], "parallelism": ["1"]}})}
            out["keycloak"] = json.dumps({
                "realm": "demo", "clients": [{"clientId": "web", "redirectUris": ["https://x/]}\"{["]}],
                "users": [
                    {"id": "kc-jo", "username": "jo", "email": "jo@example.com", "emailVerified": True, "enabled": True, "firstName": "Jo",
                     "lastName": "K", "createdTimestamp": 1700000000000, "attributes": {"dept": ["r&d"]},
                     "credentials": [keycloak_pbkdf2("keycloak one", "sha256", 64)]},
                    {"id": "kc-kim", "username": "kim", "email": "kim@example.com", "emailVerified": True, "enabled": True,
                     "credentials": [keycloak_pbkdf2("keycloak two", "sha512", 64)]},
                    {"id": "kc-lu", "username": "lu", "email": "lu@example.com", "emailVerified": True, "enabled": True,
                     "credentials": [keycloak_argon2("keycloak three", "id")]},
                    {"id": "kc-ned", "username": "ned", "email": "ned@example.com", "emailVerified": True, "enabled": True,
                     "credentials": [keycloak_argon2("keycloak five", "i")]},
                    {"id": "kc-max", "username": "max", "email": "max@example.com", "emailVerified": False, "enabled": False,
                     "credentials": [keycloak_pbkdf2("keycloak four", "sha256", 32)]},
                    {"id": "kc-svc", "username": "service-account-web", "serviceAccountClientId": "web", "enabled": True},
                ],
                "groups": [],
            })

            # Supabase: `\copy auth.users to users.csv csv header`, bcrypt as GoTrue writes it ($2a$).
            def supabase_bcrypt(password):
                return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode().replace("$2b$", "$2a$", 1)
            rows = [
                ["id", "email", "encrypted_password", "email_confirmed_at", "raw_user_meta_data", "banned_until", "deleted_at", "created_at", "phone", "is_anonymous"],
                ["5b0c1d2e-0000-4000-8000-000000000001", "nia@example.com", supabase_bcrypt("supabase one"), "2024-02-03 10:00:00.123456+00",
                 "{\"name\": \"Nia, \\\"the first\\\"\"}", "", "", "2024-02-01 09:00:00+00", "", "false"],
                ["5b0c1d2e-0000-4000-8000-000000000002", "oz@example.com", supabase_bcrypt("supabase two"), "", "{}", "", "", "2024-02-01 09:00:00+00", "", "false"],
                ["5b0c1d2e-0000-4000-8000-000000000003", "pia@example.com", supabase_bcrypt("supabase three"), "2024-02-03 10:00:00+00", "{}",
                 "2999-01-01 00:00:00+00", "", "2024-02-01 09:00:00+00", "", "false"],
                ["5b0c1d2e-0000-4000-8000-000000000004", "gone@example.com", supabase_bcrypt("x"), "2024-02-03 10:00:00+00", "{}", "",
                 "2024-05-01 00:00:00+00", "2024-02-01 09:00:00+00", "", "false"],
                ["5b0c1d2e-0000-4000-8000-000000000005", "", "", "", "{}", "", "", "2024-02-01 09:00:00+00", "", "true"],
            ]
            buffer = io.StringIO()
            csv.writer(buffer, lineterminator="\r\n").writerows(rows)
            out["supabase"] = buffer.getvalue()

            # Plain CSV: Django's, passlib's and argon2-cffi's string forms.
            rows = [
                ["email", "password_hash", "email_verified", "custom_data", "id"],
                ["quinn@example.com", django_pbkdf2_sha256.using(rounds=1000).hash("csv one"), "true", "{\"tier\": 2}", "q-1"],
                ["ray@example.com", pbkdf2_sha256.using(rounds=1000).hash("csv two"), "1", "", "r-2"],
                ["sal@example.com", a2.hash_secret(b"csv three", os.urandom(16), time_cost=1, memory_cost=256, parallelism=1,
                                                    hash_len=32, type=a2.Type.ID).decode(), "yes", "", "s-3"],
                ["sid@example.com", a2.hash_secret(b"csv four", os.urandom(16), time_cost=2, memory_cost=64, parallelism=2,
                                                    hash_len=24, type=a2.Type.D, version=16).decode(), "true", "", "s-4"],
                ["sue@example.com", django_argon2.using(memory_cost=128, rounds=1).hash("csv five"), "true", "", "s-5"],
                ["tam@example.com", "md5$salt$0123456789abcdef0123456789abcdef", "true", "", "t-4"],
                ["not an address", "", "true", "", "u-5"],
                ["QUINN@example.com", "", "true", "", "v-6"],
            ]
            buffer = io.StringIO()
            csv.writer(buffer).writerows(rows)
            out["csv"] = buffer.getvalue()
            print(json.dumps(out))
            """#
        let run = try await FaultSuiteTests.spawn([python, "-c", script], within: .seconds(120))
        #expect(run.status == 0, "\(run.stderr)")
        return try JSONDecoder().decode([String: String].self, from: Data(run.stdout.utf8))
    }

    /// Imports `file` in chunks of `chunk` bytes; the skipped records come back with the summary.
    static func importFile(
        _ file: String, as format: ForeignExportFormat, into configuration: GatehouseConfiguration, firebase: FirebaseHashParameters? = nil,
        dryRun: Bool = false, chunk: Int = 4096, clock: ManualClock
    ) async throws -> (ForeignImportSummary, [SkippedRecord]) {
        let bytes = Array(file.utf8)
        var offset = 0
        var skipped: [SkippedRecord] = []
        let summary = try await AuthServer.importForeignUsers(
            configuration: configuration, format: format, appId: "test-app", firebase: firebase, dryRun: dryRun, clock: clock.clock,
            logger: quietLogger,
            read: {
                guard offset < bytes.count else { return nil }
                defer { offset += chunk }
                return Array(bytes[offset..<min(offset + chunk, bytes.count)])
            },
            skipped: { skipped.append($0) }
        )
        return (summary, skipped)
    }

    /// Runs `body` on a fresh target database (PostgreSQL on the PostgreSQL run) with a manual clock, and drops it
    /// afterwards, also when the body throws.
    static func withTarget(_ body: (GatehouseConfiguration, ManualClock) async throws -> Void) async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (target, drop) = try await TransferTests.target(in: folder)
        do {
            try await body(target, ManualClock())
            await drop()
        } catch {
            await drop()
            throw error
        }
    }

    static func firebaseParameters(_ files: [String: String]) -> FirebaseHashParameters {
        FirebaseHashParameters(algorithm: "SCRYPT", key: files["firebaseKey"], saltSeparator: files["firebaseSeparator"], rounds: 8, memoryCost: 12)
    }

    /// Logs in with each password: the right ones work (the first login rehashing to Argon2id), a wrong one does not.
    static func expectLogins(_ expected: KeyValuePairs<String, HTTPResponse.Status>, _ gatehouse: AuthServer, _ client: any TestClientProtocol) async throws {
        for (email, status) in expected {
            let password = String(email.split(separator: "=")[1])
            let address = String(email.split(separator: "=")[0])
            let imported = try await gatehouse.env.store.emailAccount(appId: "test-app", email: address)?.passwordHash
            #expect(try await client.login(address, password + "x").status == .unauthorized, "\(address) with a wrong password")
            #expect(try await client.login(address, password).status == status, "\(address)")
            if status == .ok {
                // Rehashed: a new hash, Argon2id with the app's parameters.
                let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: address))
                #expect(account.passwordHash != imported && (try? Argon2.parseParameters(phc: account.passwordHash)) == testHashParameters, "\(address)")
                #expect(try await client.login(address, password).status == .ok, "\(address) after the rehash")
            }
        }
    }

    @Test func firebaseUsersSignInWithTheirPasswordsUnderTheProjectsScrypt() async throws {
        let files = try await Self.exports()
        try await Self.withTarget { target, clock in
            let (summary, skipped) = try await Self.importFile(
                try #require(files["firebase"]), as: .firebase, into: target, firebase: Self.firebaseParameters(files), chunk: 7, clock: clock
            )
            #expect(summary.read == 5 && summary.imported == 4 && summary.skipped == 1 && summary.pending == 1 && summary.withoutPassword == 1, "\(summary)")
            #expect(skipped.map(\.sourceId) == ["fb-phone"])
            #expect(skipped.first?.reason.contains("no email address") == true)
            try await withGatehouse(target, clock: clock) { gatehouse, client in
                try await Self.expectLogins(
                    ["ada@example.com=firebase one": .ok, "bob@example.com=firebase two": .unauthorized, "cy@example.com=firebase three": .unauthorized],
                    gatehouse, client
                )
                // Disabled stays disabled; the right password says so, a wrong one does not.
                let disabled = try await client.login("cy@example.com", "firebase three")
                #expect(disabled.status == .unauthorized && disabled.text.contains("UserDisabled"))
                // The source's id and name are in the profile; custom attributes are the custom data.
                let login = try await client.login("ada@example.com", "firebase one").decode(LoginResponse.self)
                let profile = try await client.call(Path.profile, .get, bearer: login.accessToken).decode(ProfileResponse.self)
                #expect(profile.data["source_user_id"] == "fb-ada" && profile.data["imported_from"] == "firebase" && profile.data["name"] == "Ada L")
                #expect(profile.data["email"] == "Ada@Example.com")
                let user = try #require(try await gatehouse.env.store.user(id: login.userId))
                #expect(user.customData == ["role": "admin"])
                #expect(user.createdAt == Date(timeIntervalSince1970: 1_600_000_000))
                // A user without a password (Google only) sets one through a password reset.
                let google = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "google-only@example.com"))
                #expect(google.passwordHash.isEmpty && google.confirmedAt != nil)
            }
        }
    }

    @Test func firebasesOtherHashAlgorithmsReadTheirParametersToo() async throws {
        let files = try await Self.exports()
        try await Self.withTarget { target, clock in
            let cases: [(String, FirebaseHashParameters, String)] = [
                ("firebaseHMAC", FirebaseHashParameters(algorithm: "HMAC_SHA256", key: files["firebaseHMACKey"], inputOrder: "SALT_FIRST"), "hmac@example.com=by hmac"),
                ("firebasePBKDF2", FirebaseHashParameters(algorithm: "PBKDF2_SHA256", rounds: 1000), "pbkdf2@example.com=by pbkdf2"),
                ("firebaseBCRYPT", FirebaseHashParameters(algorithm: "BCRYPT"), "bcrypt@example.com=by bcrypt"),
            ]
            for (file, parameters, _) in cases {
                let (summary, skipped) = try await Self.importFile(try #require(files[file]), as: .firebase, into: target, firebase: parameters, clock: clock)
                #expect(summary.imported == 1, "\(file): \(skipped)")
            }
            // The wrong order of salt and password is a wrong hash: imported, but no password matches it.
            let reversed = try await Self.importFile(
                try #require(files["firebaseHMAC"]).replacingOccurrences(of: "hmac@", with: "reversed@"), as: .firebase, into: target,
                firebase: FirebaseHashParameters(algorithm: "HMAC_SHA256", key: files["firebaseHMACKey"], inputOrder: "PASSWORD_FIRST"), clock: clock
            )
            #expect(reversed.0.imported == 1)
            try await withGatehouse(target, clock: clock) { gatehouse, client in
                for (_, _, login) in cases { try await Self.expectLogins([login: .ok], gatehouse, client) }
                #expect(try await client.login("reversed@example.com", "by hmac").status == .unauthorized)
            }
        }
    }

    @Test func firebaseNeedsTheProjectsHashParameters() async throws {
        try await Self.withTarget { target, clock in
            for parameters in [
                nil, FirebaseHashParameters(algorithm: "SCRYPT", key: "c2lnbmVy", rounds: 8), FirebaseHashParameters(algorithm: "MD5", rounds: 1),
                FirebaseHashParameters(algorithm: "SCRYPT", key: "c2lnbmVyIGtleSBvZiBzaXh0ZWVu", saltSeparator: "Bw==", rounds: 8, memoryCost: 40),
            ] {
                await #expect(throws: AuthServer.ImportSetupError.self, "\(String(describing: parameters))") {
                    _ = try await Self.importFile(#"{"users": []}"#, as: .firebase, into: target, firebase: parameters, clock: ManualClock())
                }
            }
        }
    }

    @Test func auth0UsersOfEveryHashShapeSignIn() async throws {
        let files = try await Self.exports()
        try await Self.withTarget { target, clock in
            let (summary, skipped) = try await Self.importFile(try #require(files["auth0"]), as: .auth0, into: target, clock: clock)
            #expect(summary.read == 6 && summary.imported == 5 && summary.withoutPassword == 1, "\(summary) \(skipped)")
            #expect(skipped.map(\.sourceId) == ["auth0|ian"] && skipped.first?.reason.contains("ldap") == true, "\(skipped)")
            try await withGatehouse(target, clock: clock) { gatehouse, client in
                try await Self.expectLogins(
                    ["dee@example.com=auth0 one": .ok, "eve@example.com=auth0 two": .ok, "fay@example.com=auth0 three": .ok, "gil@example.com=auth0 four": .ok],
                    gatehouse, client
                )
                let fay = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "fay@example.com"))
                let user = try #require(try await gatehouse.env.store.user(id: fay.userId))
                #expect(user.customData == ["app_metadata": ["roles": ["editor"]]])
                let gilAccount = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "gil@example.com"))
                let gil = try #require(try await gatehouse.env.store.identities(userId: gilAccount.userId).first)
                #expect(gil.data["source_user_id"] == "60a1b2c3d4e5f60718293a4b")
                let hal = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "hal@example.com"))
                #expect(try await gatehouse.env.store.user(id: hal.userId)?.disabled == true)
            }
        }
    }

    /// A ban or block is never read as "none" unless it plainly is: Supabase's `banned_until` of `infinity` (banned for
    /// good, as `\copy` writes it) imports a disabled user, `-infinity` an enabled one, and a value that is no time is a
    /// skipped user; Auth0's `blocked` and Firebase's `disabled` that are not JSON booleans (`"true"`, `1`) skip the user
    /// too. Before, each of those imported an enabled user who could sign in.
    @Test func aBanOrBlockThatIsNotPlainlyNoneIsNeverImportedAsEnabled() async throws {
        let header = "id,email,encrypted_password,email_confirmed_at,banned_until,created_at\n"
        let supabase = header + [
            "s-1,forever@example.com,,2024-02-03 10:00:00+00,infinity,2024-02-01 09:00:00+00",
            "s-2,never@example.com,,2024-02-03 10:00:00+00,-infinity,2024-02-01 09:00:00+00",
            "s-3,unclear@example.com,,2024-02-03 10:00:00+00,not a date,2024-02-01 09:00:00+00",
            "s-4,past@example.com,,2024-02-03 10:00:00+00,2001-01-01 00:00:00+00,2024-02-01 09:00:00+00",
        ].joined(separator: "\n") + "\n"
        let auth0 = [
            #"{"user_id": "a-1", "email": "text@example.com", "email_verified": true, "blocked": "true"}"#,
            #"{"user_id": "a-2", "email": "one@example.com", "email_verified": true, "blocked": 1}"#,
            #"{"user_id": "a-3", "email": "open@example.com", "email_verified": true, "blocked": false}"#,
            #"{"user_id": "a-4", "email": "null@example.com", "email_verified": true, "blocked": null}"#,
        ].joined(separator: "\n") + "\n"
        let firebase = #"{"users": [{"localId": "f-1", "email": "fb@example.com", "emailVerified": true, "disabled": "true"}]}"#
        try await Self.withTarget { target, clock in
            let (supabaseSummary, supabaseSkipped) = try await Self.importFile(supabase, as: .supabase, into: target, clock: clock)
            #expect(supabaseSummary.imported == 3 && supabaseSkipped.map(\.sourceId) == ["s-3"], "\(supabaseSummary) \(supabaseSkipped)")
            #expect(supabaseSkipped.first?.reason.contains("banned_until") == true)
            let (auth0Summary, auth0Skipped) = try await Self.importFile(auth0, as: .auth0, into: target, clock: clock)
            #expect(auth0Summary.imported == 2 && auth0Skipped.map(\.sourceId) == ["a-1", "a-2"], "\(auth0Summary) \(auth0Skipped)")
            #expect(auth0Skipped.allSatisfy { $0.reason.contains("blocked") })
            let (firebaseSummary, firebaseSkipped) = try await Self.importFile(
                firebase, as: .firebase, into: target, firebase: FirebaseHashParameters(algorithm: "SCRYPT", key: "c2lnbmVyIGtleSBvZiBzaXh0ZWVu", saltSeparator: "Bw==", rounds: 8, memoryCost: 12), clock: clock
            )
            #expect(firebaseSummary.imported == 0 && firebaseSkipped.map(\.sourceId) == ["f-1"], "\(firebaseSummary) \(firebaseSkipped)")
            try await withGatehouse(target, clock: clock) { gatehouse, _ in
                let store = gatehouse.env.store
                for (email, disabled) in ["forever@example.com": true, "never@example.com": false, "past@example.com": false, "open@example.com": false, "null@example.com": false] {
                    let account = try #require(try await store.emailAccount(appId: "test-app", email: email), "\(email)")
                    #expect(try await store.user(id: account.userId)?.disabled == disabled, "\(email)")
                }
                for email in ["unclear@example.com", "text@example.com", "one@example.com", "fb@example.com"] {
                    #expect(try await store.emailAccount(appId: "test-app", email: email) == nil, "\(email)")
                }
            }
        }
    }

    @Test func keycloakRealmUsersSignInWithPBKDF2AndArgon2() async throws {
        let files = try await Self.exports()
        try await Self.withTarget { target, clock in
            let (summary, skipped) = try await Self.importFile(try #require(files["keycloak"]), as: .keycloak, into: target, chunk: 3, clock: clock)
            #expect(summary.read == 6 && summary.imported == 5 && summary.pending == 1, "\(summary) \(skipped)")
            #expect(skipped.map(\.sourceId) == ["kc-svc"])
            try await withGatehouse(target, clock: clock) { gatehouse, client in
                try await Self.expectLogins(
                    [
                        "jo@example.com=keycloak one": .ok, "kim@example.com=keycloak two": .ok, "lu@example.com=keycloak three": .ok,
                        "ned@example.com=keycloak five": .ok, "max@example.com=keycloak four": .unauthorized,
                    ],
                    gatehouse, client
                )
                let jo = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "jo@example.com"))
                #expect(try await gatehouse.env.store.user(id: jo.userId)?.customData == ["attributes": ["dept": ["r&d"]], "username": "jo"])
                let max = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "max@example.com"))
                #expect(try await gatehouse.env.store.user(id: max.userId)?.disabled == true && max.confirmedAt == nil)
            }
        }
    }

    @Test func supabaseRowsAsCSVAndAsJSONImportAlike() async throws {
        let files = try await Self.exports()
        try await Self.withTarget { target, clock in
            let (summary, skipped) = try await Self.importFile(try #require(files["supabase"]), as: .supabase, into: target, chunk: 5, clock: clock)
            #expect(summary.read == 5 && summary.imported == 3 && summary.pending == 1, "\(summary) \(skipped)")
            #expect(skipped.map(\.reason).contains { $0.contains("deleted") } && skipped.map(\.reason).contains { $0.contains("anonymous") })
            try await withGatehouse(target, clock: clock) { gatehouse, client in
                try await Self.expectLogins(
                    ["nia@example.com=supabase one": .ok, "oz@example.com=supabase two": .unauthorized], gatehouse, client
                )
                let banned = try await client.login("pia@example.com", "supabase three")
                #expect(banned.text.contains("UserDisabled"))
                let nia = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "nia@example.com"))
                #expect(try await gatehouse.env.store.user(id: nia.userId)?.customData == ["name": "Nia, \"the first\""])
            }
        }
    }

    @Test func aCSVOfStringFormsImportsWhatALoginCanVerifyAndReportsTheRest() async throws {
        let files = try await Self.exports()
        try await Self.withTarget { target, clock in
            let (summary, skipped) = try await Self.importFile(try #require(files["csv"]), as: .csv, into: target, clock: clock)
            #expect(summary.read == 8 && summary.imported == 5 && summary.skipped == 3, "\(summary)")
            #expect(skipped.map(\.record) == [6, 7, 8])
            #expect(skipped[0].reason.contains("cannot verify") && skipped[1].reason.contains("not an email address"))
            #expect(skipped[2].reason == "an earlier record has the same address")
            try await withGatehouse(target, clock: clock) { gatehouse, client in
                try await Self.expectLogins(
                    [
                        "quinn@example.com=csv one": .ok, "ray@example.com=csv two": .ok, "sal@example.com=csv three": .ok,
                        "sid@example.com=csv four": .ok, "sue@example.com=csv five": .ok,
                    ],
                    gatehouse, client
                )
            }
        }
    }

    @Test func aReportLineCannotBeForgedByARecordsFields() async throws {
        try await Self.withTarget { target, clock in
            let file = "email,id\n\"x\nrecord 99\tid=forged\",a\tb\n"
            let (_, skipped) = try await Self.importFile(file, as: .csv, into: target, clock: ManualClock())
            let line = try #require(skipped.first).description
            #expect(!line.contains("\n") && line.split(separator: "\t").count == 4, "\(line)")
            #expect(line.contains(#"email=x\nrecord 99\tid=forged"#), "\(line)")
        }
    }

    /// A person the source lists twice — the same id under two addresses, or one address twice — becomes one user, even
    /// when the two records are batches apart, in a dry run as in the real one.
    @Test(arguments: [true, false]) func aRecordRepeatingAnEarlierOnesIdOrAddressIsNotASecondUser(dryRun: Bool) async throws {
        try await Self.withTarget { target, clock in
            var rows = ["email,id"] + (0..<600).map { "user\($0)@example.com,id-\($0)" }
            rows.append("someone.else@example.com,id-10")  // record 601: the id of record 11, another address
            rows.append("USER20@example.com,id-new")  // record 602: the address of record 21
            let (summary, skipped) = try await Self.importFile(rows.joined(separator: "\n"), as: .csv, into: target, dryRun: dryRun, clock: clock)
            #expect(summary.imported == 600 && summary.skipped == 2, "\(summary)")
            #expect(skipped.map(\.record) == [601, 602])
            #expect(skipped.map(\.reason) == ["an earlier record has the same id", "an earlier record has the same address"])
        }
    }

    @Test func aCSVWithAColumnItDoesNotKnowIsRefusedBeforeAnythingIsWritten() async throws {
        try await Self.withTarget { target, clock in
            await #expect(throws: AuthServer.ImportSetupError.self) {
                _ = try await Self.importFile("email,password,verified\na@example.com,hunter2,true\n", as: .csv, into: target, clock: ManualClock())
            }
        }
    }

    @Test func runningAnImportAgainSkipsWhatItBroughtAndNeverDuplicates() async throws {
        let files = try await Self.exports()
        try await Self.withTarget { target, clock in
            let file = try #require(files["auth0"])
            // Someone else holds one of the addresses already.
            try await withGatehouse(target, clock: clock) { _, client in _ = try await client.signUp("eve@example.com", "a different person") }
            let dry = try await Self.importFile(file, as: .auth0, into: target, dryRun: true, clock: clock)
            let first = try await Self.importFile(file, as: .auth0, into: target, clock: clock)
            #expect(dry.0 == first.0 && dry.1 == first.1, "a dry run reports what the import does")
            #expect(first.0.imported == 4 && first.1.contains { $0.email == "eve@example.com" && $0.reason == "the app has a user with this address already" })
            let again = try await Self.importFile(file, as: .auth0, into: target, clock: clock)
            #expect(again.0.imported == 0 && again.0.skipped == 6)
            #expect(again.1.filter { $0.reason.hasPrefix("already imported") }.count == 4)
            try await withGatehouse(target, clock: clock) { gatehouse, client in
                #expect(try await client.login("eve@example.com", "a different person").status == .ok, "the holder keeps the address")
                #expect(try await client.login("eve@example.com", "auth0 two").status == .unauthorized)
                let rows = try await (gatehouse.env.store as! SQLStore).db.query("SELECT COUNT(*) AS n FROM users WHERE app_id = 'test-app'", [])
                #expect(try rows.first?.int("n") == 5)
            }
        }
    }

    /// An address imported unverified holds whatever password the source's registrant chose — perhaps someone who
    /// typed the victim's address. It gives that person nothing: the account stays pending, and the mailbox's owner who
    /// registers it takes it over. A registration over a pending account confirms no password (whose it is cannot be
    /// told), so the owner chooses theirs after the proof.
    @Test func anAddressImportedUnverifiedIsTheMailboxOwnersOnceTheyRegister() async throws {
        try await Self.withTarget { target, clock in
            #expect(target.apps[0].localUserpass?.confirmation == .email)
            let squatter = try #require(try await ForeignPasswordHashTests.referenceHashes(of: "the squatter's").first { $0.0 == "django_pbkdf2_sha256" }?.1)
            // An Argon2 hash asking for 4 GiB is not taken in: verifying it would take the server's memory.
            let greedy = "$argon2i$v=19$m=4194304,t=1,p=1$c2FsdHNhbHQ$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
            let file = "email,password_hash,email_verified\nvictim@example.com,\(squatter),false\ngreedy@example.com,\"\(greedy)\",true\n"
            let (summary, skipped) = try await Self.importFile(file, as: .csv, into: target, clock: clock)
            #expect(summary.imported == 1 && summary.pending == 1 && skipped.map(\.email) == ["greedy@example.com"], "\(summary) \(skipped)")
            try await withGatehouse(target, clock: clock) { _, client in
                #expect(try await client.login("victim@example.com", "the squatter's").status == .unauthorized)
                #expect(try await client.register("victim@example.com", "the victim's own").status == .created)
                let link = try await client.latestLink("victim@example.com")
                #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .ok)
                #expect(try await client.login("victim@example.com", "the squatter's").status == .unauthorized)
                #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "victim@example.com")).status == .ok)
                let reset = try await client.latestLink("victim@example.com")
                let chosen = ResetPasswordRequest(password: "the victim's own", token: reset.token, tokenId: reset.tokenId)
                #expect(try await client.call(Path.local("reset"), json: chosen).status == .ok)
                #expect(try await client.login("victim@example.com", "the victim's own").status == .ok)
                #expect(try await client.login("victim@example.com", "the squatter's").status == .unauthorized)
            }
        }
    }

    /// Someone registers the victim's address here before the move and never confirms it. The import's verified record
    /// of the victim is not kept out by that: the pending registration goes (as a confirmation would end it), the
    /// victim signs in with their old password, and the squatter's password opens nothing. A confirmed holder keeps
    /// the address (the test above), and an unverified record never displaces anyone.
    @Test func aPendingRegistrationOfTheVictimsAddressDoesNotKeepTheirImportOut() async throws {
        try await Self.withTarget { target, clock in
            let old = try #require(try await ForeignPasswordHashTests.referenceHashes(of: "the victim's old one").first { $0.0 == "django_pbkdf2_sha256" }?.1)
            try await withGatehouse(target, clock: clock) { _, client in
                let victim = try await client.register("victim@example.com", "the squatter's")
                let other = try await client.register("other@example.com", "another squatter")
                #expect(victim.status == .created && other.status == .created)
            }
            let file = "email,password_hash,email_verified\nvictim@example.com,\(old),true\nother@example.com,\(old),false\n"
            let (summary, skipped) = try await Self.importFile(file, as: .csv, into: target, clock: clock)
            #expect(summary.imported == 1 && skipped.map(\.email) == ["other@example.com"], "\(summary) \(skipped)")
            try await withGatehouse(target, clock: clock) { gatehouse, client in
                #expect(try await client.login("victim@example.com", "the victim's old one").status == .ok)
                #expect(try await client.login("victim@example.com", "the squatter's").status == .unauthorized)
                // The squatter's confirmation link died with their registration.
                let link = try await client.latestLink("victim@example.com")
                #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status != .ok)
                let users = try await (gatehouse.env.store as! SQLStore).db.query("SELECT COUNT(*) AS n FROM users WHERE app_id = 'test-app'", [])
                #expect(try users.first?.int("n") == 2, "the squatter's user went; the other pending one stays")
            }
        }
    }

    @Test func aDryRunWritesNothing() async throws {
        let files = try await Self.exports()
        try await Self.withTarget { target, clock in
            let (summary, _) = try await Self.importFile(try #require(files["keycloak"]), as: .keycloak, into: target, dryRun: true, clock: clock)
            #expect(summary.imported == 5)
            try await withGatehouse(target, clock: clock) { gatehouse, client in
                let account = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "jo@example.com")
                #expect(account == nil)
                #expect(try await client.login("jo@example.com", "keycloak one").status == .unauthorized)
            }
        }
    }

    @Test func aTruncatedFileStopsWithTheBatchesBeforeItWritten() async throws {
        try await Self.withTarget { target, clock in
            let users = (0..<700).map { #"{"localId": "u\#($0)", "email": "user\#($0)@example.com", "emailVerified": true}"# }
            let file = #"{"users": ["# + users.joined(separator: ",") + ", {\"localId\": \"cut"
            let parameters = FirebaseHashParameters(algorithm: "HMAC_SHA256", key: "a2V5")
            await #expect(throws: AuthServer.ImportSetupError.self) {
                _ = try await Self.importFile(file, as: .firebase, into: target, firebase: parameters, clock: ManualClock())
            }
            // The first batch (500) is in; running the complete file again brings the rest and only the rest.
            let complete = #"{"users": ["# + users.joined(separator: ",") + "]}"
            let (summary, skipped) = try await Self.importFile(complete, as: .firebase, into: target, firebase: parameters, clock: ManualClock())
            #expect(summary.imported == 200 && skipped.count == 500 && skipped.allSatisfy { $0.reason.hasPrefix("already imported") })
        }
    }
}

/// The streaming readers under the import: a file is walked in chunks, never held whole.
@Suite struct StreamingInputTests {
    static func chunks(_ text: String, size: Int) -> ByteInput {
        let bytes = Array(text.utf8)
        var offset = 0
        return ByteInput {
            guard offset < bytes.count else { return nil }
            defer { offset += size }
            return Array(bytes[offset..<min(offset + size, bytes.count)])
        }
    }

    @Test(arguments: [1, 2, 5, 4096]) func theUsersArrayIsFoundPastOtherKeysWhateverTheChunks(size: Int) throws {
        let document = #"{"realm": "a]\"}", "n": 12, "clients": [{"x": ["]", "[", {"users": [1]}]}], "ok": true, "users": [{"a": "}\\"}, {"b": [1, {"c": null}]} , {}], "after": [1]}"#
        var elements = JSONArrayElements(Self.chunks(document, size: size), key: "users")
        var found: [String] = []
        while let element = try elements.next() { found.append(String(decoding: element, as: UTF8.self)) }
        #expect(found == [#"{"a": "}\\"}"#, #"{"b": [1, {"c": null}]}"#, "{}"])
    }

    @Test func aDocumentWithoutTheArrayOrCutShortThrows() {
        for document in [#"{"realm": "x"}"#, #"{"users": [{"a": 1}, {"b": "#, #"{"users": [{"a": 1} {"b": 2}]}"#, "[1, 2]", ""] {
            var elements = JSONArrayElements(StreamingInputTests.chunks(document, size: 3), key: "users")
            #expect(throws: ExportFileError.self, "\(document)") { while try elements.next() != nil {} }
        }
    }

    @Test(arguments: [1, 3, 4096]) func csvRecordsKeepQuotedCommasNewlinesAndQuotes(size: Int) throws {
        let file = "a,b,c\r\n\"x, y\",\"line\nbreak\",\"say \"\"hi\"\"\"\r\n\r\n,,\nlast,2,3"
        var records = CSVRecords(Self.chunks(file, size: size))
        var found: [[String]] = []
        while let record = try records.next() { found.append(record) }
        #expect(found == [["a", "b", "c"], ["x, y", "line\nbreak", "say \"hi\""], ["", "", ""], ["last", "2", "3"]])
        var cut = CSVRecords(Self.chunks("a\n\"open", size: size))
        #expect(throws: ExportFileError.self) { while try cut.next() != nil {} }
    }
}
