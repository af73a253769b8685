//! How objects are laid out: the stub a tree holds for an object's key, the keys and values
//! of the objects tree (extent maps and fragments), and the fragment encoding.
//!
//! **Stub** (the value of an object's key in its tree, 24 bytes, always in the leaf):
//!
//! | offset | size | meaning |
//! |---|---|---|
//! | 0 | 8 | magic `FE 4F 42 4A 00 7F 53 01` |
//! | 8 | 8 | object id (little-endian) |
//! | 16 | 8 | length in bytes |
//!
//! A value that begins with the magic is always stored as an object, whatever its length
//! (so a plain value can never be taken for a stub).
//!
//! **Objects tree** (a tree of the catalog named `\0objects`, hidden from users): key =
//! object id (8, big-endian) + kind (1) + index (8, big-endian), so an object's entries are
//! contiguous and ordered by block.
//!
//! | object id | kind | index | value |
//! |---|---|---|---|
//! | the object's | 1 extent | its last block | first block (8), first page (8): blocks `first..=last` live in pages `first page..` |
//! | `u64::MAX` (the fragment log) | 2 fragment | sequence number | object id (8, LE), block (8, LE), fragments (below) |
//!
//! A block is 4 KiB of the object (block `b` = bytes `4096 b .. 4096 (b + 1)`). Bytes of the
//! object covered by neither an extent nor a fragment read as zeros.
//!
//! **The fragment log.** Small and unaligned writes are not merged into their block on the
//! write path: each becomes one or more entries appended at the end of the objects tree
//! under a sequence number that grows with every commit, so appending never reads an old
//! entry (the leaf it lands in is the tree's last, always in memory). Entries of one block
//! apply in sequence order over its extent data (the newer wins). An index in memory (object,
//! block → sequence numbers), rebuilt at open by a scan of the log's key range, tells reads
//! which entries to overlay and the merge which blocks to rewrite.
//!
//! **Fragments** of one entry: count (2), then per fragment offset in the block (2), length
//! (2) and the bytes; fragments are ordered, do not overlap or touch, and lie inside the
//! block.

use crate::error::PageId;
use crate::format::page::PAGE_SIZE;
use crate::format::value::MAX_VALUE_LEN;

pub const BLOCK: u64 = PAGE_SIZE as u64;
pub const STUB_LEN: usize = 24;
pub const MAGIC: [u8; 8] = [0xFE, 0x4F, 0x42, 0x4A, 0x00, 0x7F, 0x53, 0x01];
/// The objects tree's name in the catalog (a leading NUL: no user tree can have it).
pub const OBJECTS_TREE: &str = "\0objects";

pub const KIND_EXTENT: u8 = 1;
pub const KIND_FRAGMENT: u8 = 2;
pub const KEY_LEN: usize = 17;
/// The object-id part of the fragment log's keys (no object has it: ids share the tree-id
/// counter).
pub const FRAGMENT_LOG: u64 = u64::MAX;
/// Bytes of a fragment-log entry before its fragments: object id, block.
pub const ENTRY_HEAD: usize = 16;
/// Largest encoded fragments of one entry: the entry stays in its leaf (a key and value
/// of at most `MAX_INLINE_ENTRY` bytes), so appending one writes no Value page and a scan
/// of the log reads its entries with the leaves.
pub const MAX_FRAGMENTS_LEN: usize = crate::btree::node::MAX_INLINE_ENTRY - KEY_LEN - ENTRY_HEAD;
/// Longest fragment one entry holds (a longer run of bytes takes several entries).
pub const MAX_FRAGMENT_BYTES: usize = MAX_FRAGMENTS_LEN - 6;

/// Whether a value must be stored as an object: too long for a value, or beginning with the
/// stub magic.
pub fn needs_object(value_len: u64, starts: &[u8]) -> bool {
    value_len > MAX_VALUE_LEN as u64 || starts.starts_with(&MAGIC)
}

/// Whether a stored value is an object's stub (the one test on every read's path).
#[inline]
pub fn is_stub(value: &[u8]) -> bool {
    value.len() == STUB_LEN && value[..8] == MAGIC
}

pub fn encode_stub(id: u64, len: u64) -> [u8; STUB_LEN] {
    let mut stub = [0u8; STUB_LEN];
    stub[..8].copy_from_slice(&MAGIC);
    stub[8..16].copy_from_slice(&id.to_le_bytes());
    stub[16..].copy_from_slice(&len.to_le_bytes());
    stub
}

/// What a tree's value is: `Ok(None)` a plain value, `Ok(Some((id, len)))` an object's stub,
/// `Err` a value that begins with the magic but is no stub (damage).
pub fn decode_stub(value: &[u8]) -> Result<Option<(u64, u64)>, String> {
    if !value.starts_with(&MAGIC) {
        return Ok(None);
    }
    if value.len() != STUB_LEN {
        return Err(format!("an object stub of {} bytes (not {STUB_LEN})", value.len()));
    }
    let id = u64::from_le_bytes(value[8..16].try_into().unwrap());
    let len = u64::from_le_bytes(value[16..24].try_into().unwrap());
    Ok(Some((id, len)))
}

pub fn key(id: u64, kind: u8, index: u64) -> [u8; KEY_LEN] {
    let mut key = [0u8; KEY_LEN];
    key[..8].copy_from_slice(&id.to_be_bytes());
    key[8] = kind;
    key[9..].copy_from_slice(&index.to_be_bytes());
    key
}

/// `(id, kind, index)` of an objects-tree key.
pub fn parse_key(key: &[u8]) -> Option<(u64, u8, u64)> {
    if key.len() != KEY_LEN {
        return None;
    }
    let id = u64::from_be_bytes(key[..8].try_into().unwrap());
    let index = u64::from_be_bytes(key[9..].try_into().unwrap());
    Some((id, key[8], index))
}

/// The key of fragment-log entry `seq`.
pub fn log_key(seq: u64) -> [u8; KEY_LEN] {
    key(FRAGMENT_LOG, KIND_FRAGMENT, seq)
}

/// A fragment-log entry's value: the fragments of block `block` of object `id`.
pub fn encode_log_entry(id: u64, block: u64, fragments: &Fragments) -> Vec<u8> {
    let mut out = Vec::with_capacity(ENTRY_HEAD + encoded_len(fragments));
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&block.to_le_bytes());
    out.extend_from_slice(&encode_fragments(fragments));
    out
}

/// `(object id, block, fragments)` of a fragment-log entry's value.
pub fn decode_log_entry(value: &[u8]) -> Result<(u64, u64, Fragments), String> {
    if value.len() < ENTRY_HEAD {
        return Err(format!("a fragment-log entry of {} bytes", value.len()));
    }
    let id = u64::from_le_bytes(value[..8].try_into().unwrap());
    let block = u64::from_le_bytes(value[8..16].try_into().unwrap());
    if id == FRAGMENT_LOG || block >= super::MAX_OBJECT_LEN / BLOCK {
        return Err(format!("a fragment-log entry for object {id} block {block}"));
    }
    let fragments = decode_fragments(&value[ENTRY_HEAD..])?;
    if fragments.is_empty() {
        return Err("a fragment-log entry with no fragment".into());
    }
    Ok((id, block, fragments))
}

/// `fragments` of one block split into entries that each fit `MAX_FRAGMENTS_LEN`: in order,
/// a fragment longer than `MAX_FRAGMENT_BYTES` in several pieces (each in an entry of its
/// own, as pieces of one entry may not touch).
pub fn split_entries(fragments: &Fragments) -> Vec<Fragments> {
    let mut entries: Vec<Fragments> = Vec::new();
    let mut current = Fragments::new();
    for (offset, bytes) in fragments {
        for (i, piece) in bytes.chunks(MAX_FRAGMENT_BYTES).enumerate() {
            let at = *offset + (i * MAX_FRAGMENT_BYTES) as u16;
            let fits = encoded_len(&current) + 4 + piece.len() <= MAX_FRAGMENTS_LEN;
            if !current.is_empty() && (i > 0 || !fits) {
                entries.push(std::mem::take(&mut current));
            }
            current.push((at, piece.to_vec()));
        }
    }
    if !current.is_empty() {
        entries.push(current);
    }
    entries
}

/// An extent: blocks `first..=last` of an object in pages `page..page + (last - first + 1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub first: u64,
    pub last: u64,
    pub page: PageId,
}

impl Extent {
    pub fn blocks(&self) -> u64 {
        self.last - self.first + 1
    }
    /// The page holding block `block` (inside the extent).
    pub fn page_of(&self, block: u64) -> PageId {
        self.page + (block - self.first)
    }
    pub fn value(&self) -> [u8; 16] {
        let mut v = [0u8; 16];
        v[..8].copy_from_slice(&self.first.to_le_bytes());
        v[8..].copy_from_slice(&self.page.to_le_bytes());
        v
    }
    pub fn decode(last: u64, value: &[u8]) -> Result<Extent, String> {
        if value.len() != 16 {
            return Err(format!("an extent value of {} bytes", value.len()));
        }
        let first = u64::from_le_bytes(value[..8].try_into().unwrap());
        let page = u64::from_le_bytes(value[8..].try_into().unwrap());
        if first > last {
            return Err(format!("an extent from block {first} to block {last}"));
        }
        if page.checked_add(last - first + 1).is_none() {
            return Err(format!("an extent at page {page} runs past the last page id"));
        }
        Ok(Extent { first, last, page })
    }
}

/// The fragments of one block: `(offset, bytes)`, ordered, not overlapping or touching.
pub type Fragments = Vec<(u16, Vec<u8>)>;

pub fn fragment_bytes(fragments: &Fragments) -> usize {
    fragments.iter().map(|(_, b)| b.len()).sum()
}

pub fn encoded_len(fragments: &Fragments) -> usize {
    2 + fragments.iter().map(|(_, b)| 4 + b.len()).sum::<usize>()
}

pub fn encode_fragments(fragments: &Fragments) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(fragments));
    out.extend_from_slice(&(fragments.len() as u16).to_le_bytes());
    for (offset, bytes) in fragments {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out
}

pub fn decode_fragments(value: &[u8]) -> Result<Fragments, String> {
    let take = |at: usize, n: usize| value.get(at..at + n).ok_or("fragments cut short");
    let count = u16::from_le_bytes(take(0, 2)?.try_into().unwrap()) as usize;
    let mut at = 2;
    let mut out = Vec::with_capacity(count.min(64));
    let mut floor = 0usize;
    for _ in 0..count {
        let offset = u16::from_le_bytes(take(at, 2)?.try_into().unwrap()) as usize;
        let len = u16::from_le_bytes(take(at + 2, 2)?.try_into().unwrap()) as usize;
        if len == 0
            || offset < floor
            || offset + len > BLOCK as usize
            || (floor > 0 && offset == floor)
        {
            return Err(format!("a fragment at {offset}+{len} out of order or bounds"));
        }
        out.push((offset as u16, take(at + 4, len)?.to_vec()));
        floor = offset + len;
        at += 4 + len;
    }
    if at != value.len() {
        return Err(format!("{} bytes after the fragments", value.len() - at));
    }
    Ok(out)
}

/// `fragments` with `bytes` written at `offset` over them (newer bytes win), coalesced:
/// every old fragment that overlaps or touches the new bytes joins them in one fragment.
pub fn overlay_fragment(fragments: &Fragments, offset: usize, bytes: &[u8]) -> Fragments {
    debug_assert!(offset + bytes.len() <= BLOCK as usize && !bytes.is_empty());
    let (start, end) = (offset, offset + bytes.len());
    let span = |(o, b): &(u16, Vec<u8>)| (*o as usize, *o as usize + b.len());
    let joins = |f: &(u16, Vec<u8>)| {
        let (fs, fe) = span(f);
        fe >= start && fs <= end
    };
    let low = fragments.iter().filter(|f| joins(f)).map(|f| span(f).0).fold(start, usize::min);
    let high = fragments.iter().filter(|f| joins(f)).map(|f| span(f).1).fold(end, usize::max);
    let mut joined = vec![0u8; high - low];
    for f in fragments.iter().filter(|f| joins(f)) {
        let (fs, fe) = span(f);
        joined[fs - low..fe - low].copy_from_slice(&f.1);
    }
    joined[start - low..end - low].copy_from_slice(bytes);
    let mut out: Fragments = fragments.iter().filter(|f| span(f).1 < start).cloned().collect();
    out.push((low as u16, joined));
    out.extend(fragments.iter().filter(|f| span(f).0 > end).cloned());
    out
}

/// Applies `fragments` over a block's bytes.
pub fn apply_fragments(block: &mut [u8], fragments: &Fragments) {
    for (offset, bytes) in fragments {
        let at = *offset as usize;
        block[at..at + bytes.len()].copy_from_slice(bytes);
    }
}

/// Fuzz body for the objects tree's decoders (stubs, keys, extents, fragments): any bytes
/// decode or are refused without panicking, and what decodes encodes back to the same bytes.
#[doc(hidden)]
pub fn fuzz_object_entry(input: &[u8]) {
    if let Ok(Some((id, len))) = decode_stub(input) {
        assert_eq!(encode_stub(id, len)[..], input[..]);
    }
    if let Some((id, kind, index)) = parse_key(input) {
        assert_eq!(key(id, kind, index)[..], input[..]);
        if input.len() >= 16 {
            if let Ok(extent) = Extent::decode(index, &input[..16]) {
                assert_eq!(extent.value()[..], input[..16]);
                assert!(extent.first <= extent.last && extent.page_of(extent.last) >= extent.page);
            }
        }
    }
    if let Ok((id, block, fragments)) = decode_log_entry(input) {
        assert_eq!(encode_log_entry(id, block, &fragments), input);
        for entry in split_entries(&fragments) {
            assert!(encoded_len(&entry) <= MAX_FRAGMENTS_LEN);
        }
    }
    if let Ok(fragments) = decode_fragments(input) {
        assert_eq!(encode_fragments(&fragments), input);
        let mut block = vec![0u8; BLOCK as usize];
        apply_fragments(&mut block, &fragments);
        // Overlaying every fragment again changes nothing.
        let mut again = Fragments::new();
        for (offset, bytes) in &fragments {
            again = overlay_fragment(&again, *offset as usize, bytes);
        }
        let mut rebuilt = vec![0u8; BLOCK as usize];
        apply_fragments(&mut rebuilt, &again);
        assert_eq!(block, rebuilt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fuzz_body_survives_random_and_mutated_entries() {
        let mut seed = 0x0bad_5eed_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let valid = [
            encode_stub(5, 1 << 20).to_vec(),
            key(9, KIND_EXTENT, 77).to_vec(),
            encode_fragments(&vec![(3, vec![1, 2]), (100, vec![9; 50])]),
            encode_log_entry(4, 12, &vec![(7, vec![5; 30]), (900, vec![6; 9])]),
        ];
        for round in 0..3_000 {
            let mut input = valid[round % valid.len()].clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() as usize) % input.len();
                input[at] ^= (next() % 255 + 1) as u8;
            }
            if round % 5 == 0 {
                input.truncate((next() as usize) % (input.len() + 1));
            }
            fuzz_object_entry(&input);
            let random: Vec<u8> = (0..next() % 64).map(|_| next() as u8).collect();
            fuzz_object_entry(&random);
        }
    }

    #[test]
    fn overlaid_fragments_match_a_model_block() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..500 {
            let mut model = vec![0u8; BLOCK as usize];
            let mut covered = vec![false; BLOCK as usize];
            let mut fragments = Fragments::new();
            for write in 0..(1 + next(12)) {
                let cap = if next(2) == 0 { 64 } else { 1500 };
                let len = 1 + next(cap) as usize;
                let offset = next(BLOCK - len as u64 + 1) as usize;
                let fill = (round * 31 + write * 7 + 1) as u8;
                let bytes: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
                fragments = overlay_fragment(&fragments, offset, &bytes);
                model[offset..offset + len].copy_from_slice(&bytes);
                covered[offset..offset + len].iter_mut().for_each(|c| *c = true);
                let mut block = vec![0u8; BLOCK as usize];
                apply_fragments(&mut block, &fragments);
                assert_eq!(block, model, "round {round} write {write}");
                assert_eq!(fragment_bytes(&fragments), covered.iter().filter(|c| **c).count());
                let encoded = encode_fragments(&fragments);
                assert_eq!(encoded.len(), encoded_len(&fragments));
                assert_eq!(decode_fragments(&encoded).unwrap(), fragments, "round {round}");
            }
        }
    }

    #[test]
    fn long_fragments_split_into_entries_that_fit_and_apply_alike() {
        let cases: Vec<Fragments> = vec![
            vec![(1, vec![7; BLOCK as usize - 1])],
            vec![(0, vec![1; 100]), (200, vec![2; 3000]), (3300, vec![3; 700])],
            vec![(10, vec![4; 5])],
        ];
        for fragments in cases {
            let entries = split_entries(&fragments);
            let mut want = vec![0u8; BLOCK as usize];
            apply_fragments(&mut want, &fragments);
            let mut got = vec![0u8; BLOCK as usize];
            for entry in &entries {
                let value = encode_log_entry(9, 3, entry);
                assert!(value.len() + KEY_LEN <= crate::btree::node::MAX_INLINE_ENTRY);
                let (id, block, decoded) = decode_log_entry(&value).unwrap();
                assert_eq!((id, block, &decoded), (9, 3, entry));
                apply_fragments(&mut got, &decoded);
            }
            assert_eq!(got, want);
        }
        assert_eq!(split_entries(&vec![(1, vec![7; BLOCK as usize - 1])]).len(), 3);
        assert!(decode_log_entry(&encode_log_entry(FRAGMENT_LOG, 0, &vec![(0, vec![1])])).is_err());
        assert!(decode_log_entry(&encode_log_entry(1, 0, &Fragments::new())).is_err());
    }

    #[test]
    fn damaged_fragments_and_stubs_are_refused() {
        assert!(decode_fragments(&[1, 0, 0, 16, 0, 0]).is_err(), "empty fragment");
        assert!(decode_fragments(&[1, 0, 255, 15, 2, 0, 1, 2]).is_err(), "past the block");
        let two = encode_fragments(&vec![(0, vec![1]), (1, vec![2])]);
        assert!(decode_fragments(&two).is_err(), "touching fragments");
        assert!(decode_fragments(&[0, 0, 9]).is_err(), "trailing bytes");
        assert_eq!(decode_stub(b"plain"), Ok(None));
        let stub = encode_stub(7, 1 << 33);
        assert_eq!(decode_stub(&stub), Ok(Some((7, 1 << 33))));
        assert!(decode_stub(&stub[..20]).is_err());
        assert!(needs_object(10, &MAGIC) && needs_object(MAX_VALUE_LEN as u64 + 1, b""));
        assert!(!needs_object(MAX_VALUE_LEN as u64, b"x"));
        assert_eq!(parse_key(&key(3, KIND_FRAGMENT, 9)), Some((3, KIND_FRAGMENT, 9)));
        assert!(Extent::decode(3, &Extent { first: 4, last: 3, page: 1 }.value()).is_err());
    }
}
