//! The data of the point-lookup workload: key `i` is the 8-byte big-endian integer `i` (so
//! keys sort like their numbers), and its value is `VALUE_LEN` bytes derived from `i` alone,
//! so that any reader can check any value it gets without keeping a copy.
//!
//! | offset | size | value of key `i`                                                   |
//! |--------|------|--------------------------------------------------------------------|
//! | 0      | 8    | `i`, big-endian (a value returned for the wrong key names that key) |
//! | 8      | 112  | SplitMix64 stream seeded with `i ^ VALUE_SALT`, little-endian words |

use std::fmt;

use crate::gen::rng::Rng;

/// Bytes in a key.
pub const KEY_LEN: usize = 8;
/// Bytes in a value.
pub const VALUE_LEN: usize = 120;
/// Mixed into value seeds so that values do not repeat the key streams of `Rng::stream`.
const VALUE_SALT: u64 = 0xF3_22_17_E5_0B_AD_5E_ED;

const _: () = assert!(VALUE_LEN >= KEY_LEN && (VALUE_LEN - KEY_LEN) % 8 == 0);

/// The key of entry `i`.
pub fn key(i: u64) -> [u8; KEY_LEN] {
    i.to_be_bytes()
}

/// The entry number of a key, if it is a workload key.
pub fn key_index(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.try_into().ok()?))
}

/// The value of entry `i`.
pub fn value(i: u64) -> [u8; VALUE_LEN] {
    let mut out = [0u8; VALUE_LEN];
    out[..KEY_LEN].copy_from_slice(&key(i));
    let mut rng = Rng::new(i ^ VALUE_SALT);
    for word in out[KEY_LEN..].chunks_exact_mut(8) {
        word.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    out
}

/// How a value read for some key differs from the value that key should have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueMismatch {
    /// The key was not found.
    Missing,
    /// The value has the wrong length.
    WrongLength { len: usize },
    /// The value is intact but belongs to another key.
    OtherKeys { owner: u64 },
    /// The value's bytes differ from the expected ones, starting at `offset`.
    Corrupt { offset: usize },
}

impl fmt::Display for ValueMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueMismatch::Missing => write!(f, "the key is missing"),
            ValueMismatch::WrongLength { len } => {
                write!(f, "the value has {len} bytes instead of {VALUE_LEN}")
            }
            ValueMismatch::OtherKeys { owner } => {
                write!(f, "the value is the one of key {owner}")
            }
            ValueMismatch::Corrupt { offset } => {
                write!(f, "the value differs from the expected one at byte {offset}")
            }
        }
    }
}

/// Checks that `got` (the value read for key `i`, `None` if absent) is `value(i)`.
pub fn check_value(i: u64, got: Option<&[u8]>) -> Result<(), ValueMismatch> {
    let got = got.ok_or(ValueMismatch::Missing)?;
    if got.len() != VALUE_LEN {
        return Err(ValueMismatch::WrongLength { len: got.len() });
    }
    let expected = value(i);
    if got == expected {
        return Ok(());
    }
    if let Some(owner) = key_index(&got[..KEY_LEN]) {
        if owner != i && got == value(owner) {
            return Err(ValueMismatch::OtherKeys { owner });
        }
    }
    let offset = got.iter().zip(expected.iter()).position(|(a, b)| a != b).unwrap_or(0);
    Err(ValueMismatch::Corrupt { offset })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_like_their_numbers() {
        assert_eq!(key(0), [0; 8]);
        assert_eq!(key(0x0102), [0, 0, 0, 0, 0, 0, 1, 2]);
        let numbers = [0u64, 1, 255, 256, 65_535, 1 << 40, u64::MAX];
        for pair in numbers.windows(2) {
            assert!(key(pair[0]) < key(pair[1]));
        }
        for n in numbers {
            assert_eq!(key_index(&key(n)), Some(n));
        }
        assert_eq!(key_index(b"short"), None);
    }

    #[test]
    fn values_are_deterministic_and_distinct() {
        assert_eq!(value(12_345), value(12_345));
        assert_ne!(value(1), value(2));
        assert_eq!(&value(7)[..KEY_LEN], &key(7));
        // Not mostly zeros: the tail is pseudo-random.
        let zeros = value(0).iter().filter(|&&b| b == 0).count();
        assert!(zeros < 16, "{zeros} zero bytes");
    }

    #[test]
    fn check_accepts_the_right_value_and_names_wrong_ones() {
        assert_eq!(check_value(5, Some(&value(5))), Ok(()));
        assert_eq!(check_value(5, None), Err(ValueMismatch::Missing));
        assert_eq!(
            check_value(5, Some(&value(5)[..100])),
            Err(ValueMismatch::WrongLength { len: 100 })
        );
        assert_eq!(check_value(5, Some(&value(6))), Err(ValueMismatch::OtherKeys { owner: 6 }));
        let mut bad = value(5);
        bad[50] ^= 1;
        assert_eq!(check_value(5, Some(&bad)), Err(ValueMismatch::Corrupt { offset: 50 }));
        assert!(ValueMismatch::OtherKeys { owner: 6 }.to_string().contains("key 6"));
    }
}
