import Foundation
import Mustache

/// The emulator's Mustache pages, loaded once when the router is built.
struct EmulatorTemplates: Sendable {
    static let required = ["sheet", "form_post", "error", "dashboard"]

    let library: MustacheLibrary

    /// Loads every `*.mustache` in `directory` (partials included); fails if a page is missing.
    init(directory: String) throws {
        var library = MustacheLibrary()
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for file in files where file.hasSuffix(".mustache") {
            let text = try String(contentsOfFile: (directory as NSString).appendingPathComponent(file), encoding: .utf8)
            try library.register(text, named: String(file.dropLast(".mustache".count)))
        }
        for name in Self.required where library.getTemplate(named: name) == nil {
            throw EmulatorError.templateMissing(name)
        }
        self.library = library
    }

    func render(_ name: String, _ context: [String: Any]) -> String {
        library.render(context, withTemplate: name) ?? "template \(name) failed to render"
    }
}
