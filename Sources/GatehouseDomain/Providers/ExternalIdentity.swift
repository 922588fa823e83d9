import Foundation
import GatehouseWire

/// Who a provider says the caller is: the provider's own id for them and the profile data it shares.
package struct ExternalIdentity: Sendable, Hashable {
    package var providerType: String
    /// Stable per provider: `sub` of an ID token or custom JWT, the Facebook user id, …
    package var externalId: String
    /// Profile data (`name`, `email`, `picture_url`, `first_name`, `last_name`, …), strings only: Realm clients read
    /// these keys as strings and abort on anything else.
    package var data: [String: JSONValue]

    package init(providerType: String, externalId: String, data: [String: JSONValue]) {
        self.providerType = providerType
        self.externalId = externalId
        self.data = data
    }
}

/// The profile data of an OpenID Connect ID token (Google, Apple), under App Services' names.
package enum OpenIDProfile {
    /// The profile data an ID token fills. The address (`email`) only when the provider says it verified it
    /// (`email_verified` true, or `"true"` as Apple writes it): an app may take a profile's address for one its user
    /// proved, and anyone can put someone else's address on a Google or Apple account they own.
    package static func data(_ token: VerifiedJWT) -> [String: JSONValue] {
        var data: [String: JSONValue] = [:]
        for (claim, field) in [
            ("name", "name"), ("email", "email"), ("picture", "picture_url"), ("given_name", "first_name"), ("family_name", "last_name"),
        ] {
            if let value = token.string(claim), !value.isEmpty { data[field] = .string(value) }
        }
        switch token.claims["email_verified"] {
        case .bool(true)?, .string("true")?: break
        default: data["email"] = nil
        }
        return data
    }
}

extension JSONValue {
    /// A claim value as profile data: strings as they are, numbers and booleans written out, nothing for the rest.
    package var profileString: String? {
        switch self {
        case .string(let s): s
        case .int(let i): String(i)
        case .double(let d): String(d)
        case .bool(let b): String(b)
        default: nil
        }
    }
}
