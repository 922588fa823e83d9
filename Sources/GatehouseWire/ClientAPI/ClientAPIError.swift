/// The error body of every Client API v2.0 route: `{"error","error_code","link"}`.
///
/// Servers must send it with `Content-Type: application/json` exactly; Realm clients ignore the code under any
/// other content type (spec §4.1).
public struct ClientAPIErrorBody: Codable, Hashable, Sendable {
    /// Human-readable message.
    public var error: String
    /// Machine-readable code clients branch on.
    public var errorCode: ClientAPIErrorCode?
    /// Where to read more (the server's logs in App Services; documentation here).
    public var link: String?

    public init(error: String, errorCode: ClientAPIErrorCode?, link: String? = nil) {
        self.error = error
        self.errorCode = errorCode
        self.link = link
    }

    enum CodingKeys: String, CodingKey {
        case error
        case errorCode = "error_code"
        case link
    }
}
