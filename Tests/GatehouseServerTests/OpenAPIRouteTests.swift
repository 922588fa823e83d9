import Foundation
import GatehouseDomain
@testable import GatehouseServer
import HTTPTypes
import Hummingbird
import Testing

/// The routes the server registers and the operations `openapi.yaml` describes are the same set, both ways: every
/// method and path the router answers is documented, and every documented path and method is served. Paths compare
/// by shape with their parameters' names (`:appId` in the router, `{appId}` in the document, both `{appId}` here).
///
/// The router is the one `AuthServer.makeApplication()` builds, with every optional route group on (the dev mailbox,
/// `/metrics`): the application it returns hides its router, so this test registers the same route groups on a
/// router of its own, and checks against `AuthServer.swift` that they are all of them.
@Suite struct OpenAPIRouteTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Routes the server answers that `openapi.yaml` leaves out on purpose, each with where it is documented instead.
    static let undocumentedOnPurpose: [String: String] = [
        // Prometheus' text format, off by default, loopback or a bearer token only: an operator's route, not the API
        // (and schemathesis, which fuzzes every operation of openapi.yaml, would find it hidden). docs/operations.md.
        "GET /metrics": "docs/operations.md",
    ]

    /// `METHOD /path` for every operation of `openapi.yaml`: a path is a two-space-indented key under `paths:` and
    /// an operation a four-space-indented HTTP method under it (`parameters:` and other keys are not operations).
    static func documentedOperations() throws -> Set<String> {
        let text = try String(contentsOf: root.appendingPathComponent("Sources/GatehouseServer/Resources/openapi.yaml"), encoding: .utf8)
        var operations: Set<String> = []
        var inPaths = false
        var path: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" ") && !line.isEmpty && !line.hasPrefix("#") {
                inPaths = line.hasPrefix("paths:")
                path = nil
                continue
            }
            guard inPaths else { continue }
            if let match = line.wholeMatch(of: #/ {2}(/[^:\s]*|"[^"]+"|'[^']+'):\s*(#.*)?/#) {
                path = String(match.output.1).trimmingCharacters(in: CharacterSet(charactersIn: "\"'"))
            } else if let match = line.wholeMatch(of: #/ {4}(get|put|post|delete|options|head|patch|trace):\s*(#.*)?/#), let path {
                operations.insert("\(match.output.1.uppercased()) \(path)")
            }
        }
        return operations
    }

    /// The route groups `makeApplication()` registers, registered the same way on a router this test can read.
    static func registeredOperations(_ gatehouse: AuthServer) -> (operations: Set<String>, groups: Set<String>) {
        let router = Router(context: GatehouseRequestContext.self)
        ClientAPIRoutes(env: gatehouse.env).register(on: router)
        NativeAuthRoutes(env: gatehouse.env).register(on: router)
        ServiceRoutes(env: gatehouse.env, readiness: DatabaseReadiness(ready: true), probe: ReadinessProbe(write: {})).register(on: router)
        HostedPages(env: gatehouse.env).register(on: router)
        MetricsRoutes(
            metrics: gatehouse.metrics, settings: MetricsSettings(enabled: true), clientIPHeader: nil,
            outboxDepth: OutboxDepth(gauge: gatehouse.metrics.outboxPending) { 0 }
        ).register(on: router)
        DevMailboxRoutes(store: gatehouse.env.store).register(on: router)
        let groups: Set<String> = ["ClientAPIRoutes", "NativeAuthRoutes", "ServiceRoutes", "HostedPages", "MetricsRoutes", "DevMailboxRoutes"]
        return (Set(router.routes.map { "\($0.method.rawValue) \($0.path.description)" }), groups)
    }

    @Test func everyServedRouteIsDocumentedAndEveryDocumentedOperationIsServed() async throws {
        try await withGatehouse(testConfiguration(mailbox: true)) { gatehouse, _ in
            let (served, groups) = Self.registeredOperations(gatehouse)
            let documented = try Self.documentedOperations()
            // The parsers found something: a broken one would make both directions pass vacuously.
            #expect(served.count >= 50, "\(served.sorted())")
            #expect(documented.count >= 50, "\(documented.sorted())")
            #expect(served.contains("POST /api/client/v2.0/auth/password"))
            #expect(documented.contains("GET /_dev/mailbox"))
            #expect(documented.contains("PUT /api/client/v2.0/auth/api_keys/{keyId}/enable"))

            let undocumented = served.subtracting(documented).subtracting(Self.undocumentedOnPurpose.keys)
            #expect(undocumented.isEmpty, "served but not in openapi.yaml: \(undocumented.sorted())")
            let unserved = documented.subtracting(served)
            #expect(unserved.isEmpty, "in openapi.yaml but not served: \(unserved.sorted())")
            // An exception that stops being one goes from the list.
            for (route, doc) in Self.undocumentedOnPurpose {
                #expect(served.contains(route) && !documented.contains(route), "\(route) is no longer an exception")
                let path = String(route.split(separator: " ")[1])
                let text = try String(contentsOf: Self.root.appendingPathComponent(doc), encoding: .utf8)
                let mentioned = text.contains(path)
                #expect(mentioned, "\(route) is not documented in \(doc)")
            }

            // The route groups registered above are every one there is: each type in Sources/GatehouseServer that
            // registers routes, and each is registered by makeApplication().
            let sources = Self.root.appendingPathComponent("Sources/GatehouseServer")
            var declared: Set<String> = []
            for case let file as URL in FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)! where file.pathExtension == "swift" {
                let text = try String(contentsOf: file, encoding: .utf8)
                guard text.contains("func register(on router: Router<GatehouseRequestContext>)") else { continue }
                // The type whose body holds the registration: the nearest declaration above it.
                var current: String?
                for line in text.split(separator: "\n") {
                    if let match = line.firstMatch(of: #/^(?:\w+\s+)*(?:struct|final class|class|extension)\s+(\w+)/#) { current = String(match.output.1) }
                    if line.contains("func register(on router: Router<GatehouseRequestContext>)"), let current { declared.insert(current) }
                }
            }
            #expect(declared == groups, "route groups in the sources: \(declared.sorted()); registered by this test: \(groups.sorted())")
            let server = try String(contentsOf: sources.appendingPathComponent("AuthServer.swift"), encoding: .utf8)
            let body = try #require(server.range(of: "func makeApplication(").map { server[$0.lowerBound...] })
            let application = body.prefix(upTo: body.range(of: "var services")?.lowerBound ?? body.endIndex)
            for group in groups {
                #expect(application.contains("\(group)("), "makeApplication() no longer registers \(group)")
            }
            #expect(application.components(separatedBy: ".register(on: router)").count - 1 == groups.count)
        }
    }
}
