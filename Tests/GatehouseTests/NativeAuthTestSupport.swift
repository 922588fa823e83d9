import Foundation
import GatehouseDomain
import GatehouseTestSupport
import Testing

@testable import Gatehouse
import GatehouseWire

// The scripted server every native auth SDK test talks to: each request must be the next one of the script, with
// exactly the expected form fields, and gets the canned answer. (End-to-end tests against the real server are
// elsewhere.)

/// A canned exchange: the endpoint and exact body the SDK must send, and the answer.
struct Exchange: Sendable {
    enum Reply: Sendable {
        case answer(status: Int, body: String, headers: [String: String])
        /// No connection can be made (no HTTP answer; the request never reached the server).
        case unreachable
        /// The request went out and no answer came back (it timed out): whether the server acted is unknown.
        case lost
        /// Waits until the gate opens, then answers.
        case gated(Gate, status: Int, body: String)
    }

    var endpoint: NativeAuthEndpoint
    var fields: [String: String]
    var reply: Reply
}

/// One request as the transport saw it.
struct SeenRequest: Sendable {
    var method: String
    var url: String
    var headers: [String: String]
    var fields: [String: String]
}


final class ScriptedTransport: NetworkTransport, Sendable {
    static let base = "http://127.0.0.1:9090/native/my-app/"

    private struct State {
        var script: [Exchange]
        var seen: [SeenRequest] = []
        var problems: [String] = []
        var arrivals: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state: Locked<State>

    init(_ script: [Exchange] = []) { state = Locked(State(script: script)) }

    /// Adds exchanges at the end of the script.
    func then(_ exchanges: Exchange...) { then(exchanges) }
    func then(_ exchanges: [Exchange]) { state.withLock { $0.script += exchanges } }

    var seen: [SeenRequest] { state.withLock { $0.seen } }
    var problems: [String] { state.withLock { $0.problems } }
    var unused: Int { state.withLock { $0.script.count } }

    /// Returns once `count` requests have arrived.
    func waitForRequests(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.seen.count >= count { return true }
                state.arrivals.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let fields = request.body.flatMap(FormURLEncoding.decode) ?? [:]
        let seen = SeenRequest(method: request.method, url: request.url.absoluteString, headers: request.headers, fields: fields)
        let (exchange, ready) = state.withLock { state -> (Exchange?, [CheckedContinuation<Void, Never>]) in
            state.seen.append(seen)
            let ready = state.arrivals.filter { $0.count <= state.seen.count }.map(\.continuation)
            state.arrivals.removeAll { $0.count <= state.seen.count }
            guard !state.script.isEmpty else {
                state.problems.append("unexpected request \(seen.url) \(fields)")
                return (nil, ready)
            }
            let exchange = state.script.removeFirst()
            let expectedURL = Self.base + exchange.endpoint.rawValue
            if seen.url != expectedURL { state.problems.append("URL \(seen.url), expected \(expectedURL)") }
            if seen.method != "POST" { state.problems.append("method \(seen.method)") }
            if request.headers["Content-Type"] != "application/x-www-form-urlencoded" { state.problems.append("content type \(request.headers)") }
            if request.headers["client-request-id"].flatMap(UUID.init(uuidString:)) == nil { state.problems.append("no client-request-id") }
            if fields != exchange.fields {
                state.problems.append(
                    "\(exchange.endpoint.rawValue) body \(fields.sorted { $0.key < $1.key }), expected \(exchange.fields.sorted { $0.key < $1.key })"
                )
            }
            return (exchange, ready)
        }
        for continuation in ready { continuation.resume() }
        guard let exchange else { return TransportResponse(statusCode: 599, body: Data("no script".utf8)) }
        switch exchange.reply {
        case .answer(let status, let body, let headers):
            return TransportResponse(
                statusCode: status,
                headers: headers.merging(["Content-Type": "application/json"]) { a, _ in a },
                body: Data(body.utf8)
            )
        case .unreachable:
            throw URLError(.cannotConnectToHost)
        case .lost:
            throw URLError(.timedOut)
        case .gated(let gate, let status, let body):
            await gate.wait()
            return TransportResponse(statusCode: status, headers: ["Content-Type": "application/json"], body: Data(body.utf8))
        }
    }
}


/// Records the waits between polls instead of waiting.
final class SleepRecorder: Sendable {
    private let waits = Locked<[TimeInterval]>([])
    var recorded: [TimeInterval] { waits.withLock { $0 } }
    func sleep(_ seconds: TimeInterval) { waits.withLock { $0.append(seconds) } }
}

/// A client against a scripted transport, with a test clock and no real sleeping.
struct Harness {
    let transport: ScriptedTransport
    let store: any UserStore
    let clock = ManualClock()
    let sleeps = SleepRecorder()
    let client: NativeAuthClient

    init(
        _ script: [Exchange] = [],
        store: any UserStore = InMemoryUserStore(),
        challengeTypes: NativeAuthChallengeTypes = [.oob, .password],
        capabilities: NativeAuthCapabilities = []
    ) {
        transport = ScriptedTransport(script)
        self.store = store
        client = NativeAuthClient(configuration: Self.configuration(transport, store, clock, sleeps, challengeTypes, capabilities))
    }

    /// Another client over the same store (an app restart).
    func restart() -> NativeAuthClient {
        NativeAuthClient(configuration: Self.configuration(transport, store, clock, sleeps, [.oob, .password], []))
    }

    private static func configuration(
        _ transport: ScriptedTransport,
        _ store: any UserStore,
        _ clock: ManualClock,
        _ sleeps: SleepRecorder,
        _ types: NativeAuthChallengeTypes,
        _ capabilities: NativeAuthCapabilities
    ) -> NativeAuthConfiguration {
        var configuration = NativeAuthConfiguration(
            baseURL: "http://127.0.0.1:9090/",
            appId: "my-app",
            clientId: "ios-app",
            challengeTypes: types,
            capabilities: capabilities,
            transport: transport,
            accountStore: store
        )
        configuration.now = { clock.now }
        configuration.sleep = { sleeps.sleep($0) }
        return configuration
    }

    /// The refresh token stored for the signed-in account now.
    var storedRefreshToken: String? { client.app.currentUser?.refreshToken }

    /// Every scripted exchange was used, and every request was the expected one.
    func verify(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(transport.problems == [], sourceLocation: sourceLocation)
        #expect(transport.unused == 0, "unused exchanges", sourceLocation: sourceLocation)
    }
}

// MARK: - Canned requests and answers

enum Form {
    static let types = "oob password redirect"
    static let scope = "openid profile offline_access"

    static func start(_ username: String, _ extra: [String: String] = [:]) -> [String: String] {
        ["client_id": "ios-app", "username": username, "challenge_type": types].merging(extra) { _, new in new }
    }

    static func challenge(_ token: String) -> [String: String] {
        ["client_id": "ios-app", "continuation_token": token, "challenge_type": types]
    }

    static func proceed(_ token: String, grant: String, _ extra: [String: String]) -> [String: String] {
        ["client_id": "ios-app", "continuation_token": token, "grant_type": grant].merging(extra) { _, new in new }
    }

    /// The revocation a sign-out sends for `refreshToken`.
    static func revoke(_ refreshToken: String) -> [String: String] {
        ["client_id": "ios-app", "token": refreshToken, "token_type_hint": "refresh_token"]
    }

    static func token(grant: String, _ extra: [String: String], scope: String = scope) -> [String: String] {
        var fields = ["client_id": "ios-app", "grant_type": grant, "scope": scope, "client_info": "true"]
        if grant != "oob" && grant != "refresh_token" { fields["challenge_type"] = types }
        return fields.merging(extra) { _, new in new }
    }
}

enum Reply {
    static func ok(_ body: String, headers: [String: String] = [:]) -> Exchange.Reply { .answer(status: 200, body: body, headers: headers) }

    static func continuation(_ token: String) -> Exchange.Reply { ok(#"{"continuation_token":"\#(token)"}"#) }

    static func codeSent(_ token: String) -> Exchange.Reply {
        ok(
            #"{"continuation_token":"\#(token)","challenge_type":"oob","binding_method":"prompt","challenge_channel":"email","challenge_target_label":"a***@e******e.com","code_length":8,"interval":60}"#
        )
    }

    static func passwordChallenge(_ token: String) -> Exchange.Reply { ok(#"{"continuation_token":"\#(token)","challenge_type":"password"}"#) }

    static let redirect = ok(#"{"challenge_type":"redirect","redirect_reason":"the app cannot do this"}"#)

    static func error(
        _ name: String,
        _ description: String = "",
        codes: [Int] = [],
        suberror: String? = nil,
        status: Int = 400,
        extra: String = "",
        headers: [String: String] = [:]
    ) -> Exchange.Reply {
        var body = #"{"error":"\#(name)","error_description":"\#(description)","error_codes":\#(codes),"error_uri":"https://errors.example/\#(name)""#
        if let suberror { body += #","suberror":"\#(suberror)""# }
        body += extra + "}"
        return .answer(status: status, body: body, headers: headers)
    }

    static func poll(_ status: String, _ token: String? = nil) -> Exchange.Reply {
        ok(token.map { #"{"status":"\#(status)","continuation_token":"\#($0)"}"# } ?? #"{"status":"\#(status)"}"#)
    }

    static func tokens(
        access: String = "at-1",
        refresh: String? = "rt-1",
        expiresIn: Int = 3600,
        scope: String = "openid profile offline_access",
        user: String = "u1"
    )
        -> Exchange.Reply
    {
        ok(tokensBody(access: access, refresh: refresh, expiresIn: expiresIn, scope: scope, user: user))
    }

    static func tokensBody(
        access: String = "at-1",
        refresh: String? = "rt-1",
        expiresIn: Int = 3600,
        scope: String = "openid profile offline_access",
        user: String = "u1"
    )
        -> String
    {
        let claims =
            #"{"iss":"http://127.0.0.1:9090","sub":"\#(user)","aud":"ios-app","exp":1800003600,"iat":1800000000,"preferred_username":"ada@example.com","email":"ada@example.com","name":"Ada","oid":"\#(user)","tid":"my-app"}"#
        let idToken = "eyJhbGciOiJFUzI1NiJ9.\(base64URL(claims)).c2ln"
        let clientInfo = base64URL(#"{"uid":"\#(user)","utid":"my-app"}"#)
        let refreshField = refresh.map { #","refresh_token":"\#($0)""# } ?? ""
        return
            #"{"token_type":"Bearer","scope":"\#(scope)","expires_in":\#(expiresIn),"access_token":"\#(access)"\#(refreshField),"id_token":"\#(idToken)","client_info":"\#(clientInfo)"}"#
    }

    static func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

// MARK: - Delegates

/// One delegate callback: the method, and what it got.
struct Event: Sendable {
    var method: String
    var error: (any NativeAuthError)?
    var state: (any Sendable)?
    var values: [String] = []
    var account: NativeAuthUserAccountResult?
    var token: NativeAuthTokenResult?

    /// The state, as `T`.
    func state<T>(_ type: T.Type, sourceLocation: SourceLocation = #_sourceLocation) throws -> T {
        try #require(state as? T, "\(method) got \(String(describing: state))", sourceLocation: sourceLocation)
    }
}

/// Implements every method of every native auth delegate and hands each callback to the test waiting for it.
@MainActor
final class Recorder: SignUpStartDelegate, SignUpVerifyCodeDelegate, SignUpResendCodeDelegate, SignUpPasswordRequiredDelegate,
    SignUpAttributesRequiredDelegate, SignInAfterSignUpDelegate, ResetPasswordStartDelegate, ResetPasswordVerifyCodeDelegate,
    ResetPasswordResendCodeDelegate, ResetPasswordRequiredDelegate, SignInAfterResetPasswordDelegate, SignInStartDelegate,
    SignInPasswordRequiredDelegate, SignInVerifyCodeDelegate, SignInResendCodeDelegate, CredentialsDelegate
{
    private var waiting: CheckedContinuation<Event, Never>?
    private(set) var events: [Event] = []

    /// Runs `start` and returns the first callback it causes (or a "no callback" event if the SDK made none).
    func next(_ start: () -> Void) async -> Event {
        await withCheckedContinuation { continuation in
            waiting = continuation
            DelegateCall.$afterDelivery.withValue({ self.deliveredWithoutCallback() }) { start() }
        }
    }

    private func deliveredWithoutCallback() {
        if waiting != nil { record(Event(method: "no callback")) }
    }

    private func record(_ event: Event) {
        MainActor.assertIsolated()
        events.append(event)
        waiting?.resume(returning: event)
        waiting = nil
    }

    private func code(_ method: String, _ state: any Sendable, _ sentTo: String, _ channel: NativeAuthChannelType, _ length: Int) {
        record(Event(method: method, state: state, values: [sentTo, channel.value, String(length)]))
    }

    func onSignUpStartError(error: SignUpStartError) { record(Event(method: #function, error: error)) }
    func onSignUpCodeRequired(newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int) {
        code(#function, newState, sentTo, channelTargetType, codeLength)
    }
    func onSignUpAttributesInvalid(attributeNames: [String]) { record(Event(method: #function, values: attributeNames)) }
    func onSignUpVerifyCodeError(error: VerifyCodeError, newState: SignUpCodeRequiredState?) {
        record(Event(method: #function, error: error, state: newState))
    }
    func onSignUpPasswordRequired(newState: SignUpPasswordRequiredState) { record(Event(method: #function, state: newState)) }
    func onSignUpAttributesRequired(attributes: [RequiredAttribute], newState: SignUpAttributesRequiredState) {
        record(Event(method: #function, state: newState, values: attributes.map(\.name)))
    }
    func onSignUpCompleted(newState: SignInAfterSignUpState) { record(Event(method: #function, state: newState)) }
    func onSignUpResendCodeError(error: ResendCodeError, newState: SignUpCodeRequiredState?) {
        record(Event(method: #function, error: error, state: newState))
    }
    func onSignUpResendCodeCodeRequired(newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int)
    {
        code(#function, newState, sentTo, channelTargetType, codeLength)
    }
    func onSignUpPasswordRequiredError(error: PasswordRequiredError, newState: SignUpPasswordRequiredState?) {
        record(Event(method: #function, error: error, state: newState))
    }
    func onSignUpAttributesRequiredError(error: AttributesRequiredError) { record(Event(method: #function, error: error)) }
    func onSignUpAttributesInvalid(attributeNames: [String], newState: SignUpAttributesRequiredState) {
        record(Event(method: #function, state: newState, values: attributeNames))
    }
    func onSignInAfterSignUpError(error: SignInAfterSignUpError) { record(Event(method: #function, error: error)) }
    func onSignInCompleted(result: NativeAuthUserAccountResult) { record(Event(method: #function, account: result)) }

    func onResetPasswordStartError(error: ResetPasswordStartError) { record(Event(method: #function, error: error)) }
    func onResetPasswordCodeRequired(
        newState: ResetPasswordCodeRequiredState,
        sentTo: String,
        channelTargetType: NativeAuthChannelType,
        codeLength: Int
    ) {
        code(#function, newState, sentTo, channelTargetType, codeLength)
    }
    func onResetPasswordVerifyCodeError(error: VerifyCodeError, newState: ResetPasswordCodeRequiredState?) {
        record(Event(method: #function, error: error, state: newState))
    }
    func onPasswordRequired(newState: ResetPasswordRequiredState) { record(Event(method: #function, state: newState)) }
    func onResetPasswordResendCodeError(error: ResendCodeError, newState: ResetPasswordCodeRequiredState?) {
        record(Event(method: #function, error: error, state: newState))
    }
    func onResetPasswordResendCodeRequired(
        newState: ResetPasswordCodeRequiredState,
        sentTo: String,
        channelTargetType: NativeAuthChannelType,
        codeLength: Int
    ) {
        code(#function, newState, sentTo, channelTargetType, codeLength)
    }
    func onResetPasswordRequiredError(error: PasswordRequiredError, newState: ResetPasswordRequiredState?) {
        record(Event(method: #function, error: error, state: newState))
    }
    func onResetPasswordCompleted(newState: SignInAfterResetPasswordState) { record(Event(method: #function, state: newState)) }
    func onSignInAfterResetPasswordError(error: SignInAfterResetPasswordError) { record(Event(method: #function, error: error)) }

    func onSignInStartError(error: SignInStartError) { record(Event(method: #function, error: error)) }
    func onSignInCodeRequired(newState: SignInCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int) {
        code(#function, newState, sentTo, channelTargetType, codeLength)
    }
    func onSignInPasswordRequired(newState: SignInPasswordRequiredState) { record(Event(method: #function, state: newState)) }
    func onSignInPasswordRequiredError(error: PasswordRequiredError, newState: SignInPasswordRequiredState?) {
        record(Event(method: #function, error: error, state: newState))
    }
    func onSignInVerifyCodeError(error: VerifyCodeError, newState: SignInCodeRequiredState?) {
        record(Event(method: #function, error: error, state: newState))
    }
    func onSignInResendCodeError(error: ResendCodeError, newState: SignInCodeRequiredState?) {
        record(Event(method: #function, error: error, state: newState))
    }
    func onSignInResendCodeCodeRequired(newState: SignInCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int)
    {
        code(#function, newState, sentTo, channelTargetType, codeLength)
    }

    func onAccessTokenRetrieveError(error: RetrieveAccessTokenError) { record(Event(method: #function, error: error)) }
    func onAccessTokenRetrieveCompleted(result: NativeAuthTokenResult) { record(Event(method: #function, token: result)) }
}

/// Runs `body` and returns the error it throws, typed.
func thrown<T: Sendable, E: Error>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws(E) -> T,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> E? {
    do {
        let value = try await body()
        Issue.record("expected an error, got \(value)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

/// A value a delegate hands over once; nil when the SDK finished without calling the delegate.
@MainActor final class OneShot<Value: Sendable> {
    private var continuation: CheckedContinuation<Value?, Never>?

    /// Runs `start` and waits for ``deliver(_:)``.
    func wait(_ start: () -> Void) async -> Value? {
        await withCheckedContinuation { continuation in
            self.continuation = continuation
            DelegateCall.$afterDelivery.withValue({ self.finish(nil) }) { start() }
        }
    }

    func deliver(_ value: Value) { finish(value) }

    private func finish(_ value: Value?) {
        continuation?.resume(returning: value)
        continuation = nil
    }
}
