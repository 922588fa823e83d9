import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// An attacker who names the owner's address cannot lock the owner out, whichever protocol either uses: counts that
/// others drive slow them and never refuse the owner's right credential, code or recovery mail from an address that has
/// not been failing. Every test runs with the production defaults (rate limits, login delays, send limits) and client
/// addresses from `X-Forwarded-For`, so one test is many clients.
@Suite struct OwnerLockoutTests {
    static let attacker = "203.0.113.66"
    static let owner = "198.51.100.10"

    /// Production limits, client addresses from the proxy header.
    static func defaults(native: Bool = false) -> GatehouseConfiguration {
        limitedConfiguration(RateLimitSettings.defaultRules, native: native)
    }

    @Test func wrongPasswordsFromOneAddressNeverRefuseTheOwnersRightPasswordFromAnother() async throws {
        let clock = ManualClock()
        try await withGatehouse(Self.defaults(), clock: clock) { _, client in
            _ = try await client.signUp("olga@example.com")
            // More than the per-username limit (30) of wrong logins, from one address: its own delays refuse most of them.
            var refused = 0
            for _ in 0..<40 where try await client.login("olga@example.com", "guess", from: Self.attacker).status == .tooManyRequests { refused += 1 }
            #expect(refused > 0)
            #expect(try await client.login("olga@example.com", from: Self.owner).status == .ok)
            // Again and again: five minutes later the attacker tries once more, and the owner still gets in.
            clock.advance(by: 301)
            for _ in 0..<40 { _ = try await client.login("olga@example.com", "guess", from: Self.attacker) }
            #expect(try await client.login("olga@example.com", from: Self.owner).status == .ok)
        }
    }

    @Test func aLeakedAPIKeyHammeredFromElsewhereDoesNotRefuseItsOwner() async throws {
        try await withGatehouse(Self.defaults()) { _, client in
            let login = try await client.signUp("kai@example.com")
            let created = try await client.call("/api/client/v2.0/auth/api_keys", body: #"{"name":"build"}"#, bearer: login.refreshToken)
            let key = try #require((try JSONSerialization.jsonObject(with: created.body) as? [String: Any])?["key"] as? String)
            let path = Path.app() + "/auth/providers/api-key/login"
            let body = try JSONSerialization.data(withJSONObject: ["key": key])
            for _ in 0..<35 { _ = try await client.post(path, body, from: Self.attacker) }
            #expect(try await client.post(path, body, from: Self.attacker).status == .tooManyRequests)
            #expect(try await client.post(path, body, from: Self.owner).status == .ok)
        }
    }

    @Test func nativeStartsFromOneAddressNeverRefuseTheOwnersSignInOrReset() async throws {
        try await withGatehouse(Self.defaults(native: true)) { _, client in
            _ = try await client.nativeSignedUp("nina@example.com")
            let from = { (ip: String) in HTTPFields([HTTPField(name: HTTPField.Name("X-Forwarded-For")!, value: ip)]) }
            let signIn = ["username": "nina@example.com", "challenge_type": allChallengeTypes]
            for _ in 0..<31 { _ = try await client.native(.signInInitiate, headers: from(Self.attacker), signIn) }
            #expect(try await client.native(.signInInitiate, headers: from(Self.attacker), signIn).status == .tooManyRequests)
            #expect(try await client.native(.signInInitiate, headers: from(Self.owner), signIn).status == .ok)
            for _ in 0..<31 { _ = try await client.native(.resetPasswordStart, headers: from(Self.attacker), signIn) }
            #expect(try await client.native(.resetPasswordStart, headers: from(Self.owner), signIn).status == .ok)
        }
    }

    @Test func resetMailRequestedByOthersNeverUsesUpTheOwnersOwnRequest() async throws {
        try await withGatehouse(Self.defaults()) { _, client in
            _ = try await client.signUp("omar@example.com")
            let body = try JSONEncoder().encode(EmailRequest(email: "omar@example.com"))
            let sendFrom = { (ip: String) in try await client.post(Path.local("reset/send"), body, from: ip).status }
            // One address: its five, then refused.
            for _ in 0..<5 { #expect(try await sendFrom(Self.attacker) == .ok) }
            #expect(try await sendFrom(Self.attacker) == .tooManyRequests)
            // Many addresses: up to the total cap (20), then one each.
            for host in 1...3 { for _ in 0..<5 { #expect(try await sendFrom("192.0.2.\(host)") == .ok) } }
            #expect(try await sendFrom("192.0.2.4") == .ok)
            #expect(try await sendFrom("192.0.2.4") == .tooManyRequests)
            let before = try await client.mailbox("omar@example.com").count
            #expect(try await sendFrom(Self.owner) == .ok)
            #expect(try await client.mailbox("omar@example.com").count == before + 1)
        }
    }

    @Test func nativeCodeMailRequestedByOthersNeverUsesUpTheOwnersOwnRequest() async throws {
        try await withGatehouse(Self.defaults(native: true)) { _, client in
            _ = try await client.nativeSignedUp("nora@example.com")
            let from = { (ip: String) in HTTPFields([HTTPField(name: HTTPField.Name("X-Forwarded-For")!, value: ip)]) }
            func resetCode(_ ip: String) async throws -> HTTPResponse.Status {
                let started = try await client.native(.resetPasswordStart, headers: from(ip), ["username": "nora@example.com", "challenge_type": allChallengeTypes])
                let token = try #require(try started.decode(NativeAuthStepResponse.self).continuationToken)
                return try await client.native(.resetPasswordChallenge, headers: from(ip), ["continuation_token": token, "challenge_type": allChallengeTypes]).status
            }
            for _ in 0..<5 { #expect(try await resetCode(Self.attacker) == .ok) }
            #expect(try await resetCode(Self.attacker) != .ok)
            let before = try await client.mailbox("nora@example.com").count
            #expect(try await resetCode(Self.owner) == .ok)
            #expect(try await client.mailbox("nora@example.com").count == before + 1)
        }
    }

    // MARK: Imported hashes

    /// An attacker who knows some imported users' addresses, the owner's among them, floods wrong passwords for them
    /// from many client addresses (IPv4 addresses and IPv6 /64s), before the owner signs in and after. The
    /// imported-hash lane is held by a latch and let go one verification at a time: the owner's right password, from
    /// the owner's own address, is verified within the lane's bound (``ImportedHashLane``: one round per login to the
    /// account that waited before it, plus its own, each round one verification per account), however many logins
    /// the flood sends, and signs in. It is never answered 503.
    @Test func floodsOnTheImportedHashLaneNeverKeepAnImportedOwnerOut() async throws {
        try await withGatehouse(Self.defaults()) { gatehouse, client in
            let owner = "ines@example.com"
            let others = ["ivo@example.com", "ida@example.com", "ira@example.com"]
            // Imported users: each holds another system's bcrypt hash, which only the lane verifies.
            for email in [owner] + others {
                _ = try await client.signUp(email)
                let stored = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: email)).passwordHash
                try await gatehouse.env.store.upgradePasswordHash(
                    appId: "test-app", email: email, from: stored, to: BcryptHash.hash("imported \(email)", cost: 4)
                )
            }
            let lane = try #require(gatehouse.env.hasher as? Argon2PasswordHasher).importedLane
            let latch = DispatchSemaphore(value: 0)
            let ran = NIOLockedValueBox<[PasswordCheck?]>([])
            lane.beforeEach = { check in
                ran.withLockedValue { $0.append(check) }
                latch.wait()
            }
            defer {
                lane.beforeEach = nil
                for _ in 0..<64 { latch.signal() }
            }
            let answered = NIOLockedValueBox(0)
            /// A login from `ip`, once it waits in the lane or was answered (no sleep: the lane and the answers say so).
            func enter(_ email: String, _ password: String, from ip: String) async -> Task<Reply, any Error> {
                let before = lane.load.waiting + answered.withLockedValue { $0 }
                let login = Task {
                    defer { answered.withLockedValue { $0 += 1 } }
                    return try await client.login(email, password, from: ip)
                }
                while lane.load.waiting + answered.withLockedValue({ $0 }) == before { await Task.yield() }
                return login
            }
            let address = { (index: Int) in index.isMultiple(of: 2) ? "192.0.2.\(index)" : "2001:db8:\(index):1::7" }

            // One guess holds the lane; twenty more from twenty networks wait, two of them for the owner's account.
            let first = Task { try await client.login(others[0], "a guess", from: "198.18.0.1") }
            while ran.withLockedValue({ $0.isEmpty }) { await Task.yield() }
            let before = [others[0], owner, others[1], others[2], owner] + Array(repeating: others, count: 5).flatMap { $0 }
            var guesses = [first]
            for (index, email) in before.enumerated() { guesses.append(await enter(email, "a guess", from: address(index))) }
            let ownersLogin = await enter(owner, "imported \(owner)", from: Self.owner)
            // The flood goes on: ten more, four of them for the owner's account.
            let after = [owner, others[0], owner, others[1], owner, others[2], owner, others[0], others[1], others[2]]
            for (index, email) in after.enumerated() { guesses.append(await enter(email, "a guess", from: address(100 + index))) }

            // One verification at a time, until the owner's starts.
            let ownersNetwork = ClientNetwork.key(for: Self.owner)
            let ownersTurn = { ran.withLockedValue { $0.firstIndex { $0?.network == ownersNetwork } } }
            while ownersTurn() == nil, lane.load.running + lane.load.waiting > 0 {
                let seen = ran.withLockedValue { $0.count }
                latch.signal()
                while ran.withLockedValue({ $0.count }) == seen, lane.load.running + lane.load.waiting > 0 { await Task.yield() }
            }
            // Before it: the guess that held the lane, then at most one round per guess for the account that waited
            // before the owner's, plus the owner's own round, each one verification per account.
            let waitedBefore = before.filter { $0 == owner }.count
            let bound = 1 + (waitedBefore + 1) * (others.count + 1) - 1
            let turn = ownersTurn()
            lane.beforeEach = nil
            for _ in 0..<64 { latch.signal() }
            let reply = try await ownersLogin.value
            #expect(reply.status == .ok, "\(reply.status) \(reply.text)")
            #expect(try #require(turn, "the owner's login was never verified") <= bound, "the owner's verification came after the bound")
            for guess in guesses { #expect(try await guess.value.status == .unauthorized) }
        }
    }

    // MARK: IPv6

    @Test func ipv6ClientsAreCountedByTheirSlash64() async throws {
        let config = limitedConfiguration([.login: .init(perIP: .init(3, per: 300), perIdentifier: nil)])
        try await withGatehouse(config) { _, client in
            // Four addresses of one /64: the fourth is over the limit of three.
            for host in 1...3 {
                let status = try await client.login("nobody@example.com", "x", from: "2001:db8:1:2::\(host)").status
                #expect(status == .unauthorized)
            }
            #expect(try await client.login("nobody@example.com", "x", from: "2001:db8:1:2:ffff:ffff:ffff:ffff").status == .tooManyRequests)
            // The next /64 is another client.
            #expect(try await client.login("nobody@example.com", "x", from: "2001:db8:1:3::1").status == .unauthorized)
        }
    }

    @Test func anonymousUsersFromOneSlash64AreOneClient() async throws {
        let config = limitedConfiguration([.registration: .init(perIP: .init(2, per: 300), perIdentifier: nil)])
        try await withGatehouse(config) { _, client in
            let path = Path.app() + "/auth/providers/anon-user/login"
            let body = Data(#"{"provider":"anon-user"}"#.utf8)
            var statuses: [HTTPResponse.Status] = []
            for address in ["2001:db8:aa:bb::1", "2001:db8:aa:bb:1:2:3:4", "2001:db8:aa:bb::99", "2001:db8:aa:bc::1"] {
                statuses.append(try await client.post(path, body, from: address).status)
            }
            #expect(statuses == [.ok, .ok, .tooManyRequests, .ok])
        }
    }

    @Test func clientNetworksParseEveryIPv6Spelling() {
        #expect(ClientNetwork.key(for: "192.0.2.1") == "192.0.2.1")
        #expect(ClientNetwork.key(for: "2001:db8:1:2:3:4:5:6") == "2001:db8:1:2:0:0:0:0/64")
        #expect(ClientNetwork.key(for: "2001:DB8:1:2::") == "2001:db8:1:2:0:0:0:0/64")
        #expect(ClientNetwork.key(for: "fe80::1%eth0") == "fe80:0:0:0:0:0:0:0/64")
        #expect(ClientNetwork.key(for: "::ffff:192.0.2.7") == "192.0.2.7")
        #expect(ClientNetwork.key(for: "2001:db8::1", ipv6PrefixLength: 48) == "2001:db8:0:0:0:0:0:0/48")
        #expect(ClientNetwork.key(for: "2001:db8:1:2:3:4:5:6", ipv6PrefixLength: 128) == "2001:db8:1:2:3:4:5:6/128")
        #expect(ClientNetwork.key(for: "2001:db8:1:2:3:4:5:6", ipv6PrefixLength: 56) == "2001:db8:1:0:0:0:0:0/56")
        // Every spelling of one address is one client: brackets, ports and leading zeros go.
        for spelling in ["[2001:db8:1:2::1]", "[2001:db8:1:2::9]:443", "2001:0db8:0001:0002::1"] {
            #expect(ClientNetwork.key(for: spelling) == "2001:db8:1:2:0:0:0:0/64", "\(spelling)")
        }
        for spelling in ["10.77.1.1:5555", "010.077.001.001", "::ffff:a4d:101"] { #expect(ClientNetwork.key(for: spelling) == "10.77.1.1", "\(spelling)") }
        // What is not an address is one client, whatever it says: odd values cannot make counters.
        for odd in ["::1::2", "1:2:3:4:5:6:7:8:9", "2001:db8::12345", "unknown", "10.77.1.256", "1.2.3", "[::1", ""] {
            #expect(ClientNetwork.key(for: odd) == ClientNetwork.unparsed, "\(odd)")
        }
    }

    /// A dotted IPv4 address is read over its bytes (every request's peer is one); that reading must give the key the
    /// general one gives, for every string of digits and dots, and leave anything else to it.
    @Test func dottedIPv4KeysAgreeWithTheGeneralReading() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["0", "00", "000", "1", "01", "001", "9", "10", "010", "99", "100", "199", "255", "256", "300", "999", "1000", ""]
        var fastAnswered = 0
        for _ in 0..<5_000 {
            let count = Bool.random(using: &generator) ? 4 : Int.random(in: 2...5, using: &generator)
            let address = (0..<count).map { _ in pieces.randomElement(using: &generator)! }.joined(separator: ".")
            let general = ClientNetwork.parsedKey(for: address)
            if let fast = ClientNetwork.dottedIPv4Key(address) {
                fastAnswered += 1
                #expect(fast == general, "\(address)")
            } else {
                #expect(general == ClientNetwork.unparsed, "\(address): the byte reading left a valid address to the general one")
            }
            #expect(ClientNetwork.key(for: address) == general, "\(address)")
        }
        #expect(fastAnswered > 300)
        for other in ["10.77.1.1:5555", "::ffff:10.77.1.1", "[10.77.1.1]", " 10.77.1.1", "10.77.1.1 ", "１.2.3.4"] {
            #expect(ClientNetwork.dottedIPv4Key(other) == nil, "\(other)")
        }
    }

    // MARK: Links

    @Test func anotherClientAskingForMailNeverVoidsTheLinkTheOwnerHolds() async throws {
        try await withGatehouse(Self.defaults()) { _, client in
            _ = try await client.signUp("rosa@example.com")
            let body = try JSONEncoder().encode(EmailRequest(email: "rosa@example.com"))
            #expect(try await client.post(Path.local("reset/send"), body, from: Self.owner).status == .ok)
            let owners = try await client.latestLink("rosa@example.com")
            // Someone else asks, in any spelling, again and again: the owner's link still works.
            for spelling in ["rosa@example.com", "ROSA@example.com"] {
                let other = try JSONEncoder().encode(EmailRequest(email: spelling))
                #expect(try await client.post(Path.local("reset/send"), other, from: Self.attacker).status == .ok)
            }
            let others = try await client.latestLink("rosa@example.com")
            #expect(others.tokenId != owners.tokenId)
            let reset = ResetPasswordRequest(password: "the owner's new one", token: owners.token, tokenId: owners.tokenId)
            #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
            // One link used, every other one is spent: a link works once, whoever asked for it.
            let late = ResetPasswordRequest(password: "someone else's", token: others.token, tokenId: others.tokenId)
            #expect(try await client.call(Path.local("reset"), json: late).status == .badRequest)
            #expect(try await client.login("rosa@example.com", "the owner's new one", from: Self.owner).status == .ok)
            // The same client asking again still supersedes its own older link.
            #expect(try await client.post(Path.local("reset/send"), body, from: Self.owner).status == .ok)
            let first = try await client.latestLink("rosa@example.com")
            #expect(try await client.post(Path.local("reset/send"), body, from: Self.owner).status == .ok)
            let stale = ResetPasswordRequest(password: "from the older mail", token: first.token, tokenId: first.tokenId)
            #expect(try await client.call(Path.local("reset"), json: stale).status == .badRequest)
        }
    }

    @Test func anotherClientsConfirmationResendNeverVoidsTheOwnersLink() async throws {
        try await withGatehouse(Self.defaults()) { _, client in
            #expect(try await client.post(Path.local("register"), try JSONEncoder().encode(RegisterRequest(email: "cyd@example.com", password: "cyd's password")), from: Self.owner).status == .created)
            let owners = try await client.latestLink("cyd@example.com")
            #expect(try await client.post(Path.local("confirm/send"), try JSONEncoder().encode(EmailRequest(email: "cyd@example.com")), from: Self.attacker).status == .ok)
            #expect(try await client.latestLink("cyd@example.com").tokenId != owners.tokenId)
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: owners.token, tokenId: owners.tokenId)).status == .ok)
            #expect(try await client.login("cyd@example.com", "cyd's password", from: Self.owner).status == .ok)
        }
    }

    // MARK: Look-alike addresses

    @Test func lookAlikeSpellingsOfAnAddressAreRefused() async throws {
        try await withGatehouse(Self.defaults()) { _, client in
            let lookAlikes = [
                "victim@\u{FF45}\u{FF58}\u{FF41}\u{FF4D}\u{FF50}\u{FF4C}\u{FF45}.com",  // fullwidth
                "victim@\u{212F}xample.com",  // script e
                "victim@example.\u{FF43}\u{FF4F}\u{FF4D}",
                "victim@exa\u{1D50}ple.com",  // modifier letter small m
                "\u{FF56}ictim@example.com",
                #""victim"@example.com"#, "victim(c)@example.com", ".victim@example.com", "vic..tim@example.com",
                "victim@xn--mi7chab1aes7c.com",  // Punycode of the fullwidth label
            ]
            for address in lookAlikes {
                let reply = try await client.register(address, "the attacker's one")
                #expect(reply.status == .badRequest, "\(address): \(reply.status)")
            }
            #expect(try await client.register("victim@example.com", "the owner's").status == .created)
            #expect(EmailAddress("jürgen@bücher.example") != nil)
            #expect(EmailAddress("o'brien+tag@example.com") != nil)
        }
    }

    // MARK: Registrations of a pending address

    @Test func aSecondRegistrationOfAPendingAddressConfirmsNoPassword() async throws {
        try await withGatehouse(Self.defaults()) { _, client in
            let victim = "vera@example.com"
            #expect(try await client.register(victim, "the owner's password").status == .created)
            #expect(try await client.post(Path.local("register"), try JSONEncoder().encode(RegisterRequest(email: victim, password: "the attacker's one")), from: Self.attacker).status == .created)
            // The owner opens the newest link, which their mailbox got.
            let link = try await client.latestLink(victim)
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .ok)
            // Neither registrant's password opens the account: nobody can tell whose the link confirmed.
            #expect(try await client.login(victim, "the attacker's one", from: Self.attacker).status == .unauthorized)
            #expect(try await client.login(victim, "the owner's password", from: Self.owner).status == .unauthorized)
            // The owner chooses one with a reset.
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: victim)).status == .ok)
            let reset = try await client.latestLink(victim)
            #expect(try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "chosen after", token: reset.token, tokenId: reset.tokenId)).status == .ok)
            #expect(try await client.login(victim, "chosen after", from: Self.owner).status == .ok)
            #expect(try await client.login(victim, "the attacker's one", from: Self.attacker).status == .unauthorized)
        }
    }

    /// Registrations of the owner's pending address from other clients, again and again, never void the links the
    /// owner holds: neither the confirmation link (it confirms no password now, the address being contested) nor a
    /// reset link. Before, each registration superseded every link of the user, and a squatter re-registering once a
    /// second kept the owner of a Client-API-only app out.
    /// Which link the owner follows after the squatter's registrations.
    enum OwnersLink: String, CaseIterable, CustomTestStringConvertible {
        case confirmation, reset
        var testDescription: String { rawValue }
    }

    /// Registrations of the owner's pending address from other clients, again and again, never void the links the
    /// owner holds: neither the confirmation link (it confirms no password now, the address being contested) nor a
    /// reset link. Before, each registration superseded every link of the user, and a squatter re-registering once a
    /// second kept the owner of a Client-API-only app out.
    @Test(arguments: OwnersLink.allCases) func registrationsFromOtherClientsNeverVoidTheOwnersLinks(_ kind: OwnersLink) async throws {
        try await withGatehouse(Self.defaults()) { _, client in
            let victim = "vale@example.com"
            #expect(try await client.post(Path.local("register"), try JSONEncoder().encode(RegisterRequest(email: victim, password: "the owner's password")), from: Self.owner).status == .created)
            if kind == .reset {
                #expect(try await client.post(Path.local("reset/send"), try JSONEncoder().encode(EmailRequest(email: victim)), from: Self.owner).status == .ok)
            }
            let link = try await client.latestLink(victim)
            for index in 1...3 {
                let again = RegisterRequest(email: victim, password: "the squatter's \(index)")
                #expect(try await client.post(Path.local("register"), try JSONEncoder().encode(again), from: "203.0.113.\(100 + index)").status == .created)
            }
            switch kind {
            case .confirmation:
                #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .ok)
                // Contested: the owner chooses the password with a reset.
                #expect(try await client.post(Path.local("reset/send"), try JSONEncoder().encode(EmailRequest(email: victim)), from: Self.owner).status == .ok)
                let reset = try await client.latestLink(victim)
                let chosen = ResetPasswordRequest(password: "the owner's own", token: reset.token, tokenId: reset.tokenId)
                #expect(try await client.call(Path.local("reset"), json: chosen).status == .ok)
            case .reset:
                let chosen = ResetPasswordRequest(password: "the owner's own", token: link.token, tokenId: link.tokenId)
                #expect(try await client.call(Path.local("reset"), json: chosen).status == .ok)
            }
            #expect(try await client.login(victim, "the owner's own", from: Self.owner).status == .ok)
            #expect(try await client.login(victim, "the squatter's 3", from: Self.attacker).status == .unauthorized)
        }
    }

    @Test func theHostedConfirmPageOfAContestedAddressAsksForThePasswordAtOnce() async throws {
        try await withGatehouse(Self.defaults()) { _, client in
            let victim = "vito@example.com"
            #expect(try await client.register(victim, "the owner's password").status == .created)
            #expect(try await client.register(victim, "the attacker's one").status == .created)
            let link = try await client.latestLink(victim)
            let page = try await client.execute(uri: "/app/test-app/confirm?token=\(link.token)&tokenId=\(link.tokenId)", method: .get) { $0 }
            let cookie = try #require(page.headers[.setCookie]?.split(separator: ";").first.map(String.init))
            let html = String(buffer: page.body)
            let csrf = String(try #require(html.firstMatch(of: /name="csrf" value="([^"]+)"/)?.output.1))
            let form = "token=\(link.token)&tokenId=\(link.tokenId)&csrf=\(csrf.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
            let confirmed = try await client.execute(
                uri: "/app/test-app/confirm", method: .post,
                headers: [.contentType: "application/x-www-form-urlencoded", .cookie: cookie], body: ByteBuffer(string: form)
            ) { String(buffer: $0.body) }
            #expect(confirmed.contains("registered more than once"))
            let resetToken = String(try #require(confirmed.firstMatch(of: /name="token" value="([0-9a-f]+)"/)?.output.1))
            let resetTokenId = String(try #require(confirmed.firstMatch(of: /name="tokenId" value="([0-9a-f]+)"/)?.output.1))
            #expect(try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "chosen on the page", token: resetToken, tokenId: resetTokenId)).status == .ok)
            #expect(try await client.login(victim, "chosen on the page").status == .ok)
            #expect(try await client.login(victim, "the attacker's one").status == .unauthorized)
        }
    }

    @Test func oneRegistrationAloneStillConfirmsItsPassword() async throws {
        try await withGatehouse(Self.defaults()) { gatehouse, client in
            _ = try await client.signUp("solo@example.com")
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "solo@example.com")?.contestedAt == nil)
        }
    }

    // MARK: Spellings

    @Test func mailGoesToTheStoredAddressAndNonCanonicalLabelsAreRefused() async throws {
        try await withGatehouse(Self.defaults(native: true)) { gatehouse, client in
            _ = try await client.signUp("alice@example.com")
            // An ACE label that decodes to ASCII (`com`), that ends in a hyphen, or whose Unicode is not in NFC is no
            // spelling of a domain.
            let odd = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "Alice@Example.xn--com-"))
            #expect(odd.status == .badRequest)
            #expect(EmailAddress("a@b\u{fc}cher.example") != nil)
            #expect(EmailAddress("a@XN--BCHER-KVA.example")?.normalized == "a@bücher.example")
            #expect(EmailAddress("a@xn--Bcher-kva.example") != nil)
            for refused in ["a@xn--com-.example", "a@xn--bcher-kva-.example", "a@xn--bucher-xyd.example"] { #expect(EmailAddress(refused) == nil, "\(refused)") }
            // Another spelling of a known address: the mail goes to the address as registered, never to the asker's.
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "ALICE@EXAMPLE.COM")).status == .ok)
            let outbox = try await gatehouse.env.store.mailbox(recipient: nil, limit: 50)
            #expect(!outbox.isEmpty)
            #expect(outbox.allSatisfy { $0.recipient == "alice@example.com" }, "\(outbox.map(\.recipient))")
            // Native reset codes too.
            let started = try await client.native(.resetPasswordStart, ["username": "Alice@EXAMPLE.com", "challenge_type": allChallengeTypes])
            let token = try #require(try started.decode(NativeAuthStepResponse.self).continuationToken)
            #expect(try await client.native(.resetPasswordChallenge, ["continuation_token": token, "challenge_type": allChallengeTypes]).status == .ok)
            let newest = try #require(try await gatehouse.env.store.mailbox(recipient: nil, limit: 1).first)
            #expect(newest.kind == MailKind.oneTimeCode.rawValue)
            #expect(newest.recipient == "alice@example.com")
        }
    }

    /// `auto` confirms without a proof of the mailbox, so a registration over a pending account (here an import's
    /// unverified address, with the old system's id and custom data) must not confirm it in place: the stranger would
    /// get the imported user. The address counts as taken; its owner is mailed and gets in by a reset.
    @Test func anAutomaticRegistrationNeverConfirmsSomeoneElsesPendingAccount() async throws {
        var config = testConfiguration()
        config.apps[0].localUserpass?.confirmation = .auto
        try await withGatehouse(config) { gatehouse, client in
            let (user, account) = try await Self.importUnverified(gatehouse, "imported@example.com", "the owner's old password", customData: ["plan": "gold"])

            #expect(try await client.register("imported@example.com", "the stranger's password").status == .created)
            #expect(try await client.login("imported@example.com", "the stranger's password").status == .unauthorized)
            let kept = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "imported@example.com"))
            #expect(kept.userId == user.id && kept.confirmedAt == nil && kept.passwordHash == account.passwordHash)
            #expect(try await client.mailbox("imported@example.com").first?.subject.contains("Someone tried to create") == true)

            // The owner's reset confirms the imported user, with its id and data.
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "imported@example.com")).status == .ok)
            let link = try await client.latestLink("imported@example.com")
            let reset = ResetPasswordRequest(password: "the owner's new password", token: link.token, tokenId: link.tokenId)
            #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
            let owner = try await client.login("imported@example.com", "the owner's new password").decode(LoginResponse.self)
            #expect(owner.userId == user.id)
        }
    }

    // MARK: Lazy migration

    /// An account as an import writes an unverified address of the old system: pending, unproven, with the old
    /// system's password (Argon2id here) and custom data.
    static func importUnverified(
        _ gatehouse: AuthServer, _ email: String, _ password: String, customData: [String: JSONValue] = [:]
    ) async throws -> (UserRecord, EmailAccountRecord) {
        let app = try #require(gatehouse.env.configuration.app(id: "test-app"))
        let now = gatehouse.env.clock.now
        var (user, identity, account) = EmailPasswordService.newAccount(
            userId: Secrets.objectID(at: now), app: app, email: try #require(EmailAddress(email)),
            passwordHash: try await gatehouse.env.hasher.hash(password, parameters: app.passwordHash), confirmed: false, proven: false, now: now
        )
        user.customData = customData
        account.fromOldSystem = true
        try await gatehouse.env.store.createEmailUser(user: user, identity: identity, account: account, token: nil, mail: nil, recording: nil)
        return (user, account)
    }

    /// A native-auth app (email codes) whose migrate-user function vouches for any password; `asked` lists the
    /// addresses it was asked about.
    static func withVouchingOldSystem(
        _ body: @escaping @Sendable (AuthServer, any TestClientProtocol, _ asked: @escaping @Sendable () -> [String]) async throws -> Void
    ) async throws {
        let asked = NIOLockedValueBox<[String]>([])
        let functions = FunctionHandlers(migrateUser: { call in
            asked.withLockedValue { $0.append(call.email) }
            return .migrated(emailVerified: true, customData: [:])
        })
        try await withOpenServer(nativeConfiguration(methods: [.emailOTP]), logger: quietLogger, functions: functions) { gatehouse in
            try await gatehouse.makeApplication().test(.router) { client in
                try await body(gatehouse, client) { asked.withLockedValue { $0 } }
            }
        }
    }

    @Test func theMigrateUserFunctionNeverSetsAFirstPasswordOnAnAccountGatehouseMade() async throws {
        try await Self.withVouchingOldSystem { gatehouse, client, asked in
            // A code-only native sign-up: the account has no password.
            _ = try await client.nativeTokens(try await client.nativeSignUp("cody@example.com"), username: "cody@example.com")
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "cody@example.com")?.passwordHash == "")
            // The old system's password for the address (the function vouches for anything) does not open it.
            #expect(try await client.login("cody@example.com", "old system's").status == .unauthorized)
            #expect(asked().isEmpty)
            // An account the old system brought (a reset request migrated it) still may be vouched for.
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "olden@example.com")).status == .ok)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "olden@example.com")?.fromOldSystem == true)
            #expect(try await client.login("olden@example.com", "old system's").status == .ok)
        }
    }

    /// Once the owner has shown up — proved the mailbox — the old system's password, which may have leaked, is no way
    /// in: not for an imported unverified account, whose hash the owner's first code sign-in discards, nor for an
    /// account a reset request migrated without a password, whose owner then signs in with codes only.
    @Test func theOwnersProofOfTheMailboxEndsTheOldSystemsSay() async throws {
        try await Self.withVouchingOldSystem { gatehouse, client, asked in
            _ = try await Self.importUnverified(gatehouse, "unverified@example.com", "the old system's password")
            // Migrated by a reset request that nobody follows.
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "migrated@example.com")).status == .ok)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "migrated@example.com")?.oldSystemMayVouch == true)
            let calls = asked().count
            for address in ["unverified@example.com", "migrated@example.com"] {
                _ = try await PreRegistrationTests.codeSignIn(client, address)
                let proven = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: address))
                #expect(proven.passwordHash == "" && !proven.oldSystemMayVouch, "\(address)")
                #expect(try await client.login(address, "the old system's password").status == .unauthorized, "\(address)")
            }
            #expect(asked().count == calls)
        }
    }
}
