// enumeration-timing: how much does an answer's timing tell about whether an account exists?
//
//   swift run -c release enumeration-timing [--rounds N] [--hash-rounds N] [--only NAME]
//
// Starts Gatehouse in this process on a loopback port (SQLite in a temporary folder, the default Argon2id
// parameters, rate limits and login delays off so that every request does its full work), makes one confirmed
// account, and then times, over real HTTP, pairs of requests that differ only in whether the address has an account:
//
//   - a Client API login with a wrong password;
//   - `reset/send` (a reset email, or for an unknown address the same statements rolled back);
//   - `register` (a taken address: the owner is mailed; a new one: an account is made), and `confirm/send`;
//   - `confirm/call` and `reset/call` of an app whose functions run after the answer;
//   - native sign-up start with a password (a taken address vs a new one), sign-in start, and the sign-in
//     challenge of a client that takes codes (a code emailed vs the same statements rolled back).
//
// Known and unknown requests alternate, so a machine that slows down slows both alike. Prints, per scenario, the
// median and p90 of each side and the difference of the medians in milliseconds and as a share of the median.

import AsyncHTTPClient
import Foundation
import GatehouseDomain
import GatehouseServer
import Logging
import NIOCore
import NIOHTTP1

struct Options {
    var rounds = 300
    var hashRounds = 60
    /// Only the scenarios whose name contains this.
    var only: String?
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = CommandLine.arguments.dropFirst()
    while let flag = arguments.popFirst() {
        if flag == "--only", let name = arguments.popFirst() {
            options.only = name
            continue
        }
        guard let value = arguments.popFirst().flatMap(Int.init), value > 0 else {
            FileHandle.standardError.write(Data("usage: enumeration-timing [--rounds N] [--hash-rounds N] [--only NAME]\n".utf8))
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
    /// The body of round `round` for a known (true) or unknown address: a new address each round where a request
    /// would make the unknown one known (a registration), a fresh flow where a step needs one.
    var body: @Sendable (_ known: Bool, _ round: Int) async throws -> String
    var rounds: Int

    init(name: String, path: String, contentType: String, known: String, unknown: String, rounds: Int) {
        self.init(name: name, path: path, contentType: contentType, rounds: rounds) { isKnown, _ in isKnown ? known : unknown }
    }

    init(name: String, path: String, contentType: String, rounds: Int, body: @escaping @Sendable (Bool, Int) async throws -> String) {
        (self.name, self.path, self.contentType, self.rounds, self.body) = (name, path, contentType, rounds, body)
    }
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
// An app whose confirmation and reset functions decide (here: closures that answer "pending" at once).
var functionApp = app
functionApp.id = "timing-fn"
functionApp.localUserpass = LocalUserpassConfiguration(confirmation: .function)
functionApp.localUserpass?.reset = .function
functionApp.nativeAuth = nil
let configuration = GatehouseConfiguration(
    server: ServerSettings(host: "127.0.0.1", port: 0),
    database: DatabaseSettings(url: .sqliteFile(folder.appendingPathComponent("timing.sqlite").path)),
    apps: [app, functionApp]
)
var logger = Logger(label: "enumeration-timing")
logger.logLevel = .critical  // the shutdown at the end logs cancellations
let functions = FunctionHandlers(confirmation: { _ in .pending }, reset: { _ in .pending })
let gatehouse = try await AuthServer.open(configuration: configuration, logger: logger, functions: functions)
let (portStream, portContinuation) = AsyncStream.makeStream(of: Int.self)
let server = Task { try await gatehouse.run(onServerRunning: { portContinuation.yield($0) }) }
guard let port = await portStream.first(where: { _ in true }) else { fatalError("the server did not start") }
let base = "http://127.0.0.1:\(port)"
let client = HTTPClient(eventLoopGroupProvider: .singleton)

let local = "\(base)/api/client/v2.0/app/timing/auth/providers/local-userpass"
let registered = try await time(client, "\(local)/register", body: #"{"email":"known@example.com","password":"a long enough secret"}"#, contentType: "application/json")
precondition(registered.status == 201, "registration failed: \(registered.status)")
let functionLocal = "\(base)/api/client/v2.0/app/timing-fn/auth/providers/local-userpass"
let pending = try await time(client, "\(functionLocal)/register", body: #"{"email":"known@example.com","password":"a long enough secret"}"#, contentType: "application/json")
precondition(pending.status == 201, "registration failed: \(pending.status)")

let native = "client_id=timing-client&challenge_type=oob%20password%20redirect&username="
let nativeBase = "\(base)/native/timing"
let form = "application/x-www-form-urlencoded"

/// A fresh sign-in flow's continuation token, for a client that takes codes only.
@Sendable func signInToken(_ email: String) async throws -> String {
    var request = HTTPClientRequest(url: "\(nativeBase)/oauth2/v2.0/initiate")
    request.method = .POST
    request.headers.add(name: "Content-Type", value: form)
    request.body = .bytes(ByteBuffer(string: "client_id=timing-client&challenge_type=oob%20redirect&username=\(email)"))
    let response = try await client.execute(request, timeout: .seconds(30))
    let body = try await response.body.collect(upTo: 1 << 20)
    let object = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
    guard let token = object?["continuation_token"] as? String else { fatalError("initiate answered \(response.status)") }
    return token.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
}
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
    Scenario(name: "native sign-in challenge", path: "\(nativeBase)/oauth2/v2.0/challenge", contentType: form, rounds: options.rounds) { known, _ in
        "client_id=timing-client&challenge_type=oob%20redirect&continuation_token="
            + (try await signInToken(known ? "known%40example.com" : "unknown%40example.com"))
    },
    Scenario(name: "native sign-up start", path: "\(nativeBase)/signup/v1.0/start", contentType: form, rounds: options.hashRounds) { known, round in
        native + (known ? "known%40example.com" : "new-signup-\(round)%40example.com") + "&password=a%20long%20enough%20secret"
    },
    Scenario(name: "register", path: "\(local)/register", contentType: "application/json", rounds: options.hashRounds) { known, round in
        #"{"email":""# + (known ? "known@example.com" : "new-\(round)@example.com") + #"","password":"a long enough secret"}"#
    },
    Scenario(
        name: "confirm/send", path: "\(local)/confirm/send", contentType: "application/json",
        known: #"{"email":"known@example.com"}"#, unknown: #"{"email":"unknown@example.com"}"#, rounds: options.rounds
    ),
    Scenario(
        name: "confirm/call (pending)", path: "\(functionLocal)/confirm/call", contentType: "application/json",
        known: #"{"email":"known@example.com"}"#, unknown: #"{"email":"unknown@example.com"}"#, rounds: options.rounds
    ),
    Scenario(
        name: "reset/call", path: "\(functionLocal)/reset/call", contentType: "application/json",
        known: #"{"email":"known@example.com","password":"a new long secret","arguments":[]}"#,
        unknown: #"{"email":"unknown@example.com","password":"a new long secret","arguments":[]}"#, rounds: options.hashRounds
    ),
]

print("enumeration-timing: known vs unknown account, medians over alternating requests (loopback HTTP, SQLite)")
print("scenario                  rounds   known p50/p90 ms   unknown p50/p90 ms   Δ p50 ms   Δ/p50")
for scenario in scenarios where options.only.map(scenario.name.contains) ?? true {
    // Warm-up: the first requests pay for connections, caches and the hasher's memory.
    for warmup in 0..<3 {
        _ = try await time(client, scenario.path, body: try await scenario.body(true, -1 - warmup), contentType: scenario.contentType)
        _ = try await time(client, scenario.path, body: try await scenario.body(false, -1 - warmup), contentType: scenario.contentType)
    }
    var known: [Double] = []
    var unknown: [Double] = []
    var statuses: [Bool: Set<UInt>] = [:]
    for round in 0..<scenario.rounds {
        // Alternate which goes first, so that neither side always follows the other.
        let order = round.isMultiple(of: 2) ? [true, false] : [false, true]
        for isKnown in order {
            let body = try await scenario.body(isKnown, round)
            let sample = try await time(client, scenario.path, body: body, contentType: scenario.contentType)
            precondition(sample.status < 500, "\(scenario.name) answered \(sample.status)")
            if isKnown { known.append(sample.ms) } else { unknown.append(sample.ms) }
            statuses[isKnown, default: []].insert(sample.status)
        }
    }
    // The answers themselves must not differ; the timing is what this measures.
    precondition(statuses[true] == statuses[false], "\(scenario.name): known \(statuses[true]!) vs unknown \(statuses[false]!)")
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
