import Foundation
@testable import Gatehouse
import Testing

@Suite struct ErrorParsingTests {
    @Test func theEnvelopeBecomesAnAppErrorWithEveryField() throws {
        let body = Data(#"{"error":"name already in use","error_code":"AccountNameInUse","link":"http://x/openapi.yaml"}"#.utf8)
        let error = try #require(AppCore.error(from: TransportResponse(statusCode: 409, headers: ["Content-Type": "application/json"], body: body)) as? AppError)
        #expect(error.code == .accountNameInUse)
        #expect(error.message == "name already in use")
        #expect(error.link == "http://x/openapi.yaml")
        #expect(error.httpStatus == 409)
        #expect(error.localizedDescription == "name already in use")
    }

    @Test func unknownCodesAreKeptAsTheyCame() throws {
        let body = Data(#"{"error":"new thing","error_code":"SomethingNew"}"#.utf8)
        let error = try #require(AppCore.error(from: TransportResponse(statusCode: 400, headers: ["content-type": "application/json"], body: body)) as? AppError)
        #expect(error.code.rawValue == "SomethingNew")
    }

    @Test func answersWithoutTheEnvelopeAreClientErrors() throws {
        let error = try #require(AppCore.error(from: TransportResponse(statusCode: 502, headers: ["Content-Type": "text/html"], body: Data("<h1>Bad gateway</h1>".utf8))) as? ClientError)
        #expect(error.httpStatus == 502)
        #expect(!error.isTransport)
    }
}
