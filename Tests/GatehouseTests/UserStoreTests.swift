import Foundation
@testable import Gatehouse
import Testing

@Suite struct UserStoreTests {
    @Test func fileStoreWritesOwnerOnlyFilesPerApp() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = FileUserStore(directory: folder)
        #expect(try store.load(appId: "a") == nil)
        try store.save(Data("one".utf8), appId: "a")
        try store.save(Data("two".utf8), appId: "a")
        try store.save(Data("other".utf8), appId: "b/../c")
        #expect(try store.load(appId: "a") == Data("two".utf8))
        #expect(try store.load(appId: "b/../c") == Data("other".utf8))
        let attributes = try FileManager.default.attributesOfItem(atPath: store.file("a").path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let folderAttributes = try FileManager.default.attributesOfItem(atPath: folder.path)
        #expect((folderAttributes[.posixPermissions] as? Int) == 0o700)
        #expect(store.file("b/../c").deletingLastPathComponent().path == folder.path)
    }

    /// Every app id has a file of its own: ids that differ only in characters a file name cannot hold, or that look
    /// like another id's written form, never share users. Plain ids keep the name earlier versions gave them.
    @Test func everyAppIdHasItsOwnFile() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = FileUserStore(directory: folder)
        let ids = ["a/b", "a_b", "a b", "a:b", "é", "_", ".", "..", ".hidden", "~61", "a"]
        for id in ids { try store.save(Data(id.utf8), appId: id) }
        for id in ids { #expect(try store.load(appId: id) == Data(id.utf8), "\(id)") }
        #expect(Set(ids.map { store.file($0).lastPathComponent }).count == ids.count)
        #expect(store.file("my-app_1.0").lastPathComponent == "my-app_1.0.users.json")
        for id in ids { #expect(store.file(id).deletingLastPathComponent().path == folder.path, "\(id)") }
    }

    /// An id earlier versions wrote under another name is still read from it while its new file is missing — unless
    /// that old name is another app's file now (`a/b` was written as `a_b`, which is app `a_b`'s).
    @Test func anOldFileNameIsReadOnlyWhenItIsNoOtherAppsFile() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = FileUserStore(directory: folder)
        try store.save(Data("a_b's users".utf8), appId: "a_b")
        #expect(try store.load(appId: "a/b") == nil)
        #expect(try store.load(appId: "a_b") == Data("a_b's users".utf8))

        // "é" was written as é.users.json, a name no id has now.
        let old = folder.appendingPathComponent("é.users.json")
        #expect(FileManager.default.createFile(atPath: old.path, contents: Data("é's users".utf8), attributes: [.posixPermissions: 0o600]))
        #expect(try store.load(appId: "é") == Data("é's users".utf8))
        try store.save(Data("é's users, saved".utf8), appId: "é")
        #expect(try store.load(appId: "é") == Data("é's users, saved".utf8))
    }

    /// A folder or file found with wider permissions (a folder made by hand, an old version, a restored backup) is
    /// narrowed; a symbolic link or something another user owns is refused, never read.
    @Test func fileStoreRepairsLoosePermissionsAndRefusesWhatIsNotItsOwn() throws {
        let fm = FileManager.default
        let folder = fm.temporaryDirectory.appendingPathComponent("gatehouse-store-\(UUID().uuidString)")
        defer { try? fm.removeItem(at: folder) }
        try fm.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let store = FileUserStore(directory: folder)
        _ = fm.createFile(atPath: store.file("a").path, contents: Data("users".utf8), attributes: [.posixPermissions: 0o644])
        #expect(try store.load(appId: "a") == Data("users".utf8))
        #expect((try fm.attributesOfItem(atPath: folder.path)[.posixPermissions] as? Int) == 0o700)
        #expect((try fm.attributesOfItem(atPath: store.file("a").path)[.posixPermissions] as? Int) == 0o600)

        // Loosened again behind its back: the next save narrows the folder before writing.
        #expect(chmod(folder.path, 0o777) == 0)
        try store.save(Data("more".utf8), appId: "a")
        #expect((try fm.attributesOfItem(atPath: folder.path)[.posixPermissions] as? Int) == 0o700)

        // A symbolic link where the file should be (pointing at someone's planted users) is refused.
        let planted = fm.temporaryDirectory.appendingPathComponent("gatehouse-planted-\(UUID().uuidString)")
        defer { try? fm.removeItem(at: planted) }
        try Data("planted".utf8).write(to: planted)
        try fm.createSymbolicLink(atPath: store.file("b").path, withDestinationPath: planted.path)
        #expect(throws: ClientError.self) { try store.load(appId: "b") }

        // A folder that belongs to another user is refused (only root can hand one over, so only then is it tried).
        if geteuid() == 0 {
            let foreign = fm.temporaryDirectory.appendingPathComponent("gatehouse-foreign-\(UUID().uuidString)")
            defer { try? fm.removeItem(at: foreign) }
            try fm.createDirectory(at: foreign, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            #expect(chown(foreign.path, 65534, 65534) == 0)
            let error = #expect(throws: ClientError.self) { try FileUserStore(directory: foreign).save(Data("x".utf8), appId: "a") }
            #expect(error?.message.contains("another user") == true)
        }
    }

    @Test func jwtClaimsAreReadWithoutVerification() throws {
        let payload = Data(#"{"exp":1800000000,"iat":1,"user_data":{"plan":"pro"}}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        let claims = try #require(JWTClaims("e30.\(payload).sig"))
        #expect(claims.exp == 1_800_000_000)
        #expect(claims.userData == ["plan": "pro"])
        #expect(JWTClaims("not a token") == nil)
    }

    /// Two changes of the users whose saves cross — the first change's write held back until the second change was
    /// made (a refresh ending as `signOut()` runs) — leave the second in the store, never the first written over it.
    @Test func aChangeOvertakenByALaterOneIsNotWrittenOverIt() throws {
        let store = HeldStore()
        let core = App(id: "held", configuration: AppConfiguration(baseURL: "https://auth.example.com", userStore: store)).core
        let finished = DispatchSemaphore(value: 0)
        store.holdNext()
        Thread {
            try? core.mutate { users in
                users.users.append(
                    StoredUser(
                        id: "u1", deviceId: "d1", accessToken: "at", refreshToken: "rt", loggedIn: true, identities: [], profileData: [:],
                        lastLogin: Date(), native: nil
                    )
                )
            }
            finished.signal()
        }.start()
        store.arrived.wait()   // the first change is made, its write held
        Thread {
            try? core.mutate { $0.users.removeAll() }
            finished.signal()
        }.start()
        while core.changeCount < 2 { sched_yield() }   // the second change is made too
        // Its write goes first when nothing orders the two (it ends here), or waits for the held one (it does not end
        // within the bound, which only lets the check of the unordered case see the crossing).
        let secondEndedFirst = finished.wait(timeout: .now() + 0.2) == .success
        store.release.signal()
        finished.wait()
        if !secondEndedFirst { finished.wait() }
        let saved = try #require(store.saved)
        let users = try JSONDecoder().decode(PersistedUsers.self, from: saved)
        #expect(users.users.isEmpty, "the signed-out user came back: \(users.users.map(\.id))")
    }
}

/// A store whose next write waits until the test releases it.
private final class HeldStore: UserStore, @unchecked Sendable {
    let arrived = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var hold = false
    private var blob: Data?
    private var count = 0

    func holdNext() { lock.withLock { hold = true } }
    var saved: Data? { lock.withLock { blob } }
    var saves: Int { lock.withLock { count } }

    func load(appId: String) throws -> Data? { nil }
    func save(_ data: Data, appId: String) throws {
        let held = lock.withLock { () -> Bool in
            defer { hold = false }
            return hold
        }
        if held {
            arrived.signal()
            release.wait()
        }
        lock.withLock {
            blob = data
            count += 1
        }
    }
}
