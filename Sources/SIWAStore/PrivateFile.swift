import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Files siwa creates that hold personal data or secrets — the SQLite database (SQLite gives its `-wal`,
/// `-shm` and `-journal` files the database file's mode), backups, `people export --output`, generated
/// keys — are the owner's alone (SPEC §14): mode 0600 from before their first byte, whatever the umask.
/// Folders siwa creates for them are 0700.
public enum PrivateFile {
    public struct Failure: LocalizedError, CustomStringConvertible {
        public let description: String
        public var errorDescription: String? { description }
    }

    /// Creates `path` empty with mode 0600. With `replacing`, an existing file is emptied and set to 0600;
    /// without, an existing file is a ``Failure`` (`exists` true).
    public static func create(atPath path: String, replacing: Bool) throws {
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (replacing ? O_TRUNC : O_EXCL)
        let descriptor = open(path, flags, mode_t(0o600))
        guard descriptor >= 0 else {
            let error = errno
            throw Failure(description: "cannot create \(path): \(String(cString: strerror(error)))")
        }
        defer { close(descriptor) }
        // The mode of a file that existed (with `replacing`) is not changed by open(2).
        guard fchmod(descriptor, 0o600) == 0 else {
            throw Failure(description: "cannot make \(path) private (mode 0600): \(String(cString: strerror(errno)))")
        }
    }

    /// Whether `path` exists (a file, a folder, or a link).
    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Writes `data` to `path`, created (or, with `replacing`, emptied) with mode 0600 before the first byte,
    /// and flushed to the disk.
    public static func write(_ data: Data, toPath path: String, replacing: Bool) throws {
        try create(atPath: path, replacing: replacing)
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw Failure(description: "cannot open \(path) for writing")
        }
        defer { try? handle.close() }
        try handle.write(contentsOf: data)
        try handle.synchronize()
    }

    /// Creates the folder `path` (and the missing ones above it) with mode 0700; an existing folder is left as it is.
    public static func createDirectory(atPath path: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }
}
