import Foundation
import CoreMetrics
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `/metrics`: what it measures, parsed by the reference Prometheus parser (Python's `prometheus_client`), who may read
/// it, and labels that stay bounded whatever clients send.
@Suite struct MetricsTests {
    // MARK: parsing with prometheus_client

    struct Sample: Decodable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    struct Family: Decodable {
        var name: String
        var type: String
        var samples: [Sample]
    }

    struct Scrape {
        var families: [Family]

        /// The family that has a sample named `sample` (prometheus_client names a counter family without `_total`).
        func family(of sample: String) -> Family? { families.first { $0.samples.contains { $0.name == sample } } }

        /// The sum of the samples named `name` whose labels include `labels`.
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double {
            families.flatMap(\.samples).filter { sample in
                sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value }
            }.reduce(0) { $0 + $1.value }
        }

        /// Every value of label `label` on samples named `name`.
        func labelValues(_ name: String, _ label: String) -> Set<String> {
            Set(families.flatMap(\.samples).filter { $0.name == name }.compactMap { $0.labels[label] })
        }

        var allLabelValues: Set<String> { Set(families.flatMap(\.samples).flatMap(\.labels.values)) }
    }

    static let parser = """
        import json, sys
        from prometheus_client.parser import text_string_to_metric_families
        text = open(sys.argv[1], encoding="utf-8").read()
        out = [{"name": f.name, "type": f.type,
                "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]}
               for f in text_string_to_metric_families(text)]
        print(json.dumps(out))
        """

    /// Parses `text` with `prometheus_client`; a text it cannot parse fails the test.
    static func parse(_ text: String) async throws -> Scrape {
        guard let python = ProcessInfo.processInfo.environment["GATEHOUSE_PYTHON"] else {
            throw SMTPTestSetupError(description: "GATEHOUSE_PYTHON is not set: run the tests with scripts/test.sh (it makes .build-venv with prometheus-client)")
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString).txt")
        try text.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try await FaultSuiteTests.spawn([python, "-c", parser, file.path], within: .seconds(60))
        try #require(run.status == 0, "prometheus_client refused the scrape: \(run.stderr)\n\(text)")
        return Scrape(families: try JSONDecoder().decode([Family].self, from: Data(run.stdout.utf8)))
    }

    // MARK: servers

    static func configuration(token: String? = nil, host: String = "127.0.0.1") -> GatehouseConfiguration {
        // No dev mailbox: nothing delivers mail, so the outbox keeps what requests queue.
        var configuration = testConfiguration(mailbox: false)
        configuration.server.host = host
        configuration.server.metrics = MetricsSettings(enabled: true, token: token)
        return configuration
    }

    /// A server listening on a real port; `body` gets its port.
    static func withLiveGatehouse(
        _ configuration: GatehouseConfiguration, _ body: @Sendable (AuthServer, any TestClientProtocol, Int) async throws -> Void
    ) async throws {
        try await withOpenServer(configuration, logger: quietLogger) { gatehouse in
            try await gatehouse.makeApplication().test(.live) { client in
                try await body(gatehouse, client, try #require(client.port))
            }
        }
    }

    /// A server listening on `configuration.server.host` (HummingbirdTesting's live mode always binds localhost);
    /// `body` gets its port.
    static func withRunningGatehouse(_ configuration: GatehouseConfiguration, _ body: @Sendable (Int) async throws -> Void) async throws {
        try await withOpenServer(configuration, logger: quietLogger) { gatehouse in
            let (ports, listening) = AsyncStream.makeStream(of: Int.self)
            let app = gatehouse.makeApplication(onServerRunning: { port in listening.yield(port) })
            let server = Task {
                // A server that fails to start ends the wait for its port.
                defer { listening.finish() }
                try await app.runService(gracefulShutdownSignals: [])
            }
            var outcome: Result<Void, any Error> = .success(())
            var next = ports.makeAsyncIterator()
            if let port = await next.next() {
                do { try await body(port) } catch { outcome = .failure(error) }
            } else {
                outcome = .failure(SMTPTestSetupError(description: "the server never listened"))
            }
            server.cancel()
            _ = await server.result
            try outcome.get()
        }
    }

    /// GET over a connection of its own from this process to `host`.
    static func get(_ host: String, _ port: Int, _ path: String, headers: [String: String] = [:]) async throws -> (status: Int, body: String) {
        var request = URLRequest(url: URL(string: "http://\(host):\(port)\(path)")!)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    /// Scrapes over the loopback connection and parses.
    static func scrape(_ port: Int, token: String? = nil) async throws -> Scrape {
        let answer = try await get("127.0.0.1", port, "/metrics", headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:])
        try #require(answer.status == 200, "GET /metrics: \(answer.status) \(answer.body)")
        return try await parse(answer.body)
    }

    // MARK: what is measured

    @Test func theScrapeParsesAndItsCountersMoveWithTheRequestsMade() async throws {
        var configuration = Self.configuration()
        // Two logins an hour from one address: the third is refused.
        configuration.apps[0].rateLimits.rules[.login] = RateLimitSettings.Rule(perIP: .init(2, per: 3600), perIdentifier: nil)
        try await Self.withLiveGatehouse(configuration) { _, client, port in
            let login = "/api/client/v2.0/app/{appId}/auth/providers/{provider}/login"
            let failed = ["app": "test-app", "kind": "login_failed", "provider": "local-userpass"]
            let limited = ["app": "test-app", "kind": "rate_limited"]
            let before = try await Self.scrape(port)

            // The metric families and their types.
            #expect(before.family(of: "gatehouse_password_hashes_running")?.type == "gauge")
            #expect(before.family(of: "gatehouse_outbox_pending")?.type == "gauge")

            #expect(try await client.register("ida@example.com").status == .created)
            #expect(try await client.login("ida@example.com", "wrong password").status == .unauthorized)
            #expect(try await client.login("nobody@example.com", "wrong password").status == .unauthorized)
            let after = try await Self.scrape(port)

            #expect(after.family(of: "gatehouse_http_requests_total")?.type == "counter")
            #expect(after.family(of: "gatehouse_http_request_duration_seconds_bucket")?.type == "histogram")
            #expect(after.family(of: "gatehouse_auth_events_total")?.type == "counter")
            #expect(after.family(of: "gatehouse_db_statement_duration_seconds_bucket")?.type == "histogram")
            #expect(after.family(of: "gatehouse_password_hash_wait_seconds_bucket")?.type == "histogram")

            #expect(before.value("gatehouse_auth_events_total", failed) == 0)
            #expect(after.value("gatehouse_auth_events_total", failed) == 2)
            #expect(after.value("gatehouse_auth_events_total", ["app": "test-app", "kind": "registration", "provider": "local-userpass"]) == 1)
            // Each request counted under its route's template, method and status; the scrape under its own.
            #expect(after.value("gatehouse_http_requests_total", ["route": login, "method": "POST", "status": "401"]) == 2)
            #expect(after.value("gatehouse_http_requests_total", ["route": "/metrics", "method": "GET", "status": "200"]) == 1)
            #expect(after.value("gatehouse_http_request_duration_seconds_count", ["route": login, "method": "POST"]) == 2)
            // The registration and the logins hashed passwords (the unknown user's login hashes too, for timing).
            #expect(after.value("gatehouse_password_hash_wait_seconds_count") >= before.value("gatehouse_password_hash_wait_seconds_count") + 3)
            // Their CPU time, counted on the hashing threads: some, and never more than the time they ran.
            #expect(after.family(of: "gatehouse_password_hash_cpu_seconds_total")?.type == "counter")
            let hashCPU = after.value("gatehouse_password_hash_cpu_seconds_total") - before.value("gatehouse_password_hash_cpu_seconds_total")
            let hashWall = after.value("gatehouse_password_hash_duration_seconds_sum") - before.value("gatehouse_password_hash_duration_seconds_sum")
            #expect(hashCPU > 0)
            #expect(hashCPU <= hashWall + 0.001, "CPU time \(hashCPU) s of hashes that ran \(hashWall) s")
            #expect(after.value("gatehouse_outbox_pending") >= 1, "the confirmation mail, with nothing delivering it here")
            #expect(after.value("gatehouse_db_statement_duration_seconds_count") > before.value("gatehouse_db_statement_duration_seconds_count"))

            // The third and fourth logins of the hour are refused: each refusal counts (the audit log keeps the first).
            #expect(try await client.login("ida@example.com").status == .tooManyRequests)
            #expect(try await client.login("ida@example.com").status == .tooManyRequests)
            let limitedScrape = try await Self.scrape(port)
            #expect(limitedScrape.value("gatehouse_auth_events_total", limited) == 2)
            #expect(limitedScrape.value("gatehouse_http_requests_total", ["route": login, "status": "429"]) == 2)
        }
    }

    /// A successful refresh is counted in the metrics whether or not the audit log records it (`audit.refreshes`):
    /// with the row gone by default, the counter is what is left of it.
    @Test(arguments: [false, true])
    func refreshesAreCountedWhetherOrNotTheAuditLogRecordsThem(recorded: Bool) async throws {
        var configuration = Self.configuration()
        configuration.audit.refreshes = recorded
        try await Self.withLiveGatehouse(configuration) { gatehouse, client, port in
            // auto-app confirms at registration (there is no mailbox here).
            #expect(try await client.register("rob@example.com", app: "auto-app").status == .created)
            let login = try await client.login("rob@example.com", app: "auto-app").decode(LoginResponse.self)
            for _ in 0..<2 { #expect(try await client.call(Path.session, .post, bearer: login.refreshToken).status == .created) }
            let scrape = try await Self.scrape(port)
            #expect(scrape.value("gatehouse_auth_events_total", ["app": "auto-app", "kind": "refresh"]) == 2)
            let rows = try await gatehouse.env.store.auditEvents(appId: "auto-app", userId: nil, afterSeq: nil, limit: 100).filter { $0.kind == "refresh" }
            #expect(rows.count == (recorded ? 2 : 0))
        }
    }

    @Test func labelsStayBoundedWhateverPathsAndAppsClientsSend() async throws {
        try await withGatehouse(Self.configuration()) { gatehouse, client in
            let ids = (0..<1000).map { _ in "app\(UInt64.random(in: 0...UInt64.max))" }
            for id in ids {
                _ = try await client.execute(uri: "/native/\(id)/oauth2/v2.0/token", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"], body: .init(string: "client_id=x&grant_type=password"))
            }
            for id in ids.prefix(50) {
                _ = try await client.login("someone@example.com", app: id)
                _ = try await client.execute(uri: "/no/such/\(id)", method: .get)
                _ = try await client.execute(uri: "/healthz", method: HTTPRequest.Method("BREW\(id.suffix(4))")!)
            }
            let scrape = try await Self.parse(String(decoding: gatehouse.metrics.text(), as: UTF8.self))
            let routes = scrape.labelValues("gatehouse_http_requests_total", "route")
            #expect(routes.contains("/native/{appId}/oauth2/v2.0/token"))
            #expect(routes.contains("unmatched"))
            #expect(routes.count < 10, "\(routes)")
            #expect(scrape.value("gatehouse_http_requests_total", ["route": "/native/{appId}/oauth2/v2.0/token"]) == 1000)
            #expect(scrape.labelValues("gatehouse_http_requests_total", "method").isSubset(of: ["GET", "POST", "other"]))
            // No path, app id or method a client made up is a label value anywhere.
            let values = scrape.allLabelValues
            #expect(!values.contains { value in ids.contains { value.contains($0) || value.contains($0.suffix(4)) && value.hasPrefix("BREW") } })
            #expect(values.count < 100, "\(values.count) label values")
        }
    }

    @Test func anAuthEventOfAnAppNotConfiguredIsNotItsOwnLabel() async throws {
        try await withGatehouse(Self.configuration()) { gatehouse, _ in
            gatehouse.env.countAuthEvent(.loginFailed, app: "not-configured-1", detail: ["provider": "made-up-provider"])
            gatehouse.env.countAuthEvent(.loginSucceeded, app: "test-app", detail: ["via": "native auth signIn"])
            let scrape = try await Self.parse(String(decoding: gatehouse.metrics.text(), as: UTF8.self))
            #expect(scrape.value("gatehouse_auth_events_total", ["app": "unknown", "kind": "login_failed", "provider": "none"]) == 1)
            #expect(scrape.value("gatehouse_auth_events_total", ["app": "test-app", "kind": "login_succeeded", "provider": "native"]) == 1)
            #expect(!scrape.allLabelValues.contains("not-configured-1") && !scrape.allLabelValues.contains("made-up-provider"))
        }
    }

    @Test func authEventsCountedAtOnceFromManyTasksAreEachCounted() async throws {
        try await withGatehouse(Self.configuration()) { gatehouse, _ in
            let env = gatehouse.env
            // Each label set's handle is made at its first use: many tasks meet there at once.
            await withTaskGroup { group in
                for index in 0..<400 {
                    group.addTask {
                        env.countAuthEvent(index % 2 == 0 ? .refresh : .logout, app: index % 4 < 2 ? "test-app" : "auto-app")
                    }
                }
            }
            let scrape = try await Self.parse(String(decoding: gatehouse.metrics.text(), as: UTF8.self))
            for (app, kind) in [("test-app", "refresh"), ("test-app", "logout"), ("auto-app", "refresh"), ("auto-app", "logout")] {
                #expect(scrape.value("gatehouse_auth_events_total", ["app": app, "kind": kind, "provider": "none"]) == 100, "\(app) \(kind)")
            }
        }
    }

    /// The handle of each label set is made at its first use and kept: later events ask the factory nothing.
    @Test func anAuthEventsHandleIsMadeOncePerLabelSet() async throws {
        final class MakingFactory: MetricsFactory, Sendable {
            let counters = LockedValue(0)
            func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
                counters.withLockedValue { $0 += 1 }
                return NOOPMetricsHandler.instance
            }
            func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { NOOPMetricsHandler.instance }
            func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { NOOPMetricsHandler.instance }
            func destroyCounter(_ handler: any CounterHandler) {}
            func destroyRecorder(_ handler: any RecorderHandler) {}
            func destroyTimer(_ handler: any TimerHandler) {}
        }
        try await withGatehouse(Self.configuration()) { gatehouse, _ in
            let factory = MakingFactory()
            var counting = gatehouse.env
            counting.metrics = AuthEventCounters(factory)
            let env = counting
            @Sendable func countMany() async {
                await withTaskGroup { group in
                    for index in 0..<400 {
                        group.addTask { env.countAuthEvent(index % 2 == 0 ? .refresh : .logout, app: index % 4 < 2 ? "test-app" : "auto-app") }
                    }
                }
            }
            await countMany()
            let made = factory.counters.withLockedValue { $0 }
            // Racing first uses may each make one; every label set has one by now.
            #expect(made >= 4 && made < 400, "\(made)")
            await countMany()
            #expect(factory.counters.withLockedValue { $0 } == made)
        }
    }

    @Test func theOutboxDepthAndItsDeliveryOutcomesAreMeasured() async throws {
        let clock = ManualClock()
        let token = "scrape-token-0123456789abcdef"
        try await withGatehouse(Self.configuration(token: token), clock: clock) { gatehouse, client in
            let transport = OutboxDeliveryTests.Transport()
            var service = OutboxDeliveryService(store: gatehouse.env.store, transport: transport, clock: clock.clock, logger: quietLogger)
            service.metrics = gatehouse.metrics
            @Sendable func scrape() async throws -> Scrape {
                let answer = try await client.execute(uri: "/metrics", method: .get, headers: [.authorization: "Bearer \(token)"])
                try #require(answer.status == .ok)
                return try await Self.parse(String(buffer: answer.body))
            }
            #expect(try await client.register("one@example.com").status == .created)
            #expect(try await client.register("two@example.com").status == .created)
            #expect(try await scrape().value("gatehouse_outbox_pending") == 2)

            transport.failures = [.transient("421 try later"), .permanent("550 no such mailbox")]
            #expect(try await service.deliverDue() == 0)
            var now = try await scrape()
            #expect(now.value("gatehouse_outbox_pending") == 1, "the one to retry")
            #expect(now.value("gatehouse_outbox_delivery_failures_total", ["outcome": "retrying"]) == 1)
            #expect(now.value("gatehouse_outbox_delivery_failures_total", ["outcome": "failed"]) == 1)
            #expect(now.value("gatehouse_outbox_sent_total") == 0)

            clock.advance(by: 11)
            #expect(try await service.deliverDue() == 1)
            now = try await scrape()
            #expect(now.value("gatehouse_outbox_pending") == 0)
            #expect(now.value("gatehouse_outbox_sent_total") == 1)
            #expect(now.family(of: "gatehouse_outbox_delivery_failures_total")?.type == "counter")
        }
    }

    @Test func aScrapeDoesNotWaitForADatabaseThatDoesNotAnswer() async throws {
        let metrics = GatehouseMetrics(enabled: true)
        let gate = Gate()
        let calls = NIOLockedValueBox(0)
        let depth = OutboxDepth(gauge: metrics.outboxPending) {
            let call = calls.withLockedValue { $0 += 1; return $0 }
            if call == 1 { return 3 }
            gate.arrived()
            await gate.wait()
            return 7
        }
        func pending() async throws -> Double { try await Self.parse(String(decoding: metrics.text(), as: UTF8.self)).value("gatehouse_outbox_pending") }
        await depth.refresh(within: .seconds(30))
        #expect(try await pending() == 3)
        // The database stops answering: the scrape goes on with the last depth, and starts no second count meanwhile.
        await depth.refresh(within: .milliseconds(50))
        await gate.waitForArrival()  // the count is stuck
        #expect(try await pending() == 3)
        await depth.refresh(within: .milliseconds(50))
        #expect(calls.withLockedValue { $0 } == 2)
        gate.open()
    }

    // MARK: who may read it

    @Test func withATokenOnlyItsBearerReadsTheMetrics() async throws {
        let token = "scrape-token-0123456789abcdef"
        try await Self.withLiveGatehouse(Self.configuration(token: token)) { _, _, port in
            #expect(try await Self.get("127.0.0.1", port, "/metrics").status == 401, "loopback needs the token too")
            #expect(try await Self.get("127.0.0.1", port, "/metrics", headers: ["Authorization": "Bearer scrape-token-0123456789abcdeX"]).status == 401)
            #expect(try await Self.get("127.0.0.1", port, "/metrics", headers: ["Authorization": "Bearer scrape-token"]).status == 401)
            #expect(try await Self.get("127.0.0.1", port, "/metrics", headers: ["Authorization": "Basic \(token)"]).status == 401)
            let good = try await Self.get("127.0.0.1", port, "/metrics", headers: ["Authorization": "Bearer \(token)"])
            #expect(good.status == 200)
            #expect(good.body.contains("gatehouse_http_requests_total"))
        }
    }

    @Test func withoutATokenOnlyLoopbackPeersWithoutProxyHeadersReadTheMetrics() async throws {
        // Listening on every interface, so that another address of this machine reaches it as a non-loopback peer.
        try await Self.withRunningGatehouse(Self.configuration(host: "0.0.0.0")) { port in
            #expect(try await Self.get("127.0.0.1", port, "/metrics").status == 200)
            #expect(try await Self.get("127.0.0.1", port, "/metrics", headers: ["X-Forwarded-For": "203.0.113.9"]).status == 404)
            #expect(try await Self.get("127.0.0.1", port, "/metrics", headers: ["Forwarded": "for=203.0.113.9"]).status == 404)
            let external = try #require(Self.nonLoopbackAddress(), "this machine has no non-loopback IPv4 address to test from")
            let refused = try await Self.get(external, port, "/metrics")
            #expect(refused.status == 404)
            #expect(!refused.body.contains("gatehouse_"))
            #expect(try await Self.get(external, port, "/healthz").status == 200, "the address does reach the server")
        }
    }

    @Test func disabledTheRouteIsAbsent() async throws {
        var configuration = testConfiguration()
        configuration.server.metrics = MetricsSettings(enabled: false, token: "scrape-token-0123456789abcdef")
        try await withGatehouse(configuration) { gatehouse, client in
            let answer = try await client.execute(uri: "/metrics", method: .get, headers: [.authorization: "Bearer scrape-token-0123456789abcdef"])
            #expect(answer.status == .notFound)
            #expect(gatehouse.metrics.text().isEmpty)
        }
    }

    @Test func theAccessRule() {
        let open = MetricsSettings(enabled: true)
        func decide(_ settings: MetricsSettings, _ peer: String?, _ headers: HTTPFields = [:], proxyHeader: String? = nil) -> MetricsAccess {
            MetricsAccess.decide(settings: settings, headers: headers, peerIP: peer, clientIPHeader: proxyHeader.flatMap { HTTPField.Name($0) })
        }
        for peer in ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"] { #expect(decide(open, peer) == .allowed, "\(peer)") }
        for peer in ["192.0.2.2", "10.0.0.1", "::ffff:10.0.0.1", "fd00::2", "localhost", "", "128.0.0.1"] {
            #expect(decide(open, peer) == .hidden, "\(peer)")
        }
        #expect(decide(open, nil) == .hidden)
        #expect(decide(open, "127.0.0.1", [HTTPField.Name("X-Real-IP")!: "127.0.0.1"]) == .hidden)
        #expect(decide(open, "127.0.0.1", [HTTPField.Name("X-Client")!: "127.0.0.1"], proxyHeader: "X-Client") == .hidden)

        let token = "0123456789abcdef0123"
        let closed = MetricsSettings(enabled: true, token: token)
        #expect(decide(closed, "127.0.0.1") == .unauthorized)
        #expect(decide(closed, "192.0.2.2", [.authorization: "Bearer \(token)"]) == .allowed)
        #expect(decide(closed, nil, [.authorization: "bearer \(token)"]) == .allowed)
        for wrong in ["Bearer \(token)x", "Bearer \(token.dropLast())", "Bearer \(token.uppercased())", "Bearer", "Bearer ", token, "Basic \(token)"] {
            #expect(decide(closed, "127.0.0.1", [.authorization: wrong]) == .unauthorized, "\(wrong)")
        }
        // Two Authorization headers, the right token in each: neither is taken.
        var twice: HTTPFields = [.authorization: "Bearer \(token)"]
        twice.append(HTTPField(name: .authorization, value: "Bearer \(token)"))
        #expect(decide(closed, "127.0.0.1", twice) == .unauthorized)
    }

    @Test func theLoaderReadsTheSettingsAndRefusesAShortToken() throws {
        let base = "apps:\n  - id: a\n    providers:\n      anon-user: {}\nserver:\n  metrics:\n"
        let loaded = try ConfigurationLoader(environment: [:]).parse(yaml: base + "    enabled: true\n    token: abcdefghijklmnopq\n")
        #expect(loaded.server.metrics == MetricsSettings(enabled: true, token: "abcdefghijklmnopq"))
        #expect(try ConfigurationLoader(environment: [:]).parse(yaml: "apps:\n  - id: a\n    providers:\n      anon-user: {}\n").server.metrics.enabled == false)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: file) }
        for short in ["short", "fifteen-chars-x", "sixteen chars xx"] {
            try (base + "    enabled: true\n    token: \(short)\n").write(to: file, atomically: true, encoding: .utf8)
            let error = #expect(throws: ConfigurationError.self) { try ConfigurationLoader(environment: [:]).load(file: file.path) }
            #expect(error?.key == "server.metrics.token", "\(short)")
        }
        try (base + "    enabled: true\n").write(to: file, atomically: true, encoding: .utf8)
        let fromEnvironment = try ConfigurationLoader(environment: ["GATEHOUSE_METRICS_TOKEN": "from-the-environment-0123"]).load(file: file.path)
        #expect(fromEnvironment.server.metrics.token == "from-the-environment-0123")
    }

    /// An IPv4 address of this machine other than loopback, if it has one.
    static func nonLoopbackAddress() -> String? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            guard getnameinfo(address, socklen_t(MemoryLayout<sockaddr_in>.size), &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            let text = String(cString: host)
            if !text.hasPrefix("127.") { return text }
        }
        return nil
    }
}
