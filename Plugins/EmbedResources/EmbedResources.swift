import Foundation
import PackagePlugin

/// Compiles the files of a target's `Resources/` folder into the module as string constants
/// (`EmbeddedResources.openapi`, `EmbeddedResources.commonPasswords`).
///
/// SwiftPM's resource bundles are folders the program looks for beside its executable or at the absolute path it was
/// built in: a `gatehouse` binary copied anywhere else stopped at start. Embedded, the release binary is one file that
/// needs nothing beside it. The files stay ordinary files in the repository (the root's `openapi.yaml` links to one);
/// this plugin reads them at every build.
@main
struct EmbedResources: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let folder = target.directoryURL.appending(path: "Resources")
        let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: [.isRegularFileKey])
            .filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedResources.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(files.map(\.lastPathComponent).joined(separator: ", ")) in \(target.name)",
                executable: try context.tool(named: "EmbedResourcesTool").url,
                arguments: [output.path] + files.map(\.path),
                inputFiles: files,
                outputFiles: [output]
            )
        ]
    }
}
