//! The JSON form of a result line, one object per run in the `--json` files: the fields in
//! their order, numbers as JSON numbers written exactly as on the line, words as strings. Written by
//! serde_json.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;

use super::ResultLine;

/// A field's value as JSON sees it: a number keeps the exact text of the line (`0.750` stays
/// `0.750`, as the hand-written writer before serde_json wrote it), anything else is a string.
#[derive(Debug)]
enum Value<'a> {
    Number(Box<RawValue>),
    Word(&'a str),
}

impl<'a> Value<'a> {
    /// Numbers as JSON writes them (no leading zeros, no bare point, no exponent) are numbers;
    /// anything else (`0012ab`, `007`, `ferrite`) is a word.
    fn of(text: &'a str) -> Value<'a> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        let (int, fraction) = match digits.split_once('.') {
            Some((int, fraction)) => (int, Some(fraction)),
            None => (digits, None),
        };
        let is_number = !int.is_empty()
            && int.bytes().all(|b| b.is_ascii_digit())
            && (int == "0" || !int.starts_with('0'))
            && fraction.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()));
        match is_number.then(|| RawValue::from_string(text.to_owned())) {
            Some(Ok(raw)) => Value::Number(raw),
            _ => Value::Word(text),
        }
    }
}

impl Serialize for Value<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Number(raw) => raw.serialize(serializer),
            Value::Word(word) => serializer.serialize_str(word),
        }
    }
}

/// A result line is a JSON object of its fields, in the order they were added.
impl Serialize for ResultLine {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields().len()))?;
        for (name, value) in self.fields() {
            map.serialize_entry(name, &Value::of(value))?;
        }
        map.end()
    }
}

impl ResultLine {
    /// The fields as one JSON object, on one line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a result line is always valid JSON")
    }

    /// The fields as the members of a JSON object without the braces, for a writer that adds
    /// members of its own.
    pub fn json_members(&self) -> String {
        let object = self.to_json();
        object[1..object.len() - 1].to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

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
        assert_eq!(
            line.json_members(),
            r#""store":"ferrite","ops_per_s":1234.5,"n":0,"config":"0012ab","hash":"007""#
        );
        assert_eq!(ResultLine::new().to_json(), "{}");
        assert_eq!(ResultLine::new().json_members(), "");
    }

    /// The JSON the hand-written writer produced before serde_json: each field's text as is
    /// when it reads as a JSON number, else quoted.
    fn json_written_by_hand(line: &ResultLine) -> String {
        let members: Vec<String> = line
            .fields()
            .iter()
            .map(|(name, value)| match Value::of(value) {
                Value::Word(_) => format!("\"{name}\":\"{value}\""),
                _ => format!("\"{name}\":{value}"),
            })
            .collect();
        format!("{{{}}}", members.join(","))
    }

    #[test]
    fn numbers_keep_the_text_of_the_line() {
        let line = ResultLine::new()
            .word("store", "ferrite")
            .real("ops_per_s", 1234.0, 0)
            .real("reads_per_op", 0.75, 3)
            .word("config", "0123abcd")
            .word("hash", "01");
        assert_eq!(
            line.to_json(),
            r#"{"store":"ferrite","ops_per_s":1234,"reads_per_op":0.750,"config":"0123abcd","hash":"01"}"#
        );
        assert_eq!(line.to_json(), json_written_by_hand(&line));
    }

    #[test]
    fn the_same_fields_and_values_as_the_hand_written_json() {
        let line = ResultLine::new()
            .word("workload", "recovery")
            .real("seconds", 0.3, 1)
            .real("recovery_ms", 12.340, 3)
            .real("ratio", -1.5, 2)
            .real("whole", 2.0, 0)
            .real("zero", -0.0001, 2)
            .int("log_max_bytes", u64::MAX)
            .real("huge", 1e20, 0)
            .flag("verified", true)
            .word("config", "0012ab")
            .word("commit", "9f2c1e0-dirty");
        let before: serde_json::Value = serde_json::from_str(&json_written_by_hand(&line)).unwrap();
        let after: serde_json::Value = serde_json::from_str(&line.to_json()).unwrap();
        let (before, after) = (before.as_object().unwrap(), after.as_object().unwrap());
        assert_eq!(before.len(), line.fields().len());
        assert_eq!(after.len(), before.len());
        for (name, _) in line.fields() {
            assert_eq!(after[name], before[name], "field {name}");
        }
        let names: Vec<&str> = line.fields().iter().map(|(n, _)| n.as_str()).collect();
        let text = line.to_json();
        let keys_in_order: Vec<&str> = text
            .trim_matches(['{', '}'])
            .split(',')
            .map(|member| member.split(':').next().unwrap().trim_matches('"'))
            .collect();
        assert_eq!(keys_in_order, names);
        assert_eq!(after["seconds"], json!(0.3));
        assert_eq!(after["whole"], json!(2));
        assert_eq!(after["ratio"], json!(-1.5));
        assert_eq!(after["log_max_bytes"], json!(u64::MAX));
        assert_eq!(after["verified"], json!(1));
        assert_eq!(after["config"], json!("0012ab"));
    }
}
