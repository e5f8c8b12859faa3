import SQLKit

extension SIWADatabase {
    /// Takes the lease on the periodic job `name` for `holder` until `until`, when nobody holds it at
    /// `now` (or `holder` already does). True when taken: then this instance runs the job and the
    /// others skip it until the lease ends. A holder that dies leaves its lease to expire.
    ///
    /// One statement on both backends (an upsert that only overwrites an expired or own lease), so
    /// two instances asking at once cannot both win.
    public func claimJob(_ name: String, holder: String, now: Int64, until: Int64) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                INSERT INTO job_leases (name, holder, lease_until) VALUES (\(bind: name), \(bind: holder), \(bind: until))
                ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
                WHERE job_leases.lease_until <= \(bind: now) OR job_leases.holder = excluded.holder
                RETURNING name
                """).first() != nil
        }
    }
}
