//! Numbers in request lines, read exactly as memcached 1.6 reads each field (so that the
//! same bytes are accepted or refused): its strict token parsers (digits only, a length cap,
//! no overflow) for most fields, and the C library's `strtol`/`strtoul` with truncation to
//! 32 bits for the `<flags>` and `<exptime>` of the text storage commands.

/// Unsigned 32-bit: at most 11 characters, all digits, no overflow.
pub(crate) fn token_u32(token: &[u8]) -> Option<u32> {
    if token.len() > 11 {
        return None;
    }
    token.iter().try_fold(0u32, |sum, &b| {
        let digit = b.checked_sub(b'0').filter(|d| *d < 10)?;
        sum.checked_mul(10)?.checked_add(u32::from(digit))
    })
}

/// Unsigned 64-bit: at most 22 characters, all digits, no overflow.
pub(crate) fn token_u64(token: &[u8]) -> Option<u64> {
    if token.len() > 22 {
        return None;
    }
    token.iter().try_fold(0u64, |sum, &b| {
        let digit = b.checked_sub(b'0').filter(|d| *d < 10)?;
        sum.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// Signed 32-bit: at most 11 characters, an optional leading `-`, then digits (a lone `-`
/// reads as 0, as in memcached), no overflow.
pub(crate) fn token_i32(token: &[u8]) -> Option<i32> {
    if token.len() > 11 {
        return None;
    }
    let (negative, digits) = match token.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, token),
    };
    digits.iter().try_fold(0i32, |sum, &b| {
        let digit = i32::from(b.checked_sub(b'0').filter(|d| *d < 10)?);
        let sum = sum.checked_mul(10)?;
        if negative {
            sum.checked_sub(digit)
        } else {
            sum.checked_add(digit)
        }
    })
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `strtoul`/`strtol` over `text` (which runs to the end of the line): leading white space,
/// an optional sign, at least one digit, no 64-bit overflow, and the digits followed by white
/// space, a NUL or the end. Returns the magnitude and whether it was negative.
fn c_strto(text: &[u8]) -> Option<(u64, bool)> {
    let mut i = text.iter().position(|&b| !is_c_space(b)).unwrap_or(text.len());
    let negative = text.get(i) == Some(&b'-');
    if matches!(text.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let digits = text[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let magnitude = text[i..i + digits]
        .iter()
        .try_fold(0u64, |sum, &b| sum.checked_mul(10)?.checked_add(u64::from(b - b'0')))?;
    match text.get(i + digits) {
        None => Some((magnitude, negative)),
        Some(&b) if b == 0 || is_c_space(b) => Some((magnitude, negative)),
        Some(_) => None,
    }
}

/// memcached's `<exptime>` of the storage commands: `strtol` into a 64-bit long (overflow
/// refused), then truncated to 32 bits.
pub(crate) fn c_strtol_i32(text: &[u8]) -> Option<i32> {
    let (magnitude, negative) = c_strto(text)?;
    let value = if negative {
        // -(2^63) is the most negative long.
        if magnitude > 1 << 63 {
            return None;
        }
        0i64.wrapping_sub(magnitude as i64)
    } else {
        i64::try_from(magnitude).ok()?
    };
    Some(value as i32)
}

/// memcached's `<flags>` (32-bit client flags): `strtoul` (a negative number that wraps to
/// a negative long is refused), then truncated to 32 bits.
pub(crate) fn c_strtoul_u32(text: &[u8]) -> Option<u32> {
    let (magnitude, negative) = c_strto(text)?;
    let value = if negative { magnitude.wrapping_neg() } else { magnitude };
    if negative && (value as i64) < 0 {
        return None;
    }
    Some(value as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_tokens() {
        assert_eq!(token_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(token_u32(b"4294967296"), None);
        assert_eq!(token_u32(b"-1"), None);
        assert_eq!(token_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(token_u64(b"18446744073709551616"), None);
        assert_eq!(token_u64(b"1x"), None);
        assert_eq!(token_i32(b"-2147483648"), Some(i32::MIN));
        assert_eq!(token_i32(b"2147483648"), None);
        assert_eq!(token_i32(b"-"), Some(0));
        assert_eq!(token_i32(b"+1"), None);
        assert_eq!(token_i32(b"000000000001"), None); // longer than 11
    }

    #[test]
    fn c_library_fields() {
        assert_eq!(c_strtol_i32(b"10 5\r\n"), Some(10));
        assert_eq!(c_strtol_i32(b"+10 5"), Some(10));
        assert_eq!(c_strtol_i32(b"-1 5"), Some(-1));
        assert_eq!(c_strtol_i32(b"4294967297 5"), Some(1)); // truncated, as memcached does
        assert_eq!(c_strtol_i32(b"99999999999999999999 5"), None);
        assert_eq!(c_strtol_i32(b"1x 5"), None);
        assert_eq!(c_strtol_i32(b"x"), None);
        assert_eq!(c_strtoul_u32(b"4294967296 0"), Some(0));
        assert_eq!(c_strtoul_u32(b"-1 0"), None);
        assert_eq!(c_strtoul_u32(b"-0 0"), Some(0));
        assert_eq!(c_strtoul_u32(b"7\x00junk"), Some(7));
    }
}
