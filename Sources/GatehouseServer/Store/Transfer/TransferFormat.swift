import Foundation
import GatehouseDomain
import GatehouseWire

/// The lines of a `gatehouse export` file (JSON lines, format 1), in order:
///
/// 1. a header: `{"format":"gatehouse-export","version":1,"exportedAt":"…","apps":[…],"sessions":false}`;
/// 2. with `--sessions` only, one `{"type":"signingKey",…}` line per active signing key (the private key,
///    base64): refresh tokens are JWTs signed by them, so sessions are useless without them;
/// 3. one `{"type":"user",…}` line per user, carrying every credential of the user (each ``CredentialKind``, with
///    who added it): its identities, its email/password accounts with the Argon2id hashes as stored, the API keys
///    behind its `api-key` identities (their SHA-256 hashes; absent when none), and (with `--sessions`) its live
///    sessions;
/// 4. one `{"type":"migratedAddress","appId":…,"email":…,"migratedAt":…}` line per address the old system handed
///    over (``GatehouseStore/migratedAddress(appId:email:)``), kept after its account moved away or was deleted: the
///    old system hands an address over once, in the target database too;
/// 5. a trailer: `{"type":"end","users":N,"signingKeys":K,"migratedAddresses":M}`. Import refuses a file without
///    it, so a truncated file cannot pass for a complete one.
///
/// Timestamps are ISO 8601 in UTC with milliseconds; byte strings (hashes, keys) are base64. What is not
/// exported is transient and is recreated on demand: unredeemed confirmation and reset tokens, native auth
/// flows in progress, the outbox and the send-limit log.
enum TransferFormat {
    static let name = "gatehouse-export"
    /// Version 2 added `mailboxProvenAt` to email accounts; version 3 every email account of a user
    /// (`emailAccounts`, where 1 and 2 had one `emailAccount`) and who added each credential; version 4 the
    /// `migratedAddress` lines. Versions 1 to 3 are read too (a confirmed account in a version 1 file is taken as
    /// proven; a file before version 4 records the addresses of the accounts from the old system it brings).
    static let version = 4
    static let readableVersions = 1...4

    struct Header: Codable, Equatable {
        var format: String
        var version: Int
        var exportedAt: Timestamp
        /// The apps exported (all the apps with users when no `--app` was given).
        var apps: [String]
        /// Whether live sessions and the signing keys are included.
        var sessions: Bool
    }

    /// A record line: `type` says which of the optional parts is present.
    struct Line: Codable {
        var type: Kind
        var user: User?
        var signingKey: SigningKey?
        var migratedAddress: MigratedAddress?
        var end: End?

        enum Kind: String, Codable {
            case user, signingKey, migratedAddress, end
        }

        init(_ user: User) { (type, self.user) = (.user, user) }
        init(_ key: SigningKey) { (type, signingKey) = (.signingKey, key) }
        init(_ address: MigratedAddress) { (type, migratedAddress) = (.migratedAddress, address) }
        init(_ end: End) { (type, self.end) = (.end, end) }

        // Flat on the wire: {"type":"user","id":…} rather than {"type":"user","user":{…}}.
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: TypeKey.self)
            type = try container.decode(Kind.self, forKey: .type)
            switch type {
            case .user: user = try User(from: decoder)
            case .signingKey: signingKey = try SigningKey(from: decoder)
            case .migratedAddress: migratedAddress = try MigratedAddress(from: decoder)
            case .end: end = try End(from: decoder)
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: TypeKey.self)
            try container.encode(type, forKey: .type)
            try user?.encode(to: encoder)
            try signingKey?.encode(to: encoder)
            try migratedAddress?.encode(to: encoder)
            try end?.encode(to: encoder)
        }

        private enum TypeKey: String, CodingKey { case type }
    }

    struct User: Codable, Equatable {
        var id: String
        var appId: String
        var createdAt: Timestamp
        var disabled: Bool
        var customData: [String: JSONValue]
        var identities: [Identity]
        /// Versions 1 and 2: the user's one email account.
        var emailAccount: EmailAccount? = nil
        /// Version 3: every email account of the user (an address linked to it has its own).
        var emailAccounts: [EmailAccount]? = nil
        var sessions: [Session]?
        /// Absent when the user has no API key (and in files written before API keys).
        var apiKeys: [APIKey]? = nil
    }

    /// A user or server API key, owned by the user of the line it is on (a server key's user exists only for it).
    struct APIKey: Codable, Equatable {
        var id: String
        var name: String
        var server: Bool
        /// SHA-256 of the secret, as stored.
        var keyHash: Bytes
        var disabled: Bool
        var createdAt: Timestamp
    }

    struct Identity: Codable, Equatable {
        var id: String
        var providerType: String
        var externalId: String
        var data: [String: JSONValue]
        var createdAt: Timestamp
        /// Version 3: the signed-in session that added it (a link, an API key) and what that session had proven;
        /// absent for one that came with the account.
        var addedSession: String? = nil
        var addedMethods: [String]? = nil
    }

    struct EmailAccount: Codable, Equatable {
        var email: String
        /// Argon2id PHC string as stored, or (in a file made for import) a PBKDF2 hash in Django's or passlib's form or
        /// an scrypt hash in passlib's, which the first successful login replaces with Argon2id; empty for an account
        /// without a password.
        var passwordHash: String
        var confirmedAt: Timestamp?
        /// When the owner first proved they read the address (version 2); absent for an account that was never proven.
        var mailboxProvenAt: Timestamp? = nil
        var createdAt: Timestamp
        /// Optional, absent from older files (readers of version 2 ignore them): the address as registered, where mail
        /// goes (absent: `email`); when a second registration named the pending address; whether the account came
        /// from another system (only then may the migrate-user function vouch for a missing password; an export
        /// always says, and a file that does not, written by hand for a migration, counts as from another system).
        var address: String? = nil
        var contestedAt: Timestamp? = nil
        var fromOldSystem: Bool? = nil
        /// Version 3: when a change or reset last set the password, and the session that changed it.
        var passwordSetAt: Timestamp? = nil
        var passwordSession: String? = nil
        var passwordMethods: [String]? = nil
    }

    struct Session: Codable, Equatable {
        var id: String
        var deviceId: String
        var device: [String: JSONValue]
        var secretHash: Bytes
        var createdAt: Timestamp
        var expiresAt: Timestamp
        var clientId: String?
        var previousSecretHash: Bytes?
        var rotationSalt: Bytes?
        var rotatedAt: Timestamp?
        /// The API key the session was logged in with.
        var apiKeyId: String? = nil
        /// Optional (absent from older files): how the session began (`first-party`, `api-key`, `anonymous`; absent:
        /// from `apiKeyId`), the RFC 8176 methods that proved it, and when.
        var kind: String? = nil
        var methods: [String]? = nil
        var provenAt: Timestamp? = nil
    }

    struct SigningKey: Codable, Equatable {
        var kid: String
        var algorithm: String
        var privateKey: Bytes
        var createdAt: Timestamp
    }

    /// An address the old system handed over to the app (a lazy migration or an import made an account of it).
    struct MigratedAddress: Codable, Equatable {
        var appId: String
        /// Normalized (trimmed, lowercase), as accounts key it.
        var email: String
        var migratedAt: Timestamp
    }

    struct End: Codable, Equatable {
        var users: Int
        var signingKeys: Int
        /// Version 4 (absent before: none).
        var migratedAddresses: Int? = nil
    }

    /// Milliseconds since 1970, written as ISO 8601 with milliseconds (`2026-11-22T07:52:44.123Z`).
    struct Timestamp: Codable, Equatable {
        var milliseconds: Int64

        init(milliseconds: Int64) { self.milliseconds = milliseconds }
        init(_ date: Date) { milliseconds = date.millisecondsSince1970 }
        var date: Date { Date(milliseconds: milliseconds) }

        // Whole seconds go through Foundation's formatter; the milliseconds are written and read here, as integers,
        // so that no value changes on the way (a fractional-second Double would turn .999 into .998).
        private static let seconds = Date.ISO8601FormatStyle()

        init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let match = text.wholeMatch(of: /(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,3}))?Z/),
                let date = try? Self.seconds.parse("\(match.output.1)Z")
            else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "not an ISO 8601 UTC timestamp like 2026-11-22T07:52:44.123Z: \(text)")
                )
            }
            let fraction = match.output.2.map { String($0).padding(toLength: 3, withPad: "0", startingAt: 0) } ?? "0"
            milliseconds = Int64(date.timeIntervalSince1970.rounded()) * 1000 + Int64(fraction)!
        }

        func encode(to encoder: any Encoder) throws {
            let (whole, fraction) = milliseconds.quotientAndRemainder(dividingBy: 1000)
            let (second, millisecond) = fraction < 0 ? (whole - 1, fraction + 1000) : (whole, fraction)
            let text = Self.seconds.format(Date(timeIntervalSince1970: TimeInterval(second)))
            var container = encoder.singleValueContainer()
            try container.encode("\(text.dropLast()).\(String(format: "%03d", millisecond))Z")
        }
    }

    /// Bytes as standard base64.
    struct Bytes: Codable, Equatable {
        var bytes: [UInt8]

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let data = Data(base64Encoded: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not base64"))
            }
            bytes = Array(data)
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(Data(bytes).base64EncodedString())
        }
    }
}
