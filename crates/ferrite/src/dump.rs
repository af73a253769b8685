//! The dump format: a database's entries as lines of text that any bytes survive, written by
//! `ferrite dump` and read by `ferrite load` (and by programs, through this module).
//!
//! Version 1, one line each, `\n`-terminated:
//!
//! | line | meaning |
//! |---|---|
//! | `# ferrite dump 1 text` (or `hex`) | the header, first: the version and how fields are written |
//! | `# tree NAME` | the entries that follow belong to tree NAME (escaped text) |
//! | `KEY<TAB>VALUE` | an entry; in key order within a tree |
//! | `# end trees=N entries=M` | the last line: what the dump holds, so that a dump cut short is told from a whole one |
//!
//! In `text`, a field is escaped so that it stays on its line: `\\` for a backslash, `\t`,
//! `\n`, `\r`, `\xNN` for other ASCII control characters and for bytes that are not UTF-8,
//! `\u{X}` for other control characters; every other byte is itself (so UTF-8 text reads as
//! it is). A key whose first byte is `#` has that byte written `\x23`, so that no entry looks
//! like a directive. In `hex`, fields are lower-case hexadecimal. Tree names are always
//! escaped text. Input without a header is plain `KEY<TAB>VALUE` lines (what `ferrite scan`
//! prints), every line an entry.

use std::fmt::Write as _;

/// The format version this module writes and reads.
pub const VERSION: u32 = 1;

const HEADER: &[u8] = b"# ferrite dump ";
const TREE: &[u8] = b"# tree ";
const END: &[u8] = b"# end ";

/// How a dump writes keys and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Escaped text (see the module documentation).
    Text,
    /// Lower-case hexadecimal, two digits a byte.
    Hex,
}

impl Encoding {
    /// The name the header uses: `text` or `hex`.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Text => "text",
            Encoding::Hex => "hex",
        }
    }
}

/// One decoded line (see [`parse_line`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// The header: the dump's fields are written in this encoding.
    Header(Encoding),
    /// The entries that follow belong to this tree.
    Tree(String),
    /// The last line of a dump, with what it holds.
    End {
        /// Tree lines in the dump.
        trees: u64,
        /// Entry lines in the dump.
        entries: u64,
    },
    /// An entry: its key and value are in the buffers given to [`parse_line`].
    Entry,
}

/// The header line (without its newline).
pub fn header_line(encoding: Encoding) -> String {
    format!("# ferrite dump {VERSION} {}", encoding.name())
}

/// The line that starts tree `name`'s entries (without its newline).
pub fn tree_line(name: &str) -> String {
    let mut line = String::from("# tree ");
    escape(name.as_bytes(), &mut line);
    line
}

/// The last line of a dump of `trees` trees and `entries` entries (without its newline).
pub fn end_line(trees: u64, entries: u64) -> String {
    format!("# end trees={trees} entries={entries}")
}

/// Appends the line of entry (`key`, `value`), its newline included, to `out`.
pub fn push_entry(out: &mut String, key: &[u8], value: &[u8], encoding: Encoding) {
    match encoding {
        Encoding::Hex => {
            push_hex(key, out);
            out.push('\t');
            push_hex(value, out);
        }
        Encoding::Text => {
            // A line starting with `#` is a directive: such a key has its `#` escaped.
            let key = match key.split_first() {
                Some((b'#', rest)) => {
                    out.push_str("\\x23");
                    rest
                }
                _ => key,
            };
            escape(key, out);
            out.push('\t');
            escape(value, out);
        }
    }
    out.push('\n');
}

/// Decodes `line` (without its newline). `first`: it is the input's first line, the only one
/// that may be the header. `dump`: a header came first, so a line starting with `#` is a
/// directive; otherwise every line but a header is an entry. An entry's key and value are
/// decoded into `key` and `value` with `encoding`. The error says what is wrong with the line.
pub fn parse_line(
    line: &[u8],
    first: bool,
    dump: bool,
    encoding: Encoding,
    key: &mut Vec<u8>,
    value: &mut Vec<u8>,
) -> Result<Line, String> {
    if first {
        if let Some(rest) = line.strip_prefix(HEADER) {
            return parse_header(rest);
        }
    }
    if dump && line.first() == Some(&b'#') {
        return parse_directive(line);
    }
    let tab = line.iter().position(|&b| b == b'\t');
    let tab = tab.ok_or_else(|| "not KEY<TAB>VALUE: the line has no tab".to_owned())?;
    let decode = |field: &[u8], out: &mut Vec<u8>| match encoding {
        Encoding::Text => unescape(field, out),
        Encoding::Hex => decode_hex(field, out),
    };
    decode(&line[..tab], key).map_err(|e| format!("the key: {e}"))?;
    decode(&line[tab + 1..], value).map_err(|e| format!("the value: {e}"))?;
    if key.is_empty() {
        return Err("an empty key (keys are 1 byte or more)".into());
    }
    Ok(Line::Entry)
}

fn parse_header(rest: &[u8]) -> Result<Line, String> {
    let rest = String::from_utf8_lossy(rest);
    let (version, encoding) = rest.split_once(' ').unwrap_or((&rest, ""));
    if version != VERSION.to_string() {
        return Err(format!("a dump of version {version:?}: this version reads version {VERSION}"));
    }
    match encoding {
        "text" => Ok(Line::Header(Encoding::Text)),
        "hex" => Ok(Line::Header(Encoding::Hex)),
        other => Err(format!("the header names encoding {other:?}, not text or hex")),
    }
}

fn parse_directive(line: &[u8]) -> Result<Line, String> {
    if let Some(name) = line.strip_prefix(TREE) {
        let mut bytes = Vec::new();
        unescape(name, &mut bytes).map_err(|e| format!("the tree name: {e}"))?;
        return String::from_utf8(bytes)
            .map(Line::Tree)
            .map_err(|_| "a tree name that is not UTF-8".to_owned());
    }
    if let Some(end) = line.strip_prefix(END) {
        let end = String::from_utf8_lossy(end);
        let count = |field: Option<&str>, name: &str| {
            field.and_then(|f| f.strip_prefix(name)).and_then(|n| n.parse::<u64>().ok())
        };
        let mut fields = end.split(' ');
        let (trees, entries) = (count(fields.next(), "trees="), count(fields.next(), "entries="));
        return match (trees, entries, fields.next()) {
            (Some(trees), Some(entries), None) => Ok(Line::End { trees, entries }),
            _ => Err(format!("`# end {end}` is not `# end trees=N entries=M`")),
        };
    }
    let shown: String = String::from_utf8_lossy(line).chars().take(40).collect();
    Err(format!("`{shown}` is not a line of a dump (`# tree NAME`, `# end …`, or an entry)"))
}

/// Appends `bytes` escaped as a text field (see the module documentation) to `out`.
pub fn escape(bytes: &[u8], out: &mut String) {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_ascii_control() => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c if c.is_control() => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
}

/// The bytes of a text field, the inverse of [`escape`]: `\\`, `\t`, `\n`, `\r`, `\xNN` and
/// `\u{X}` stand for what they escape, every other byte for itself. `out` is cleared first.
pub fn unescape(text: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    let mut rest = text;
    while let Some(at) = rest.iter().position(|&b| b == b'\\') {
        out.extend_from_slice(&rest[..at]);
        let escape = &rest[at..];
        let bad = || {
            let shown: String = String::from_utf8_lossy(escape).chars().take(12).collect();
            format!("{shown:?} is not an escape (\\\\, \\t, \\n, \\r, \\xNN or \\u{{X}})")
        };
        let used = match escape.get(1) {
            Some(b'\\') => {
                out.push(b'\\');
                2
            }
            Some(b't') => {
                out.push(b'\t');
                2
            }
            Some(b'n') => {
                out.push(b'\n');
                2
            }
            Some(b'r') => {
                out.push(b'\r');
                2
            }
            Some(b'x') => {
                let byte =
                    escape.get(2..4).and_then(|d| Some(hex_digit(d[0])? << 4 | hex_digit(d[1])?));
                out.push(byte.ok_or_else(bad)?);
                4
            }
            Some(b'u') if escape.get(2) == Some(&b'{') => {
                let close = escape.iter().position(|&b| b == b'}').ok_or_else(bad)?;
                let digits = &escape[3..close];
                let code = (!digits.is_empty() && digits.len() <= 6)
                    .then(|| {
                        digits
                            .iter()
                            .try_fold(0u32, |n, &d| Some(n << 4 | u32::from(hex_digit(d)?)))
                    })
                    .flatten();
                let c = code.and_then(char::from_u32).ok_or_else(bad)?;
                out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                close + 1
            }
            _ => return Err(bad()),
        };
        rest = &escape[used..];
    }
    out.extend_from_slice(rest);
    Ok(())
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn push_hex(bytes: &[u8], out: &mut String) {
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
}

/// The bytes of a hex field (either case, no prefix) into `out` (cleared first).
fn decode_hex(text: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    if text.len() % 2 != 0 {
        return Err("not hex: an odd number of digits".into());
    }
    for pair in text.chunks(2) {
        let byte = hex_digit(pair[0]).zip(hex_digit(pair[1])).map(|(high, low)| high << 4 | low);
        let shown = String::from_utf8_lossy(pair);
        out.push(byte.ok_or_else(|| format!("not hex: {shown:?} is not a pair of hex digits"))?);
    }
    Ok(())
}

/// Fuzz body for the dump decoder, shared by the cargo-fuzz target (`fuzz/fuzz_targets/dump.rs`)
/// and the unit tests: every line of `input` is decoded in each mode without panicking;
/// every entry that decodes encodes back (in both encodings) to a line that decodes to the
/// same key and value; and any bytes escape and unescape to themselves.
#[doc(hidden)]
pub fn fuzz_dump(input: &[u8]) {
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let (mut key2, mut value2) = (Vec::new(), Vec::new());
    for (n, line) in input.split(|&b| b == b'\n').enumerate() {
        for (dump, encoding) in
            [(true, Encoding::Text), (false, Encoding::Hex), (true, Encoding::Hex)]
        {
            if let Ok(Line::Entry) = parse_line(line, n == 0, dump, encoding, &mut key, &mut value)
            {
                for again in [Encoding::Text, Encoding::Hex] {
                    let mut text = String::new();
                    push_entry(&mut text, &key, &value, again);
                    let encoded = text.strip_suffix('\n').expect("an entry ends its line");
                    assert!(!encoded.contains('\n'), "an entry stays on its line");
                    let parsed =
                        parse_line(encoded.as_bytes(), n == 0, true, again, &mut key2, &mut value2);
                    assert_eq!(parsed, Ok(Line::Entry), "{encoded:?}");
                    assert_eq!((&key2, &value2), (&key, &value), "{encoded:?}");
                }
            }
        }
    }
    let mut text = String::new();
    escape(input, &mut text);
    unescape(text.as_bytes(), &mut key).expect("an escaped field unescapes");
    assert_eq!(key, input);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    fn parse(
        line: &[u8],
        first: bool,
        dump: bool,
        encoding: Encoding,
    ) -> Result<(Line, Vec<u8>, Vec<u8>), String> {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        parse_line(line, first, dump, encoding, &mut key, &mut value).map(|l| (l, key, value))
    }

    #[test]
    fn lines_encode_and_decode() {
        assert_eq!(header_line(Encoding::Text), "# ferrite dump 1 text");
        assert_eq!(
            parse(b"# ferrite dump 1 hex", true, false, Encoding::Text).unwrap().0,
            Line::Header(Encoding::Hex)
        );
        assert_eq!(tree_line("a\tb"), "# tree a\\tb");
        assert_eq!(
            parse(b"# tree a\\tb", false, true, Encoding::Text).unwrap().0,
            Line::Tree("a\tb".into())
        );
        assert_eq!(
            parse(end_line(2, 7).as_bytes(), false, true, Encoding::Text).unwrap().0,
            Line::End { trees: 2, entries: 7 }
        );
        let mut line = String::new();
        push_entry(&mut line, b"#k\xff", b"v\n", Encoding::Text);
        assert_eq!(line, "\\x23k\\xff\tv\\n\n");
        let (l, key, value) =
            parse(line.trim_end().as_bytes(), false, true, Encoding::Text).unwrap();
        assert_eq!((l, &key[..], &value[..]), (Line::Entry, &b"#k\xff"[..], &b"v\n"[..]));
        line.clear();
        push_entry(&mut line, b"\x00A", b"", Encoding::Hex);
        assert_eq!(line, "0041\t\n");
        // Without a header, a `#` line is an entry of plain input.
        assert_eq!(parse(b"#a\tb", false, false, Encoding::Text).unwrap().1, b"#a");
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let cases: [(&[u8], bool, Encoding, &str); 9] = [
            (b"# ferrite dump 2 text", true, Encoding::Text, "a dump of version \"2\""),
            (b"# ferrite dump 1 base64", true, Encoding::Text, "encoding \"base64\""),
            (b"# comment", true, Encoding::Text, "is not a line of a dump"),
            (b"# end trees=1", true, Encoding::Text, "is not `# end trees=N entries=M`"),
            (b"no tab", true, Encoding::Text, "the line has no tab"),
            (b"\tv", true, Encoding::Text, "an empty key"),
            (b"k\t\\q", true, Encoding::Text, "the value: \"\\\\q\" is not an escape"),
            (b"6\t00", true, Encoding::Hex, "the key: not hex: an odd number"),
            (b"zz\t00", true, Encoding::Hex, "not a pair of hex digits"),
        ];
        for (line, dump, encoding, expected) in cases {
            let e = parse(line, true, dump, encoding).unwrap_err();
            assert!(e.contains(expected), "{:?}: {e}", String::from_utf8_lossy(line));
        }
        for bad in [
            &b"a\\"[..],
            b"\\x4",
            b"\\x0x",
            b"\\x+1",
            b"\\u{110000}",
            b"\\u{41",
            b"\\u41",
            b"\\u{}",
        ] {
            assert!(unescape(bad, &mut Vec::new()).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let mut out = Vec::new();
        unescape(b"\\x41\\u{2603}\\\\", &mut out).unwrap();
        assert_eq!(out, "A☃\\".as_bytes());
    }

    #[test]
    fn fuzz_body_over_random_inputs() {
        let mut rng = Rng::new(0xd0_4d);
        for round in 0..3000 {
            let len = rng.below(200) as usize;
            // Mostly bytes a line is made of, so that entries and escapes decode often.
            let alphabet: &[u8] = b"#\t\\xu{}0123456789abcdefntr \n\xff\xc3\xa9k=";
            let input: Vec<u8> = (0..len)
                .map(|_| match round % 3 {
                    0 => rng.below(256) as u8,
                    _ => alphabet[rng.below(alphabet.len() as u64) as usize],
                })
                .collect();
            fuzz_dump(&input);
        }
        fuzz_dump(b"# ferrite dump 1 text\n# tree t\n\\x23a\tb\n# end trees=1 entries=1\n");
    }
}
