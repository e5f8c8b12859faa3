import Foundation
import JOSE
import SIWAStore
import SIWAWeb

/// Demo mode's generated secrets, kept in the data folder so restarts keep sessions and accounts.
struct DemoFiles {
    let directory: String

    func appleKey() throws -> P256PrivateKey {
        let path = directory + "/demo-apple-key.p8"
        if let pem = try? String(contentsOfFile: path, encoding: .utf8) {
            do { return try P256PrivateKey(pkcs8PEM: pem) } catch {
                throw ConfigurationError(SiteSettings.dataDirectory.name, "holds an unreadable demo key at \(path): delete it to generate a new one")
            }
        }
        let key = try P256PrivateKey.generate()
        try write(try key.pkcs8PEM(), to: path)
        return key
    }

    func tokenEncryptionKey() throws -> AESGCMKey {
        let path = directory + "/demo-token-encryption.key"
        if let encoded = try? String(contentsOfFile: path, encoding: .utf8) {
            guard let bytes = try? Base64.decode(encoded.trimmingCharacters(in: .whitespacesAndNewlines)),
                  let key = try? AESGCMKey(bytes: bytes)
            else {
                throw ConfigurationError(SiteSettings.dataDirectory.name, "holds an unreadable demo encryption key at \(path): delete it to generate a new one")
            }
            return key
        }
        let key = AESGCMKey.generate()
        try write(Base64.encode(key.bytes) + "\n", to: path)
        return key
    }

    private func write(_ contents: String, to path: String) throws {
        do {
            // Owner-only from the first byte: these are secrets, even in demo mode; the folder holds the database too.
            try PrivateFile.createDirectory(atPath: directory)
            try PrivateFile.write(Data(contents.utf8), toPath: path, replacing: false)
        } catch {
            throw ConfigurationError(SiteSettings.dataDirectory.name, "is not writable (\(directory)): \(error.localizedDescription)")
        }
    }
}
