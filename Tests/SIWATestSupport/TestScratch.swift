import Foundation

/// Names for a test run's temporary files and folders, all inside one folder of this process that is
/// removed when the process exits: tests that restart an app on the same data keep their files until
/// then, and a run leaves nothing behind in the temporary directory.
public enum TestScratch {
    private static let root: String = {
        let root = NSTemporaryDirectory() + "siwa-tests-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(atPath: TestScratch.root) }
        return root
    }()

    /// A fresh path `<root>/<name>-<UUID><suffix>`; nothing is created there.
    public static func path(_ name: String, suffix: String = "") -> String {
        root + "/\(name)-\(UUID().uuidString)\(suffix)"
    }
}
