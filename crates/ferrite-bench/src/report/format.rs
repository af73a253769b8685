//! Numbers for people: the formats of the human-readable summaries and the progress display
//! (thousands separators, k/M/G rates, binary byte units, durations, latencies).

/// `1234567` as `1,234,567`, for people.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count or rate in at most four significant digits with a k / M / G suffix: `412.3k`.
pub fn si(x: f64) -> String {
    let x = if x.is_finite() { x.max(0.0) } else { 0.0 };
    let (scaled, suffix) = if x >= 1e9 {
        (x / 1e9, "G")
    } else if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        return format!("{x:.0}");
    };
    let decimals = if scaled >= 100.0 {
        0
    } else if scaled >= 10.0 {
        1
    } else {
        2
    };
    format!("{scaled:.decimals$}{suffix}")
}

/// Bytes in binary units: `640.0 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A duration for people: `850 ms`, `4.2 s`, `3m05s`, `1h02m`.
pub fn duration(seconds: f64) -> String {
    let seconds = if seconds.is_finite() { seconds.max(0.0) } else { 0.0 };
    if seconds < 1.0 {
        return format!("{:.0} ms", seconds * 1e3);
    }
    if seconds < 60.0 {
        return format!("{seconds:.1} s");
    }
    let whole = seconds.round() as u64;
    if whole < 3600 {
        format!("{}m{:02}s", whole / 60, whole % 60)
    } else {
        format!("{}h{:02}m", whole / 3600, whole % 3600 / 60)
    }
}

/// A latency given in nanoseconds: `850 ns`, `3.1 us`, `48 us`, `1.20 ms`.
pub fn latency(nanos: u64) -> String {
    let ns = nanos as f64;
    if nanos < 1_000 {
        format!("{nanos} ns")
    } else if nanos < 10_000 {
        format!("{:.1} us", ns / 1e3)
    } else if nanos < 1_000_000 {
        format!("{:.0} us", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(3_200_000), "3,200,000");
        assert_eq!(si(999.4), "999");
        assert_eq!(si(412_345.0), "412k");
        assert_eq!(si(41_234.0), "41.2k");
        assert_eq!(si(1_500_000.0), "1.50M");
        assert_eq!(si(f64::NAN), "0");
        assert_eq!(bytes(100), "100 bytes");
        assert_eq!(bytes(640 << 20), "640.0 MiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(duration(0.25), "250 ms");
        assert_eq!(duration(4.24), "4.2 s");
        assert_eq!(duration(185.0), "3m05s");
        assert_eq!(duration(3_720.0), "1h02m");
        assert_eq!(latency(850), "850 ns");
        assert_eq!(latency(3_140), "3.1 us");
        assert_eq!(latency(48_200), "48 us");
        assert_eq!(latency(1_200_000), "1.20 ms");
    }
}
