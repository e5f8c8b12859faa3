import SQLKit

/// How SQLKit writes SQL for SQLite: the same choices as SQLiteKit's dialect (which siwa used before it
/// ran SQLite directly), for SQLite ≥ 3.35 (`RETURNING`, standard upserts).
struct SQLiteDialect: SQLDialect {
    var name: String { "sqlite" }
    var identifierQuote: any SQLExpression { SQLRaw(#"""#) }
    var literalStringQuote: any SQLExpression { SQLRaw("'") }
    func bindPlaceholder(at position: Int) -> any SQLExpression {
        position < Self.placeholders.count ? Self.placeholders[position] : SQLRaw("?\(position)")
    }
    /// `?1` … `?63`, made once: every bound value of every statement asks for one.
    private static let placeholders = (0..<64).map { SQLRaw("?\($0)") }
    func literalBoolean(_ value: Bool) -> any SQLExpression { SQLRaw(value ? "TRUE" : "FALSE") }
    var literalDefault: any SQLExpression { SQLLiteral.null }
    var supportsIfExists: Bool { true }
    var supportsDropBehavior: Bool { false }
    var supportsAutoIncrement: Bool { false }
    var autoIncrementClause: any SQLExpression { SQLRaw("AUTOINCREMENT") }
    var enumSyntax: SQLEnumSyntax { .unsupported }
    var triggerSyntax: SQLTriggerSyntax { .init(create: [.supportsBody, .supportsCondition, .supportsUpdateColumns], drop: []) }
    var alterTableSyntax: SQLAlterTableSyntax { .init(allowsBatch: false) }
    var upsertSyntax: SQLUpsertSyntax { .standard }
    var supportsReturning: Bool { true }
    var unionFeatures: SQLUnionFeatures { [.union, .unionAll, .intersect, .except] }
}
