import Testing

@testable import GatehouseArgon2

/// The long loops stop when their caller gives up: Argon2 before every segment, bcrypt before every round of its key
/// schedule. A server shutting down then never waits on a hash, whatever its cost.
@Suite struct HashCancellationTests {
    /// 100 million passes over 8 KiB would take some hours; asked to stop, it stops at the next segment.
    @Test func anArgon2HashOfHoursStopsWhenCancelled() throws {
        var asked = 0
        let parameters = Argon2Parameters(memoryKiB: 8, iterations: 100_000_000, parallelism: 1)
        #expect(throws: CancellationError.self) {
            try Argon2.hash(
                password: Array("password".utf8), salt: Array(repeating: 1, count: 16), parameters: parameters, variant: .i, version: .v13,
                isCancelled: {
                    asked += 1
                    return asked > 8
                }
            )
        }
        // Asked before each of the four segments of each pass: two passes ran, then it stopped.
        #expect(asked == 9)
    }

    /// Gatehouse's own form too: a stored hash with 2^32 - 1 passes stops when its verification is cancelled.
    @Test func anArgon2idVerificationStopsWhenCancelled() throws {
        let phc = "$argon2id$v=19$m=8,t=4294967295,p=1$c29tZXNhbHRzb21lc2FsdA$" + String(repeating: "A", count: 42) + "Y"
        var asked = 0
        #expect(throws: CancellationError.self) {
            try Argon2.verifyPHC(password: "guess", phc: phc, isCancelled: {
                asked += 1
                return asked > 4
            })
        }
        #expect(asked == 5)
    }

    /// A cancelled hash still gives a correct tag when not cancelled: the check does not change the computation.
    @Test func theCheckDoesNotChangeTheTag() throws {
        let parameters = Argon2Parameters(memoryKiB: 64, iterations: 3, parallelism: 2)
        let salt = [UInt8](repeating: 3, count: 16)
        let plain = try Argon2.hash(password: Array("pw".utf8), salt: salt, parameters: parameters)
        var asked = 0
        let checked = try Argon2.hash(
            password: Array("pw".utf8), salt: salt, parameters: parameters, variant: .id, version: .v13,
            isCancelled: {
                asked += 1
                return false
            }
        )
        #expect(plain == checked)
        #expect(asked == 3 * 4 * 2)
    }

    /// bcrypt at cost 31 (some 40 hours) stops at the next round once cancelled.
    @Test func aBcryptChecksumOfHoursStopsWhenCancelled() {
        var asked = 0
        let checksum = Bcrypt.checksum(password: Array("pw".utf8), salt: Array(repeating: 5, count: 16), cost: 31, isCancelled: {
            asked += 1
            return asked > 100
        })
        #expect(checksum == nil)
        #expect(asked == 101)
        #expect(Bcrypt.checksum(password: Array("pw".utf8), salt: Array(repeating: 5, count: 16), cost: 4, isCancelled: { false })
            == Bcrypt.checksum(password: Array("pw".utf8), salt: Array(repeating: 5, count: 16), cost: 4))
    }

    /// An imported PHC string whose memory × passes is over the caller's limit is refused before anything is
    /// allocated or computed, even when its memory and passes are each within theirs.
    @Test func verifyAnyPHCRefusesWorkOverTheLimit() throws {
        let phc = "$argon2i$v=19$m=1048576,t=1000,p=1$c29tZXNhbHRzb21lc2FsdA$" + String(repeating: "A", count: 42) + "Y"
        let error = #expect(throws: Argon2Error.self) {
            try Argon2.verifyAnyPHC(password: "pw", phc: phc, maxMemoryKiB: 1_048_576, maxWork: 2_000_000)
        }
        #expect(error?.isCostLimitExceeded == true)
        #expect(Argon2Parameters(memoryKiB: 1_048_576, iterations: 1000, parallelism: 1).work == 1_048_576_000)
    }
}
