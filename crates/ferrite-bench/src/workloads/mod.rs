//! The workloads that run on the runner (`crate::runner`): Ferrite's own lookup benchmark
//! (`lookup`), the comparison workloads on any store (`run`: one workload on one store, over
//! the operation streams of `ycsb`, fills included) and the fills' read-back (`fill`).

pub mod fill;
pub mod lookup;
pub mod run;
pub mod ycsb;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;

use crate::report::ResultLine;

/// A result line's fields as JSON object members, in the line's order: numbers as JSON
/// numbers written exactly as on the line (`0.750` stays `0.750`), words as strings.
#[derive(Debug, Clone, Copy)]
pub struct JsonFields<'a>(pub &'a ResultLine);

impl Serialize for JsonFields<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = self.0.fields();
        let mut map = serializer.serialize_map(Some(fields.len()))?;
        for (name, value) in fields {
            match json_number(value) {
                Some(number) => map.serialize_entry(name, &number)?,
                None => map.serialize_entry(name, value)?,
            }
        }
        map.end()
    }
}

/// `text` as a raw JSON number, if it is one as JSON writes them.
fn json_number(text: &str) -> Option<Box<RawValue>> {
    let first = text.bytes().next()?;
    if !(first.is_ascii_digit() || first == b'-') {
        return None;
    }
    serde_json::from_str::<serde_json::Number>(text).ok()?;
    RawValue::from_string(text.to_owned()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_fields_keep_their_text_and_kind() {
        let line = ResultLine::new()
            .word("store", "ferrite")
            .real("ops_per_s", 1234.0, 0)
            .real("reads_per_op", 0.75, 3)
            .word("config", "0123abcd")
            .word("hash", "01");
        let json = serde_json::to_string(&JsonFields(&line)).unwrap();
        assert_eq!(
            json,
            r#"{"store":"ferrite","ops_per_s":1234,"reads_per_op":0.750,"config":"0123abcd","hash":"01"}"#
        );
        assert_eq!(json, line.to_json(), "as the result line writes itself");
    }
}
