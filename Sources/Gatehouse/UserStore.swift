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
    /// Replaces the blob for `appId`. One ``App`` (or ``NativeAuthClient``) calls it one save at a time, with its
    /// newest blob; it must not call back into the SDK (which waits for it) or wait for a thread that does. Two `App`
    /// objects of one id each save their own users: make one per app id and keep it.
    func save(_ data: Data, appId: String) throws
}

/// Keeps users in memory only: nothing survives the process. For tests and previews.
public final class InMemoryUserStore: UserStore, @unchecked Sendable {
    private let lock = NSLock()
    private var blobs: [String: Data] = [:]

    /// An empty store.
    public init() {}

    public func load(appId: String) throws -> Data? { lock.withLock { blobs[appId] } }
    public func save(_ data: Data, appId: String) throws { lock.withLock { blobs[appId] = data } }
}

/// Keeps users in one JSON file per app in a folder only the owner can read (0700 folder, 0600 files).
/// The default on Linux, under `$XDG_DATA_HOME/gatehouse` (or `~/.local/share/gatehouse`).
///
/// The folder and files hold refresh tokens, so neither is trusted as found: before every read and write the store
/// checks that the folder is a real folder (not a symbolic link) and the file a regular file, both owned by this
/// process's user, and takes away any permission a group or other users have. A folder or file that belongs to
/// another user is refused (``ClientError/storage(_:)``): someone who could plant one could slip their own session
/// into the app.
public struct FileUserStore: UserStore {
    /// The folder of the files.
    public let directory: URL

    /// A store in `directory` (created, owner-only, at the first save).
    public init(directory: URL) { self.directory = directory }

    /// `$XDG_DATA_HOME/gatehouse`, or `~/.local/share/gatehouse`.
    public static var defaultDirectory: URL {
        if let xdg = ProcessInfo.processInfo.environment["XDG_DATA_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("gatehouse")
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share/gatehouse")
    }

    /// The file of `appId`: `APPID.users.json` for an id of ASCII letters, digits, `-`, `_` and `.` (not starting
    /// with a dot); any other id is written as `~` and the hex of its UTF-8 bytes, so that two ids never share a file
    /// (`a/b` and `a_b` are two apps, each with its own users; on a volume that ignores case, as macOS's usually
    /// does, ids differing only in case still share one). Earlier versions wrote other ids with `_` for each
    /// character a file name could not hold: ``load(appId:)`` still reads that file while the new one is missing,
    /// unless that name could be another app's (`a/b`'s old `a_b`, whose users sign in again).
    func file(_ appId: String) -> URL {
        let name = Self.isPlain(appId) ? appId : "~" + appId.utf8.map { String(format: "%02x", $0) }.joined()
        return directory.appendingPathComponent("\(name).users.json")
    }

    /// An id written as it is: ASCII letters, digits, `-`, `_` and `.`, not empty, not starting with a dot.
    private static func isPlain(_ appId: String) -> Bool {
        !appId.isEmpty && !appId.hasPrefix(".")
            && appId.utf8.allSatisfy { byte in (0x30...0x39).contains(byte) || (0x41...0x5a).contains(byte) || (0x61...0x7a).contains(byte) || "-_.".utf8.contains(byte) }
    }

    /// The file earlier versions used for `appId`, when it is not ``file(_:)`` and cannot be another app's: a legacy
    /// name that is itself a plain id (`a/b` was written as `a_b`) is app `a_b`'s file now, never read for `a/b`.
    private func legacyFile(_ appId: String) -> URL? {
        let safe = appId.unicodeScalars.map { CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0) ? String($0) : "_" }.joined()
        // A plain `safe` is another app's file now (or, for a plain id, this one's: file(_:) already read it).
        guard !Self.isPlain(safe) else { return nil }
        return directory.appendingPathComponent("\(safe).users.json")
    }

    public func load(appId: String) throws -> Data? {
        guard try secure(directory, kind: S_IFDIR, permissions: 0o700) else { return nil }
        let url = file(appId)
        if try secure(url, kind: S_IFREG, permissions: 0o600) { return try Data(contentsOf: url) }
        guard let legacy = legacyFile(appId), try secure(legacy, kind: S_IFREG, permissions: 0o600) else { return nil }
        return try Data(contentsOf: legacy)
    }

    public func save(_ data: Data, appId: String) throws {
        let fm = FileManager.default
        if try !secure(directory, kind: S_IFDIR, permissions: 0o700) {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            _ = try secure(directory, kind: S_IFDIR, permissions: 0o700)
        }
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

    /// False when nothing is at `url`. Otherwise checks that it is of `kind` (a folder or a regular file, never a
    /// symbolic link) and belongs to this user, and narrows its permissions to `permissions` when they are wider.
    private func secure(_ url: URL, kind: mode_t, permissions: mode_t) throws -> Bool {
        var info = stat()
        guard lstat(url.path, &info) == 0 else {
            if errno == ENOENT { return false }
            throw ClientError.storage("cannot inspect \(url.path): errno \(errno)")
        }
        guard info.st_mode & S_IFMT == kind else {
            throw ClientError.storage("\(url.path) is not a \(kind == S_IFDIR ? "folder" : "regular file") (a symbolic link?): refusing to use it")
        }
        guard info.st_uid == geteuid() else {
            throw ClientError.storage("\(url.path) belongs to another user (uid \(info.st_uid)): refusing to use it")
        }
        if info.st_mode & 0o777 & ~permissions != 0 {
            guard chmod(url.path, permissions) == 0 else {
                throw ClientError.storage("cannot narrow the permissions of \(url.path): errno \(errno)")
            }
        }
        return true
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
