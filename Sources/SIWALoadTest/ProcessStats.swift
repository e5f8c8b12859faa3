import Foundation

/// Readings of one process from /proc (Linux): this one (`self`) or a child by its pid.
struct ProcessStats: Sendable {
    /// `/proc/self` or `/proc/PID`.
    let directory: String

    static let current = ProcessStats(directory: "/proc/self")

    init(pid: Int32) { directory = "/proc/\(pid)" }
    private init(directory: String) { self.directory = directory }

    /// Peak and current resident set size in MB, from `status` (VmHWM, VmRSS).
    func memoryMegabytes() -> (peak: Double, current: Double) {
        guard let status = try? String(contentsOfFile: directory + "/status", encoding: .utf8) else { return (0, 0) }
        func kilobytes(_ field: String) -> Double {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return 0 }
            return Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return (kilobytes("VmHWM") / 1024, kilobytes("VmRSS") / 1024)
    }

    /// User + system CPU seconds used so far by every thread of the process, from `stat` (fields 14
    /// and 15, in clock ticks: 10 ms resolution, so a window of seconds is read to better than 1 %).
    func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: directory + "/stat", encoding: .utf8) else { return 0 }
        return Self.cpuSeconds(stat: stat, ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// The parsing half of ``cpuSeconds()``: the command name in parentheses may itself hold spaces
    /// and parentheses, so the fields are counted from the last `)`.
    static func cpuSeconds(stat: String, ticksPerSecond: Double) -> Double {
        guard let close = stat.lastIndex(of: ")") else { return 0 }
        // After the command name: field 3 (state) is at offset 0, so utime (14) is at 11, stime (15) at 12.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / ticksPerSecond
    }

    /// The 1-minute load average of the machine.
    static func loadAverage() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return 0 }
        return Double(text.split(separator: " ").first ?? "") ?? 0
    }
}
