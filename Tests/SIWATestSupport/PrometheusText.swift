/// One sample read from Prometheus's text format, as a registry emits it for `/metrics`.
public enum PrometheusText {
    /// The value on the line of `metric` whose labels include `label` (e.g. `result="accepted"`), as a whole
    /// number; 0 when there is no such line (a counter never incremented is not emitted).
    public static func count(in emitted: [UInt8], metric: String, label: String) -> Int {
        let line = String(decoding: emitted, as: UTF8.self).split(separator: "\n")
            .first { $0.hasPrefix(metric + "{") && $0.contains(label) }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }.map { Int($0) } ?? 0
    }
}
