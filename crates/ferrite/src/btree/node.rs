//! The B+tree node: a slotted 4 KiB page with fences, prefix truncation, 4-byte key heads
//! and search hints (the layout of LeanStore's B-tree node, written down here first).
//!
//! A node holds the keys `k` with `lower < k <= upper`, where an empty lower fence means
//! minus infinity and an empty upper fence means plus infinity (keys are never empty).
//! Every key in the node shares `prefix = longest common prefix(lower, upper)`; slots store
//! only the part after the prefix (the *suffix*), and the prefix is read from the lower fence.
//!
//! | offset | size   | meaning                                                                  |
//! |--------|--------|--------------------------------------------------------------------------|
//! | 0      | 16     | common page header (`store::page`), kind `Leaf` or `Inner`               |
//! | 16     | 8      | tree id: every node of a tree carries it (stale handles are detected)    |
//! | 24     | 8      | upper child (inner): child for keys greater than every separator; leaf: 0 |
//! | 32     | 2      | slot count                                                               |
//! | 34     | 2      | heap start: lowest offset used by the heap (the heap grows down from 4096)|
//! | 36     | 2      | dead heap bytes (space freed by removals, reclaimed by compaction)       |
//! | 38     | 2      | prefix length                                                            |
//! | 40     | 2      | lower fence offset                                                       |
//! | 42     | 2      | lower fence length (0 = minus infinity)                                  |
//! | 44     | 2      | upper fence offset                                                       |
//! | 46     | 2      | upper fence length (0 = plus infinity)                                   |
//! | 48     | 2      | level: 0 for leaves, children's level + 1 for inner nodes               |
//! | 50     | 2      | reserved, 0                                                              |
//! | 52     | 64     | hints: 16 × u32, the head of slot `(count * (i + 1)) / 17` for i in 0..16 |
//! | 116    | 10 × n | slots, sorted by key: head u32, offset u16, suffix length u16, payload  |
//! |        |        | length u16 (bit 15 set: the leaf's value lives in a Value page)          |
//! | ...    |        | free space                                                               |
//! | heap   |        | fences, then per slot: key suffix bytes followed by payload bytes       |
//!
//! A *head* is the first 4 bytes of a key suffix read big-endian, zero-padded when shorter, so
//! comparing heads as integers orders keys except when the heads are equal (then the full
//! suffixes are compared). Payloads: in a leaf the value bytes, or (bit 15) the 8-byte id of
//! the Value page holding it; in an inner node the 8-byte child page id, whose subtree holds
//! the keys `k` with `previous separator < k <= this separator`.
//!
//! Decoding never panics, whatever the bytes (a fuzz target checks this): a node read from a
//! page that passed its checksum can still be wrong, and `check` says how.

#![allow(dead_code)]

use crate::error::PageId;
use crate::store::page::PAGE_SIZE;

/// Longest key, in bytes.
pub const MAX_KEY_LEN: usize = 1024;
/// Longest key + value stored inline in a leaf; a longer pair keeps its value in a Value page.
/// Chosen so that a leaf always holds one entry next to two maximal fences.
pub const MAX_INLINE_ENTRY: usize = 1536;
/// Bytes before the first slot.
pub const HEADER_SIZE: usize = 116;
/// Bytes per slot.
pub const SLOT_SIZE: usize = 10;
/// Number of hint heads kept in the header.
pub const HINT_COUNT: usize = 16;
/// Payload-length bit: the leaf's value lives in the Value page whose id is the payload.
pub const PAYLOAD_OUT_OF_LINE: u16 = 0x8000;

const _: () = assert!(HEADER_SIZE == 52 + HINT_COUNT * 4);
// A leaf holds one maximal inline entry next to two maximal fences; an inner node one
// maximal separator. Splits rely on both.
const _: () = assert!(HEADER_SIZE + 2 * MAX_KEY_LEN + MAX_INLINE_ENTRY + SLOT_SIZE <= PAGE_SIZE);
const _: () = assert!(HEADER_SIZE + 3 * MAX_KEY_LEN + 8 + SLOT_SIZE <= PAGE_SIZE);

/// A leaf entry's value as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload<'a> {
    Inline(&'a [u8]),
    /// The value lives in this Value page.
    OutOfLine(PageId),
}

/// What `Node::check` compares the node against (from the parent, when known).
#[derive(Debug, Clone, Copy, Default)]
pub struct Expect<'a> {
    pub page_id: PageId,
    pub tree_id: Option<u64>,
    pub level: Option<u16>,
    /// The fences the parent implies: (lower, upper), empty = infinite.
    pub fences: Option<(&'a [u8], &'a [u8])>,
}

/// A read-only view of a node image (`PAGE_SIZE` bytes).
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    page: &'a [u8],
}

/// A writable view of a node image.
#[derive(Debug)]
pub struct NodeMut<'a> {
    page: &'a mut [u8],
}

impl<'a> Node<'a> {
    /// Panics if `page` is not `PAGE_SIZE` bytes.
    pub fn new(page: &'a [u8]) -> Self {
        assert_eq!(page.len(), PAGE_SIZE);
        Node { page }
    }
    pub fn is_leaf(&self) -> bool {
        todo!()
    }
    pub fn level(&self) -> u16 {
        todo!()
    }
    pub fn tree_id(&self) -> u64 {
        todo!()
    }
    pub fn count(&self) -> usize {
        todo!()
    }
    /// Inner nodes: the child right of the last separator.
    pub fn upper_child(&self) -> PageId {
        todo!()
    }
    pub fn lower_fence(&self) -> &'a [u8] {
        todo!()
    }
    pub fn upper_fence(&self) -> &'a [u8] {
        todo!()
    }
    pub fn prefix(&self) -> &'a [u8] {
        todo!()
    }
    /// The stored part of slot `slot`'s key (after the prefix).
    pub fn suffix(&self, slot: usize) -> &'a [u8] {
        let _ = slot;
        todo!()
    }
    /// Writes slot `slot`'s full key (prefix + suffix) into `out`, replacing its contents.
    pub fn key_into(&self, slot: usize, out: &mut Vec<u8>) {
        let _ = (slot, out);
        todo!()
    }
    /// The raw payload bytes of slot `slot`.
    pub fn payload(&self, slot: usize) -> &'a [u8] {
        let _ = slot;
        todo!()
    }
    /// Leaves: slot `slot`'s value.
    pub fn value(&self, slot: usize) -> Payload<'a> {
        let _ = slot;
        todo!()
    }
    /// Inner nodes: child `index`, where `index == count()` is the upper child.
    pub fn child(&self, index: usize) -> PageId {
        let _ = index;
        todo!()
    }
    /// The first slot whose key is `>= key`, and whether that key equals `key`
    /// (`(count(), false)` when every key is smaller). Uses hints and heads.
    pub fn lower_bound(&self, key: &[u8]) -> (usize, bool) {
        let _ = key;
        todo!()
    }
    /// Contiguous free bytes between the slot array and the heap.
    pub fn free_bytes(&self) -> usize {
        todo!()
    }
    /// Free bytes once dead heap bytes are reclaimed.
    pub fn free_bytes_after_compaction(&self) -> usize {
        todo!()
    }
    /// Bytes a new entry takes in this node (its suffix, payload and slot).
    pub fn space_needed(&self, key_len: usize, payload_len: usize) -> usize {
        let _ = (key_len, payload_len);
        todo!()
    }
    /// Whether an entry of these sizes fits (after compaction if need be).
    pub fn has_space_for(&self, key_len: usize, payload_len: usize) -> bool {
        let _ = (key_len, payload_len);
        todo!()
    }
    /// Where to split a node that holds at least one slot: `(sep_slot, separator)`.
    /// Leaves: left keeps slots `0..=sep_slot`, and the separator `s` satisfies
    /// `key(sep_slot) <= s < key(sep_slot + 1)`, as short as the suffix truncation of
    /// `key(sep_slot + 1)` allows. Inner nodes: the separator is `key(sep_slot)` and moves up.
    pub fn split_point(&self) -> (usize, Vec<u8>) {
        todo!()
    }
    /// Verifies everything that can be checked within the node: header fields in range,
    /// slots and heap inside the page and not overlapping, dead-byte accounting, keys in
    /// strictly increasing order and inside the fences, prefix equal to the fences' common
    /// prefix, heads and hints matching the keys, out-of-line flags only in leaves, and
    /// whatever `expect` names. The error says what is wrong and where.
    pub fn check(&self, expect: &Expect<'_>) -> Result<(), String> {
        let _ = expect;
        todo!()
    }
}

impl<'a> NodeMut<'a> {
    /// Panics if `page` is not `PAGE_SIZE` bytes.
    pub fn new(page: &'a mut [u8]) -> Self {
        assert_eq!(page.len(), PAGE_SIZE);
        NodeMut { page }
    }
    pub fn as_node(&self) -> Node<'_> {
        Node { page: self.page }
    }
    /// Formats an empty node (common header included) with these fences.
    #[allow(clippy::too_many_arguments)]
    pub fn init(
        &mut self,
        page_id: PageId,
        leaf: bool,
        level: u16,
        tree_id: u64,
        lower: &[u8],
        upper: &[u8],
        upper_child: PageId,
    ) {
        let _ = (page_id, leaf, level, tree_id, lower, upper, upper_child);
        todo!()
    }
    /// Inserts `key` (full key, not present, inside the fences) at its sorted position,
    /// compacting if need be. Returns false, leaving the node unchanged, when it does not fit.
    pub fn insert(&mut self, key: &[u8], payload: &[u8], out_of_line: bool) -> bool {
        let _ = (key, payload, out_of_line);
        todo!()
    }
    /// Removes slot `slot`; its heap bytes become dead.
    pub fn remove_at(&mut self, slot: usize) {
        let _ = slot;
        todo!()
    }
    /// Slot `slot`'s payload bytes, to change in place.
    pub fn payload_mut(&mut self, slot: usize) -> &mut [u8] {
        let _ = slot;
        todo!()
    }
    /// Replaces slot `slot`'s payload (in place when the length is unchanged). Returns false,
    /// leaving the node unchanged, when the new payload does not fit.
    pub fn set_payload(&mut self, slot: usize, payload: &[u8], out_of_line: bool) -> bool {
        let _ = (slot, payload, out_of_line);
        todo!()
    }
    /// Inner nodes: sets child `index` (`index == count()` is the upper child).
    pub fn set_child(&mut self, index: usize, child: PageId) {
        let _ = (index, child);
        todo!()
    }
    /// Rewrites the heap without dead bytes.
    pub fn compact(&mut self) {
        todo!()
    }
}

/// Splits `node` at `(sep_slot, sep)` from [`Node::split_point`] into two fresh nodes:
/// `left` (page `left_id`, fences `(node.lower, sep)`) and `right` (page `right_id`, fences
/// `(sep, node.upper)`), both at the node's level and tree. Leaves: left gets slots
/// `0..=sep_slot`, right the rest. Inner: left gets slots `0..sep_slot` and upper child
/// `child(sep_slot)`, right gets slots `sep_slot + 1..` and the node's upper child.
pub fn split_into(
    node: Node<'_>,
    sep_slot: usize,
    sep: &[u8],
    left: &mut NodeMut<'_>,
    left_id: PageId,
    right: &mut NodeMut<'_>,
    right_id: PageId,
) {
    let _ = (node, sep_slot, sep, left, left_id, right, right_id);
    todo!()
}

/// Merges siblings `left` and `right`, which the parent separates with `sep`, into `out`
/// (page `out_id`, fences `(left.lower, right.upper)`). Inner nodes pull `sep` down with
/// `left.upper_child()` as its child. Returns false when the result would not fit (then
/// `out` holds garbage and must not be used).
pub fn merge_into(
    left: Node<'_>,
    sep: &[u8],
    right: Node<'_>,
    out: &mut NodeMut<'_>,
    out_id: PageId,
) -> bool {
    let _ = (left, sep, right, out, out_id);
    todo!()
}
