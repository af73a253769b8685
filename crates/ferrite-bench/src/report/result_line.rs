//! The result line every benchmark ends with: `result name=value name=value ...`. Names are
//! `[a-z0-9_]`, values are plain numbers (no thousands separators, `.` as decimal point) or
//! short words without spaces or `=`. Scripts find it as the last line of the output starting
//! with `result `; its JSON form is in `report::json`.

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

impl fmt::Display for ResultLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "result")?;
        for (name, value) in &self.fields {
            write!(f, " {name}={value}")?;
        }
        Ok(())
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
}
