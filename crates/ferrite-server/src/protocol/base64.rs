//! Base64 for meta keys (the `b` flag): decoding as memcached 1.6 decodes (characters outside
//! the alphabet are skipped, the count of the rest must be a non-zero multiple of four, and
//! decoding stops after the first padded block), and standard padded encoding for echoing a
//! binary key back.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The 6-bit value of an alphabet character, 0 for `=`, `None` for anything else (skipped).
fn value(byte: u8) -> Option<u8> {
    match byte {
        b'A'..=b'Z' => Some(byte - b'A'),
        b'a'..=b'z' => Some(byte - b'a' + 26),
        b'0'..=b'9' => Some(byte - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        b'=' => Some(0),
        _ => None,
    }
}

/// Decodes `src` into `out`, returning the decoded length; `None` where memcached's decoder
/// returns 0 (which it treats as failure, so an empty result is a failure too).
pub(crate) fn decode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let count = src.iter().filter(|&&b| value(b).is_some()).count();
    if count == 0 || count % 4 != 0 || count / 4 * 3 > out.len() {
        return None;
    }
    let mut block = [0u8; 4];
    let mut filled = 0;
    let mut pad = 0;
    let mut len = 0;
    for &byte in src {
        let Some(v) = value(byte) else { continue };
        if byte == b'=' {
            pad += 1;
        }
        block[filled] = v;
        filled += 1;
        if filled == 4 {
            out[len] = (block[0] << 2) | (block[1] >> 4);
            out[len + 1] = (block[1] << 4) | (block[2] >> 2);
            out[len + 2] = (block[2] << 6) | block[3];
            len += 3;
            filled = 0;
            if pad > 0 {
                match pad {
                    1 => len -= 1,
                    2 => len -= 2,
                    _ => return None,
                }
                break;
            }
        }
    }
    (len > 0).then_some(len)
}

/// Appends the padded base64 encoding of `src` to `out`.
pub(crate) fn encode(src: &[u8], out: &mut Vec<u8>) {
    for chunk in src.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextet = |shift: u32| ALPHABET[((n >> shift) & 63) as usize];
        out.push(sextet(18));
        out.push(sextet(12));
        out.push(if chunk.len() > 1 { sextet(6) } else { b'=' });
        out.push(if chunk.len() > 2 { sextet(0) } else { b'=' });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_memcached_refuses() {
        for src in [&b"a"[..], b"ab", b"abc", b"abcd", b"\x00\xff\x10 \r\n"] {
            let mut encoded = Vec::new();
            encode(src, &mut encoded);
            let mut out = [0u8; 16];
            let len = decode(&encoded, &mut out).unwrap();
            assert_eq!(&out[..len], src);
        }
        let mut out = [0u8; 16];
        assert_eq!(decode(b"Zm9v", &mut out), Some(3));
        assert_eq!(decode(b"Zm9", &mut out), None); // not a multiple of four
        assert_eq!(decode(b"", &mut out), None);
        assert_eq!(decode(b"====", &mut out), None); // invalid padding
        assert_eq!(decode(b"Z!m9v", &mut out), Some(3)); // `!` skipped
        assert_eq!(decode(b"Zg==Zm9v", &mut out), Some(1)); // stops after a padded block
    }
}
