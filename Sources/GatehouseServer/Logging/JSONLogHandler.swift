import Foundation
import Logging

/// Writes each log event as one JSON object on one line — `{"ts", "level", "label", "message", …metadata}` — for log
/// collectors (Loki, CloudWatch, Elasticsearch). `gatehouse --log-format json` uses it; an embedding program can
/// bootstrap it too:
///
/// ```swift
/// LoggingSystem.bootstrap { JSONLogHandler(label: $0) }
/// ```
///
/// Metadata values that are lists or dictionaries are written as their text. Keys are sorted, so equal events print
/// equal lines.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let write: @Sendable (String) -> Void

    /// A handler writing to standard error.
    public init(label: String) {
        self.init(label: label) { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }

    /// A handler giving each line (without its newline) to `write`.
    public init(label: String, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields: [String: String] = [:]
        for (key, value) in metadataProvider?.get() ?? [:] { fields[key] = "\(value)" }
        for (key, value) in metadata { fields[key] = "\(value)" }
        for (key, value) in event.metadata ?? [:] { fields[key] = "\(value)" }
        if let error = event.error { fields["error"] = "\(error)" }
        fields["ts"] = Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        fields["level"] = event.level.rawValue
        fields["label"] = label
        fields["message"] = event.message.description
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(fields) else { return }
        write(String(decoding: data, as: UTF8.self))
    }
}
