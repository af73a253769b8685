//! How keys and values travel through the command line: as text (the argument's bytes as
//! they are) or, with `--hex`, as hexadecimal; and how they are printed so that binary data
//! never corrupts the output.
//!
//! Printing as text has two forms:
//! - a *field* (`scan` keys and values, tree names): everything that could break the
//!   one-entry-per-line, tab-separated format is escaped: `\\`, `\t`, `\n`, `\r`, other
//!   control characters as `\xNN` (or `\u{...}` beyond ASCII), bytes that are not UTF-8 as
//!   `\xNN`;
//! - a *value* (`get`): printed as it is when it is UTF-8; otherwise the invalid bytes are
//!   escaped as `\xNN` (and backslashes as `\\`) and the caller says so on stderr.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;

/// The bytes an argument stands for: the argument itself, or the bytes it spells in hex.
pub fn decode_arg(arg: &OsStr, hex: bool) -> Result<Vec<u8>, String> {
    if hex {
        decode_hex(arg.as_bytes())
    } else {
        Ok(arg.as_bytes().to_vec())
    }
}

/// Bytes from hexadecimal text: pairs of digits, either case, with an optional `0x` prefix.
pub fn decode_hex(text: &[u8]) -> Result<Vec<u8>, String> {
    let digits = text.strip_prefix(b"0x").or_else(|| text.strip_prefix(b"0X")).unwrap_or(text);
    if digits.len() % 2 != 0 {
        return Err(format!(
            "{:?} is not hex: it has an odd number of digits",
            String::from_utf8_lossy(text)
        ));
    }
    let nibble = |pos: usize| -> Result<u8, String> {
        let c = digits[pos];
        (c as char).to_digit(16).map(|d| d as u8).ok_or_else(|| {
            format!(
                "{:?} is not hex: {:?} is not a hex digit",
                String::from_utf8_lossy(text),
                String::from_utf8_lossy(&[c])
            )
        })
    };
    (0..digits.len() / 2).map(|i| Ok(nibble(2 * i)? << 4 | nibble(2 * i + 1)?)).collect()
}

/// Lower-case hexadecimal, two digits a byte.
pub fn encode_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// A key, value or name printed as one field of a line (see the module documentation).
pub fn field(bytes: &[u8], hex: bool) -> String {
    if hex {
        return encode_hex(bytes);
    }
    // The same escapes as the dump format's text fields, so `scan` output loads back.
    let mut out = String::with_capacity(bytes.len());
    ferrite::dump::escape(bytes, &mut out);
    out
}

/// A value printed on its own (`get`): its bytes when UTF-8 (`None` is returned then, so the
/// caller writes the bytes unchanged), else the text with `\xNN` for each invalid byte.
pub fn escape_if_not_utf8(bytes: &[u8]) -> Option<String> {
    if std::str::from_utf8(bytes).is_ok() {
        return None;
    }
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode_hex(encode_hex(&all).as_bytes()).unwrap(), all);
        assert_eq!(encode_hex(b"\x00\xffA"), "00ff41");
        assert_eq!(decode_hex(b"00FFa0").unwrap(), vec![0, 255, 160]);
        assert_eq!(decode_hex(b"0x0102").unwrap(), vec![1, 2]);
        assert_eq!(decode_hex(b"").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn bad_hex_is_explained() {
        let odd = decode_hex(b"abc").unwrap_err();
        assert!(odd.contains("odd number of digits"), "{odd}");
        let bad = decode_hex(b"zz").unwrap_err();
        assert!(bad.contains("\"z\" is not a hex digit"), "{bad}");
        assert!(decode_hex("éé".as_bytes()).is_err());
    }

    #[test]
    fn args_decode_as_text_or_hex() {
        assert_eq!(decode_arg(OsStr::new("héllo"), false).unwrap(), "héllo".as_bytes());
        assert_eq!(decode_arg(OsStr::new("6869"), true).unwrap(), b"hi");
        let raw = OsStr::from_bytes(b"\xff\x00");
        assert_eq!(decode_arg(raw, false).unwrap(), b"\xff\x00");
    }

    #[test]
    fn fields_escape_what_would_break_a_line() {
        assert_eq!(field(b"plain text", false), "plain text");
        assert_eq!(field("naïve ☃".as_bytes(), false), "naïve ☃");
        assert_eq!(field(b"a\tb\nc\rd\\e", false), "a\\tb\\nc\\rd\\\\e");
        assert_eq!(field(b"\x00\x1b\x7f", false), "\\x00\\x1b\\x7f");
        assert_eq!(field(b"ok\xff\xfe", false), "ok\\xff\\xfe");
        assert_eq!(field("\u{85}".as_bytes(), false), "\\u{85}");
        assert_eq!(field(b"\x01\xff", true), "01ff");
        assert_eq!(field(b"", false), "");
    }

    #[test]
    fn values_print_as_they_are_unless_not_utf8() {
        assert_eq!(escape_if_not_utf8(b"line one\nline two\\"), None);
        assert_eq!(escape_if_not_utf8(b"a\\b\xffc").as_deref(), Some("a\\\\b\\xffc"));
        assert_eq!(escape_if_not_utf8(b"\x80").as_deref(), Some("\\x80"));
    }
}
