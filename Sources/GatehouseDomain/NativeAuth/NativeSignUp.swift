import Foundation
import GatehouseWire
import Logging

/// Sign-up: `signup/v1.0/start` → `challenge` (code emailed) → `continue` with the code → [`credential_required`
/// → `challenge` answers `password` → `continue` with the password] → [`attributes_required` → `continue` with
/// attributes] → 200 with the token for `/token grant_type=continuation_token`.
extension NativeAuthService {
    /// `signup/v1.0/start`.
    package func signUpStart(client: Client, request: NativeAuthRequest) async throws -> NativeStep {
        let types = try challengeTypes(request)
        let email = try username(request)
        try await env.checkRateLimit(.registration, app: client.app, account: email.normalized)
        let settings = client.settings
        guard types.contains(.oob) else {
            return redirect("this app verifies email addresses with a one-time code, and the client does not take codes (oob)", client: client)
        }
        if settings.requiresPassword, !types.contains(.password) {
            return redirect("this app requires a password, and the client does not take passwords", client: client)
        }
        let password = request.password
        if password != nil, !settings.signUpMethods.contains(.emailPassword) {
            throw NativeFlowError.invalidRequest("this app signs up with email codes only; send no password")
        }
        let attributes = try parseAttributes(request.attributes, settings: settings)
        if let password { try checkNewPassword(password, email: email.normalized, client: client) }
        // A pending account (someone's unconfirmed registration) does not stop a sign-up: the code proves the mailbox,
        // and the sign-up restarts that account. A confirmed one is refused only where the app reveals user existence;
        // otherwise the flow goes on, and its "code" email tells the owner someone tried (``sendCode``).
        if client.app.revealUserExistence, let account = try await env.store.emailAccount(appId: client.app.id, email: email.normalized),
            account.confirmedAt != nil
        {
            throw NativeFlowError.userAlreadyExists
        }
        // Hashing is slow; it runs before the flow is written and never inside a transaction.
        let hash = try await password.asyncMap { try await hashNewPassword($0, email: email.normalized, client: client) }
        let token = try await startFlow(
            .signUp, client: client, email: email, userId: nil, challengeTypes: types, passwordHash: hash, attributes: attributes
        )
        return .next(continuationToken: token.encoded)
    }

    /// `signup/v1.0/challenge`: sends the first code, sends another (resend), or asks for the password.
    package func signUpChallenge(client: Client, request: NativeAuthRequest) async throws -> NativeStep {
        let types = try challengeTypes(request)
        let (flow, token) = try await loadFlow(request, client: client, kinds: [.signUp], steps: [.started, .codeSent, .passwordNeeded])
        if flow.step == .passwordNeeded {
            guard types.contains(.password) else {
                return redirect("this app requires a password, and the client does not take passwords", client: client)
            }
            let (_, next) = try await advance(flow, from: token, to: .password, client: client)
            return .passwordRequired(continuationToken: next.encoded)
        }
        guard types.contains(.oob) else {
            return redirect("this app verifies email addresses with a one-time code, and the client does not take codes (oob)", client: client)
        }
        return try await sendCode(flow, token: token, client: client)
    }

    /// `signup/v1.0/continue` with `grant_type` `oob`, `password` or `attributes`.
    package func signUpContinue(client: Client, request: NativeAuthRequest) async throws -> NativeStep {
        let grant = try request.required(\.grantType, "grant_type")
        var flow: NativeFlowRecord
        let token: OpaqueToken
        switch NativeAuthGrantType(rawValue: grant) {
        case .oob:
            (flow, token) = try await loadFlow(request, client: client, kinds: [.signUp], steps: [.codeSent])
            try await checkCode(flow, token: token, client: client, request: request)
            flow.verified = true
            flow.codeHash = nil
        case .password:
            (flow, token) = try await loadFlow(request, client: client, kinds: [.signUp], steps: [.password])
            flow.passwordHash = try await hashNewPassword(try request.required(\.password, "password"), email: flow.username, client: client)
        case .attributes:
            (flow, token) = try await loadFlow(request, client: client, kinds: [.signUp], steps: [.attributes])
            let given = try parseAttributes(try request.required(\.attributes, "attributes"), settings: client.settings)
            flow.attributes.merge(given) { _, new in new }
        default:
            throw NativeFlowError.invalidContinuationToken("grant_type '\(grant.prefix(64))' does not continue a sign-up")
        }
        return try await nextSignUpStep(flow, token: token, client: client)
    }

    /// After a successful `continue`: ask for what is still missing, or create the account.
    private func nextSignUpStep(_ flow: NativeFlowRecord, token: OpaqueToken, client: Client) async throws -> NativeStep {
        let settings = client.settings
        if settings.requiresPassword, flow.passwordHash == nil {
            let (_, next) = try await advance(flow, from: token, to: .passwordNeeded, client: client)
            throw NativeFlowError.credentialRequired(continuationToken: next.encoded)
        }
        let missing = settings.attributes.filter { $0.required && (flow.attributes[$0.name] ?? "").isEmpty }
        if !missing.isEmpty {
            let (_, next) = try await advance(flow, from: token, to: .attributes, client: client)
            throw NativeFlowError.attributesRequired(
                missing.map {
                    NativeAuthRequiredAttribute(name: $0.name, type: $0.type, required: true, options: $0.regex.map { .init(regex: $0) })
                },
                continuationToken: next.encoded
            )
        }
        // Everything is there: the account is created in the transaction that moves the flow on.
        let now = env.clock.now
        let userId = Secrets.objectID(at: now)
        guard let email = EmailAddress(flow.email) else { throw NativeFlowError.invalidParameter("username") }
        // Confirmed and proven: the code proved the mailbox.
        let (user, identity, account) = EmailPasswordService.newAccount(
            userId: userId, app: client.app, email: email, passwordHash: flow.passwordHash ?? "", confirmed: true, proven: true,
            profile: flow.attributes.mapValues(JSONValue.string), now: now
        )
        var completed = flow
        completed.userId = userId
        let (_, next) = try await advance(
            completed, from: token, to: .completed, client: client, effects: [.createAccount(user, identity, account)]
        )
        env.logger.info("user registered", metadata: ["app": "\(client.app.id)", "user": "\(userId)", "via": "native auth"])
        return .next(continuationToken: next.encoded, expiresIn: settings.continuationTokenTTL)
    }

    /// The app's attributes found in `text` (a JSON object), validated. Unknown names are ignored; a list of
    /// strings (a multi-select) is joined with commas; numbers and booleans are taken as their text. Any invalid
    /// value fails them all as `attribute_validation_failed`, naming each. Both `signup/v1.0/start` and
    /// `continue` with `grant_type=attributes` read attributes here and nowhere else, before anything is written.
    ///
    /// Refused, as `attribute_validation_failed`: a text that names one key twice, in any object (JSON parsers
    /// disagree on which value wins, so the text is not read one way; the error names that key); a value with a
    /// character ``isRefusedInAttribute(_:)`` refuses, however it arrived (a JSON escape such as `\u0000` included),
    /// or a line break; an empty required value; one over 1,024 Unicode scalars (not characters: one emoji sequence
    /// may join thousands); one its regex does not match whole. A text nested deeper than an object of arrays is
    /// `invalid_request` before it is decoded.
    package func parseAttributes(_ text: String?, settings: NativeAuthSettings) throws(NativeFlowError) -> [String: String] {
        guard let text else { return [:] }
        let data = Data(text.utf8)
        guard Self.nestingDepth(data) <= 2, case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: data) else {
            throw .invalidRequest("attributes must be a JSON object, like {\"displayName\":\"Ada\"}")
        }
        switch StrictJSON.first(in: data) {
        case .duplicate(let name)?: throw .attributeValidationFailed([name])
        case .unterminated?, .notJSON?: throw .invalidRequest("attributes must be a JSON object, like {\"displayName\":\"Ada\"}")
        case nil: break
        }
        var values: [String: String] = [:]
        var invalid: [String] = []
        for attribute in settings.attributes {
            guard let raw = object[attribute.name] else { continue }
            let value: String?
            switch raw {
            case .string(let s): value = s
            case .int(let n): value = String(n)
            case .double(let n): value = String(n)
            case .bool(let b): value = String(b)
            case .array(let items):
                let strings = items.compactMap { if case .string(let s) = $0 { s } else { nil } }
                value = strings.count == items.count ? strings.joined(separator: ",") : nil
            case .null, .object: value = nil
            }
            guard let value, value.unicodeScalars.count <= 1024, !value.contains(where: { $0.isNewline }),
                !value.unicodeScalars.contains(where: Self.isRefusedInAttribute),
                attribute.regex.map({ Self.value(value, matches: $0) }) ?? true,
                !(attribute.required && value.trimmingCharacters(in: .whitespaces).isEmpty)
            else {
                invalid.append(attribute.name)
                continue
            }
            values[attribute.name] = value
        }
        if !invalid.isEmpty { throw .attributeValidationFailed(invalid) }
        return values
    }

    /// True for a character no attribute value may hold. Attributes are single-line text (Gatehouse's only
    /// attribute type is `string`) that reaches the profile, the id token's `name` and whatever displays them, so:
    /// - every control character (Unicode general category Cc): C0 U+0000–U+001F (NUL and tab included), DEL
    ///   U+007F and C1 U+0080–U+009F;
    /// - every invisible bidirectional formatting character, which can make a value display as something other
    ///   than what it holds: the embeddings and overrides U+202A–U+202E, the isolates U+2066–U+2069, and the marks
    ///   U+200E, U+200F and U+061C. Right-to-left letters themselves are ordinary text and allowed.
    /// - every other invisible format character (category Cf: zero-width space U+200B, U+FEFF, the soft hyphen, tag
    ///   characters that can smuggle hidden text, …) but the zero-width joiner U+200D, which builds emoji sequences;
    /// - private-use and unassigned code points (noncharacters such as U+FFFF among them): nobody can tell what they
    ///   show.
    package static func isRefusedInAttribute(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true
        case 0x200D: return false
        default:
            switch scalar.properties.generalCategory {
            case .format, .privateUse, .unassigned, .surrogate: return true
            default: return false
            }
        }
    }

    /// The deepest nesting of objects and arrays in the JSON text `data`, strings skipped: read before the text is
    /// decoded, so that a deep text costs no more than its bytes.
    package static func nestingDepth(_ data: Data) -> Int {
        var depth = 0, deepest = 0, inString = false, escaped = false
        for byte in data {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                deepest = max(deepest, depth)
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            default: break
            }
        }
        return deepest
    }

    /// True when the whole of `value` matches `pattern` (checked to compile when the configuration loads).
    private static func value(_ value: String, matches pattern: String) -> Bool {
        guard let regex = try? Regex(pattern), let match = try? regex.wholeMatch(in: value) else { return false }
        return match.range == value.startIndex..<value.endIndex
    }
}

extension Optional {
    /// `map` with an async transform.
    package func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
