//! Point lookups that read nodes in place: the header, a few slots and the bytes compared,
//! instead of a copy of the whole 4 KiB page per node. A lookup through an inner node of a
//! few hundred slots touches about eight cache lines this way, against 64 for a copy, and the
//! leaf it ends in usually came from the device moments ago and is in no cache at all.
//!
//! A [`Probe`] decodes exactly as [`Node`](super::node::Node) does (same bounds checks, same
//! answers for the same bytes: a test compares them on every node the model tests build), but
//! reads through a [`FrameView`], whose bytes may be torn by a concurrent writer. Nothing a
//! probe returns is trusted before the caller validates the page's version.

use std::cmp::Ordering;

use super::node::{
    decode_page_id, head_of, order_past_heads, slot_position, HEADER_SIZE, HEAD_BYTES, MAX_SLOTS,
    OFFSET_COUNT, OFFSET_HINTS, OFFSET_LEVEL, OFFSET_LOWER_LEN, OFFSET_LOWER_OFFSET,
    OFFSET_PREFIX_LEN, OFFSET_TREE_ID, OFFSET_UPPER_CHILD, OFFSET_UPPER_LEN, OFFSET_UPPER_OFFSET,
    PAYLOAD_LEN_MASK, PAYLOAD_OUT_OF_LINE, SLOT_HEAD, SLOT_OFFSET, SLOT_PAYLOAD_LEN, SLOT_SIZE,
    SLOT_SUFFIX_LEN,
};
use crate::buffer::FrameView;
use crate::error::PageId;
use crate::format::page::{PageKind, OFFSET_KIND, PAGE_SIZE};

/// A cache line's bytes.
const LINE: usize = 64;

/// Lines of slots [`Probe::prefetch_search`] prefetches at most: the slots between two
/// hints of a full node (about 24 slots of 10 bytes) span four or five.
const MAX_SEARCH_LINES: usize = 6;

/// Lines of an entry [`Probe::prefetch_entry`] prefetches at most: a row of a few hundred
/// bytes whole, the start of a longer one (the copy's own streaming takes the rest).
const MAX_ENTRY_LINES: usize = 8;

/// A node read in place: its header copied, everything else read on demand.
#[derive(Debug)]
pub struct Probe<'a> {
    view: FrameView<'a>,
    header: [u8; HEADER_SIZE],
}

/// One slot's fields.
#[derive(Debug, Clone, Copy)]
struct SlotFields {
    head: u32,
    offset: usize,
    suffix_len: usize,
    payload_word: u16,
}

impl<'a> Probe<'a> {
    /// A probe of the node in `view` (its header is copied now).
    pub fn new(view: FrameView<'a>) -> Self {
        Probe { view, header: view.array(0) }
    }

    fn u16_field(&self, offset: usize) -> usize {
        usize::from(u16::from_le_bytes([self.header[offset], self.header[offset + 1]]))
    }

    fn u64_field(&self, offset: usize) -> u64 {
        u64::from_le_bytes(self.header[offset..offset + 8].try_into().unwrap())
    }

    /// The page's kind, if its kind byte names one.
    pub fn kind(&self) -> Option<PageKind> {
        PageKind::from_u8(self.header[OFFSET_KIND])
    }
    /// Whether the page is a node (a leaf or an inner node).
    pub fn is_node(&self) -> bool {
        matches!(self.kind(), Some(PageKind::Leaf) | Some(PageKind::Inner))
    }
    /// Whether the page is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.kind() == Some(PageKind::Leaf)
    }
    /// As [`Node::tree_id`](super::node::Node::tree_id).
    pub fn tree_id(&self) -> u64 {
        self.u64_field(OFFSET_TREE_ID)
    }
    /// As [`Node::level`](super::node::Node::level).
    pub fn level(&self) -> u16 {
        self.u16_field(OFFSET_LEVEL) as u16
    }
    /// As [`Node::count`](super::node::Node::count).
    pub fn count(&self) -> usize {
        self.u16_field(OFFSET_COUNT).min(MAX_SLOTS)
    }
    fn hint(&self, hint: usize) -> u32 {
        let at = OFFSET_HINTS + hint * 4;
        u32::from_le_bytes(self.header[at..at + 4].try_into().unwrap())
    }

    /// Slot `slot`, which must be below `count()` (so it lies inside the page).
    fn slot(&self, slot: usize) -> SlotFields {
        let bytes: [u8; SLOT_SIZE] = self.view.array(slot_position(slot));
        let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        SlotFields {
            head: u32::from_le_bytes(bytes[SLOT_HEAD..SLOT_HEAD + 4].try_into().unwrap()),
            offset: usize::from(u16_at(SLOT_OFFSET)),
            suffix_len: usize::from(u16_at(SLOT_SUFFIX_LEN)),
            payload_word: u16_at(SLOT_PAYLOAD_LEN),
        }
    }

    /// Orders the page bytes `offset..offset + len` against `other`; a range that leaves the
    /// page counts as empty (as `Node` reads it). Eight bytes at a time, as big-endian words
    /// (whose order is their bytes' order), read straight from the frame: no copy to a
    /// buffer and no call to `memcmp` (perf, TPC-C in memory: `memcmp` 8 % of the CPU, the copies
    /// for it about 4 %).
    #[inline]
    fn compare_range(&self, offset: usize, len: usize, other: &[u8]) -> Ordering {
        if offset + len > PAGE_SIZE {
            return [].as_slice().cmp(other);
        }
        let common = len.min(other.len());
        let mut done = 0;
        while done + 8 <= common {
            let ours = u64::from_be_bytes(self.view.array(offset + done));
            let theirs = u64::from_be_bytes(other[done..done + 8].try_into().unwrap());
            if ours != theirs {
                return ours.cmp(&theirs);
            }
            done += 8;
        }
        while done < common {
            let [ours] = self.view.array::<1>(offset + done);
            if ours != other[done] {
                return ours.cmp(&other[done]);
            }
            done += 1;
        }
        len.cmp(&other.len())
    }

    /// The prefix's place in the page: (offset, length); length 0 when `Node::prefix` would
    /// be empty.
    fn prefix_range(&self) -> (usize, usize) {
        let lower_offset = self.u16_field(OFFSET_LOWER_OFFSET);
        let lower_len = self.u16_field(OFFSET_LOWER_LEN);
        let prefix_len = self.u16_field(OFFSET_PREFIX_LEN);
        if lower_offset + lower_len > PAGE_SIZE || prefix_len > lower_len {
            return (0, 0);
        }
        (lower_offset, prefix_len)
    }

    /// As `Node::lower_bound`: the first slot whose key is `>= key`, and whether it equals.
    pub fn lower_bound(&self, key: &[u8]) -> (usize, bool) {
        let count = self.count();
        let (prefix_offset, prefix_len) = self.prefix_range();
        let rest = if prefix_len == 0 {
            key
        } else {
            let head = &key[..prefix_len.min(key.len())];
            match self.compare_range(prefix_offset, prefix_len, head) {
                Ordering::Equal if key.len() >= prefix_len => &key[prefix_len..],
                // The key is shorter than the prefix and starts it, or the prefix is greater.
                Ordering::Equal | Ordering::Greater => return (0, false),
                Ordering::Less => return (count, false),
            }
        };
        let head = head_of(rest);
        let (mut low, mut high) = self.hint_range(head, count);
        while low < high {
            let middle = low + (high - low) / 2;
            let slot = self.slot(middle);
            let order = slot.head.cmp(&head).then_with(|| {
                order_past_heads(slot.suffix_len, rest.len()).unwrap_or_else(|| {
                    let skip = HEAD_BYTES;
                    self.compare_range(slot.offset + skip, slot.suffix_len - skip, &rest[skip..])
                })
            });
            match order {
                Ordering::Less => low = middle + 1,
                Ordering::Greater => high = middle,
                Ordering::Equal => return (middle, true),
            }
        }
        (low, false)
    }

    /// Prefetches what a search for `key` in this node reads beyond its header
    /// (`FrameView::prefetch`): the fences, which `holds` and the prefix compare, and the
    /// slots between the hints around the key's head, where `lower_bound` searches. A hint
    /// to the CPU and nothing more: the header may be torn, and nothing here is trusted.
    pub fn prefetch_search(&self, key: &[u8]) {
        self.view.prefetch(self.u16_field(OFFSET_LOWER_OFFSET));
        self.view.prefetch(self.u16_field(OFFSET_UPPER_OFFSET));
        let (_, prefix_len) = self.prefix_range();
        let rest = key.get(prefix_len..).unwrap_or_default();
        let count = self.count();
        let (low, high) = self.hint_range(head_of(rest), count);
        let (first, end) = (slot_position(low), slot_position(high));
        // Whole lines, and no more than a search of a wide range touches.
        let mut line = first - first % LINE;
        for _ in 0..MAX_SEARCH_LINES {
            if line >= end {
                break;
            }
            self.view.prefetch(line);
            line += LINE;
        }
    }

    /// A fence's place in the page: (offset, length); length 0 (infinite) when it leaves the
    /// page, as `Node` reads it.
    fn fence_range(&self, offset_field: usize, len_field: usize) -> (usize, usize) {
        let (offset, len) = (self.u16_field(offset_field), self.u16_field(len_field));
        if offset + len > PAGE_SIZE {
            return (0, 0);
        }
        (offset, len)
    }

    /// As `Node::holds`: whether `key` lies in the node's range, `lower < key <= upper`.
    pub fn holds(&self, key: &[u8]) -> bool {
        let (lower_offset, lower_len) = self.fence_range(OFFSET_LOWER_OFFSET, OFFSET_LOWER_LEN);
        let (upper_offset, upper_len) = self.fence_range(OFFSET_UPPER_OFFSET, OFFSET_UPPER_LEN);
        (lower_len == 0 || self.compare_range(lower_offset, lower_len, key).is_lt())
            && (upper_len == 0 || self.compare_range(upper_offset, upper_len, key).is_ge())
    }

    /// As `Node::bounds_child`: whether `lower` and `upper` are exactly the keys around child
    /// `index` (below or equal to `count()`).
    pub fn bounds_child(&self, index: usize, lower: &[u8], upper: &[u8]) -> bool {
        let lower_ok = match index.checked_sub(1) {
            None => self.fence_is(OFFSET_LOWER_OFFSET, OFFSET_LOWER_LEN, lower),
            Some(slot) => self.key_is(slot, lower),
        };
        let upper_ok = if index >= self.count() {
            self.fence_is(OFFSET_UPPER_OFFSET, OFFSET_UPPER_LEN, upper)
        } else {
            self.key_is(index, upper)
        };
        lower_ok && upper_ok
    }

    fn fence_is(&self, offset_field: usize, len_field: usize, bytes: &[u8]) -> bool {
        let (offset, len) = self.fence_range(offset_field, len_field);
        len == bytes.len() && self.compare_range(offset, len, bytes).is_eq()
    }

    /// Whether slot `slot`'s full key (prefix and suffix) is `bytes`.
    fn key_is(&self, slot: usize, bytes: &[u8]) -> bool {
        let (prefix_offset, prefix_len) = self.prefix_range();
        let fields = self.slot(slot);
        bytes.len() == prefix_len + fields.suffix_len
            && self.compare_range(prefix_offset, prefix_len, &bytes[..prefix_len]).is_eq()
            && self.compare_range(fields.offset, fields.suffix_len, &bytes[prefix_len..]).is_eq()
    }

    /// As `Node::hint_range`.
    fn hint_range(&self, head: u32, count: usize) -> (usize, usize) {
        super::node::hint_range(head, count, |i| self.hint(i))
    }

    /// The payload range of slot `slot` (below `count()`), empty when it leaves the page.
    fn payload_range(&self, slot: usize) -> (usize, usize, bool) {
        let fields = self.slot(slot);
        let len = usize::from(fields.payload_word & PAYLOAD_LEN_MASK);
        let start = fields.offset + fields.suffix_len;
        let out_of_line = fields.payload_word & PAYLOAD_OUT_OF_LINE != 0;
        if start + len > PAGE_SIZE {
            return (0, 0, out_of_line);
        }
        (start, len, out_of_line)
    }

    /// As `Node::child`: child `index`, where `index == count()` is the upper child.
    pub fn child(&self, index: usize) -> PageId {
        match index.cmp(&self.count()) {
            Ordering::Less => {
                let (start, len, _) = self.payload_range(index);
                if len != 8 {
                    return 0;
                }
                decode_page_id(&self.view.array::<8>(start))
            }
            Ordering::Equal => self.u64_field(OFFSET_UPPER_CHILD),
            Ordering::Greater => 0,
        }
    }

    /// Copies the whole page (for a caller that keeps it, like a scan's cursor).
    pub fn copy_page(&self, out: &mut [u8]) {
        self.view.copy(0, out);
    }

    /// Prefetches the bytes of slot `slot`'s entry (its key suffix and payload, in the
    /// heap), as many lines as [`MAX_ENTRY_LINES`] at most. A hint, like `prefetch_search`.
    pub fn prefetch_entry(&self, slot: usize) {
        let fields = self.slot(slot);
        let start = fields.offset;
        let end = start + fields.suffix_len + usize::from(fields.payload_word & PAYLOAD_LEN_MASK);
        let mut line = start - start % LINE;
        for _ in 0..MAX_ENTRY_LINES {
            if line >= end.min(PAGE_SIZE) {
                break;
            }
            self.view.prefetch(line);
            line += LINE;
        }
    }

    /// Leaves: copies slot `slot`'s payload (below `count()`) into `out` (a page long) and
    /// returns its length and whether it is the id of a Value page.
    pub fn payload_into(&self, slot: usize, out: &mut [u8; PAGE_SIZE]) -> (usize, bool) {
        let (start, len, out_of_line) = self.payload_range(slot);
        self.view.copy(start, &mut out[..len]);
        (len, out_of_line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::node::{Node, NodeMut};
    use crate::buffer::BufferPool;
    use crate::io::PageFile;
    use tempfile::TempDir;

    fn key_of(node: &Node<'_>, slot: usize) -> Vec<u8> {
        let mut key = Vec::new();
        node.key_into(slot, &mut key);
        key
    }

    /// A probe of any bytes at all (a page torn by a writer, or damaged) never panics and
    /// answers within bounds: searches, fences, children, payloads, and the prefetches of
    /// descents taken together, on random pages with a node's kind byte, some with a count
    /// and a prefix length small enough to pass the first checks.
    #[test]
    fn probes_of_garbage_never_panic() {
        let dir = TempDir::with_prefix("probe").unwrap();
        let file = PageFile::open(&dir.path().join("pages"), true, true, true, 1 << 20).unwrap();
        let pool = BufferPool::new(file, 16, 4096, 0, Vec::new()).unwrap();
        let mut rng = crate::testing::Rng::new(5);
        let mut out = [0u8; PAGE_SIZE];
        for round in 0..300 {
            let mut guard = pool.allocate().unwrap();
            let id = guard.page_id();
            let page = guard.page_mut();
            page.copy_from_slice(&rng.bytes(PAGE_SIZE));
            page[OFFSET_KIND] = [PageKind::Leaf, PageKind::Inner][round % 2] as u8;
            // A count and a prefix length small enough, in some rounds, to be believed.
            if round % 3 == 0 {
                page[OFFSET_COUNT..OFFSET_COUNT + 2].copy_from_slice(&(round as u16).to_le_bytes());
                page[OFFSET_PREFIX_LEN..OFFSET_PREFIX_LEN + 2].copy_from_slice(&[2, 0]);
            }
            drop(guard);
            let (_, view) = pool.read_begin(id).unwrap();
            let probe = Probe::new(view);
            for _ in 0..20 {
                let len = rng.index(20);
                let key = rng.bytes(len);
                probe.prefetch_search(&key);
                if key.is_empty() {
                    continue;
                }
                let (slot, exact) = probe.lower_bound(&key);
                assert!(slot <= probe.count());
                let _ = probe.holds(&key);
                let _ = probe.child(slot);
                if exact {
                    probe.prefetch_entry(slot);
                    let (len, _) = probe.payload_into(slot, &mut out);
                    assert!(len <= PAGE_SIZE);
                }
                probe.prefetch_entry(rng.index(MAX_SLOTS));
            }
            assert!(pool.peek(id).is_some(), "a page in memory has a frame to peek at");
            pool.free_by_id(id).unwrap();
        }
    }

    /// The word-wise comparison orders a page range against a key exactly as slices are
    /// ordered: equal prefixes of every length, a difference in each byte of a word, either
    /// side a prefix of the other, and ranges at the page's end or leaving it.
    #[test]
    fn compare_range_orders_as_slices() {
        let dir = TempDir::with_prefix("probe").unwrap();
        let file = PageFile::open(&dir.path().join("pages"), true, true, true, 1 << 20).unwrap();
        let pool = BufferPool::new(file, 16, 4096, 0, Vec::new()).unwrap();
        let mut guard = pool.allocate().unwrap();
        let id = guard.page_id();
        let page = guard.page_mut();
        for (i, byte) in page.iter_mut().enumerate() {
            *byte = (i * 7 % 5) as u8;
        }
        drop(guard);
        let (_, view) = pool.read_begin(id).unwrap();
        let mut image = vec![0; PAGE_SIZE];
        view.copy(0, &mut image);
        let probe = Probe::new(view);
        for offset in [0, 1, 13, PAGE_SIZE - 40, PAGE_SIZE - 9, PAGE_SIZE - 1] {
            for len in 0..=40.min(PAGE_SIZE - offset) {
                let ours = &image[offset..offset + len];
                let mut others = vec![ours.to_vec(), ours[..len / 2].to_vec(), Vec::new()];
                let mut longer = ours.to_vec();
                longer.push(0);
                others.push(longer);
                for at in 0..len {
                    for delta in [1u8, 255] {
                        let mut other = ours.to_vec();
                        other[at] = other[at].wrapping_add(delta);
                        others.push(other.clone());
                        other.truncate(at + 1);
                        others.push(other);
                    }
                }
                for other in &others {
                    let order = probe.compare_range(offset, len, other);
                    assert_eq!(order, ours.cmp(other.as_slice()), "{offset} {len} {other:?}");
                }
            }
        }
        // A range that leaves the page reads as empty.
        assert_eq!(probe.compare_range(PAGE_SIZE - 4, 8, b""), Ordering::Equal);
        assert_eq!(probe.compare_range(PAGE_SIZE - 4, 8, b"a"), Ordering::Less);
    }

    /// Builds nodes of several shapes in a pool frame and checks that a probe answers every
    /// lookup exactly as `Node` does on a copy.
    #[test]
    fn probes_agree_with_nodes() {
        let dir = TempDir::with_prefix("probe").unwrap();
        let file = PageFile::open(&dir.path().join("pages"), true, true, true, 1 << 20).unwrap();
        let pool = BufferPool::new(file, 16, 4096, 0, Vec::new()).unwrap();
        // (lower fence, upper fence, key length, leaf, the alphabet of the keys' tails)
        type Shape = (&'static [u8], &'static [u8], usize, bool, &'static [u8]);
        let shapes: [Shape; 4] = [
            (b"", b"", 8, true, b"abcdefgh"),
            (b"user:0001", b"user:0999", 12, true, b"0123456789"),
            (b"k", b"", 3, false, b"klmnopqrstuvwxyz"),
            (b"aaaa", b"aaab", 40, false, b"ab"),
        ];
        let mut rng = 0x1234_5678_u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for (lower, upper, key_len, leaf, alphabet) in shapes {
            let mut guard = pool.allocate().unwrap();
            let id = guard.page_id();
            let mut keys = Vec::new();
            let mut node = NodeMut::new(guard.page_mut());
            node.init(id, leaf, if leaf { 0 } else { 1 }, 7, lower, upper, 99);
            let prefix_len = super::super::node::fence_prefix_len(lower, upper);
            loop {
                let mut key = lower[..prefix_len].to_vec();
                while key.len() < key_len {
                    key.push(alphabet[(next() % alphabet.len() as u64) as usize]);
                }
                if key.as_slice() <= lower || (!upper.is_empty() && key.as_slice() > upper) {
                    continue;
                }
                let payload = if leaf {
                    vec![next() as u8; (next() % 40) as usize]
                } else {
                    (next() % 1000).to_le_bytes().to_vec()
                };
                if node.as_node().lower_bound(&key).1 {
                    continue;
                }
                if !node.insert(&key, &payload, false) {
                    break;
                }
                keys.push(key);
            }
            assert!(keys.len() > 2, "{} keys", keys.len());
            let image = guard.page().to_vec();
            drop(guard);
            let node = Node::new(&image);
            let (version, view) = pool.read_begin(id).unwrap();
            let probe = Probe::new(view);
            assert_eq!(probe.count(), node.count());
            assert_eq!(probe.is_leaf(), node.is_leaf());
            assert_eq!(probe.tree_id(), 7);
            let mut queries = keys.clone();
            for key in &keys {
                let mut shorter = key.clone();
                shorter.pop();
                queries.push(shorter);
                let mut longer = key.clone();
                longer.push(b'z');
                queries.push(longer);
            }
            queries.extend([b"a".to_vec(), b"zzzzzzzz".to_vec(), lower.to_vec(), upper.to_vec()]);
            let mut out = [0u8; PAGE_SIZE];
            for query in &queries {
                assert_eq!(probe.holds(query), node.holds(query), "{query:?}");
            }
            let mut around = (Vec::new(), Vec::new());
            for index in 0..=node.count() {
                around.0 = if index == 0 { lower.to_vec() } else { key_of(&node, index - 1) };
                around.1 =
                    if index == node.count() { upper.to_vec() } else { key_of(&node, index) };
                assert!(probe.bounds_child(index, &around.0, &around.1), "child {index}");
                assert!(node.bounds_child(index, &around.0, &around.1), "child {index}");
                around.1.push(0);
                assert!(!probe.bounds_child(index, &around.0, &around.1), "child {index}");
                assert!(!node.bounds_child(index, &around.0, &around.1), "child {index}");
            }
            for query in queries.iter().filter(|q| !q.is_empty()) {
                let found = probe.lower_bound(query);
                assert_eq!(found, node.lower_bound(query), "{query:?} in {lower:?}..{upper:?}");
                if leaf && found.1 {
                    let (len, out_of_line) = probe.payload_into(found.0, &mut out);
                    assert_eq!(&out[..len], node.payload(found.0));
                    assert!(!out_of_line);
                } else if !leaf {
                    assert_eq!(probe.child(found.0), node.child(found.0));
                }
            }
            assert!(pool.validate(id, version), "nobody wrote the page");
            drop(pool.lock_exclusive(id, version).unwrap());
            assert!(!pool.validate(id, version), "a write moves the version");
        }
    }
}
