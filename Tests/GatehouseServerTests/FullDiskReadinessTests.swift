import Foundation
import GatehouseTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A real full filesystem under SQLite: a 3 MB tmpfs, mounted by the test (as root), holds the database of a
/// `gatehouse serve` process. Filled until registrations answer 503, `/readyz` must say not ready, though its own small
/// write still fits in the pages SQLite's write-ahead log reuses; with space again, a registration succeeds and
/// `/readyz` is ready. (`StoreFaultTests` fills a database with `max_page_count` instead, which no reused page hides.)
@Suite(.serialized, .enabled(if: SmallFilesystem.canMount, "needs root and the right to mount a tmpfs (CAP_SYS_ADMIN); skipped"))
struct FullDiskReadinessTests {
    static func register(_ base: String, _ email: String) async -> FaultSuiteTests.Outcome {
        await FaultSuiteTests.request(
            "\(base)/api/client/v2.0/app/fault-app/auth/providers/local-userpass/register", method: "POST",
            json: #"{"email":"\#(email)","password":"correct horse"}"#
        )
    }

    @Test func readyzIsNotReadyOnAFullFilesystemUntilAWriteSucceedsAgain() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("full-tmpfs-\(UUID().uuidString)")
        let disk = folder.appendingPathComponent("disk")
        try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try #require(mount("tmpfs", disk.path, "tmpfs", 0, "size=3m") == 0, "mount: \(String(cString: strerror(errno)))")
        defer { umount2(disk.path, Int32(MNT_DETACH)) }

        let (server, base) = try await FaultSuiteTests.serve(FaultSuiteTests.appYAML(database: "sqlite:\(disk.path)/gatehouse.sqlite"), in: folder)
        do {
            #expect(await Self.register(base, "first@example.com").status == 201)
            try await waitFor("ready", limit: 15) { await FaultSuiteTests.request("\(base)/readyz").status == 200 }

            // A filler file takes all but ~200 KB, then registrations fill the rest until one is refused.
            let filler = disk.appendingPathComponent("filler")
            var stats = statvfs()
            try #require(statvfs(disk.path, &stats) == 0)
            let free = Int(stats.f_bavail) * Int(stats.f_frsize)
            FileManager.default.createFile(atPath: filler.path, contents: Data(count: max(0, free - 200 * 1024)))
            var refused: FaultSuiteTests.Outcome?
            for n in 0..<3000 {
                let outcome = await Self.register(base, "fill-\(n)@example.com")
                if outcome.status != 201 {
                    refused = outcome
                    break
                }
            }
            let full = try #require(refused, "3000 registrations fitted in 200 KB")
            #expect(full.status == 503, "\(full.body)")
            #expect(full.retryAfter != nil)

            // The disk is full: /readyz says so, and keeps saying so (its own write would fit in reused pages). Its
            // probe's answer serves for a second after it ends, so the first check waits that out.
            try await Task.sleep(for: .milliseconds(1100))
            for _ in 0..<3 {
                let ready = await FaultSuiteTests.request("\(base)/readyz")
                #expect(ready.status == 503, "\(ready.body)")
                #expect(ready.body.contains("lack of space") || ready.body.contains("disk is full"), "\(ready.body)")
                try await Task.sleep(for: .milliseconds(1100))
            }

            // Space again: a registration succeeds and the server is ready.
            try FileManager.default.removeItem(at: filler)
            #expect(await Self.register(base, "after@example.com").status == 201)
            try await waitFor("ready again", limit: 10) { await FaultSuiteTests.request("\(base)/readyz").status == 200 }
            #expect(!server.standardError.contains("unexpected error"), "\(server.standardError.suffix(2000))")
            server.signal(SIGTERM)
            #expect(try await server.waitForExit(within: .seconds(40)) == 0)
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }
}

/// Whether this process may mount a small tmpfs (root with CAP_SYS_ADMIN): a trial mount, once.
enum SmallFilesystem {
    static let canMount: Bool = {
        guard getuid() == 0 else { return false }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tmpfs-check-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        guard mount("tmpfs", folder.path, "tmpfs", 0, "size=64k") == 0 else { return false }
        umount(folder.path)
        return true
    }()
}
