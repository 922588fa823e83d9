import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// An owner and an attacker act on one address, `victim@example.com`, in a seeded random order, across both
/// protocols; after every step the security model's invariants must hold (`docs/security-model.md`):
///
/// - **Provenance**: once the owner has proven the mailbox, nothing the attacker set up (a password registered for the
///   address, a session from it, a key made from that session, an address of theirs linked to the user) reaches the
///   owner's user.
/// - **Key sessions have no power over the account**: a session from a leaked key cannot link, delete the user, log
///   out everywhere or manage keys.
/// - **Sessions end everywhere at once**: after a reset or "log out everywhere", no earlier session of the user
///   works; after a revocation, none of that session's tokens.
/// - **Spent refresh tokens end their family** when presented after the reuse window.
/// - **The owner is not locked out** by the attacker: a session the owner holds keeps working unless the owner
///   ended it or the model says why it ended; and every action of the owner (a login with their password, a code,
///   a reset mail, a confirmation) succeeds from an address that has not been failing, with the production limits
///   and login delays on, however the attacker drove the counts (wrong passwords, native starts and reset mails
///   flooded from one address, registrations of the address again and again).
/// - **A mailbox proof confirms only a password its prover set**: when more than one registration named the pending
///   address, its confirmation confirms none, and no registrant's password logs in — through the Client API's login or
///   native auth's password sign-in.
/// - **Recent proof for changes**: the account self-service routes (password change, ending one session or all
///   others, reauthentication, email change) refuse an API-key session, and refuse a credential change from a session
///   proven longer than `recentProofWindow` ago without the current password; a password change ends every other
///   session of the user in both protocols; the attacker's request to move its own account to the owner's confirmed
///   address never yields a code, and never moves the address.
/// - **Sessions say how they were proven**: every live session of every user the run touched is one the model
///   started, and its recorded methods (`amr`) and proof time are what the model proved for it (a password login
///   `pwd`, a code sign-in `otp`, a key `apikey`, a reauthentication or a password change with `currentPassword` adds
///   its method).
/// - **The owner can always sign in** with the password the model says is current, in either protocol.
/// - No request is answered with a 5xx.
///
/// Runs on SQLite, and on PostgreSQL when the suite does. Each seed is reproducible: a failure prints the seed and the
/// steps; `GATEHOUSE_INTEGRITY_SEED=<seed>` runs that one alone (`GATEHOUSE_INTEGRITY_STEPS` sets the length), and
/// `GATEHOUSE_INTEGRITY_SEED=random` draws new ones; `GATEHOUSE_INTEGRITY_VERBOSE=1` prints every run's steps.
@Suite(.timeLimit(.minutes(5))) struct AccountIntegrityPropertyTests {
    static let seeds: [UInt64] = {
        switch ProcessInfo.processInfo.environment["GATEHOUSE_INTEGRITY_SEED"] {
        case "random"?: return (0..<8).map { _ in UInt64.random(in: 1...UInt64.max) }
        case let text? where UInt64(text) != nil: return [UInt64(text)!]
        // Small seeds: the generator's sequences for seeds 1, 2, … are unrelated (multiples of its step would not be).
        default: return (1...12).map { UInt64($0) }
        }
    }()
    static let steps = ProcessInfo.processInfo.environment["GATEHOUSE_INTEGRITY_STEPS"].flatMap(Int.init) ?? 80

    @Test(arguments: seeds) func anOwnerAndAnAttackerInterleaved(seed: UInt64) async throws {
        var config = nativeConfiguration()
        // Half the seeds use an app that confirms registrations automatically (no mailbox proven at registration).
        let automatic = seed % 2 == 1
        if automatic { config.apps[0].localUserpass?.confirmation = .auto }
        // The production limits and login delays, each request from a client address of its own side: the attacker's
        // from theirs, the owner's and the checks' each from an address that has not been failing.
        config.server.clientIPHeader = "X-Forwarded-For"
        let clock = ManualClock()
        try await withGatehouse(config, clock: clock) { gatehouse, client in
            let run = Run(seed: seed, automatic: automatic, gatehouse: gatehouse, client: client, clock: clock)
            do {
                for step in 0..<Self.steps {
                    try await run.step(step)
                    try await run.checkInvariants()
                    if run.failed { break }
                }
            } catch {
                run.fail("threw \(error)")
            }
            if ProcessInfo.processInfo.environment["GATEHOUSE_INTEGRITY_VERBOSE"] != nil {
                print("seed \(seed):\n" + run.log.joined(separator: "\n"))
            }
            if run.failed {
                Issue.record(
                    """
                    seed \(seed) failed (replay: GATEHOUSE_INTEGRITY_SEED=\(seed) swift test --filter AccountIntegrityPropertyTests)
                    \(run.log.joined(separator: "\n"))
                    """
                )
            }
        }
    }
}

/// SplitMix64: a small, seedable generator whose sequence is the same on every platform.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One run: the model of what each side holds, the actions, and the checks.
private final class Run: @unchecked Sendable {
    static let victim = "victim@example.com"
    static let attackerAddress = "attacker@example.com"

    /// A session someone holds.
    struct Held {
        enum Kind { case clientAPI, native }
        enum Origin: String { case owner, attackerPassword, attackerKey, attackerAddress, leakedKey, leakedRefresh }
        var kind: Kind
        var access: String
        var refresh: String
        var userId: String
        var origin: Origin
        /// The session's id (the `sid` of its access tokens).
        var sid: String
        /// The session ended on purpose (sign-out, reset, a replay): it must not work.
        var ended = false
    }

    /// What the model knows was proven for a session: the methods the server must have recorded, and when.
    struct Proof {
        var userId: String
        var methods: [AuthenticationMethod]
        var provenAt: Date
    }
    /// Every session the run started (its steps and its checks), by id.
    var proofs: [String: Proof] = [:]
    /// How many times the checks ran: the owner's sign-in check alternates protocols by it.
    var checks = 0

    /// The attacker's client address; nil while the owner (or a check) acts, each request then from a new address.
    static let attackerIP = "203.0.113.66"
    var origin: String?
    var addresses = 0
    /// An address no request came from before.
    func freshAddress() -> String {
        addresses += 1
        return "10.\(addresses >> 16 & 255).\(addresses >> 8 & 255).\(addresses & 255)"
    }
    var headers: HTTPFields { [HTTPField.Name("X-Forwarded-For")!: origin ?? freshAddress()] }

    var rng: SeededGenerator
    let automatic: Bool
    let recentProofWindow: TimeInterval
    let gatehouse: AuthServer
    let client: any TestClientProtocol
    let clock: ManualClock
    var log: [String] = []
    var failed = false

    // The owner.
    var ownerSessions: [Held] = []
    /// The password the owner set and the account still has, if any.
    var ownerPassword: String?
    /// The owner's registration that waits for confirmation (its password), if the newest registration is the owner's.
    var ownerPendingPassword: String?
    /// The owner has proven the mailbox since the account (this user) exists.
    var ownerProven = false
    /// More than one registration named the address while it is pending: its confirmation confirms no password.
    var contested = false
    var ownerKeys: [String] = []

    // The attacker.
    var attackerSessions: [Held] = []
    var attackerPasswords: Set<String> = []
    var attackerKeys: [String] = []
    var leakedKeys: [String] = []
    var leakedRefresh: [(token: String, leakedAt: Date)] = []
    var attackerAddressPassword: String?

    init(seed: UInt64, automatic: Bool, gatehouse: AuthServer, client: any TestClientProtocol, clock: ManualClock) {
        rng = SeededGenerator(state: seed)
        self.automatic = automatic
        self.gatehouse = gatehouse
        self.client = client
        self.clock = clock
        recentProofWindow = TimeInterval(gatehouse.env.configuration.app(id: "test-app")?.recentProofWindow ?? 300)
        log.append("app confirms \(automatic ? "automatically" : "by email")")
    }

    func fail(_ message: String) {
        failed = true
        log.append("  ✘ \(message)")
    }

    func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { fail(message()) }
    }

    // MARK: Requests (each checked for 5xx)

    func call(_ uri: String, _ method: HTTPRequest.Method = .post, body: String? = nil, bearer: String? = nil) async throws -> Reply {
        var fields: HTTPFields = [.contentType: "application/json", .accept: "application/json"]
        fields.append(contentsOf: headers)
        if let bearer { fields[.authorization] = "Bearer \(bearer)" }
        let reply = try await client.execute(uri: uri, method: method, headers: fields, body: body.map { ByteBuffer(string: $0) }) { response in
            Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
        }
        expect(reply.status.code < 500, "\(method) \(uri) answered \(reply.status.code): \(reply.text)")
        return reply
    }

    func call(_ uri: String, json: some Encodable, bearer: String? = nil) async throws -> Reply {
        try await call(uri, .post, body: String(decoding: try JSONEncoder().encode(json), as: UTF8.self), bearer: bearer)
    }

    func native(_ endpoint: NativeAuthEndpoint, _ fields: [String: String]) async throws -> Reply {
        let reply = try await client.native(endpoint, headers: headers, fields)
        expect(reply.status.code < 500, "\(endpoint.rawValue) answered \(reply.status.code): \(reply.text)")
        return reply
    }

    var account: EmailAccountRecord? {
        get async throws { try await gatehouse.env.store.emailAccount(appId: "test-app", email: Self.victim) }
    }

    func newestCode() async throws -> String? {
        guard let mail = try await client.mailbox(Self.victim).first, mail.subject.contains("code") else { return nil }
        return mail.text.firstMatch(of: /(?m)^\s+(\d{4,10})\s*$/).map { String($0.output.1) }
    }

    func password(_ who: String) -> String { "\(who) password \(UInt32.random(in: 0...UInt32.max, using: &rng))" }

    // MARK: Sessions

    /// A Client API login's session, recorded as proven by `methods` now.
    func clientAPISession(_ reply: Reply, origin: Held.Origin, methods: [AuthenticationMethod]) throws -> Held? {
        guard reply.status == .ok, let login = try? reply.decode(LoginResponse.self) else { return nil }
        let held = Held(kind: .clientAPI, access: login.accessToken, refresh: login.refreshToken, userId: login.userId, origin: origin, sid: sid(login.accessToken))
        started(held, methods)
        return held
    }

    /// A native `/token` answer's session: a sign-in proven by `methods` now, or (nil) a refresh of a known one.
    func nativeSession(_ reply: Reply, origin: Held.Origin, methods: [AuthenticationMethod]?) throws -> Held? {
        guard reply.status == .ok, let tokens = try? reply.decode(NativeAuthTokenResponse.self), let refresh = tokens.refreshToken,
            let userId = try? jwtPayload(tokens.accessToken)["sub"] as? String
        else { return nil }
        let held = Held(kind: .native, access: tokens.accessToken, refresh: refresh, userId: userId, origin: origin, sid: sid(tokens.accessToken))
        if let methods { started(held, methods) }
        return held
    }

    func sid(_ accessToken: String) -> String {
        guard let sid = (try? jwtPayload(accessToken))?["sid"] as? String else {
            fail("an access token without a sid")
            return ""
        }
        return sid
    }

    func started(_ held: Held, _ methods: [AuthenticationMethod]) {
        expect(proofs[held.sid] == nil, "a new sign-in answered with the session \(held.sid), which already existed")
        proofs[held.sid] = Proof(userId: held.userId, methods: methods, provenAt: clock.now)
    }

    /// Whether the model says the session was proven within `recentProofWindow`.
    func isRecent(_ held: Held) -> Bool {
        guard let proof = proofs[held.sid] else { return false }
        return clock.now.timeIntervalSince(proof.provenAt) <= recentProofWindow
    }

    /// Moves the clock past the session's recent-proof window.
    func makeStale(_ held: Held) {
        guard let proof = proofs[held.sid] else { return }
        let left = recentProofWindow - clock.now.timeIntervalSince(proof.provenAt)
        if left >= 0 { clock.advance(by: left + 1) }
    }

    /// Records `method` as proven now in the session (a reauthentication, a password change with the password).
    func reproved(_ sid: String, _ method: AuthenticationMethod?) {
        guard var proof = proofs[sid] else { return fail("the model lost the session \(sid)") }
        if let method { proof.methods = proof.methods.filter { $0 != method } + [method] }
        proof.provenAt = clock.now
        proofs[sid] = proof
    }

    /// Marks every holder's copy of the session ended.
    func ended(_ sid: String) {
        for index in ownerSessions.indices where ownerSessions[index].sid == sid { ownerSessions[index].ended = true }
        for index in attackerSessions.indices where attackerSessions[index].sid == sid { attackerSessions[index].ended = true }
    }

    /// Whether the session still reaches its user: its access token reads the profile, or a refresh works (a native
    /// refresh rotates the held token). Nil when neither works.
    func reach(_ held: inout Held) async throws -> String? {
        let profile = try await call(Path.profile, .get, bearer: held.access)
        if profile.status == .ok { return try profile.decode(ProfileResponse.self).userId }
        switch held.kind {
        case .clientAPI:
            let refreshed = try await call(Path.session, bearer: held.refresh)
            guard refreshed.status == .created, let access = try? refreshed.decode(SessionResponse.self).accessToken else { return nil }
            held.access = access
        case .native:
            guard let fresh = try nativeSession(try await client.nativeRefresh(held.refresh), origin: held.origin, methods: nil) else { return nil }
            held.access = fresh.access
            held.refresh = fresh.refresh
        }
        let again = try await call(Path.profile, .get, bearer: held.access)
        return again.status == .ok ? try again.decode(ProfileResponse.self).userId : nil
    }

    /// Ends, in the model, every session of `userId` (a reset, log out everywhere, a first proof), but `keeping`.
    func endAll(of userId: String, keeping: String? = nil) {
        for index in ownerSessions.indices where ownerSessions[index].userId == userId && ownerSessions[index].sid != keeping {
            ownerSessions[index].ended = true
        }
        for index in attackerSessions.indices where attackerSessions[index].userId == userId && attackerSessions[index].sid != keeping {
            attackerSessions[index].ended = true
        }
    }

    /// What a proof by the owner does in the model, given whether the mailbox had been proven before.
    func ownerProved(wasProven: Bool, userId: String) {
        if !wasProven {
            endAll(of: userId)
            attackerPasswords = []
            ownerKeys = []
        }
        ownerProven = true
        ownerPendingPassword = nil
    }

    // MARK: Steps

    func step(_ index: Int) async throws {
        let actions: [(weight: Int, name: String, run: () async throws -> Void)] = [
            (3, "owner registers", ownerRegisters),
            (3, "owner confirms their own registration", ownerConfirms),
            (4, "owner signs in with a code", ownerCodeSignIn),
            (2, "owner signs up natively", ownerSignsUp),
            (2, "owner resets by link", ownerResetsByLink),
            (3, "owner logs in with their password", ownerLogsIn),
            (2, "owner makes an API key", ownerMakesKey),
            (1, "owner leaks a key", ownerLeaksKey),
            (3, "owner leaks a native refresh token", ownerLeaksRefresh),
            (3, "owner refreshes", ownerRefreshes),
            (1, "owner logs out everywhere", ownerLogsOutEverywhere),
            (1, "owner signs out a native session", ownerSignsOut),
            (2, "owner reauthenticates", ownerReauthenticates),
            (3, "owner changes the password", ownerChangesPassword),
            (1, "owner ends another session", ownerEndsASession),
            (1, "owner ends all other sessions", ownerEndsOtherSessions),
            (3, "time passes", timePasses),
            (4, "attacker registers the address", attackerRegisters),
            (4, "attacker logs in with their passwords", attackerLogsIn),
            (2, "attacker makes a key from a session", attackerMakesKey),
            (2, "attacker links their own address", attackerLinks),
            (2, "attacker uses a leaked key", attackerUsesLeakedKey),
            (3, "attacker replays a leaked refresh token", attackerReplays),
            (3, "attacker refreshes what they stole", attackerRefreshesStolen),
            (2, "attacker starts a native sign-up", attackerStartsSignUp),
            (2, "attacker guesses the password from one address", attackerGuesses),
            (2, "attacker floods reset mail", attackerFloodsResetMail),
            (2, "attacker floods native starts", attackerFloodsNativeStarts),
            (4, "attacker uses the account routes with a session it holds", attackerUsesAccountRoutes),
            (2, "attacker asks to move its own account to the owner's address", attackerMovesToOwnersAddress),
        ]
        var pick = Int.random(in: 0..<actions.reduce(0) { $0 + $1.weight }, using: &rng)
        for action in actions {
            if pick < action.weight {
                log.append("\(index): \(action.name)")
                origin = action.name.hasPrefix("attacker") ? Self.attackerIP : nil
                try await action.run()
                origin = nil
                return
            }
            pick -= action.weight
        }
    }

    func ownerRegisters() async throws {
        let before = try await account
        let chosen = password("owner")
        let reply = try await call(Path.local("register"), json: RegisterRequest(email: Self.victim, password: chosen))
        expect(reply.status == .created, "registration answered \(reply.status.code)")
        guard before?.confirmedAt == nil else { return }  // taken: nothing changes
        if before == nil { ownerProven = false }
        contested = before != nil && !automatic
        if automatic {
            // Confirmed at once, and not proven.
            ownerPassword = chosen
            ownerProven = false
        } else {
            ownerPendingPassword = chosen
        }
    }

    /// The owner opens the newest confirmation link in their mailbox: one of their own registration, or (contested)
    /// whichever registration came last — the attack of registering second, which must confirm no password. (A link
    /// of the attacker's registration alone, which the owner never asked for, is the documented residual risk of
    /// registering first: the owner does not open it here.)
    func ownerConfirms() async throws {
        guard let current = try await account, current.confirmedAt == nil, contested || ownerPendingPassword != nil else { return }
        expect((current.contestedAt != nil) == contested, "the server's contested mark (\(current.contestedAt != nil)) is not the model's (\(contested))")
        guard let mail = try await client.mailbox(Self.victim).first(where: { $0.subject.contains("Confirm") }), let link = mail.link else { return }
        let reply = try await call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId))
        expect(reply.status == .ok, "the newest confirmation link answered \(reply.status.code)")
        if contested {
            // No password is confirmed, and what any registrant added is discarded, as at any first proof.
            ownerProved(wasProven: false, userId: current.userId)
            ownerPassword = nil
            contested = false
        } else {
            ownerPassword = ownerPendingPassword
            ownerPendingPassword = nil
            ownerProven = true
        }
    }

    func codeSignIn(types: String = "oob redirect") async throws -> Reply? {
        guard let ct1 = try await native(.signInInitiate, ["username": Self.victim, "challenge_type": types]).step?.continuationToken,
            let challenge = try await native(.signInChallenge, ["continuation_token": ct1, "challenge_type": types]).step,
            challenge.challengeType == .oob, let ct2 = challenge.continuationToken, let code = try await newestCode()
        else { return nil }
        return try await native(.token, ["continuation_token": ct2, "grant_type": "oob", "oob": code, "scope": "openid offline_access"])
    }

    func ownerCodeSignIn() async throws {
        guard let before = try await account else { return }
        guard let reply = try await codeSignIn() else { return fail("no code arrived for a code sign-in") }
        guard let session = try nativeSession(reply, origin: .owner, methods: [.oneTimeCode]) else { return fail("code sign-in answered \(reply.status.code): \(reply.text)") }
        // What the model knows, not what the server says: only the owner can prove the mailbox.
        let wasProven = ownerProven
        ownerProved(wasProven: wasProven, userId: before.userId)
        if !wasProven { ownerPassword = nil }
        contested = false
        ownerSessions.append(session)
    }

    func ownerSignsUp() async throws {
        let before = try await account
        guard before?.confirmedAt == nil else { return }
        let chosen = password("owner")
        let types = "oob password redirect"
        guard let ct1 = try await native(.signUpStart, ["username": Self.victim, "challenge_type": types, "password": chosen]).step?.continuationToken,
            let ct2 = try await native(.signUpChallenge, ["continuation_token": ct1, "challenge_type": types]).step?.continuationToken,
            let code = try await newestCode()
        else { return fail("the native sign-up of a new or pending address did not reach its code") }
        let done = try await native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": code])
        guard let ct3 = done.step?.continuationToken else { return fail("sign-up continue answered \(done.status.code): \(done.text)") }
        let tokens = try await native(
            .token,
            ["continuation_token": ct3, "grant_type": "continuation_token", "username": Self.victim, "scope": "openid offline_access"]
        )
        guard let session = try nativeSession(tokens, origin: .owner, methods: [.oneTimeCode]) else { return fail("sign-in after sign-up answered \(tokens.status.code)") }
        // A pending account was someone's registration: restarted, whoever made it.
        if let before { endAll(of: before.userId) }
        attackerPasswords = []
        ownerPassword = chosen
        ownerPendingPassword = nil
        ownerProven = true
        contested = false
        ownerKeys = []
        ownerSessions.append(session)
    }

    func ownerResetsByLink() async throws {
        guard let before = try await account else { return }
        let sent = try await call(Path.local("reset/send"), json: EmailRequest(email: Self.victim))
        expect(sent.status == .ok, "the owner's reset mail was refused: \(sent.status.code) \(sent.text)")
        guard let mail = try await client.mailbox(Self.victim).first, mail.subject.contains("Reset"), let link = mail.link else {
            return fail("no reset link arrived")
        }
        let chosen = password("owner")
        let reply = try await call(Path.local("reset"), json: ResetPasswordRequest(password: chosen, token: link.token, tokenId: link.tokenId))
        expect(reply.status == .ok, "the reset answered \(reply.status.code): \(reply.text)")
        ownerProved(wasProven: ownerProven, userId: before.userId)
        endAll(of: before.userId)  // a reset ends every session
        ownerPassword = chosen
        contested = false
    }

    func ownerLogsIn() async throws {
        guard let chosen = ownerPassword, try await account?.confirmedAt != nil else { return }
        let reply = try await call(Path.local("login"), json: EmailPasswordLoginRequest(username: Self.victim, password: chosen))
        guard let session = try clientAPISession(reply, origin: .owner, methods: [.password]) else {
            return fail("the owner's password no longer logs in: \(reply.status.code) \(reply.text)")
        }
        ownerSessions.append(session)
    }

    func ownerMakesKey() async throws {
        guard let held = ownerSessions.last(where: { !$0.ended && $0.kind == .clientAPI }) else { return }
        let reply = try await call(Path.apiKeys, json: CreateAPIKeyRequest(name: "owner-\(ownerKeys.count)-\(UInt16.random(in: 0...9999, using: &rng))"), bearer: held.refresh)
        if reply.status == .created, let key = try reply.decode(APIKeyResponse.self).key { ownerKeys.append(key) }
    }

    func ownerLeaksKey() async throws {
        if let key = ownerKeys.randomElement(using: &rng) { leakedKeys.append(key) }
    }

    func ownerLeaksRefresh() async throws {
        guard let index = ownerSessions.indices.last(where: { !ownerSessions[$0].ended && ownerSessions[$0].kind == .native }) else { return }
        leakedRefresh.append((ownerSessions[index].refresh, clock.now))
        // A leaked session is no longer the owner's alone: whatever the thief does to it is not the owner's lockout.
        ownerSessions[index].origin = .leakedRefresh
    }

    func ownerRefreshes() async throws {
        for index in ownerSessions.indices where !ownerSessions[index].ended {
            if ownerSessions[index].origin == .owner {
                var held = ownerSessions[index]
                let reached = try await reach(&held)
                expect(reached == held.userId, "the owner's session no longer refreshes")
                ownerSessions[index] = held
            } else if ownerSessions[index].kind == .native, let fresh = try await presentRefresh(ownerSessions[index].refresh) {
                // The owner does not know the token leaked, and goes on refreshing it.
                ownerSessions[index].refresh = fresh.refresh
                ownerSessions[index].access = fresh.access
            }
        }
    }

    func ownerLogsOutEverywhere() async throws {
        guard let index = ownerSessions.indices.last(where: { !ownerSessions[$0].ended && ownerSessions[$0].origin == .owner }),
            try await reach(&ownerSessions[index]) != nil
        else { return }
        let held = ownerSessions[index]
        let reply = try await call("/api/client/v2.0/auth/sessions", .delete, bearer: held.access)
        expect(reply.status == .noContent, "log out everywhere answered \(reply.status.code): \(reply.text)")
        endAll(of: held.userId)
    }

    func ownerSignsOut() async throws {
        guard let index = ownerSessions.indices.last(where: { !ownerSessions[$0].ended && ownerSessions[$0].kind == .native }) else { return }
        let reply = try await native(.revoke, ["token": ownerSessions[index].refresh])
        expect(reply.status == .ok, "revoke answered \(reply.status.code)")
        ownerSessions[index].ended = true
        // A thief holding a rotation of the same session loses it too.
        let sessionId = OpaqueToken(ownerSessions[index].refresh)?.id
        for other in attackerSessions.indices where attackerSessions[other].kind == .native && OpaqueToken(attackerSessions[other].refresh)?.id == sessionId {
            attackerSessions[other].ended = true
        }
    }

    func timePasses() async throws {
        clock.advance(by: [5, 45, 700].randomElement(using: &rng)!)
    }

    func attackerRegisters() async throws {
        let before = try await account
        let chosen = password("attacker")
        let reply = try await call(Path.local("register"), json: RegisterRequest(email: Self.victim, password: chosen))
        // The attacker's own limits (registrations and confirmation mails from their address) may refuse them.
        expect(reply.status == .created || reply.status == .tooManyRequests, "registration answered \(reply.status.code)")
        guard before?.confirmedAt == nil, reply.status == .created else { return }
        // A new or pending account is the attacker's registration now.
        if before == nil { ownerProven = false }
        contested = before != nil && !automatic
        ownerPendingPassword = nil
        if ownerPassword != nil, before != nil { ownerPassword = nil }
        attackerPasswords.insert(chosen)
        if automatic { ownerProven = false }
    }

    /// The attacker's passwords, through the Client API's login and native auth's password sign-in.
    func attackerLogsIn() async throws {
        for chosen in attackerPasswords.sorted() {
            let reply = try await call(Path.local("login"), json: EmailPasswordLoginRequest(username: Self.victim, password: chosen))
            if let session = try clientAPISession(reply, origin: .attackerPassword, methods: [.password]) {
                expect(!ownerProven, "a password the attacker registered logs in after the owner proved the mailbox")
                attackerSessions.append(session)
            }
            if let reply = try await nativePasswordSignIn(chosen), let session = try nativeSession(reply, origin: .attackerPassword, methods: [.password]) {
                expect(!ownerProven, "a password the attacker registered signs in natively after the owner proved the mailbox")
                attackerSessions.append(session)
            }
        }
    }

    /// Native sign-in with a password: initiate, a password challenge, `/token` with `grant_type=password`. Nil when
    /// no password challenge came (a limit refused the start, say).
    func nativePasswordSignIn(_ chosen: String) async throws -> Reply? {
        let types = "password redirect"
        guard let ct1 = try await native(.signInInitiate, ["username": Self.victim, "challenge_type": types]).step?.continuationToken,
            let challenge = try await native(.signInChallenge, ["continuation_token": ct1, "challenge_type": types]).step,
            challenge.challengeType == .password, let ct2 = challenge.continuationToken
        else { return nil }
        let reply = try await native(
            .token, ["continuation_token": ct2, "grant_type": "password", "password": chosen, "username": Self.victim, "scope": "openid offline_access"]
        )
        expect([.ok, .badRequest, .tooManyRequests].contains(reply.status), "a native password sign-in answered \(reply.status.code): \(reply.text)")
        return reply
    }

    func attackerMakesKey() async throws {
        guard let held = attackerSessions.last(where: { !$0.ended && $0.kind == .clientAPI && $0.origin != .leakedKey }) else { return }
        let reply = try await call(Path.apiKeys, json: CreateAPIKeyRequest(name: "attacker-\(UInt16.random(in: 0...9999, using: &rng))"), bearer: held.refresh)
        if reply.status == .created, let key = try reply.decode(APIKeyResponse.self).key { attackerKeys.append(key) }
    }

    /// The attacker's own address, registered and confirmed (again, if the owner's first proof discarded it).
    func ensureAttackerAddress() async throws {
        if attackerAddressPassword != nil, try await gatehouse.env.store.emailAccount(appId: "test-app", email: Self.attackerAddress) != nil { return }
        let chosen = password("attacker address")
        _ = try await call(Path.local("register"), json: RegisterRequest(email: Self.attackerAddress, password: chosen))
        if let mail = try await client.mailbox(Self.attackerAddress).first(where: { $0.subject.contains("Confirm") }), let link = mail.link {
            _ = try await call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId))
        }
        attackerAddressPassword = chosen
    }

    func attackerLinks() async throws {
        try await ensureAttackerAddress()
        guard let held = attackerSessions.last(where: { !$0.ended && $0.origin == .attackerPassword }), let chosen = attackerAddressPassword else { return }
        _ = try await call(
            Path.local("login") + "?link=true", json: EmailPasswordLoginRequest(username: Self.attackerAddress, password: chosen), bearer: held.access
        )
    }

    func attackerUsesLeakedKey() async throws {
        guard let key = leakedKeys.randomElement(using: &rng) else { return }
        let reply = try await call(Path.apiKeyLogin(), json: APIKeyLoginRequest(key: key))
        guard let session = try clientAPISession(reply, origin: .leakedKey, methods: [.apiKey]) else { return }
        // A key session may read, and nothing else.
        let attempts: [(String, HTTPRequest.Method, String?, String)] = [
            (Path.delete, .delete, nil, session.access),
            ("/api/client/v2.0/auth/sessions", .delete, nil, session.access),
            (Path.apiKeys, .post, #"{"name":"bred"}"#, session.refresh),
            (Path.local("login") + "?link=true", .post, #"{"username":"attacker@example.com","password":"x"}"#, session.access),
        ]
        for (uri, method, body, bearer) in attempts {
            let refused = try await call(uri, method, body: body, bearer: bearer)
            expect(refused.status == .forbidden, "a key session's \(method) \(uri) answered \(refused.status.code)")
        }
        attackerSessions.append(session)
    }

    func attackerReplays() async throws {
        guard let leaked = leakedRefresh.randomElement(using: &rng) else { return }
        if let session = try await presentRefresh(leaked.token) { attackerSessions.append(session) }
    }

    func attackerRefreshesStolen() async throws {
        for index in attackerSessions.indices where !attackerSessions[index].ended && attackerSessions[index].origin == .leakedRefresh {
            if let fresh = try await presentRefresh(attackerSessions[index].refresh) { attackerSessions[index] = fresh }
        }
    }

    /// Presents a native refresh token of a session two parties hold (a leaked one). A token the server had spent,
    /// presented after the reuse window, must end the whole session: the model marks every holder's copy ended.
    /// Returns the rotated session on success.
    func presentRefresh(_ token: String) async throws -> Held? {
        guard let opaque = OpaqueToken(token) else { return nil }
        // When the server spent this token (the owner or the thief refreshed since), as it recorded it.
        let store = gatehouse.env.store
        let live = try await store.session(id: opaque.id)?.revokedAt == nil
        let spentAt = try await store.spentRefreshSecret(sessionId: opaque.id, secretHash: opaque.hash)
        let window = TimeInterval(gatehouse.env.configuration.app(id: "test-app")?.nativeAuth?.refreshTokenReuseWindow ?? 0)
        let reply = try await client.nativeRefresh(token)
        expect(reply.status.code < 500, "refresh answered \(reply.status.code)")
        if let spentAt, live, clock.now.timeIntervalSince(spentAt) > window {
            // A spent token after its window: the whole session ends, for the owner and for every rotation the thief holds.
            expect(reply.status == .badRequest, "a spent refresh token replayed after the window answered \(reply.status.code)")
            for index in ownerSessions.indices where OpaqueToken(ownerSessions[index].refresh)?.id == opaque.id { ownerSessions[index].ended = true }
            for index in attackerSessions.indices where OpaqueToken(attackerSessions[index].refresh)?.id == opaque.id { attackerSessions[index].ended = true }
            return nil
        }
        return try nativeSession(reply, origin: .leakedRefresh, methods: nil)
    }

    func attackerStartsSignUp() async throws {
        let types = "oob password redirect"
        guard let ct1 = try await native(.signUpStart, ["username": Self.victim, "challenge_type": types, "password": password("attacker")]).step?
            .continuationToken,
            let ct2 = try await native(.signUpChallenge, ["continuation_token": ct1, "challenge_type": types]).step?.continuationToken
        else { return }
        let guess = try await native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": "12345678"])
        expect(guess.status == .badRequest, "a guessed sign-up code answered \(guess.status.code)")
    }

    /// More wrong passwords from one address than the per-username limit, through both protocols' password checks.
    func attackerGuesses() async throws {
        for attempt in 0..<35 {
            let reply = try await call(Path.local("login"), json: EmailPasswordLoginRequest(username: Self.victim, password: "guess \(attempt)"))
            expect(reply.status == .unauthorized || reply.status == .tooManyRequests, "a guess answered \(reply.status.code)")
        }
    }

    /// Reset mails for the victim from the attacker's address, past its own limit, and from a few more of theirs, past
    /// the cap of every client together.
    func attackerFloodsResetMail() async throws {
        for (index, address) in [Self.attackerIP, "203.0.113.67", "203.0.113.68", "203.0.113.69", "203.0.113.70"].enumerated() {
            origin = address
            for _ in 0..<(index == 0 ? 8 : 5) { _ = try await call(Path.local("reset/send"), json: EmailRequest(email: Self.victim)) }
        }
    }

    /// Native sign-in and reset starts past the per-username limit, from one address.
    func attackerFloodsNativeStarts() async throws {
        for _ in 0..<32 {
            _ = try await native(.signInInitiate, ["username": Self.victim, "challenge_type": "oob password redirect"])
            _ = try await native(.resetPasswordStart, ["username": Self.victim, "challenge_type": "oob password redirect"])
        }
    }

    // MARK: Account self-service

    /// The newest live session the owner alone holds on the account's user, its access token fresh.
    func liveOwnerSession() async throws -> Int? {
        guard let current = try await account, current.confirmedAt != nil,
            let index = ownerSessions.indices.last(where: {
                !ownerSessions[$0].ended && ownerSessions[$0].origin == .owner && ownerSessions[$0].userId == current.userId
            })
        else { return nil }
        guard try await reach(&ownerSessions[index]) == current.userId else {
            fail("the owner's session stopped working without a reason")
            ownerSessions[index].ended = true
            return nil
        }
        return index
    }

    /// With the password, or with a code mailed to the account's address: the session's methods gain it.
    func ownerReauthenticates() async throws {
        guard let index = try await liveOwnerSession() else { return }
        let held = ownerSessions[index]
        if let chosen = ownerPassword, Bool.random(using: &rng) {
            let reply = try await call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: chosen), bearer: held.access)
            expect(reply.status == .noContent, "the owner's reauthentication with their password answered \(reply.status.code): \(reply.text)")
            if reply.status == .noContent { reproved(held.sid, .password) }
        } else {
            let sent = try await call(EmailPath.reauthenticateSend, .post, bearer: held.access)
            expect(sent.status == .noContent, "the owner's reauthentication code was refused: \(sent.status.code) \(sent.text)")
            guard sent.status == .noContent else { return }
            guard let code = try await newestCode() else { return fail("no reauthentication code arrived") }
            let reply = try await call(AccountPath.reauthenticate, json: ReauthenticateRequest(code: code), bearer: held.access)
            expect(reply.status == .noContent, "the owner's reauthentication with a code answered \(reply.status.code): \(reply.text)")
            if reply.status == .noContent { reproved(held.sid, .oneTimeCode) }
        }
    }

    /// From a recent session, or with the current password; a stale session without it is refused. Every other
    /// session of the user ends, in both protocols.
    func ownerChangesPassword() async throws {
        guard let index = try await liveOwnerSession() else { return }
        let held = ownerSessions[index]
        let chosen = password("owner")
        let recent = isRecent(held)
        let withCurrent = ownerPassword != nil && (!recent || Bool.random(using: &rng))
        let reply = try await call(
            AccountPath.password, json: ChangePasswordRequest(password: chosen, currentPassword: withCurrent ? ownerPassword : nil), bearer: held.access
        )
        log.append("  from a \(recent ? "recent" : "stale") session, \(withCurrent ? "with" : "without") the current password: \(reply.status.code)")
        guard recent || withCurrent else {
            expect(
                reply.status == .forbidden && reply.error?.errorCode == .reauthenticationRequired,
                "a stale session without the password changed it, or was refused otherwise: \(reply.status.code) \(reply.text)"
            )
            return
        }
        expect(reply.status == .noContent, "the owner's password change answered \(reply.status.code): \(reply.text)")
        guard reply.status == .noContent else { return }
        endAll(of: held.userId, keeping: held.sid)
        reproved(held.sid, withCurrent ? .password : nil)
        ownerPassword = chosen
    }

    /// Lists the user's sessions (each as the model proved it) and ends one of the others.
    func ownerEndsASession() async throws {
        guard let index = try await liveOwnerSession() else { return }
        let held = ownerSessions[index]
        let listed = try await call(AccountPath.sessions, .get, bearer: held.access)
        guard let sessions = try? listed.decode([SessionInfo].self) else { return fail("the session list answered \(listed.status.code): \(listed.text)") }
        expect(sessions.filter(\.current).map(\.id) == [held.sid], "the session list's current session is not the caller's")
        for session in sessions {
            expect(
                session.amr == proofs[session.id]?.methods.map(\.rawValue),
                "the session list says \(session.id) was proven by \(session.amr), the model by \(proofs[session.id]?.methods.map(\.rawValue) ?? [])"
            )
        }
        guard let target = sessions.filter({ !$0.current }).randomElement(using: &rng) else { return }
        let reply = try await call(AccountPath.session(target.id), .delete, bearer: held.access)
        expect(reply.status == .noContent, "ending one of the owner's sessions answered \(reply.status.code): \(reply.text)")
        ended(target.id)
    }

    func ownerEndsOtherSessions() async throws {
        guard let index = try await liveOwnerSession() else { return }
        let held = ownerSessions[index]
        let reply = try await call(AccountPath.sessions + "?except=current", .delete, bearer: held.access)
        expect(reply.status == .noContent, "ending the owner's other sessions answered \(reply.status.code): \(reply.text)")
        endAll(of: held.userId, keeping: held.sid)
    }

    /// The account routes with a session the attacker holds: its own registration's, a leaked key's, a leaked refresh
    /// token's (made stale first: inside the window a thief's session may change what the owner's may, the documented
    /// residual risk), or its own address's.
    func attackerUsesAccountRoutes() async throws {
        // A kind of session first, then one of that kind; the attacker's own address's sessions (many, and with no
        // power over the owner) only when it holds no other.
        let live = attackerSessions.indices.filter { !attackerSessions[$0].ended }
        let origins = Set(live.map { attackerSessions[$0].origin.rawValue }).sorted()
        let others = origins.filter { $0 != Held.Origin.attackerAddress.rawValue }
        guard let origin = (others.isEmpty ? origins : others).randomElement(using: &rng),
            let index = live.filter({ attackerSessions[$0].origin.rawValue == origin }).randomElement(using: &rng),
            try await attackerReaches(index)
        else { return }
        let isKey = attackerSessions[index].origin == .leakedKey
        let action = Int.random(in: 0..<5, using: &rng)
        if action == 0, attackerSessions[index].origin != .attackerPassword || Bool.random(using: &rng) {
            makeStale(attackerSessions[index])
            guard try await attackerReaches(index) else { return }
        }
        let held = attackerSessions[index]
        log.append("  with a \(isRecent(held) ? "recent" : "stale") session from \(held.origin.rawValue), action \(action)")
        func refused(_ reply: Reply, _ what: String, allowed: [HTTPResponse.Status] = [.forbidden, .tooManyRequests, .badRequest]) {
            if isKey {
                expect(reply.status == .forbidden && reply.error?.errorCode == .forbidden, "a key session's \(what) answered \(reply.status.code): \(reply.text)")
            } else {
                expect(allowed.contains(reply.status), "the attacker's \(what) answered \(reply.status.code): \(reply.text)")
            }
        }
        switch action {
        case 0:
            let chosen = password("attacker")
            let reply = try await call(AccountPath.password, json: ChangePasswordRequest(password: chosen), bearer: held.access)
            if isKey || !isRecent(held) {
                refused(reply, "password change from a stale session", allowed: [.forbidden])
                if !isKey { expect(reply.error?.errorCode == .reauthenticationRequired, "a stale session's password change: \(reply.text)") }
                return
            }
            expect(reply.status == .noContent || reply.status == .badRequest, "the attacker's password change answered \(reply.status.code): \(reply.text)")
            guard reply.status == .noContent else { return }
            let current = try await account
            expect(!(ownerProven && held.userId == current?.userId), "the attacker changed the password of the owner's proven account")
            endAll(of: held.userId, keeping: held.sid)
            reproved(held.sid, nil)
            for changed in try await gatehouse.env.store.emailAccounts(userId: held.userId) where changed.confirmedAt != nil {
                if changed.email == Self.victim {
                    attackerPasswords.insert(chosen)
                    ownerPassword = nil
                } else if changed.email == Self.attackerAddress {
                    attackerAddressPassword = chosen
                }
            }
        case 1:
            let request = ChangePasswordRequest(password: password("attacker"), currentPassword: "guess \(UInt16.random(in: 0...9999, using: &rng))")
            refused(try await call(AccountPath.password, json: request, bearer: held.access), "password change with a guessed current password")
        case 2:
            let reply = try await call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "guess"), bearer: held.access)
            refused(reply, "reauthentication with a guessed password")
        case 3:
            let reply = try await call(AccountPath.sessions + "?except=current", .delete, bearer: held.access)
            if isKey { return refused(reply, "ending all other sessions") }
            expect(reply.status == .noContent, "the attacker's ending of its user's other sessions answered \(reply.status.code): \(reply.text)")
            if reply.status == .noContent { endAll(of: held.userId, keeping: held.sid) }
        default:
            // One of the owner's sessions, by its id: only a session of the same user (a stolen one) may end it.
            guard let target = ownerSessions.last(where: { !$0.ended && $0.origin == .owner }) else { return }
            let reply = try await call(AccountPath.session(target.sid), .delete, bearer: held.access)
            if isKey { return refused(reply, "ending one of the owner's sessions") }
            if target.userId == held.userId {
                expect(reply.status == .noContent, "ending a session of the stolen session's user answered \(reply.status.code): \(reply.text)")
                if reply.status == .noContent { ended(target.sid) }
            } else {
                expect(
                    reply.status == .notFound && reply.error?.errorCode == .sessionNotFound,
                    "ending another user's session answered \(reply.status.code): \(reply.text)"
                )
            }
        }
    }

    /// Whether an attacker's session still works, its access token made fresh: a stolen native session's refresh
    /// token goes through ``presentRefresh(_:)``, which knows what a spent one does to the session.
    func attackerReaches(_ index: Int) async throws -> Bool {
        guard attackerSessions[index].origin == .leakedRefresh else { return try await reach(&attackerSessions[index]) != nil }
        if try await call(Path.profile, .get, bearer: attackerSessions[index].access).status == .ok { return true }
        guard let fresh = try await presentRefresh(attackerSessions[index].refresh) else { return false }
        attackerSessions[index] = fresh
        return true
    }

    /// The attacker signs in to its own address and asks to move it to the owner's: answered as any request, but a
    /// confirmed address gets a notice and no code, no guessed code works, and the owner's address stays where it was.
    func attackerMovesToOwnersAddress() async throws {
        try await ensureAttackerAddress()
        guard let chosen = attackerAddressPassword else { return }
        let login = try await call(Path.local("login"), json: EmailPasswordLoginRequest(username: Self.attackerAddress, password: chosen))
        guard let session = try clientAPISession(login, origin: .attackerAddress, methods: [.password]) else { return }
        attackerSessions.append(session)
        let index = attackerSessions.count - 1
        let withPassword = Bool.random(using: &rng)
        if Bool.random(using: &rng) {
            makeStale(session)
            guard try await reach(&attackerSessions[index]) != nil else { return }
        }
        let held = attackerSessions[index]
        let before = try await account
        let mailsBefore = try await client.mailbox(Self.victim).count
        let reply = try await call(
            EmailPath.change, json: ChangeEmailRequest(email: Self.victim, currentPassword: withPassword ? chosen : nil), bearer: held.access
        )
        if !withPassword && !isRecent(held) {
            expect(reply.error?.errorCode == .reauthenticationRequired, "a stale session's email change answered \(reply.status.code): \(reply.text)")
        } else {
            expect(
                reply.status == .noContent || (reply.status == .badRequest && held.userId == before?.userId),
                "the attacker's email change answered \(reply.status.code): \(reply.text)"
            )
        }
        if before?.confirmedAt != nil {
            let mails = try await client.mailbox(Self.victim)
            for mail in mails.prefix(max(0, mails.count - mailsBefore)) {
                expect(mail.text.firstMatch(of: /\d{8}/) == nil, "a code to move another account to the owner's confirmed address was mailed: \(mail.subject)")
            }
        }
        for guess in ["12345678", String(UInt32.random(in: 10_000_000...99_999_999, using: &rng))] {
            let confirm = try await call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: guess), bearer: held.access)
            expect(confirm.status != .noContent, "a guessed code moved the attacker's account to the owner's address")
        }
        let after = try await account
        expect(
            after?.userId == before?.userId && (after?.confirmedAt == nil) == (before?.confirmedAt == nil),
            "the owner's address changed hands: \(String(describing: before?.userId)) → \(String(describing: after?.userId))"
        )
    }

    // MARK: Invariants

    func checkInvariants() async throws {
        let current = try await account
        if let current, ownerProven {
            // Provenance: nothing the attacker set up reaches the owner's user.
            for chosen in attackerPasswords.sorted() {
                let reply = try await call(Path.local("login"), json: EmailPasswordLoginRequest(username: Self.victim, password: chosen))
                expect(reply.status != .ok, "an attacker's password logs in to the proven account")
                _ = try clientAPISession(reply, origin: .attackerPassword, methods: [.password])
                if let native = try await nativePasswordSignIn(chosen) {
                    expect(native.status != .ok, "an attacker's password signs in natively to the proven account")
                    _ = try nativeSession(native, origin: .attackerPassword, methods: [.password])
                }
            }
            for index in attackerSessions.indices where attackerSessions[index].origin != .leakedKey && attackerSessions[index].origin != .leakedRefresh {
                let reached = try await reach(&attackerSessions[index])
                expect(reached != current.userId, "an attacker session (\(attackerSessions[index].origin.rawValue)) reaches the owner's user")
            }
            for key in attackerKeys {
                let reply = try await call(Path.apiKeyLogin(), json: APIKeyLoginRequest(key: key))
                if let session = try clientAPISession(reply, origin: .attackerKey, methods: [.apiKey]) {
                    expect(session.userId != current.userId, "a key the attacker made logs in to the owner's user")
                }
            }
            if let chosen = attackerAddressPassword {
                let reply = try await call(Path.local("login"), json: EmailPasswordLoginRequest(username: Self.attackerAddress, password: chosen))
                if let session = try clientAPISession(reply, origin: .attackerAddress, methods: [.password]) {
                    expect(session.userId != current.userId, "the attacker's own address logs in to the owner's user")
                }
            }
        }
        // Ended sessions stay ended; the owner's live ones stay live.
        for index in ownerSessions.indices {
            let held = ownerSessions[index]
            if held.origin == .leakedRefresh && !held.ended { continue }
            let reached = try await reach(&ownerSessions[index])
            if held.ended {
                expect(reached == nil, "an ended session of the owner still works")
            } else {
                expect(reached == held.userId, "the owner's session stopped working without a reason")
                if reached == nil { ownerSessions[index].ended = true }
            }
        }
        for index in attackerSessions.indices where attackerSessions[index].ended {
            expect(try await reach(&attackerSessions[index]) == nil, "an ended session (\(attackerSessions[index].origin.rawValue)) still works")
        }
        try await checkOwnerSignsIn(current)
        try await checkSessionProofs(current)
    }

    /// The owner signs in with the password the model says is current, through one protocol and then the other on
    /// the next check, from an address that has not been failing; the session is ended again at once.
    func checkOwnerSignsIn(_ current: EmailAccountRecord?) async throws {
        guard let chosen = ownerPassword, let current, current.confirmedAt != nil else { return }
        checks += 1
        if checks % 2 == 0 {
            let reply = try await call(Path.local("login"), json: EmailPasswordLoginRequest(username: Self.victim, password: chosen))
            guard let session = try clientAPISession(reply, origin: .owner, methods: [.password]) else {
                return fail("the owner's current password does not log in: \(reply.status.code) \(reply.text)")
            }
            expect(session.userId == current.userId, "the owner's password logs in to another user")
            let out = try await call(Path.session, .delete, bearer: session.refresh)
            expect(out.status == .noContent, "logging out answered \(out.status.code)")
        } else {
            guard let reply = try await nativePasswordSignIn(chosen) else { return fail("the owner's native sign-in got no password challenge") }
            guard let session = try nativeSession(reply, origin: .owner, methods: [.password]) else {
                return fail("the owner's current password does not sign in natively: \(reply.status.code) \(reply.text)")
            }
            expect(session.userId == current.userId, "the owner's password signs in natively to another user")
            let out = try await native(.revoke, ["token": session.refresh])
            expect(out.status == .ok, "revoke answered \(out.status.code)")
        }
    }

    /// Every live session of every user the run has met was started by the run, and records the methods and the proof
    /// time the model says were proven for it.
    func checkSessionProofs(_ current: EmailAccountRecord?) async throws {
        var users = Set(proofs.values.map(\.userId))
        if let current { users.insert(current.userId) }
        for userId in users.sorted() {
            for record in try await gatehouse.env.store.liveSessions(userId: userId, now: clock.now) {
                guard let proof = proofs[record.id] else {
                    fail("a live session no step started: \(record.id) of \(userId), proven by \(record.methods.map(\.rawValue))")
                    continue
                }
                expect(record.userId == proof.userId, "session \(record.id) belongs to \(record.userId), the model says \(proof.userId)")
                expect(
                    record.methods == proof.methods,
                    "session \(record.id) records \(record.methods.map(\.rawValue)), the model proved \(proof.methods.map(\.rawValue))"
                )
                let provenAt = record.provenAt ?? record.createdAt
                expect(
                    abs(provenAt.timeIntervalSince(proof.provenAt)) < 1,
                    "session \(record.id) was proven at \(provenAt), the model says \(proof.provenAt)"
                )
            }
        }
    }
}
