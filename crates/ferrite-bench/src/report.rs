//! How results are written: the one machine-readable `result` line every benchmark ends
//! with, and the number formats of the human-readable summary and progress display.
//!
//! The result line is `result name=value name=value ...`: names are `[a-z0-9_]`, values are
//! plain numbers (no thousands separators, `.` as decimal point) or short words without
//! spaces or `=`. Scripts find it as the last line of the output starting with `result `.

use std::fmt;

/// One `result name=value ...` line, fields in the order they were added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResultLine {
    fields: Vec<(String, String)>,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn valid_value(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_graphic() && b != b'=')
}

impl ResultLine {
    pub fn new() -> Self {
        ResultLine::default()
    }

    /// Adds `name=value` for an integer.
    pub fn int(self, name: &str, value: u64) -> Self {
        self.field(name, value.to_string())
    }

    /// Adds `name=value` for a real number, with `decimals` digits after the point (none when
    /// 0). Not-a-number and infinities are written as 0 (they come from empty measurements).
    pub fn real(self, name: &str, value: f64, decimals: usize) -> Self {
        let value = if value.is_finite() { value } else { 0.0 };
        let text = format!("{value:.decimals$}");
        // "-0" and "-0.00" read oddly; they are zero.
        let text = if text.trim_start_matches('-').trim_matches(['0', '.']).is_empty() {
            text.trim_start_matches('-').to_owned()
        } else {
            text
        };
        self.field(name, text)
    }

    /// Adds `name=word`; the word must be free of spaces and `=`.
    pub fn word(self, name: &str, word: &str) -> Self {
        self.field(name, word.to_owned())
    }

    /// Adds `name=0` or `name=1`.
    pub fn flag(self, name: &str, value: bool) -> Self {
        self.int(name, u64::from(value))
    }

    fn field(mut self, name: &str, value: String) -> Self {
        assert!(valid_name(name), "result field name {name:?}");
        assert!(valid_value(&value), "result field {name} value {value:?}");
        assert!(self.get(name).is_none(), "result field {name} given twice");
        self.fields.push((name.to_owned(), value));
        self
    }

    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    /// Reads a line written by `Display` back.
    pub fn parse(line: &str) -> Option<ResultLine> {
        let rest = line.strip_prefix("result ")?;
        let mut fields = Vec::new();
        for pair in rest.split(' ') {
            let (name, value) = pair.split_once('=')?;
            if !valid_name(name) || !valid_value(value) {
                return None;
            }
            fields.push((name.to_owned(), value.to_owned()));
        }
        Some(ResultLine { fields })
    }
}

impl ResultLine {
    /// The fields as the members of a JSON object (without the braces): numbers as
    /// numbers, words as strings.
    pub fn json_members(&self) -> String {
        let mut out = String::new();
        for (i, (name, value)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if is_json_number(value) {
                out.push_str(&format!("\"{name}\":{value}"));
            } else {
                // Values hold no quotes, backslashes or control characters (`valid_value`).
                out.push_str(&format!("\"{name}\":\"{value}\""));
            }
        }
        out
    }

    /// The fields as one JSON object.
    pub fn to_json(&self) -> String {
        format!("{{{}}}", self.json_members())
    }
}

/// Whether `text` is a number as JSON writes them (no leading zeros, no bare dot).
fn is_json_number(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (int, frac) = match digits.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (digits, None),
    };
    !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && (int == "0" || !int.starts_with('0'))
        && frac.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
}

impl fmt::Display for ResultLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "result")?;
        for (name, value) in &self.fields {
            write!(f, " {name}={value}")?;
        }
        Ok(())
    }
}

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
    fn result_line_format() {
        let line = ResultLine::new()
            .real("lookups_per_s", 206_172.4, 0)
            .int("keys", 3_200_000)
            .int("pool_mib", 64)
            .real("reads_per_lookup", 0.87, 3)
            .real("p50_us", -0.0001, 2)
            .word("store", "ferrite")
            .flag("reused", true);
        let text = line.to_string();
        assert_eq!(
            text,
            "result lookups_per_s=206172 keys=3200000 pool_mib=64 reads_per_lookup=0.870 \
             p50_us=0.00 store=ferrite reused=1"
        );
        assert_eq!(ResultLine::parse(&text), Some(line.clone()));
        assert_eq!(line.get("keys"), Some("3200000"));
        assert_eq!(line.get("nope"), None);
        assert!(!text.contains(','));
    }

    #[test]
    fn result_line_writes_non_finite_numbers_as_zero() {
        let line = ResultLine::new().real("a", f64::NAN, 2).real("b", f64::INFINITY, 0);
        assert_eq!(line.to_string(), "result a=0.00 b=0");
    }

    #[test]
    fn parse_rejects_other_lines() {
        assert_eq!(ResultLine::parse("results a=1"), None);
        assert_eq!(ResultLine::parse("result a"), None);
        assert_eq!(ResultLine::parse("result A=1"), None);
        assert_eq!(ResultLine::parse("result a=1  b=2"), None);
    }

    #[test]
    #[should_panic(expected = "given twice")]
    fn duplicate_fields_panic() {
        let _ = ResultLine::new().int("a", 1).int("a", 2);
    }

    #[test]
    #[should_panic(expected = "value")]
    fn words_with_spaces_panic() {
        let _ = ResultLine::new().word("a", "two words");
    }

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

#[cfg(test)]
mod json_tests {
    use super::*;

    #[test]
    fn result_lines_become_json_objects() {
        let line = ResultLine::new()
            .word("store", "ferrite")
            .real("ops_per_s", 1234.5, 1)
            .int("n", 0)
            .word("config", "0012ab")
            .word("hash", "007");
        assert_eq!(
            line.to_json(),
            r#"{"store":"ferrite","ops_per_s":1234.5,"n":0,"config":"0012ab","hash":"007"}"#
        );
    }
}
