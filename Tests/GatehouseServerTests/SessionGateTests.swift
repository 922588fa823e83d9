import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Hummingbird
import Testing

/// One gate issues every session (`SessionGate`): each grant of either protocol records its session's kind, the
/// methods that proved it (RFC 8176 `amr`) and when, and its access tokens say so; and no code but the gate makes a
/// proof or writes a new session.
@Suite struct SessionGateTests {
    /// The session an access token belongs to, as stored, and the token's claims.
    static func session(of accessToken: String, in gatehouse: AuthServer) async throws -> (SessionRecord, [String: Any]) {
        let claims = try jwtPayload(accessToken)
        let sid = try #require(claims["sid"] as? String)
        return (try #require(try await gatehouse.env.store.session(id: sid)), claims)
    }

    /// What a session records and its access token carries, for one grant.
    static func expect(
        _ accessToken: String, in gatehouse: AuthServer, kind: SessionKind, amr: [String]?, proven: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let (session, claims) = try await session(of: accessToken, in: gatehouse)
        #expect(session.kind == kind, sourceLocation: sourceLocation)
        #expect(session.methods.map(\.rawValue) == (amr ?? []), sourceLocation: sourceLocation)
        #expect((session.provenAt != nil) == proven, sourceLocation: sourceLocation)
        #expect(claims["amr"] as? [String] == amr, "\(claims)", sourceLocation: sourceLocation)
        let authTime = try #require(claims["auth_time"] as? Int, sourceLocation: sourceLocation)
        #expect(Int64(authTime) == Int64((session.provenAt ?? session.createdAt).timeIntervalSince1970), sourceLocation: sourceLocation)
        #expect(authTime <= (claims["iat"] as? Int ?? 0), sourceLocation: sourceLocation)
    }

    @Test func everyClientAPIGrantRecordsHowItsSessionWasProven() async throws {
        try await withGatehouse { gatehouse, client in
            let password = try await client.signUp("gus@example.com")
            try await Self.expect(password.accessToken, in: gatehouse, kind: .firstParty, amr: ["pwd"])
            let key = try await client.createKey("build", refreshToken: password.refreshToken)
            let keyLogin = try await client.loginWithKey(try #require(key.key)).decode(LoginResponse.self)
            try await Self.expect(keyLogin.accessToken, in: gatehouse, kind: .apiKey, amr: ["apikey"], proven: false)
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", body: "{}").decode(LoginResponse.self)
            try await Self.expect(anonymous.accessToken, in: gatehouse, kind: .anonymous, amr: nil)
            // A refreshed access token says the same: the session's proof, not the refresh's.
            let refreshed = try await client.call(Path.session, bearer: password.refreshToken).decode(SessionResponse.self)
            try await Self.expect(refreshed.accessToken, in: gatehouse, kind: .firstParty, amr: ["pwd"])
            // The kind decides the powers: the key session still may not manage the account.
            #expect(try await client.call(Path.delete, .delete, bearer: keyLogin.accessToken).status == .forbidden)
        }
    }

    @Test func everyNativeGrantRecordsHowItsSessionWasProven() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            // Sign-in after sign-up: the sign-up's code proved the mailbox.
            let afterSignUp = try await client.nativeSignedUp("nell@example.com")
            try await Self.expect(afterSignUp.accessToken, in: gatehouse, kind: .firstParty, amr: ["otp"])
            let idClaims = try jwtPayload(try #require(afterSignUp.idToken))
            #expect(idClaims["amr"] as? [String] == ["otp"])
            #expect(idClaims["sid"] as? String == OpaqueToken(try #require(afterSignUp.refreshToken))?.id)
            #expect(idClaims["auth_time"] as? Int != nil)

            // A password sign-in.
            let fields = ["username": "nell@example.com", "challenge_type": "password redirect"]
            let ct1 = try #require(try await client.nativeStep(.signInInitiate, fields).continuationToken)
            let ct2 = try #require(
                try await client.nativeStep(.signInChallenge, ["continuation_token": ct1, "challenge_type": "password redirect"]).continuationToken
            )
            let password = try await client.native(
                .token, ["continuation_token": ct2, "grant_type": "password", "password": "correct horse", "scope": "openid offline_access"]
            ).decode(NativeAuthTokenResponse.self)
            try await Self.expect(password.accessToken, in: gatehouse, kind: .firstParty, amr: ["pwd"])

            // A code sign-in.
            let codeFields = ["username": "nell@example.com", "challenge_type": "oob redirect"]
            let ct3 = try #require(try await client.nativeStep(.signInInitiate, codeFields).continuationToken)
            let ct4 = try #require(
                try await client.nativeStep(.signInChallenge, ["continuation_token": ct3, "challenge_type": "oob redirect"]).continuationToken
            )
            let code = try await client.native(
                .token,
                ["continuation_token": ct4, "grant_type": "oob", "oob": try await client.latestCode("nell@example.com"), "scope": "openid offline_access"]
            ).decode(NativeAuthTokenResponse.self)
            try await Self.expect(code.accessToken, in: gatehouse, kind: .firstParty, amr: ["otp"])

            // A rotated refresh keeps the session's proof.
            let rotated = try await client.nativeRefresh(try #require(code.refreshToken)).decode(NativeAuthTokenResponse.self)
            try await Self.expect(rotated.accessToken, in: gatehouse, kind: .firstParty, amr: ["otp"])
        }
    }

    /// The gate's guarantee in the compiler is that `SessionProof` and `IssuedSession` are made in one file; this
    /// test keeps the rest of it: only the gate writes a new session or makes a session record, so a new way in must
    /// go through it; and only ``SessionRefresh`` rotates, touches or ends one, for both protocols.
    @Test func onlyTheGateMakesProofsAndWritesSessions() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let sources = root.appendingPathComponent("Sources")
        var found: [String: Set<String>] = [:]
        let refreshCalls = ["store.rotateSessionSecret(", "store.touchSession(", "store.spentRefreshSecret(", "store.revokeSession("]
        let patterns = ["SessionProof(", "IssuedSession(", "store.createSession(", "SessionRecord("] + refreshCalls
        let walker = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        for case let file as URL in walker where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            let code = text.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }.joined(separator: "\n")
            for pattern in patterns where code.contains(pattern) {
                found[pattern, default: []].insert(file.path.replacingOccurrences(of: root.path + "/", with: ""))
            }
        }
        let gate = "Sources/GatehouseDomain/Sessions/SessionGate.swift"
        #expect(found["SessionProof("] == [gate])
        #expect(found["IssuedSession("] == [gate])
        #expect(found["store.createSession("] == [gate])
        // A session record is made by the gate, and read back by the store (rows, an export file's sessions).
        #expect(
            found["SessionRecord("] == [gate, "Sources/GatehouseServer/Store/SQL/SQLStore.swift", "Sources/GatehouseServer/Store/Transfer/UserTransfer.swift"],
            "\(found["SessionRecord("] ?? [])"
        )
        // Refresh, rotation, reuse detection and ending a session are written once, for both protocols.
        for call in refreshCalls {
            #expect(found[call] == ["Sources/GatehouseDomain/Sessions/SessionRefresh.swift"], "\(call): \(found[call] ?? [])")
        }
    }
}
