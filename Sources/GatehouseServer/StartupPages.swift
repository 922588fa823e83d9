#if canImport(Glibc)
import Foundation
import Glibc

/// Drops the server's mappings of the executable's code pages once it listens: most of what start-up ran (reading the
/// configuration, migrations, loading keys, the command line) never runs again, yet its pages, and the neighbours the
/// kernel maps around every page a fault asks for (fault-around, 64 KiB), stayed in the process's resident set.
///
/// `madvise(MADV_DONTNEED)` on the executable's read-only, executable mapping removes those pages from the process;
/// they stay in the page cache, and a page serving touches later is mapped again by a minor fault (no disk read).
/// This is only what the kernel may do to clean file-backed pages at any moment under memory pressure, done at once:
/// code pages are never written, so nothing is lost. The mapping of relocated data (`r--p`, RELRO) holds pages the
/// dynamic loader wrote, and is never touched here.
///
/// Measured (`Benchmarks/PROFILING.md`): idle PSS 41 → 20 MB, 11 MB less after load; the first registration and
/// login after start take about 25 ms longer (the faults that map serving's code again). Only `gatehouse serve`
/// does this: a program that embeds ``AuthServer`` owns its own executable.
package enum StartupPages {
    /// Returns how many bytes of mappings it dropped.
    @discardableResult
    package static func release() -> Int {
        guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"),
            let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)
        else { return 0 }
        var dropped = 0
        for line in maps.split(separator: "\n") {
            // start-end perms offset device inode path
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] == "r-xp", fields[5...].joined(separator: " ") == exe else { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16), end > start,
                madvise(UnsafeMutableRawPointer(bitPattern: start), Int(end - start), MADV_DONTNEED) == 0
            else { continue }
            dropped += Int(end - start)
        }
        return dropped
    }
}
#endif

#if canImport(Glibc)
extension StartupPages {
    /// The resident size of the executable's code mapping, in kB (`/proc/self/smaps`); nil when it is not found.
    package static func residentCode() -> Int? {
        guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"),
            let smaps = try? String(contentsOfFile: "/proc/self/smaps", encoding: .utf8)
        else { return nil }
        var inCode = false
        var total: Int?
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), fields.count >= 5, first.first?.isHexDigit == true {
                inCode = fields.count >= 6 && fields[1] == "r-xp" && fields[5...].joined(separator: " ") == exe
            } else if inCode, fields.first == "Rss:", fields.count >= 2, let kB = Int(fields[1]) {
                total = (total ?? 0) + kB
            }
        }
        return total
    }
}
#endif
