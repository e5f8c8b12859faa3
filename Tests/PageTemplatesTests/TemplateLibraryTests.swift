import Foundation
import PageTemplates
import Testing

/// The pages' templates through swift-mustache, from typed values: what the templates rely on.
@Suite("TemplateLibrary: swift-mustache, parsed once, rendered from typed values")
struct TemplateLibraryTests {
    /// `template` rendered with `view`, with `partials` beside it.
    private static func render(_ template: String, _ view: TemplateView, partials: [String: String] = [:],
                               sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        var sources = partials
        sources["main"] = template
        return try #require(try TemplateLibrary(sources: sources).render("main", view), sourceLocation: sourceLocation)
    }

    @Test("a variable is HTML-escaped; {{{…}}} and {{&…}} write it as it is; unknown names write nothing")
    func interpolation() throws {
        let view: TemplateView = ["x": .text(#"<a href="/?a=1&b='2'">é</a>"#), "yes": true]
        #expect(try Self.render("[{{x}}]", view) == "[&lt;a href=&quot;/?a=1&amp;b=&#39;2&#39;&quot;&gt;é&lt;/a&gt;]")
        #expect(try Self.render("[{{{x}}}][{{& x }}]", view) == #"[<a href="/?a=1&b='2'">é</a>][<a href="/?a=1&b='2'">é</a>]"#)
        #expect(try Self.render("[{{ missing }}][{{yes}}]", view) == "[][true]")
        #expect(try Self.render("no tags at all\n", [:]) == "no tags at all\n")
    }

    @Test("sections: a true flag and any text open them, false, nil and an empty list do not; text is pushed")
    func sections() throws {
        let view: TemplateView = [
            "on": true, "off": false, "email": "a@example.com", "empty": "", "name": "Ada",
            "people": .list([["name": "Ada"], ["name": "Grace"]]), "nobody": .list([]),
            "account": .view(["name": "Inner", "plan": "pro"]),
        ]
        #expect(try Self.render("{{#on}}A{{/on}}{{#off}}B{{/off}}{{#missing}}C{{/missing}}", view) == "A")
        // Inside a text section `.` is the text, and other names are found further out.
        #expect(try Self.render("{{#email}}<{{.}}> {{name}}{{/email}}", view) == "<a@example.com> Ada")
        #expect(try Self.render("{{#empty}}shown{{/empty}}", view) == "shown")
        #expect(try Self.render("{{#people}}{{name}},{{/people}}{{#nobody}}x{{/nobody}}", view) == "Ada,Grace,")
        #expect(try Self.render("{{#account}}{{name}}/{{plan}}{{/account}} {{name}}", view) == "Inner/pro Ada")
        #expect(try Self.render("{{account.plan}} {{account.missing}} {{name.length}}", view) == "pro  ")
    }

    @Test("inverted sections render exactly when the section would not")
    func invertedSections() throws {
        let view: TemplateView = ["on": true, "off": false, "text": "t", "nobody": .list([]), "somebody": .list([[:]])]
        #expect(try Self.render("{{^on}}1{{/on}}{{^off}}2{{/off}}{{^missing}}3{{/missing}}{{^text}}4{{/text}}", view) == "23")
        #expect(try Self.render("{{^nobody}}5{{/nobody}}{{^somebody}}6{{/somebody}}", view) == "5")
    }

    @Test("a line holding only a section, comment or partial tag leaves nothing; inline tags keep their spaces")
    func standaloneLines() throws {
        let template = "<ul>\n  {{#on}}\n  <li>{{x}}</li>\n  {{/on}}\n  {{! a comment }}\n</ul>\r\n  {{#on}}x{{/on}}  \n"
        #expect(try Self.render(template, ["on": true, "x": "1"]) == "<ul>\n  <li>1</li>\n</ul>\r\n  x  \n")
        #expect(try Self.render("a\n{{#on}}\nb\n{{/on}}", ["on": true]) == "a\nb\n")
    }

    @Test("partials: rendered in the current context; a standalone partial's lines take its indentation")
    func partials() throws {
        let partials = ["item": "<b>{{name}}</b>", "block": "one\ntwo\n"]
        #expect(try Self.render("[{{> item}}]", ["name": "Ada"], partials: partials) == "[<b>Ada</b>]")
        #expect(try Self.render("<div>\n  {{>block}}\n</div>", [:], partials: partials) == "<div>\n  one\n  two\n</div>")
    }

    @Test("inheritance: a parent's blocks are replaced by the child's, defaults stay, the outermost override wins")
    func inheritance() throws {
        let partials = [
            "layout": "<title>{{$title}}Default{{/title}}</title>\n<main>\n{{$content}}{{/content}}\n</main>",
            "middle": "{{<layout}}{{$title}}Middle{{/title}}{{$content}}middle content{{/content}}{{/layout}}",
        ]
        #expect(try Self.render("{{<layout}}\n{{$content}}\n<p>{{x}}</p>\n{{/content}}\nignored\n{{/layout}}\n", ["x": "hi"], partials: partials)
            == "<title>Default</title>\n<main>\n<p>hi</p>\n\n</main>")
        #expect(try Self.render("{{<middle}}{{$title}}Outer{{/title}}{{/middle}}", [:], partials: partials)
            == "<title>Outer</title>\n<main>\nmiddle content\n</main>")
    }

    @Test("set delimiters change the tags from there on")
    func delimiters() throws {
        #expect(try Self.render("{{=<% %>=}}<% x %> {{x}} <%={{ }}=%>{{x}}", ["x": "1"]) == "1 {{x}} 1")
    }

    @Test("what cannot be parsed is refused with the template and line; so is a partial the folder lacks, and a loop")
    func errors() throws {
        func problem(_ sources: [String: String]) -> TemplateError? {
            do {
                _ = try TemplateLibrary(sources: sources)
                return nil
            } catch {
                return error
            }
        }
        #expect(problem(["a": "line 1\n{{#open}}\nnever closed"])?.template == "a")
        #expect(problem(["a": "{{#x}}\n\n{{/y}}"])?.line == 3)
        #expect(problem(["a": "{{/y}}"]) != nil)
        #expect(problem(["a": "text {{x"]) != nil)
        #expect(problem(["a": "{{>missing}}"])?.description == "a: names the partial 'missing', which is not in the folder")
        #expect(problem(["a": "{{<gone}}{{/gone}}"])?.problem == "names the parent 'gone', which is not in the folder")
        #expect(problem(["a": "{{=<% %>}}"]) != nil)
        // swift-mustache would recurse until the stack ran out.
        #expect(problem(["loop": "x{{>loop}}"])?.problem == "includes itself")
        #expect(problem(["a": "{{> b}}", "b": "{{#x}}{{>a}}{{/x}}"])?.problem == "includes itself")
        #expect(problem(["a": "{{> b}}{{> b}}", "b": "b"]) == nil)
    }

    @Test("the shipped templates load and every page renders")
    func shippedTemplates() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../templates").standardized.path
        let pages = try TemplateLibrary(directory: root)
        for name in ["signin", "account", "recovery", "profile", "error", "deleted"] {
            let html = try #require(pages.render(name, ["siteName": "Example & Co", "title": "A <title>", "page": .text(name)]))
            #expect(html.contains("Example &amp; Co") && html.contains("data-page=\"\(name)\""), "\(name)")
        }
        let emulator = try TemplateLibrary(directory: root + "/emulator")
        for name in ["sheet", "form_post", "error", "dashboard"] { #expect(emulator.contains(name)) }
    }
}
