import ArgumentParser
import SIWASite

/// `siwa admin`: an operator's actions on the service's database, with `siwa serve`'s settings; safe while
/// instances serve. Every action writes one audit line (`admin: …`) to the log.
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "People, sessions, the revocation outbox, OIDC clients and keys, re-sealing, backups and the audit (docs/admin.md).",
        discussion: """
            Uses the same settings as `siwa serve` (DATABASE_URL, the keys), given to any admin command as flags or \
            in the environment. Read commands write nothing; every other action is recorded in the database \
            (`siwa admin audit`) and each writes an audit line to the log. Destructive commands ask on a terminal; \
            scripts pass --yes.

            """ + "\n" + SettingFlags.helpText,
        subcommands: [People.self, Sessions.self, Outbox.self, OIDC.self, Reseal.self, Backup.self, Audit.self]
    )

    /// What every action takes: `--json` and the settings.
    struct Common: ParsableArguments {
        @Flag(help: "Print JSON for machines instead of lines for people") var json = false
        @OptionGroup var settings: SettingsOptions

        /// Runs `body` with the site's admin (database and dependencies opened, then closed): `.read` for
        /// commands that write nothing.
        func withAdmin(_ access: AdminAccess, _ body: (SiteAdmin) async throws -> Void) async throws {
            let admin = try await SiteAdmin.open(configuration: Site.configuration(settings.sources()), access: access)
            do {
                try await body(admin)
            } catch {
                await admin.close()
                throw error
            }
            await admin.close()
        }
    }

    /// What a destructive command takes: `--yes`, or the operator's answer on a terminal.
    struct Confirmation: ParsableArguments {
        @Flag(name: .shortAndLong, help: "Do it without asking (scripts; without a terminal it is required)") var yes = false

        /// Goes on when `--yes` was given or the operator types `yes` on the terminal; otherwise exits with
        /// status 1 having changed nothing.
        func confirm(_ question: String) throws {
            try AdminConfirmation.confirm(question, yes: yes)
        }
    }

    /// Not found: one line on standard error, exit status 1.
    static func notFound(_ id: String) -> ExitCode {
        printError("no account \(id)")
        return ExitCode(1)
    }

    struct People: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Find, show, export (GDPR access request) and delete accounts.",
            subcommands: [Find.self, Show.self, Export.self, Delete.self]
        )

        struct Find: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Finds accounts by email, Apple sub or id.")
            @Option(help: "The email address (ASCII case ignored; may find several)") var email: String?
            @Option(help: "Apple's sub") var sub: String?
            @Option(help: "The account id") var id: String?
            @OptionGroup var common: Common

            func validate() throws {
                guard [email, sub, id].compactMap({ $0 }).count == 1 else {
                    throw ValidationError("give exactly one of --email, --sub, --id")
                }
            }

            func run() async throws {
                let query: PersonQuery = if let email { .email(email) } else if let sub { .sub(sub) } else { .id(id ?? "") }
                try await common.withAdmin(.read) { admin in
                    let found = try await admin.findPeople(query)
                    print(AdminOutput.people(found, json: common.json))
                    if found.isEmpty { throw ExitCode(1) }
                }
            }
        }

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Shows an account and what it holds.")
            @Argument(help: "The account id") var id: String
            @OptionGroup var common: Common

            func run() async throws {
                try await common.withAdmin(.read) { admin in
                    guard let record = try await admin.person(id: id, action: "show") else { throw AdminCommand.notFound(id) }
                    print(AdminOutput.person(record, json: common.json))
                }
            }
        }

        struct Export: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Everything stored about a person as JSON (GDPR art. 15), without secrets or their hashes.",
                discussion: "With --output, written to FILE with mode 0600 (it is personal data); without, printed.")
            @Argument(help: "The account id") var id: String
            @Option(name: .shortAndLong, help: "Write the JSON to this file (mode 0600) instead of standard output") var output: String?
            @Flag(help: "Replace --output's file when it exists") var overwrite = false
            /// Its output is JSON whether or not `--json` is given.
            @OptionGroup var common: Common

            func run() async throws {
                try await common.withAdmin(.read) { admin in
                    guard let record = try await admin.person(id: id, action: "export") else { throw AdminCommand.notFound(id) }
                    let json = AdminOutput.export(record)
                    guard let output else {
                        print(json)
                        return
                    }
                    try SiteAdmin.writePrivateFile(json + "\n", to: output, overwrite: overwrite)
                    printError("wrote \(output) (mode 0600)")
                }
            }
        }

        struct Delete: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Deletes an account as its owner's \"Delete account\" does; its Apple tokens are revoked through the outbox.",
                discussion: """
                    When some of its Apple tokens cannot be opened with TOKEN_ENCRYPTION_KEY (so could not be revoked), \
                    nothing is deleted and it exits with status 1, saying how many; --drop-unreadable-tokens deletes it \
                    anyway, leaving those grants at Apple (recorded in the audit).
                    """)
            @Argument(help: "The account id") var id: String
            @Flag(help: "Delete even when some Apple tokens cannot be opened (they are then never revoked at Apple)")
            var dropUnreadableTokens = false
            @OptionGroup var confirmation: Confirmation
            @OptionGroup var common: Common

            func run() async throws {
                try confirmation.confirm("Delete account \(id) and everything stored about it?")
                try await common.withAdmin(.write) { admin in
                    guard let deleted = try await admin.deletePerson(id: id, droppingUnreadable: dropUnreadableTokens) else {
                        throw AdminCommand.notFound(id)
                    }
                    print(AdminOutput.deleted(id: id, deleted, json: common.json))
                }
            }
        }
    }

    struct Sessions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Ends a person's sessions.", subcommands: [Revoke.self])

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Signs a person out everywhere: web sessions, app bearers, OpenID access tokens.")
            @Argument(help: "The account id") var id: String
            @OptionGroup var confirmation: Confirmation
            @OptionGroup var common: Common

            func run() async throws {
                try confirmation.confirm("Sign account \(id) out everywhere?")
                try await common.withAdmin(.write) { admin in
                    guard let ended = try await admin.revokeSessions(id: id) else { throw AdminCommand.notFound(id) }
                    print(AdminOutput.signedOut(id: id, ended, json: common.json))
                }
            }
        }
    }

    struct Outbox: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revocations Apple has not accepted yet.", subcommands: [List.self, Retry.self], defaultSubcommand: List.self)

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Lists pending revocations with attempts and last error (the default).")
            @OptionGroup var common: Common

            func run() async throws {
                try await common.withAdmin(.read) { admin in
                    print(AdminOutput.outbox(try await admin.outbox(), json: common.json))
                }
            }
        }

        struct Retry: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Makes failed or held revocations due now; the serving instances send them at their next poll.")
            @Option(help: "Only this outbox item") var item: String?
            @OptionGroup var common: Common

            func run() async throws {
                try await common.withAdmin(.write) { admin in
                    print(AdminOutput.retried(try await admin.retryOutbox(id: item), json: common.json))
                }
            }
        }
    }

    struct OIDC: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "oidc", abstract: "The OpenID provider: its clients and signing keys.",
            subcommands: [Clients.self, Keys.self, RotateKey.self])

        struct Clients: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Lists the configured OIDC clients (without secrets).")
            @OptionGroup var common: Common

            func run() async throws {
                try await common.withAdmin(.read) { admin in
                    print(AdminOutput.oidcClients(admin.oidcClients(), json: common.json))
                }
            }
        }

        struct Keys: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Lists the ID-token signing keys: which signs, which are published until when.")
            @OptionGroup var common: Common

            func run() async throws {
                try await common.withAdmin(.read) { admin in
                    print(AdminOutput.oidcKeys(try await admin.oidcKeys(), json: common.json))
                }
            }
        }

        struct RotateKey: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "rotate-key",
                abstract: "A new ID-token signing key for every instance, without a restart (docs/operating.md, \"Rotating keys\").",
                discussion: """
                    The new key is published at once and signs from --signs-in seconds later on every instance, so that \
                    relying parties caching the JWKS (up to 5 minutes) know it first. The keys it replaces stay \
                    published until the ID tokens they signed have expired (an hour), then drop out.
                    """)
            @Option(help: "Seconds until the new key signs (0: within seconds, on every instance)") var signsIn: Int64 = 600
            @Flag(help: "The old key leaked: sign with the new key at once and take every other key out of the JWKS now (ID tokens they signed stop verifying)")
            var withdrawPrevious = false
            @OptionGroup var confirmation: Confirmation
            @OptionGroup var common: Common

            func validate() throws {
                guard signsIn >= 0, signsIn <= 86_400 else { throw ValidationError("--signs-in must be 0 to 86400 seconds") }
            }

            func run() async throws {
                if withdrawPrevious {
                    try confirmation.confirm("Withdraw every other ID-token signing key now (ID tokens they signed stop verifying)?")
                }
                try await common.withAdmin(.write) { admin in
                    let rotation = try await admin.rotateOIDCKey(signsIn: signsIn, withdrawOthers: withdrawPrevious)
                    print(AdminOutput.rotated(rotation, json: common.json))
                }
            }
        }
    }

    struct Reseal: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Seals again with TOKEN_ENCRYPTION_KEY what TOKEN_ENCRYPTION_KEY_PREVIOUS sealed; safe while instances serve.",
            discussion: """
                Prints how many stored secrets were re-sealed, were already current, open with neither key, or were \
                rewritten meanwhile. Exits with status 1 when some open with neither key. When a whole pass finds \
                everything sealed with TOKEN_ENCRYPTION_KEY, the change of key the database records is finished: \
                from then on TOKEN_ENCRYPTION_KEY alone is the recorded key.
                """)
        @OptionGroup var confirmation: Confirmation
        @OptionGroup var common: Common

        func run() async throws {
            try confirmation.confirm("Seal every stored secret again with TOKEN_ENCRYPTION_KEY?")
            try await common.withAdmin(.write) { admin in
                let report = try await admin.reseal()
                print(AdminOutput.resealed(report, previousKeySet: admin.hasPreviousTokenKey, json: common.json))
                if report.unreadable > 0 { throw ExitCode(1) }
            }
        }
    }

    struct Backup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copies the SQLite database to PATH while instances serve (PostgreSQL: use pg_dump).")
        @Argument(help: "Where to write the copy") var path: String
        @Flag(help: "Replace PATH when it exists") var overwrite = false
        @OptionGroup var confirmation: Confirmation
        @OptionGroup var common: Common

        func run() async throws {
            if AdminConfirmation.backupReplaces(path, overwrite: overwrite) {
                try confirmation.confirm("Replace the existing backup \(path)?")
            }
            let report = try await SiteAdmin.backup(configuration: Site.configuration(common.settings.sources()), to: path,
                                                    overwrite: overwrite)
            print(AdminOutput.backup(report, json: common.json))
        }
    }

    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Lists what operators did with siwa admin, newest first: when, action, account, who and where.")
        @Option(help: "Only the actions on this account") var account: String?
        @Option(help: "At most this many entries") var limit: Int = 100
        @OptionGroup var common: Common

        func validate() throws {
            guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be 1 to 100000") }
        }

        func run() async throws {
            try await common.withAdmin(.read) { admin in
                print(AdminOutput.audit(try await admin.auditEntries(account: account, limit: limit), json: common.json))
            }
        }
    }
}
