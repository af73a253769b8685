//! The bytes `bench objects` writes into its objects, derived from (object, offset, version)
//! alone, so that any read can be checked without keeping a copy.
//!
//! An object is a run of 2 KiB pieces (the smallest block). Piece `p` (object offset
//! `p × 2048`) of object `o` at version `v` (0: the setup's content; each write of a measured
//! run a new version) is:
//!
//! | offset | size | meaning                                                           |
//! |--------|------|-------------------------------------------------------------------|
//! | 0      | 4    | `o`, u32 little-endian                                            |
//! | 4      | 4    | `p`, u32 little-endian                                            |
//! | 8      | 4    | `v`, u32 little-endian                                            |
//! | 12     | 4    | [`MAGIC`]                                                         |
//! | 16     | 8    | tag: `mix64` of (o, p, v), little-endian                          |
//! | 24     | 2024 | body: 2024 bytes of a fixed 1 MiB random pool, from an offset the |
//! |        |      | tag picks (8-byte aligned)                                        |
//!
//! The body makes the data incompressible and different from piece to piece at the cost of
//! one copy; the header says what a piece is, so a read that returned another piece, another
//! object's or an older version names it. A measured read checks the first [`SAMPLED_BYTES`]
//! of every piece it read (header and tag, 24 bytes of 2048); the full check compares every
//! byte.

use std::fmt;
use std::sync::OnceLock;

use crate::gen::rng::mix64;

/// Bytes per piece: the smallest block, and the unit the content is described in.
pub const PIECE_BYTES: usize = 2048;
/// The header and the tag: what a sampled check compares of each piece.
pub const SAMPLED_BYTES: usize = 24;
/// Bytes 12..16 of every piece.
pub const MAGIC: [u8; 4] = *b"fob1";
/// The pool bodies are cut from.
const POOL_BYTES: usize = 1 << 20;
const BODY_BYTES: usize = PIECE_BYTES - SAMPLED_BYTES;

const _: () = assert!(SAMPLED_BYTES == 24 && BODY_BYTES % 8 == 0);

/// How much of each piece a check compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The header and tag of every piece ([`SAMPLED_BYTES`] of each).
    Sampled,
    /// Every byte.
    Full,
}

/// The random bytes bodies are cut from: the same for every run.
fn pool() -> &'static [u8] {
    static POOL: OnceLock<Vec<u8>> = OnceLock::new();
    POOL.get_or_init(|| {
        (0..POOL_BYTES as u64 / 8).flat_map(|i| mix64(i ^ 0x0b1e_c7ed).to_le_bytes()).collect()
    })
}

fn tag(object: u32, piece: u32, version: u32) -> u64 {
    mix64((u64::from(object) << 32) ^ u64::from(piece) ^ mix64(u64::from(version) + 1))
}

fn body(tag: u64) -> &'static [u8] {
    let slots = (POOL_BYTES - BODY_BYTES) / 8;
    let start = (tag % slots as u64) as usize * 8;
    &pool()[start..start + BODY_BYTES]
}

fn header(object: u32, piece: u32, version: u32) -> [u8; SAMPLED_BYTES] {
    let mut h = [0u8; SAMPLED_BYTES];
    h[0..4].copy_from_slice(&object.to_le_bytes());
    h[4..8].copy_from_slice(&piece.to_le_bytes());
    h[8..12].copy_from_slice(&version.to_le_bytes());
    h[12..16].copy_from_slice(&MAGIC);
    h[16..24].copy_from_slice(&tag(object, piece, version).to_le_bytes());
    h
}

/// The piece index of object offset `offset` (a multiple of [`PIECE_BYTES`]).
fn piece_of(offset: u64) -> u32 {
    debug_assert_eq!(offset % PIECE_BYTES as u64, 0);
    u32::try_from(offset / PIECE_BYTES as u64).expect("objects are at most 8 TiB")
}

/// Fills `buf` (whole pieces) with the content of object `object` from `offset` (a multiple
/// of [`PIECE_BYTES`]) at `version`.
pub fn fill(buf: &mut [u8], object: u32, offset: u64, version: u32) {
    assert!(buf.len() % PIECE_BYTES == 0 && offset % PIECE_BYTES as u64 == 0);
    let first = piece_of(offset);
    for (i, piece) in buf.chunks_exact_mut(PIECE_BYTES).enumerate() {
        let h = header(object, first + i as u32, version);
        piece[..SAMPLED_BYTES].copy_from_slice(&h);
        let tag = u64::from_le_bytes(h[16..24].try_into().expect("8 bytes"));
        piece[SAMPLED_BYTES..].copy_from_slice(body(tag));
    }
}

/// How a read differs from what it should hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Offset in the object of the first differing byte.
    pub offset: u64,
    /// What was there instead, in words.
    pub found: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {} of the object differs: {}", self.offset, self.found)
    }
}

/// What a piece's header says it is.
fn describe_header(piece: &[u8]) -> String {
    let word = |i: usize| u32::from_le_bytes(piece[i..i + 4].try_into().expect("4 bytes"));
    if piece[12..16] != MAGIC {
        let zeros = piece.iter().all(|&b| b == 0);
        return if zeros {
            "found zeros (never written?)".to_owned()
        } else {
            format!("found no piece header (bytes {:02x?})", &piece[..16])
        };
    }
    format!(
        "found object {} piece {} (offset {}) version {}",
        word(0),
        word(4),
        u64::from(word(4)) * PIECE_BYTES as u64,
        word(8)
    )
}

/// Checks that `buf` (whole pieces) holds the content of object `object` from `offset` at
/// `version`, comparing as much of each piece as `check` says; the first difference is the
/// error.
pub fn check(
    buf: &[u8],
    object: u32,
    offset: u64,
    version: u32,
    check: Check,
) -> Result<(), Mismatch> {
    assert!(buf.len() % PIECE_BYTES == 0 && offset % PIECE_BYTES as u64 == 0);
    let first = piece_of(offset);
    for (i, piece) in buf.chunks_exact(PIECE_BYTES).enumerate() {
        let at = offset + (i * PIECE_BYTES) as u64;
        let want = header(object, first + i as u32, version);
        if let Some(j) = (0..SAMPLED_BYTES).find(|&j| piece[j] != want[j]) {
            let expected = format!("object {object} version {version}");
            let found = if j < 16 {
                format!("expected {expected}, {}", describe_header(piece))
            } else {
                format!("expected {expected}, its header matches but its tag does not")
            };
            return Err(Mismatch { offset: at + j as u64, found });
        }
        if check == Check::Full {
            let tag = u64::from_le_bytes(want[16..24].try_into().expect("8 bytes"));
            let body = body(tag);
            if let Some(j) = (0..BODY_BYTES).find(|&j| piece[SAMPLED_BYTES + j] != body[j]) {
                let (want, got) = (body[j], piece[SAMPLED_BYTES + j]);
                return Err(Mismatch {
                    offset: at + (SAMPLED_BYTES + j) as u64,
                    found: format!("expected 0x{want:02x}, found 0x{got:02x} (in the body)"),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_deterministic_and_differs_by_object_offset_and_version() {
        let mut a = vec![0u8; 4 * PIECE_BYTES];
        let mut b = vec![0u8; 4 * PIECE_BYTES];
        fill(&mut a, 3, 8192, 0);
        fill(&mut b, 3, 8192, 0);
        assert_eq!(a, b);
        for (object, offset, version) in [(4, 8192, 0), (3, 10240, 0), (3, 8192, 1)] {
            fill(&mut b, object, offset, version);
            assert_ne!(a, b, "{object} {offset} {version}");
        }
        // Pieces differ from each other beyond their headers.
        assert_ne!(a[SAMPLED_BYTES..PIECE_BYTES], a[PIECE_BYTES + SAMPLED_BYTES..2 * PIECE_BYTES]);
        // A block written from one offset reads the same as its pieces written one by one.
        let mut one = vec![0u8; PIECE_BYTES];
        fill(&mut one, 3, 8192 + 2 * PIECE_BYTES as u64, 0);
        assert_eq!(one, a[2 * PIECE_BYTES..3 * PIECE_BYTES]);
        assert!(check(&a, 3, 8192, 0, Check::Full).is_ok());
        assert!(check(&a[PIECE_BYTES..], 3, 8192 + PIECE_BYTES as u64, 0, Check::Full).is_ok());
    }

    /// The verifier finds a wrong byte: in a header with either check, in the tag with either
    /// check, deep in a body only with the full one; and a read of the wrong place or version
    /// says what it found.
    #[test]
    fn the_check_catches_a_wrong_byte() {
        let mut buf = vec![0u8; 2 * PIECE_BYTES];
        fill(&mut buf, 7, 4096, 2);
        for (at, sampled_sees_it) in [
            (5, true),
            (PIECE_BYTES + 13, true),
            (PIECE_BYTES + 20, true),
            (PIECE_BYTES + 900, false),
        ] {
            let mut bad = buf.clone();
            bad[at] ^= 0x10;
            let full = check(&bad, 7, 4096, 2, Check::Full).unwrap_err();
            assert_eq!(full.offset, 4096 + at as u64, "{full}");
            let sampled = check(&bad, 7, 4096, 2, Check::Sampled);
            assert_eq!(sampled.is_err(), sampled_sees_it, "byte {at}: {sampled:?}");
        }
        let body = check(
            &{
                let mut b = buf.clone();
                b[PIECE_BYTES + 900] ^= 1;
                b
            },
            7,
            4096,
            2,
            Check::Full,
        )
        .unwrap_err();
        assert!(body.to_string().contains("in the body"), "{body}");
        let stale = check(&buf, 7, 4096, 3, Check::Sampled).unwrap_err();
        assert_eq!(stale.offset, 4096 + 8);
        assert!(stale.found.contains("found object 7 piece 2 (offset 4096) version 2"), "{stale}");
        let elsewhere = check(&buf, 7, 6144, 2, Check::Sampled).unwrap_err();
        assert!(elsewhere.found.contains("piece 2 (offset 4096)"), "{elsewhere}");
        let zeros = check(&[0u8; PIECE_BYTES], 1, 0, 0, Check::Sampled).unwrap_err();
        assert!(zeros.found.contains("zeros"), "{zeros}");
    }
}
