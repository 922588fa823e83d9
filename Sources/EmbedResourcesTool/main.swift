// The EmbedResources build plugin's tool: `EmbedResourcesTool OUTPUT.swift FILE...` writes one Swift file declaring
// `enum EmbeddedResources` with a `static let` string per file, named after the file without its extension in lower
// camel case (`common-passwords.txt` → `commonPasswords`). Each string is a raw multi-line literal whose delimiter
// has enough `#`s that nothing in the file can end it or start an escape, so the text is compiled in byte for byte.
// Files must be UTF-8 without carriage returns (a multi-line literal turns CRLF into LF, which would change them).
import Foundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("EmbedResourcesTool: \(message)\n".utf8))
    exit(1)
}

func identifier(for file: URL) -> String {
    let words = file.deletingPathExtension().lastPathComponent.split { !$0.isLetter && !$0.isNumber }
    guard let first = words.first else { fail("\(file.lastPathComponent): no letters to name a constant after") }
    let name = first.lowercased() + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    return name.first!.isNumber ? "_" + name : name
}

let arguments = CommandLine.arguments.dropFirst()
guard let outputPath = arguments.first else { fail("usage: EmbedResourcesTool OUTPUT.swift FILE...") }

var source = """
    // Generated at build time by the EmbedResources plugin from this target's Resources folder. Do not edit.

    /// The files of this target's `Resources/` folder, compiled in (no resource bundle to find at run time).
    enum EmbeddedResources {

    """
var names: Set<String> = []
for path in arguments.dropFirst() {
    let file = URL(fileURLWithPath: path)
    guard let data = FileManager.default.contents(atPath: path) else { fail("cannot read \(path)") }
    guard let text = String(data: data, encoding: .utf8) else { fail("\(path) is not UTF-8") }
    guard !data.contains(UInt8(ascii: "\r")) else { fail("\(path) contains a carriage return") }
    let name = identifier(for: file)
    guard names.insert(name).inserted else { fail("two files would both be named \(name)") }
    var hashes = "#"
    while text.contains("\"\"\"" + hashes) || text.contains("\\" + hashes) { hashes += "#" }
    source += """
            /// `Resources/\(file.lastPathComponent)`, \(data.count) bytes.
            static let \(name): String = \(hashes)\"\"\"

        """
    // The literal's last line break is not part of its value: the one added here ends the file's text.
    source += text + "\n\"\"\"\(hashes)\n\n"
}
source += "}\n"
do {
    try Data(source.utf8).write(to: URL(fileURLWithPath: outputPath), options: .atomic)
} catch {
    fail("cannot write \(outputPath): \(error)")
}
