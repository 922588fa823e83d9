import Foundation

#if canImport(Security)
import Security
#endif

/// Where an ``App`` keeps its users and their tokens between launches, so that a new `App` with the same id
/// knows `currentUser` and `allUsers` without a network call.
///
/// The SDK stores one opaque blob per app id. Defaults: the Keychain on Apple platforms, a file on Linux.
public protocol UserStore: Sendable {
    /// The blob saved for `appId`, or nil if there is none.
    func load(appId: String) throws -> Data?
    /// Replaces the blob for `appId`.
    func save(_ data: Data, appId: String) throws
}

/// Keeps users in memory only: nothing survives the process. For tests and previews.
public final class InMemoryUserStore: UserStore, @unchecked Sendable {
    private let lock = NSLock()
    private var blobs: [String: Data] = [:]

    public init() {}

    public func load(appId: String) throws -> Data? { lock.withLock { blobs[appId] } }
    public func save(_ data: Data, appId: String) throws { lock.withLock { blobs[appId] = data } }
}

/// Keeps users in one JSON file per app in a folder only the owner can read (0700 folder, 0600 files).
/// The default on Linux, under `$XDG_DATA_HOME/gatehouse` (or `~/.local/share/gatehouse`).
public struct FileUserStore: UserStore {
    public let directory: URL

    public init(directory: URL) { self.directory = directory }

    /// `$XDG_DATA_HOME/gatehouse`, or `~/.local/share/gatehouse`.
    public static var defaultDirectory: URL {
        if let xdg = ProcessInfo.processInfo.environment["XDG_DATA_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("gatehouse")
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share/gatehouse")
    }

    func file(_ appId: String) -> URL {
        let safe = appId.unicodeScalars.map { CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0) ? String($0) : "_" }.joined()
        return directory.appendingPathComponent("\(safe).users.json")
    }

    public func load(appId: String) throws -> Data? {
        let url = file(appId)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try Data(contentsOf: url)
    }

    public func save(_ data: Data, appId: String) throws {
        let fm = FileManager.default
        try fm.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let url = file(appId)
        let temporary = directory.appendingPathComponent(".\(UUID().uuidString).tmp")
        guard fm.createFile(atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw ClientError.storage("cannot write \(temporary.path)")
        }
        // rename(2) replaces the old file atomically: a crash leaves the old users or the new, never half of them.
        guard rename(temporary.path, url.path) == 0 else {
            let code = errno
            try? fm.removeItem(at: temporary)
            throw ClientError.storage("cannot replace \(url.path): errno \(code)")
        }
    }
}

#if canImport(Security)
/// Keeps users in the Keychain (a generic password per app id). The default on Apple platforms.
public struct KeychainUserStore: UserStore {
    public let service: String

    public init(service: String = "gatehouse.users") { self.service = service }

    private func query(_ appId: String) -> [String: Any] {
        [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: appId]
    }

    public func load(appId: String) throws -> Data? {
        var query = query(appId)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: AnyObject?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw ClientError.storage("Keychain read failed: \(status)") }
        return result as? Data
    }

    public func save(_ data: Data, appId: String) throws {
        let base = query(appId)
        let status = SecItemUpdate(base as CFDictionary, [kSecValueData as String: data] as CFDictionary)
        if status == errSecItemNotFound {
            var add = base
            add[kSecValueData as String] = data
            add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            let added = SecItemAdd(add as CFDictionary, nil)
            guard added == errSecSuccess else { throw ClientError.storage("Keychain write failed: \(added)") }
        } else if status != errSecSuccess {
            throw ClientError.storage("Keychain write failed: \(status)")
        }
    }
}
#endif

/// The platform's default store.
func defaultUserStore() -> any UserStore {
    #if canImport(Security)
    KeychainUserStore()
    #else
    FileUserStore(directory: FileUserStore.defaultDirectory)
    #endif
}
