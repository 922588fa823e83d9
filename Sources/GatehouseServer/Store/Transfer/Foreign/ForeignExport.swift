import Foundation
import GatehouseArgon2
import GatehouseDomain
import GatehouseWire

/// The export files of other auth systems that `gatehouse import --from` reads.
public enum ForeignExportFormat: String, Sendable, CaseIterable {
    /// `firebase auth:export users.json --format=json`: `{"users": [...]}`, with the project's hash parameters given
    /// apart (``FirebaseHashParameters``).
    case firebase
    /// Rows of Supabase's `auth.users`: a JSON array, JSON lines, or CSV with a header (`psql`'s `\copy … csv header`).
    case supabase
    /// Auth0: the bulk user export (JSON lines), its password-hash export, or the bulk import shape (a JSON array,
    /// with `password_hash` or `custom_password_hash`).
    case auth0
    /// A Keycloak realm export (`kc.sh export`): `{"users": [...]}` with each user's `credentials`.
    case keycloak
    /// CSV with a header: `email` (required), `password_hash`, `email_verified`, `disabled`, `id`, `name`,
    /// `custom_data` (a JSON object), `created_at` (ISO 8601).
    case csv
}

/// Firebase keeps a project's password-hash parameters out of its export: the console shows them (Authentication →
/// Users → ⋮ → Password hash parameters). Names as `firebase auth:import` takes them.
public struct FirebaseHashParameters: Sendable, Hashable {
    /// `SCRYPT` (Firebase's own, every project's default), `HMAC_SHA256`, `HMAC_SHA512`, `HMAC_SHA1`, `HMAC_MD5`,
    /// `PBKDF2_SHA256`, `PBKDF_SHA1` or `BCRYPT`.
    public var algorithm: String
    /// base64: the signer key for `SCRYPT`, the HMAC key for `HMAC_*`.
    public var key: String?
    /// base64; `SCRYPT` only.
    public var saltSeparator: String?
    /// `SCRYPT`: scrypt's r (1–64); `PBKDF2_*`: the rounds.
    public var rounds: Int?
    /// `SCRYPT`: log2 of scrypt's N (1–30).
    public var memoryCost: Int?
    /// `HMAC_*` with salts: `SALT_FIRST` or `PASSWORD_FIRST`.
    public var inputOrder: String?

    public init(algorithm: String, key: String? = nil, saltSeparator: String? = nil, rounds: Int? = nil, memoryCost: Int? = nil, inputOrder: String? = nil) {
        self.algorithm = algorithm
        self.key = key
        self.saltSeparator = saltSeparator
        self.rounds = rounds
        self.memoryCost = memoryCost
        self.inputOrder = inputOrder
    }

    /// The hash of one user, from the export's base64 `passwordHash` and `salt`.
    func hash(_ passwordHash: [UInt8], salt: [UInt8]) throws -> String {
        func base64(_ text: String?, _ name: String) throws -> [UInt8] {
            guard let text, let bytes = Data(base64Encoded: text) else { throw ExportFileError("--\(name) (base64) is required for \(algorithm)") }
            return Array(bytes)
        }
        let hash: ForeignPasswordHash?
        switch algorithm.uppercased() {
        case "SCRYPT":
            guard let rounds, let memoryCost else { throw ExportFileError("--rounds and --mem-cost are required for SCRYPT") }
            hash = ForeignPasswordHash(
                .firebaseScrypt(memoryCost: memoryCost, rounds: rounds, separator: try base64(saltSeparator ?? "", "salt-separator"), signerKey: try base64(key, "hash-key")),
                salt: salt, checksum: passwordHash
            )
        case "HMAC_SHA256", "HMAC_SHA512", "HMAC_SHA1", "HMAC_MD5":
            let digest = ForeignPasswordHash.Digest(rawValue: String(algorithm.lowercased().dropFirst(5)))!
            var saltFirst = false
            if !salt.isEmpty {
                switch inputOrder?.uppercased() {
                case "SALT_FIRST": saltFirst = true
                case "PASSWORD_FIRST": saltFirst = false
                default: throw ExportFileError("--hash-input-order SALT_FIRST or PASSWORD_FIRST is required for \(algorithm) with salts")
                }
            }
            hash = ForeignPasswordHash(.digest(digest, hmacKey: try base64(key, "hash-key"), saltFirst: saltFirst), salt: salt, checksum: passwordHash)
        case "PBKDF2_SHA256", "PBKDF_SHA1":
            guard let rounds else { throw ExportFileError("--rounds is required for \(algorithm)") }
            hash = ForeignPasswordHash(.pbkdf2(algorithm.uppercased() == "PBKDF_SHA1" ? .sha1 : .sha256, rounds: rounds), salt: salt, checksum: passwordHash)
        case "BCRYPT":
            return String(decoding: passwordHash, as: UTF8.self)
        default:
            throw ExportFileError("--hash-algo \(algorithm) is not one Gatehouse reads (SCRYPT, HMAC_SHA256, HMAC_SHA512, HMAC_SHA1, HMAC_MD5, PBKDF2_SHA256, PBKDF_SHA1, BCRYPT)")
        }
        guard let text = hash?.text else { throw ExportFileError("the hash parameters are out of range for \(algorithm)") }
        return text
    }

    /// Checks the parameters before the first user is read.
    func validate() throws {
        switch algorithm.uppercased() {
        case "SCRYPT":
            let keyLength = key.flatMap { Data(base64Encoded: $0) }?.count ?? 32
            _ = try hash(Array(repeating: 0, count: keyLength), salt: Array(repeating: 1, count: 16))
        case "PBKDF2_SHA256", "PBKDF_SHA1":
            _ = try hash(Array(repeating: 0, count: 32), salt: Array(repeating: 1, count: 16))
        case "BCRYPT":
            return
        default:
            // An HMAC's length is its digest's; whether salts need an order is known at the first salted user.
            let length = ["HMAC_SHA512": 64, "HMAC_SHA1": 20, "HMAC_MD5": 16][algorithm.uppercased()] ?? 32
            _ = try hash(Array(repeating: 0, count: length), salt: [])
        }
    }
}

/// One user read from another system's export, as Gatehouse will store them.
struct ForeignUser: Sendable, Hashable {
    /// The user's id in the source system: kept in their email/password identity's data as `source_user_id`.
    var sourceId: String?
    var email: EmailAddress
    /// A hash the login verifies (``ForeignPasswordHash/refusal(_:ownParameters:)`` finds none), or nil: the user sets a password through
    /// a password reset.
    var passwordHash: String?
    var emailVerified: Bool
    var disabled: Bool
    var name: String?
    var customData: [String: JSONValue]
    var createdAt: Date?
}

/// A record of an export: a user to import, or why it is not imported.
enum ForeignRecord: Sendable, Hashable {
    case user(ForeignUser)
    case skipped(sourceId: String?, email: String?, reason: String)
}

/// Reads the users of one export file, one record at a time.
struct ForeignExportReader {
    let format: ForeignExportFormat
    let firebase: FirebaseHashParameters?
    let now: Date
    let input: ByteInput
    private var source: Source?
    private var csvHeader: [String]?

    private enum Source {
        case array(JSONArrayElements)
        case lines(TextLines)
        case csv(CSVRecords)
    }

    /// The custom data a user may bring (it travels in every access token).
    static let maxCustomDataSize = 16 * 1024

    init(format: ForeignExportFormat, input: ByteInput, firebase: FirebaseHashParameters? = nil, now: Date) throws {
        if format == .firebase {
            guard let firebase else { throw ExportFileError("a Firebase export needs the project's hash parameters: --hash-algo, --hash-key, --salt-separator, --rounds, --mem-cost") }
            try firebase.validate()
        }
        self.format = format
        self.firebase = firebase
        self.input = input
        self.now = now
    }

    /// The next record, or nil at the end of the file. A record that cannot be read as a user is skipped with its
    /// reason; a file that is not of the format at all throws ``ExportFileError``.
    mutating func next() throws -> ForeignRecord? {
        if source == nil { source = try open() }
        switch source! {
        case .array(var elements):
            defer { source = .array(elements) }
            return try elements.next().map(record(json:))
        case .lines(var lines):
            defer { source = .lines(lines) }
            return try lines.next().map(record(json:))
        case .csv(var records):
            defer { source = .csv(records) }
            guard let fields = try records.next() else { return nil }
            guard let header = csvHeader else { throw ExportFileError("the CSV file has no header") }
            guard fields.count == header.count else {
                let email = header.firstIndex(of: "email").flatMap { $0 < fields.count ? fields[$0] : nil }
                return .skipped(sourceId: nil, email: email, reason: "has \(fields.count) fields where the header names \(header.count) (a field with a comma needs quotes)")
            }
            return record(row: Dictionary(zip(header, fields)) { first, _ in first })
        }
    }

    private mutating func open() throws -> Source {
        switch format {
        case .firebase, .keycloak:
            return .array(JSONArrayElements(input, key: "users"))
        case .supabase, .auth0:
            switch try input.peekAfterWhitespace() {
            case UInt8(ascii: "["): return .array(JSONArrayElements(input, key: nil))
            case UInt8(ascii: "{"): return .lines(TextLines(input))
            case nil: return .lines(TextLines(input))
            default:
                guard format == .supabase else { throw ExportFileError("an Auth0 file is JSON lines or a JSON array") }
                return try csv(known: Self.supabaseColumns)
            }
        case .csv:
            return try csv(known: Self.csvColumns)
        }
    }

    private mutating func csv(known: Set<String>) throws -> Source {
        var records = CSVRecords(input)
        guard let header = try records.next()?.map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) else {
            throw ExportFileError("the CSV file is empty")
        }
        guard header.contains("email") else { throw ExportFileError("the CSV header has no email column") }
        guard Set(header).count == header.count else { throw ExportFileError("the CSV header names a column twice") }
        if format == .csv {
            let unknown = header.filter { !known.contains($0) }
            guard unknown.isEmpty else {
                throw ExportFileError("unknown CSV columns \(unknown.joined(separator: ", ")); the columns are \(known.sorted().joined(separator: ", "))")
            }
        }
        csvHeader = header
        return .csv(records)
    }

    static let csvColumns: Set<String> = ["email", "password_hash", "email_verified", "disabled", "id", "name", "custom_data", "created_at"]
    static let supabaseColumns: Set<String> = [
        "id", "email", "encrypted_password", "email_confirmed_at", "confirmed_at", "raw_user_meta_data", "banned_until", "deleted_at",
        "is_anonymous", "created_at",
    ]

    // MARK: Records

    private func record(json bytes: [UInt8]) -> ForeignRecord {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)), case .object(let object) = value else {
            return .skipped(sourceId: nil, email: nil, reason: "is not a JSON object")
        }
        do {
            switch format {
            case .firebase: return try firebaseUser(object)
            case .supabase: return try supabaseUser(object.mapValues(Field.json))
            case .auth0: return try auth0User(object)
            case .keycloak: return try keycloakUser(object)
            case .csv: return .skipped(sourceId: nil, email: nil, reason: "is not a CSV record")
            }
        } catch let skip as Skip {
            return .skipped(sourceId: skip.sourceId, email: skip.email, reason: skip.reason)
        } catch {
            return .skipped(sourceId: nil, email: nil, reason: "\(error)")
        }
    }

    private func record(row: [String: String]) -> ForeignRecord {
        do {
            switch format {
            case .supabase: return try supabaseUser(row.mapValues(Field.text))
            default: return try csvUser(row)
            }
        } catch let skip as Skip {
            return .skipped(sourceId: skip.sourceId, email: skip.email, reason: skip.reason)
        } catch {
            return .skipped(sourceId: nil, email: nil, reason: "\(error)")
        }
    }

    private struct Skip: Error {
        var sourceId: String?
        var email: String?
        var reason: String
    }

    /// A value of a JSON record or a CSV field (where empty is absent and JSON objects come as text).
    private enum Field {
        case json(JSONValue)
        case text(String)

        var string: String? {
            switch self {
            case .json(.string(let text)): text.isEmpty ? nil : text
            case .json(.int(let number)): String(number)
            case .text(let text): text.isEmpty ? nil : text
            default: nil
            }
        }

        var bool: Bool? {
            switch self {
            case .json(.bool(let value)): value
            case .json(.int(let number)): number != 0
            case .json, .text: string.flatMap(ForeignExportReader.bool)
            }
        }

        var object: [String: JSONValue]? {
            switch self {
            case .json(.object(let object)): object
            case .json(.string(let text)), .text(let text):
                text.isEmpty ? nil : (try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)))?.objectValue
            default: nil
            }
        }
    }

    static func bool(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "t", "1", "yes", "y": true
        case "false", "f", "0", "no", "n", "": false
        default: nil
        }
    }

    /// An ISO 8601 date (with or without fractional seconds, `T` or a space, any offset), or milliseconds since 1970.
    /// A user's yes-or-no that takes away access (Auth0's `blocked`, Firebase's `disabled`): absent or `null` is no, and
    /// anything but a JSON boolean (`"true"`, `1`) skips the user, since reading it as no would let a blocked user in.
    private static func flag(_ value: JSONValue?, _ name: String, sourceId: String?, email: String?) throws -> Bool {
        switch value {
        case nil, .null?: return false
        case .bool(let flag)?: return flag
        case _?:
            throw Skip(sourceId: sourceId, email: email, reason: "its \(name) is not a JSON true or false")
        }
    }

    static func date(_ text: String?) -> Date? {
        guard let text, !text.isEmpty else { return nil }
        if let milliseconds = Int64(text) { return Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
        var normalized = text.replacingOccurrences(of: " ", with: "T")
        // PostgreSQL writes `+00` for an offset; ISO 8601 wants `+00:00`.
        if normalized.wholeMatch(of: /.+T.+[+-]\d\d/) != nil { normalized += ":00" }
        for style in [Date.ISO8601FormatStyle(includingFractionalSeconds: true), Date.ISO8601FormatStyle()] {
            if let date = try? style.parse(normalized) { return date }
        }
        return nil
    }

    /// The user, checked: a readable address, a hash a login can verify, custom data of a bounded size.
    private func user(
        sourceId: String?, email rawEmail: String?, passwordHash: String?, verified: Bool, disabled: Bool, name: String?,
        customData: [String: JSONValue]?, createdAt: Date?
    ) throws -> ForeignRecord {
        guard let rawEmail, !rawEmail.isEmpty else {
            throw Skip(sourceId: sourceId, email: nil, reason: "has no email address (a phone, username or federated-only user)")
        }
        guard let email = EmailAddress(rawEmail) else { throw Skip(sourceId: sourceId, email: rawEmail, reason: "\"\(rawEmail)\" is not an email address") }
        if let passwordHash {
            guard ForeignPasswordHash.isReadable(passwordHash) else {
                throw Skip(sourceId: sourceId, email: rawEmail, reason: "its password hash is in a form Gatehouse cannot verify (\(passwordHash.prefix(12))…)")
            }
            // Over the cost budget: one login to it would hold a hashing thread for too long.
            if let refusal = ForeignPasswordHash.refusal(passwordHash) { throw Skip(sourceId: sourceId, email: rawEmail, reason: refusal) }
        }
        let customData = customData ?? [:]
        if let encoded = try? JSONEncoder().encode(customData), encoded.count > Self.maxCustomDataSize {
            throw Skip(sourceId: sourceId, email: rawEmail, reason: "its custom data is larger than 16 KiB")
        }
        return .user(ForeignUser(
            sourceId: sourceId.map { String($0.prefix(256)) }, email: email, passwordHash: passwordHash, emailVerified: verified,
            disabled: disabled, name: name.map { String($0.prefix(256)) }, customData: customData, createdAt: createdAt
        ))
    }

    // MARK: Firebase

    /// `{"localId", "email", "emailVerified", "passwordHash", "salt", "displayName", "disabled", "createdAt",
    /// "customAttributes": "{…}"}`.
    private func firebaseUser(_ user: [String: JSONValue]) throws -> ForeignRecord {
        let id = user["localId"]?.stringValue
        var hash: String?
        if let encoded = user["passwordHash"]?.stringValue, !encoded.isEmpty {
            guard let bytes = Data(base64Encoded: encoded), let salt = Data(base64Encoded: user["salt"]?.stringValue ?? "") else {
                throw Skip(sourceId: id, email: user["email"]?.stringValue, reason: "its passwordHash or salt is not base64")
            }
            do {
                hash = try firebase!.hash(Array(bytes), salt: Array(salt))
            } catch {
                throw Skip(sourceId: id, email: user["email"]?.stringValue, reason: "its password hash does not fit the hash parameters (\(error))")
            }
        }
        return try self.user(
            sourceId: id, email: user["email"]?.stringValue, passwordHash: hash, verified: user["emailVerified"] == .bool(true),
            disabled: try Self.flag(user["disabled"], "disabled", sourceId: id, email: user["email"]?.stringValue), name: user["displayName"]?.stringValue,
            customData: Field.json(user["customAttributes"] ?? .null).object,
            createdAt: Self.date(user["createdAt"].flatMap { Field.json($0).string })
        )
    }

    // MARK: Supabase

    /// A row of `auth.users`.
    private func supabaseUser(_ row: [String: Field]) throws -> ForeignRecord {
        let id = row["id"]?.string
        let email = row["email"]?.string
        if row["deleted_at"]?.string != nil { throw Skip(sourceId: id, email: email, reason: "was deleted in Supabase (deleted_at is set)") }
        if row["is_anonymous"]?.bool == true { throw Skip(sourceId: id, email: email, reason: "is an anonymous Supabase user") }
        // `banned_until` as `\copy` writes a timestamptz, `infinity` (banned for good) included. A value that is no
        // time skips the user: read as "not banned", it would let a banned user in.
        var banned = false
        switch row["banned_until"]?.string {
        case nil, "-infinity"?: banned = false
        case "infinity"?: banned = true
        case let text?:
            guard let until = Self.date(text) else {
                throw Skip(sourceId: id, email: email, reason: "its banned_until, \"\(text.prefix(40))\", is not a time (a ban of unknown end is not imported)")
            }
            banned = until > now
        }
        return try user(
            sourceId: id, email: email, passwordHash: row["encrypted_password"]?.string,
            verified: (row["email_confirmed_at"]?.string ?? row["confirmed_at"]?.string) != nil,
            disabled: banned, name: nil, customData: row["raw_user_meta_data"]?.object,
            createdAt: Self.date(row["created_at"]?.string)
        )
    }

    // MARK: Auth0

    /// A user of Auth0's bulk export (`user_id`), its password-hash export (`_id: {"$oid"}`, `passwordHash`) or its
    /// bulk import shape (`password_hash`, `custom_password_hash`).
    private func auth0User(_ user: [String: JSONValue]) throws -> ForeignRecord {
        let id = user["user_id"]?.stringValue ?? user["_id"]?.stringValue ?? user["_id"]?.objectValue?["$oid"]?.stringValue
        let email = user["email"]?.stringValue
        var hash = user["passwordHash"]?.stringValue ?? user["password_hash"]?.stringValue
        if let custom = user["custom_password_hash"]?.objectValue {
            do {
                hash = try Self.auth0CustomHash(custom)
            } catch let error as ExportFileError {
                throw Skip(sourceId: id, email: email, reason: "custom_password_hash: \(error.message)")
            }
        }
        var customData = user["user_metadata"]?.objectValue ?? [:]
        if let appMetadata = user["app_metadata"], appMetadata != .object([:]) { customData["app_metadata"] = appMetadata }
        return try self.user(
            sourceId: id, email: email, passwordHash: hash, verified: user["email_verified"] == .bool(true),
            disabled: try Self.flag(user["blocked"], "blocked", sourceId: id, email: email), name: user["name"]?.stringValue, customData: customData,
            createdAt: Self.date(user["created_at"]?.stringValue)
        )
    }

    /// Auth0's `custom_password_hash`: `{"algorithm", "hash": {"value", "encoding", "digest", "key"}, "salt": {"value",
    /// "encoding", "position"}, "password": {"encoding"}}`.
    static func auth0CustomHash(_ custom: [String: JSONValue]) throws -> String {
        guard let algorithm = custom["algorithm"]?.stringValue, let hash = custom["hash"]?.objectValue, let value = hash["value"]?.stringValue else {
            throw ExportFileError("algorithm and hash.value are required")
        }
        if let encoding = custom["password"]?.objectValue?["encoding"]?.stringValue, encoding != "utf8" {
            throw ExportFileError("passwords encoded as \(encoding) are not read (only utf8)")
        }
        func decode(_ text: String, _ encoding: String?) throws -> [UInt8] {
            let bytes: [UInt8]?
            switch encoding ?? "utf8" {
            case "utf8": bytes = Array(text.utf8)
            case "base64": bytes = Data(base64Encoded: text).map(Array.init)
            case "hex": bytes = Self.hex(text)
            default: throw ExportFileError("the encoding \(encoding ?? "") is not read (utf8, base64, hex)")
            }
            guard let bytes else { throw ExportFileError("\"\(text.prefix(12))…\" is not \(encoding ?? "utf8")") }
            return bytes
        }
        switch algorithm {
        case "bcrypt", "argon2", "pbkdf2":
            return value
        case "md5", "sha1", "sha256", "sha512", "hmac":
            let digestName = algorithm == "hmac" ? hash["digest"]?.stringValue ?? "" : algorithm
            guard let digest = ForeignPasswordHash.Digest(rawValue: digestName.replacingOccurrences(of: "-", with: "")) else {
                throw ExportFileError("hmac with digest \(digestName) is not read")
            }
            var key: [UInt8]?
            if algorithm == "hmac" {
                guard let keyObject = hash["key"]?.objectValue, let keyValue = keyObject["value"]?.stringValue else { throw ExportFileError("hmac needs hash.key") }
                key = try decode(keyValue, keyObject["encoding"]?.stringValue)
            }
            let salt = custom["salt"]?.objectValue
            let saltBytes = try salt?["value"]?.stringValue.map { try decode($0, salt?["encoding"]?.stringValue) } ?? []
            guard let parsed = ForeignPasswordHash(
                .digest(digest, hmacKey: key, saltFirst: salt?["position"]?.stringValue == "prefix"), salt: saltBytes,
                checksum: try decode(value, hash["encoding"]?.stringValue ?? "hex")
            ), let text = parsed.text else { throw ExportFileError("the \(algorithm) hash has the wrong length") }
            return text
        default:
            throw ExportFileError("the algorithm \(algorithm) is not read (bcrypt, argon2, pbkdf2, md5, sha1, sha256, sha512, hmac)")
        }
    }

    static func hex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    // MARK: Keycloak

    /// A user of a realm export: `{"id", "username", "email", "emailVerified", "enabled", "createdTimestamp",
    /// "firstName", "lastName", "attributes", "credentials": [{"type": "password", "secretData": "{…}",
    /// "credentialData": "{…}"}]}`.
    private func keycloakUser(_ user: [String: JSONValue]) throws -> ForeignRecord {
        let id = user["id"]?.stringValue
        let email = user["email"]?.stringValue
        if user["serviceAccountClientId"] != nil { throw Skip(sourceId: id, email: email, reason: "is a Keycloak service account") }
        var hash: String?
        if case .array(let credentials) = user["credentials"] ?? .null,
            let password = credentials.compactMap(\.objectValue).first(where: { $0["type"]?.stringValue == "password" })
        {
            do {
                hash = try Self.keycloakHash(password)
            } catch let error as ExportFileError {
                throw Skip(sourceId: id, email: email, reason: "its password credential: \(error.message)")
            }
        }
        let name = [user["firstName"]?.stringValue, user["lastName"]?.stringValue].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " ")
        var customData: [String: JSONValue] = [:]
        if let attributes = user["attributes"]?.objectValue, !attributes.isEmpty { customData["attributes"] = .object(attributes) }
        if let username = user["username"]?.stringValue, username != email?.lowercased() { customData["username"] = .string(username) }
        return try self.user(
            sourceId: id, email: email, passwordHash: hash, verified: user["emailVerified"] == .bool(true),
            disabled: user["enabled"] == .bool(false), name: name.isEmpty ? nil : name, customData: customData,
            createdAt: Self.date(user["createdTimestamp"].flatMap { Field.json($0).string })
        )
    }

    /// `secretData` `{"value": base64, "salt": base64}` and `credentialData` `{"hashIterations", "algorithm",
    /// "additionalParameters"}` of a Keycloak password credential, as a hash string.
    static func keycloakHash(_ credential: [String: JSONValue]) throws -> String {
        func object(_ key: String) throws -> [String: JSONValue] {
            guard let text = credential[key]?.stringValue,
                let value = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)), let object = value.objectValue
            else { throw ExportFileError("\(key) is not a JSON object in a string") }
            return object
        }
        let secret = try object("secretData")
        let data = try object("credentialData")
        guard let value = secret["value"]?.stringValue.flatMap({ Data(base64Encoded: $0) }), let salt = secret["salt"]?.stringValue.flatMap({ Data(base64Encoded: $0) }),
            let algorithm = data["algorithm"]?.stringValue, case .int(let iterations) = data["hashIterations"] ?? .null
        else { throw ExportFileError("value, salt, algorithm or hashIterations is missing") }
        let digest: ForeignPasswordHash.Digest
        switch algorithm {
        case "pbkdf2": digest = .sha1
        case "pbkdf2-sha256": digest = .sha256
        case "pbkdf2-sha512": digest = .sha512
        case "argon2":
            // additionalParameters: {"type": ["id"], "version": ["1.3"], "memory": ["7168"], "parallelism": ["1"], "hashLength": ["32"]}
            let parameters = data["additionalParameters"]?.objectValue ?? [:]
            func parameter(_ name: String, _ fallback: String) -> String {
                if case .array(let values) = parameters[name] ?? .null, let first = values.first?.stringValue { return first }
                return fallback
            }
            let type = parameter("type", "id")
            guard ["id", "i", "d"].contains(type) else { throw ExportFileError("Argon2 type \(type) is not one of id, i, d") }
            let version = parameter("version", "1.3") == "1.0" ? 16 : 19
            guard let memory = Int(parameter("memory", "7168")), let parallelism = Int(parameter("parallelism", "1")) else {
                throw ExportFileError("Argon2's memory or parallelism is not a number")
            }
            let b64 = { (bytes: Data) in bytes.base64EncodedString().replacingOccurrences(of: "=", with: "") }
            return "$argon2\(type)$v=\(version)$m=\(memory),t=\(iterations),p=\(parallelism)$\(b64(salt))$\(b64(value))"
        default:
            throw ExportFileError("the algorithm \(algorithm) is not read (pbkdf2, pbkdf2-sha256, pbkdf2-sha512, argon2)")
        }
        guard let hash = ForeignPasswordHash(.pbkdf2(digest, rounds: Int(iterations)), salt: Array(salt), checksum: Array(value)), let text = hash.text else {
            throw ExportFileError("the \(algorithm) parameters are out of range")
        }
        return text
    }

    // MARK: CSV

    private func csvUser(_ row: [String: String]) throws -> ForeignRecord {
        let id = row["id"].flatMap { $0.isEmpty ? nil : $0 }
        let email = row["email"]
        func flag(_ column: String) throws -> Bool {
            guard let text = row[column] else { return false }
            guard let value = Self.bool(text.trimmingCharacters(in: .whitespaces)) else {
                throw Skip(sourceId: id, email: email, reason: "\(column) \"\(text)\" is not true or false")
            }
            return value
        }
        var customData: [String: JSONValue]?
        if let text = row["custom_data"], !text.isEmpty {
            guard let object = Field.text(text).object else { throw Skip(sourceId: id, email: email, reason: "custom_data is not a JSON object") }
            customData = object
        }
        var createdAt: Date?
        if let text = row["created_at"], !text.isEmpty {
            guard let date = Self.date(text) else { throw Skip(sourceId: id, email: email, reason: "created_at \"\(text)\" is not an ISO 8601 date") }
            createdAt = date
        }
        return try user(
            sourceId: id, email: email, passwordHash: row["password_hash"].flatMap { $0.isEmpty ? nil : $0 }, verified: try flag("email_verified"),
            disabled: try flag("disabled"), name: row["name"].flatMap { $0.isEmpty ? nil : $0 }, customData: customData, createdAt: createdAt
        )
    }
}
