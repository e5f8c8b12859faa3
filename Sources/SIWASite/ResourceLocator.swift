import Foundation

/// Where `templates/` and `Public/` are when `SIWA_RESOURCES_DIR` does not say: the working directory,
/// else `../share/siwa` beside the running binary (an installed one: `/usr/bin/siwa` reads
/// `/usr/share/siwa`, `/usr/local/bin/siwa` reads `/usr/local/share/siwa`), else the source checkout this
/// binary was built from (so `swift run` and `swift test` work from anywhere).
public enum ResourceLocator {
    /// The first of the working directory, the installed folder and the package root that holds `templates/`.
    public static func defaultRoot() -> String {
        defaultRoot(workingDirectory: FileManager.default.currentDirectoryPath, executablePath: executablePath)
    }

    /// `defaultRoot()` for a given working directory and binary (nil: unknown), so tests can place both.
    public static func defaultRoot(workingDirectory: String, executablePath: String?) -> String {
        var candidates = [workingDirectory]
        if let executablePath { candidates.append(installedRoot(executablePath: executablePath)) }
        candidates.append(packageRoot)
        return candidates.first(where: holdsTemplates) ?? packageRoot
    }

    /// The installed resources of a binary: `BIN/../share/siwa` (`/usr/bin/siwa` → `/usr/share/siwa`).
    public static func installedRoot(executablePath: String) -> String {
        URL(fileURLWithPath: executablePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("share/siwa").standardizedFileURL.path
    }

    /// The source checkout: Sources/SIWASite/ResourceLocator.swift → the package root.
    public static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// The running binary, symbolic links resolved (`/proc/self/exe` on Linux), so a link in another
    /// folder still finds the resources beside the real file.
    static var executablePath: String? {
        if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return target }
        return Bundle.main.executableURL?.resolvingSymlinksInPath().path
    }

    private static func holdsTemplates(_ root: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: root + "/templates", isDirectory: &isDirectory) && isDirectory.boolValue
    }
}
