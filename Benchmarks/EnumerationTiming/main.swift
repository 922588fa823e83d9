// enumeration-timing: how much does an answer's timing tell about whether an account exists?
//
//   swift run -c release enumeration-timing [--rounds N] [--hash-rounds N]
//
// Starts Gatehouse in this process on a loopback port (SQLite in a temporary folder, the default Argon2id
// parameters, rate limits and login delays off so that every request does its full work), makes one confirmed
// account, and then times, over real HTTP, pairs of requests that differ only in whether the address has an account:
//
//   - a Client API login with a wrong password;
//   - `reset/send` (a reset email, or for an unknown address the same statements rolled back);
//   - a native auth sign-in start.
//
// Known and unknown requests alternate, so a machine that slows down slows both alike. Prints, per scenario, the
// median and p90 of each side and the difference of the medians in milliseconds and as a share of the median.

import AsyncHTTPClient
import Foundation
import GatehouseServer
import Logging
import NIOCore
import NIOHTTP1

struct Options {
    var rounds = 300
    var hashRounds = 60
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = CommandLine.arguments.dropFirst()
    while let flag = arguments.popFirst() {
        guard let value = arguments.popFirst().flatMap(Int.init), value > 0 else {
            FileHandle.standardError.write(Data("usage: enumeration-timing [--rounds N] [--hash-rounds N]\n".utf8))
            exit(64)
        }
        switch flag {
        case "--rounds": options.rounds = value
        case "--hash-rounds": options.hashRounds = value
        default:
            FileHandle.standardError.write(Data("unknown option \(flag)\n".utf8))
            exit(64)
        }
    }
    return options
}

/// Milliseconds of one request, measured around the whole exchange.
func time(_ client: HTTPClient, _ url: String, body: String, contentType: String) async throws -> (ms: Double, status: UInt) {
    var request = HTTPClientRequest(url: url)
    request.method = .POST
    request.headers.add(name: "Content-Type", value: contentType)
    request.body = .bytes(ByteBuffer(string: body))
    let start = ContinuousClock.now
    let response = try await client.execute(request, timeout: .seconds(30))
    _ = try await response.body.collect(upTo: 1 << 20)
    let elapsed = ContinuousClock.now - start
    return (Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15, response.status.code)
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}

struct Scenario {
    var name: String
    var path: String
    var contentType: String
    var known: String
    var unknown: String
    var rounds: Int
}

let options = parseOptions()
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-timing-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }

var app = AppSettings(id: "timing", localUserpass: LocalUserpassConfiguration(confirmation: .auto))
app.rateLimits.enabled = false
app.loginBackoff.enabled = false
app.emailLimit = 1000
app.emailLimitWindow = 1
app.nativeAuth = NativeAuthSettings(clientIds: ["timing-client"])
let configuration = GatehouseConfiguration(
    server: ServerSettings(host: "127.0.0.1", port: 0),
    database: DatabaseSettings(url: .sqliteFile(folder.appendingPathComponent("timing.sqlite").path)),
    apps: [app]
)
var logger = Logger(label: "enumeration-timing")
logger.logLevel = .critical  // the shutdown at the end logs cancellations
let gatehouse = try await AuthServer.open(configuration: configuration, logger: logger)
let (portStream, portContinuation) = AsyncStream.makeStream(of: Int.self)
let server = Task { try await gatehouse.run(onServerRunning: { portContinuation.yield($0) }) }
guard let port = await portStream.first(where: { _ in true }) else { fatalError("the server did not start") }
let base = "http://127.0.0.1:\(port)"
let client = HTTPClient(eventLoopGroupProvider: .singleton)

let local = "\(base)/api/client/v2.0/app/timing/auth/providers/local-userpass"
let registered = try await time(client, "\(local)/register", body: #"{"email":"known@example.com","password":"a long enough secret"}"#, contentType: "application/json")
precondition(registered.status == 201, "registration failed: \(registered.status)")

let native = "client_id=timing-client&challenge_type=oob%20password%20redirect&username="
let scenarios = [
    Scenario(
        name: "login, wrong password", path: "\(local)/login", contentType: "application/json",
        known: #"{"username":"known@example.com","password":"not the secret"}"#,
        unknown: #"{"username":"unknown@example.com","password":"not the secret"}"#, rounds: options.hashRounds
    ),
    Scenario(
        name: "reset/send", path: "\(local)/reset/send", contentType: "application/json",
        known: #"{"email":"known@example.com"}"#, unknown: #"{"email":"unknown@example.com"}"#, rounds: options.rounds
    ),
    Scenario(
        name: "native sign-in start", path: "\(base)/native/timing/oauth2/v2.0/initiate", contentType: "application/x-www-form-urlencoded",
        known: native + "known%40example.com", unknown: native + "unknown%40example.com", rounds: options.rounds
    ),
]

print("enumeration-timing: known vs unknown account, medians over alternating requests (loopback HTTP, SQLite)")
print("scenario                  rounds   known p50/p90 ms   unknown p50/p90 ms   Δ p50 ms   Δ/p50")
for scenario in scenarios {
    // Warm-up: the first requests pay for connections, caches and the hasher's memory.
    for _ in 0..<3 {
        _ = try await time(client, scenario.path, body: scenario.known, contentType: scenario.contentType)
        _ = try await time(client, scenario.path, body: scenario.unknown, contentType: scenario.contentType)
    }
    var known: [Double] = []
    var unknown: [Double] = []
    for round in 0..<scenario.rounds {
        // Alternate which goes first, so that neither side always follows the other.
        let order = round.isMultiple(of: 2) ? [true, false] : [false, true]
        for isKnown in order {
            let sample = try await time(client, scenario.path, body: isKnown ? scenario.known : scenario.unknown, contentType: scenario.contentType)
            if isKnown { known.append(sample.ms) } else { unknown.append(sample.ms) }
        }
    }
    let (k50, u50) = (percentile(known, 0.5), percentile(unknown, 0.5))
    let delta = u50 - k50
    print(
        scenario.name.padding(toLength: 26, withPad: " ", startingAt: 0)
            + String(format: "%6d   %7.2f / %7.2f   %8.2f / %7.2f   %+8.3f   %+6.1f%%", scenario.rounds, k50, percentile(known, 0.9), u50, percentile(unknown, 0.9), delta, 100 * delta / k50)
    )
}

try await client.shutdown()
server.cancel()
_ = await server.result
