import Foundation
import PageTemplates

/// The emulator's pages (`templates/emulator/*.mustache`), parsed once when the router is built and
/// rendered from typed values with the site's own engine (`PageTemplates`, over swift-mustache): `{{…}}` is HTML-escaped,
/// so every request-derived value on a page is escaped.
struct EmulatorTemplates: Sendable {
    static let required = ["sheet", "form_post", "error", "dashboard"]

    let library: TemplateLibrary

    /// Parses every `*.mustache` in `directory` (partials included); fails if a page is missing or
    /// a template cannot be parsed.
    init(directory: String) throws {
        guard FileManager.default.fileExists(atPath: directory) else { throw EmulatorError.templateMissing(Self.required[0]) }
        let library = try TemplateLibrary(directory: directory)
        for name in Self.required where !library.contains(name) {
            throw EmulatorError.templateMissing(name)
        }
        self.library = library
    }

    func render(_ name: String, _ view: TemplateView) -> String {
        library.render(name, view) ?? "template \(name) failed to render"
    }
}
