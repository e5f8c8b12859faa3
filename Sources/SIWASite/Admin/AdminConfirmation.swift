import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How a destructive `siwa admin` command (`people delete`, `sessions revoke`, `oidc rotate-key
/// --withdraw-previous`, `reseal`, `backup --overwrite`) is confirmed (SPEC §14): `--yes` in scripts, or the
/// operator's `yes` typed on the terminal. Without either nothing is changed and the command exits with 1.
public enum AdminConfirmation {
    /// Returns when confirmed; otherwise a ``SiteFailure`` saying nothing was changed. `question` is asked on
    /// standard error when standard input is a terminal.
    public static func confirm(_ question: String, yes: Bool) throws {
        if yes { return }
        guard isatty(STDIN_FILENO) == 1 else {
            throw SiteFailure("not confirmed (\(question)): no terminal to ask on; pass --yes to do it; nothing was changed")
        }
        FileHandle.standardError.write(Data("\(question) Type yes to go on: ".utf8))
        guard readLine()?.trimmingCharacters(in: .whitespaces).lowercased() == "yes" else {
            throw SiteFailure("not confirmed; nothing was changed")
        }
    }

    /// Whether `backup --overwrite` would replace a file (only then does it ask).
    public static func backupReplaces(_ path: String, overwrite: Bool) -> Bool {
        overwrite && FileManager.default.fileExists(atPath: path)
    }
}
