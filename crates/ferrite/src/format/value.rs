//! A Value page: one value too large to sit in its leaf next to its key. A value longer than
//! a page holds keeps its first [`PAGE_CAPACITY`] bytes here and the rest, its *tail* (at most
//! `btree::node::MAX_TAIL` bytes), in its leaf after the page's id.
//!
//! | offset | size | meaning                                  |
//! |--------|------|------------------------------------------|
//! | 0      | 16   | common page header (kind `Value`)         |
//! | 16     | 8    | page LSN (`format::page::OFFSET_LSN`)       |
//! | 24     | 8    | tree id of the leaf that owns it          |
//! | 32     | 4    | value length in bytes                     |
//! | 36     | 4    | reserved, 0                               |
//! | 40     | n    | the value                                 |

use crate::error::PageId;
use crate::format::page::{self, read_u32, read_u64, write_u32, write_u64, PageKind, PAGE_SIZE};

/// Bytes of a Value page before the value (see the table above).
pub const VALUE_HEADER_SIZE: usize = 40;
pub(crate) const OFFSET_TREE_ID: usize = 24;
const OFFSET_LEN: usize = 32;
/// Most value bytes one Value page holds.
pub const PAGE_CAPACITY: usize = PAGE_SIZE - VALUE_HEADER_SIZE;
/// Longest value a tree stores itself: a full Value page and the longest tail. A longer one is
/// stored as an object.
pub const MAX_VALUE_LEN: usize = PAGE_CAPACITY + crate::btree::node::MAX_TAIL;

/// How a value kept out of its leaf is cut: the Value page's part, and the tail.
pub fn split(value: &[u8]) -> (&[u8], &[u8]) {
    assert!(value.len() <= MAX_VALUE_LEN, "a value of {} bytes", value.len());
    value.split_at(value.len().min(PAGE_CAPACITY))
}

/// Formats a Value page holding `value`.
pub fn encode(out: &mut [u8], page_id: PageId, tree_id: u64, value: &[u8]) {
    assert!(value.len() <= PAGE_CAPACITY);
    out.fill(0);
    page::init_header(out, PageKind::Value, page_id);
    write_u64(out, OFFSET_TREE_ID, tree_id);
    write_u32(out, OFFSET_LEN, value.len() as u32);
    out[VALUE_HEADER_SIZE..VALUE_HEADER_SIZE + value.len()].copy_from_slice(value);
}

/// The value in a Value page, checking kind, owner and length.
pub fn decode(bytes: &[u8], tree_id: u64) -> Result<&[u8], String> {
    if page::kind_of(bytes) != Some(PageKind::Value) {
        return Err(format!("expected a value page, found kind {}", bytes[page::OFFSET_KIND]));
    }
    let owner = read_u64(bytes, OFFSET_TREE_ID);
    if owner != tree_id {
        return Err(format!("value page of tree {owner}, expected tree {tree_id}"));
    }
    let len = read_u32(bytes, OFFSET_LEN) as usize;
    if len > PAGE_CAPACITY {
        return Err(format!("value length {len} exceeds {PAGE_CAPACITY}"));
    }
    Ok(&bytes[VALUE_HEADER_SIZE..VALUE_HEADER_SIZE + len])
}

/// The value bytes of a latched Value page, to change in place.
pub fn value_mut(bytes: &mut [u8]) -> &mut [u8] {
    let len = (read_u32(bytes, OFFSET_LEN) as usize).min(PAGE_CAPACITY);
    &mut bytes[VALUE_HEADER_SIZE..VALUE_HEADER_SIZE + len]
}
