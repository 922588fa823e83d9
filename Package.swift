// swift-tools-version:6.1
import PackageDescription

/// Settings every Gatehouse target shares.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Gatehouse",
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10)],
    products: [
        .executable(name: "gatehouse", targets: ["GatehouseCLI"]),
        .library(name: "GatehouseServer", targets: ["GatehouseServer"]),
        .library(name: "Gatehouse", targets: ["Gatehouse"]),
        .library(name: "GatehouseWire", targets: ["GatehouseWire"]),
        .executable(name: "argon2-bench", targets: ["Argon2Bench"]),
        .executable(name: "enumeration-timing", targets: ["EnumerationTiming"]),
        .executable(name: "gatehouse-example", targets: ["GatehouseExample"]),
        .executable(name: "gatehouse-native-example", targets: ["GatehouseNativeExample"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // `swift package generate-documentation --target Gatehouse`: the SDK reference (Sources/Gatehouse/Gatehouse.docc).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        // The wire contract shared by server and SDK: Codable bodies, error codes, envelopes. Foundation only.
        .target(name: "GatehouseWire", swiftSettings: swiftSettings),

        // The SDK: Foundation (and FoundationNetworking on Linux) and the wire types, nothing else, so that it
        // builds for iOS and macOS apps without pulling in the server's dependencies.
        .target(name: "Gatehouse", dependencies: ["GatehouseWire"], swiftSettings: swiftSettings),

        // Argon2id (RFC 9106) and BLAKE2b in pure Swift, and the verification of other systems' Argon2 variants and
        // bcrypt (imported password hashes). Compiled with optimisation even in debug builds:
        // an unoptimised Argon2 is ~50x slower, which would make `swift run gatehouse` and the tests crawl.
        .target(
            name: "GatehouseArgon2",
            swiftSettings: swiftSettings + [.unsafeFlags(["-O", "-enforce-exclusivity=unchecked"])]
        ),

        // The domain both protocols call: accounts, logins, sessions, native flows, policy and audit, with the
        // configuration, token, provider and function types they need and the store protocol. No HTTP server, NIO
        // or database driver: the compiler keeps the flow one way (façade → domain → store). Metrics through
        // swift-metrics' CoreMetrics API only (the server gives it a factory); no Prometheus.
        .target(
            name: "GatehouseDomain",
            dependencies: [
                "GatehouseWire",
                "GatehouseArgon2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Mustache", package: "swift-mustache"),
                // The metrics API only (counters), never a backend: the server chooses where they go.
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            exclude: ["Resources"],
            swiftSettings: swiftSettings,
            plugins: ["EmbedResources"]
        ),

        // The server as a library: configuration loading, HTTP façades, store implementations, mail delivery.
        .target(
            name: "GatehouseServer",
            dependencies: [
                "GatehouseDomain",
                "GatehouseWire",
                "GatehouseArgon2",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // For the SQLite library it builds (its module VaporCSQLite), which SQLiteHandle calls directly.
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            exclude: ["Resources"],
            swiftSettings: swiftSettings,
            plugins: ["EmbedResources"]
        ),

        // Compiles a target's `Resources/` files into it as string constants (`EmbeddedResources`), so the `gatehouse`
        // binary is one file that runs wherever it is copied (a resource bundle must sit beside the executable).
        .plugin(name: "EmbedResources", capability: .buildTool(), dependencies: ["EmbedResourcesTool"]),
        .executableTarget(name: "EmbedResourcesTool"),

        // `gatehouse` executable: parses the command line and wires configuration to GatehouseServer.
        .executableTarget(
            name: "GatehouseCLI",
            dependencies: [
                "GatehouseDomain",
                "GatehouseServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings,
            // With the Swift runtime linked in (`--static-swift-stdlib`, as the release binary is built), swiftc asks
            // the linker to export every symbol for `dlopen`ed code to bind to: 52,000 dynamic symbols, which the
            // loader reads at each start (about 1 MB of the idle server's memory). Nothing is loaded into gatehouse,
            // and a fully static Swift executable has no such table either.
            linkerSettings: [.unsafeFlags(["-Xlinker", "--no-export-dynamic"], .when(platforms: [.linux], configuration: .release))]
        ),

        // A terminal program that signs up, confirms, signs in and out with the SDK against `gatehouse serve`.
        .executableTarget(
            name: "GatehouseExample",
            dependencies: ["Gatehouse"],
            path: "Examples/GatehouseExample",
            swiftSettings: swiftSettings
        ),

        // The same with the native auth client: sign-up with a code, password reset, sign-in.
        .executableTarget(
            name: "GatehouseNativeExample",
            dependencies: ["Gatehouse"],
            path: "Examples/GatehouseNativeExample",
            swiftSettings: swiftSettings
        ),

        .executableTarget(
            name: "Argon2Bench",
            dependencies: ["GatehouseArgon2"],
            path: "Benchmarks/Argon2Bench",
            swiftSettings: swiftSettings
        ),

        // Known vs unknown accounts: the timing difference an attacker could measure (issue 8, point 3).
        .executableTarget(
            name: "EnumerationTiming",
            dependencies: [
                "GatehouseDomain",
                "GatehouseServer",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Benchmarks/EnumerationTiming",
            swiftSettings: swiftSettings
        ),

        // Helpers the test targets share: the throwaway database per test, child processes, a test identity provider,
        // the gate that holds answers back (the test clock is the domain's ManualClock).
        .target(
            name: "GatehouseTestSupport",
            dependencies: [
                "GatehouseDomain",
                "GatehouseServer",
                "GatehouseWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Tests/GatehouseTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatehouseTests",
            dependencies: ["Gatehouse", "GatehouseDomain", "GatehouseTestSupport", "GatehouseWire"],
            swiftSettings: swiftSettings
        ),
        // Code in the shapes of MSAL's and realm-swift's documentation, with `import Gatehouse`: it must compile
        // (the test command builds it), and the end-to-end tests drive it against a live server.
        .target(
            name: "SourceCompatibilitySamples",
            dependencies: ["Gatehouse"],
            path: "Tests/SourceCompatibilitySamples",
            swiftSettings: swiftSettings
        ),
        // The SDK against a live server on a loopback port.
        .testTarget(
            name: "GatehouseEndToEndTests",
            dependencies: [
                "Gatehouse",
                "SourceCompatibilitySamples",
                "GatehouseDomain",
                "GatehouseServer",
                "GatehouseTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatehouseArgon2Tests",
            dependencies: ["GatehouseArgon2"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatehouseServerTests",
            dependencies: [
                "GatehouseDomain",
                "GatehouseServer",
                "GatehouseTestSupport",
                "GatehouseWire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
