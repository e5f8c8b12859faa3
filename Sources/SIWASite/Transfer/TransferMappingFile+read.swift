import Foundation

extension TransferMappingFile {
    /// The mapping file at `path`, as `siwa transfer import` reads it. A file that cannot be read or is not
    /// a mapping is a ``SiteFailure`` naming the file ("cannot read PATH: …", with the line at fault).
    public static func read(path: String) throws(SiteFailure) -> [TransferMappingRow] {
        do {
            return try parse(String(contentsOfFile: path, encoding: .utf8))
        } catch let error as FormatError {
            throw SiteFailure("cannot read \(path): \(error)")
        } catch {
            throw SiteFailure("cannot read \(path): \(error.localizedDescription)")
        }
    }
}
