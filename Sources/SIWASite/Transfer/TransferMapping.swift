import Foundation

/// One line of a team-transfer mapping: our account id, the sending team's `sub`, and the
/// `transfer_sub` Apple issued for the recipient team.
public struct TransferMappingRow: Sendable, Equatable {
    public var userID: String
    public var sub: String
    public var transferSub: String

    public init(userID: String, sub: String, transferSub: String) {
        self.userID = userID
        self.sub = sub
        self.transferSub = transferSub
    }
}

/// The mapping file `siwa transfer export` writes and `siwa transfer import` reads: CSV with the
/// header `user_id,sub,transfer_sub`. Apple's identifiers and our UUIDs never contain commas,
/// quotes or spaces, so no quoting is needed; a value that does is refused rather than mangled.
public enum TransferMappingFile {
    public static let header = "user_id,sub,transfer_sub"

    public struct FormatError: Error, CustomStringConvertible {
        public let description: String
    }

    public static func line(_ row: TransferMappingRow) throws -> String {
        for value in [row.userID, row.sub, row.transferSub] where !isPlain(value) {
            throw FormatError(description: "cannot write \"\(value)\" (of account \(row.userID)) to the mapping: empty or contains a comma, quote or space")
        }
        return "\(row.userID),\(row.sub),\(row.transferSub)"
    }

    /// Parses a whole file; errors name the line.
    public static func parse(_ text: String) throws -> [TransferMappingRow] {
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).map(String.init)
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard lines.first?.trimmingCharacters(in: .whitespaces) == header else {
            throw FormatError(description: "line 1: expected the header \"\(header)\"")
        }
        var rows: [TransferMappingRow] = []
        var seen = Set<String>()
        for (index, line) in lines.enumerated().dropFirst() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 3, fields.allSatisfy(isPlain) else {
                throw FormatError(description: "line \(index + 1): expected user_id,sub,transfer_sub")
            }
            guard seen.insert(fields[0]).inserted else {
                throw FormatError(description: "line \(index + 1): account \(fields[0]) appears twice")
            }
            rows.append(TransferMappingRow(userID: fields[0], sub: fields[1], transferSub: fields[2]))
        }
        return rows
    }

    private static func isPlain(_ value: String) -> Bool {
        !value.isEmpty && !value.contains { $0 == "," || $0 == "\"" || $0.isWhitespace || $0.isNewline }
    }
}
