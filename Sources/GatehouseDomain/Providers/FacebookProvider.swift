import Foundation
import GatehouseWire

/// `oauth2-facebook`: a user access token, checked with the Graph API's `debug_token` (with the app token
/// `APP_ID|APP_SECRET`: the token must be valid and issued to this Facebook app), then the profile from
/// `me?fields=id,name,email,first_name,last_name,picture`.
package struct FacebookProvider: Sendable {
    package static let providerType = "oauth2-facebook"

    package let settings: FacebookSettings
    package let http: any OutboundHTTP

    package func identity(accessToken: String) async throws(AuthError) -> ExternalIdentity {
        guard !accessToken.isEmpty, accessToken.utf8.count <= 4096 else { throw .invalidCredential("invalid Facebook access token") }
        let debug = try await graph("debug_token", ["input_token": accessToken, "access_token": "\(settings.appId)|\(settings.appSecret)"])
        guard case .object(let data)? = debug["data"], case .bool(true)? = data["is_valid"],
            data["app_id"]?.profileString == settings.appId, let userId = data["user_id"]?.profileString
        else {
            throw .invalidCredential("invalid Facebook access token: not valid for this app")
        }
        let me = try await graph("me", ["fields": "id,name,email,first_name,last_name,picture", "access_token": accessToken])
        guard me["id"]?.profileString == userId else { throw .invalidCredential("invalid Facebook access token: the profile is another user's") }
        var profile: [String: JSONValue] = [:]
        for field in ["name", "email", "first_name", "last_name"] {
            if let value = me[field]?.profileString, !value.isEmpty { profile[field] = .string(value) }
        }
        if case .object(let picture)? = me["picture"], case .object(let data)? = picture["data"], let url = data["url"]?.profileString {
            profile["picture_url"] = .string(url)
        }
        return ExternalIdentity(providerType: Self.providerType, externalId: userId, data: profile)
    }

    private func graph(_ path: String, _ query: [String: String]) async throws(AuthError) -> [String: JSONValue] {
        var components = URLComponents(string: settings.graphURL.hasSuffix("/") ? settings.graphURL + path : settings.graphURL + "/" + path)
        components?.queryItems = query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        let encoded = components?.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        components?.percentEncodedQuery = encoded
        guard let url = components?.url?.absoluteString else { throw .providerUnavailable("oauth2-facebook.graphURL is not a URL") }
        let response: OutboundResponse
        do {
            response = try await http.send(OutboundRequest(url: url, headers: [("Accept", "application/json")]))
        } catch {
            throw .providerUnavailable("cannot reach the Facebook Graph API: \(error)")
        }
        guard let object = response.jsonObject else { throw .providerUnavailable("the Facebook Graph API answered \(response.status) without JSON") }
        if response.status == 200 { return object }
        if (400..<500).contains(response.status) { throw .invalidCredential("invalid Facebook access token") }
        throw .providerUnavailable("the Facebook Graph API answered \(response.status)")
    }

    package init(settings: FacebookSettings, http: any OutboundHTTP) {
        self.settings = settings
        self.http = http
    }
}
