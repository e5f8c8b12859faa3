import Foundation
import SIWASite
import Testing

/// Where templates/ and Public/ are found without `SIWA_RESOURCES_DIR`: the working directory, else
/// `../share/siwa` beside the binary (what the Debian package installs), else the source checkout.
@Suite("ResourceLocator: working directory, then the installed folder, then the checkout")
struct ResourceLocatorTests {
    /// A temporary folder laid out as an installed system: PREFIX/bin/siwa and PREFIX/share/siwa/templates.
    static func installedTree() throws -> (root: String, binary: String, resources: String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-locator-\(UUID().uuidString)").path
        let binary = root + "/usr/bin/siwa"
        let resources = root + "/usr/share/siwa"
        try FileManager.default.createDirectory(atPath: root + "/usr/bin", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: resources + "/templates", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: binary, contents: Data()))
        try FileManager.default.createDirectory(atPath: root + "/empty", withIntermediateDirectories: true)
        return (root, binary, resources)
    }

    @Test("BIN/../share/siwa: /usr/bin/siwa reads /usr/share/siwa, /usr/local/bin/siwa /usr/local/share/siwa")
    func installedRootOfABinary() {
        #expect(ResourceLocator.installedRoot(executablePath: "/usr/bin/siwa") == "/usr/share/siwa")
        #expect(ResourceLocator.installedRoot(executablePath: "/usr/local/bin/siwa") == "/usr/local/share/siwa")
    }

    @Test("an installed binary run from a folder without templates/ finds its share/siwa")
    func installedFolderWhenTheWorkingDirectoryHasNone() throws {
        // setup
        let tree = try Self.installedTree()
        defer { try? FileManager.default.removeItem(atPath: tree.root) }
        // MUT
        let root = ResourceLocator.defaultRoot(workingDirectory: tree.root + "/empty", executablePath: tree.binary)
        // validate
        #expect(root == tree.resources)
    }

    @Test("a working directory holding templates/ wins over the installed folder")
    func workingDirectoryFirst() throws {
        let tree = try Self.installedTree()
        defer { try? FileManager.default.removeItem(atPath: tree.root) }
        try FileManager.default.createDirectory(atPath: tree.root + "/site/templates", withIntermediateDirectories: true)
        #expect(ResourceLocator.defaultRoot(workingDirectory: tree.root + "/site", executablePath: tree.binary) == tree.root + "/site")
    }

    @Test("neither: the source checkout, as for `swift run` and the tests")
    func checkoutLast() throws {
        let tree = try Self.installedTree()
        defer { try? FileManager.default.removeItem(atPath: tree.root) }
        let elsewhere = tree.root + "/empty/bin/siwa"
        #expect(ResourceLocator.defaultRoot(workingDirectory: tree.root + "/empty", executablePath: elsewhere) == ResourceLocator.packageRoot)
        #expect(ResourceLocator.defaultRoot(workingDirectory: tree.root + "/empty", executablePath: nil) == ResourceLocator.packageRoot)
        #expect(FileManager.default.fileExists(atPath: ResourceLocator.packageRoot + "/templates"))
    }
}
