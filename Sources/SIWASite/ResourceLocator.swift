import Foundation

/// Where `templates/` and `Public/` are when `SIWA_RESOURCES_DIR` does not say: the working directory,
/// else the source checkout this binary was built from (so `swift run` and `swift test` work from anywhere).
public enum ResourceLocator {
    /// The first of the working directory and the package root that holds `templates/`.
    public static func defaultRoot() -> String {
        for root in [FileManager.default.currentDirectoryPath, packageRoot] {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/templates", isDirectory: &isDirectory), isDirectory.boolValue {
                return root
            }
        }
        return packageRoot
    }

    /// The source checkout: Sources/SIWASite/ResourceLocator.swift → the package root.
    public static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }
}
