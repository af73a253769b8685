//! Log records: how a change is written into the log, and read back.
//!
//! A record's position in the log stream is its LSN; the log is one stream of bytes laid over
//! segment files (`segment.rs`). Every record starts with this header:
//!
//! | offset | size | meaning                                                          |
//! |--------|------|------------------------------------------------------------------|
//! | 0      | 4    | CRC-32C of bytes 4..length                                        |
//! | 4      | 4    | length of the record in bytes, this header included              |
//! | 8      | 8    | LSN: the record's own position (catches stale bytes of a reused   |
//! |        |      | segment and misplaced reads)                                     |
//! | 16     | 1    | kind: 1 = commit, 2 = checkpoint, 3 = page image, 4 = flush end    |
//! | 17     | 3    | reserved, 0                                                      |
//! | 20     | ...  | body, by kind                                                     |
//!
//! **Commit** (one per committed batch: everything it changed, all or nothing):
//!
//! | size | meaning                                                                     |
//! |------|-----------------------------------------------------------------------------|
//! | 8    | next tree id after the commit                                                |
//! | 4    | page entries n                                                               |
//! | ...  | n page entries                                                               |
//! | 4    | (only if the commit changed the change buffer) buffered changes m, at least 1 |
//! | ...  | m buffered changes                                                           |
//!
//! A buffered change (the change buffer, `change_buffer/`): op (1: 0 = put: the key's value
//! is now held in the change buffer; 1 = removed: the key left the change buffer, its value
//! written into its leaf, overwritten or deleted by this same record's page changes), tree
//! id (8), key length (2), key, and for a put value length (2) and value.
//!
//! A page entry: page id (8), op (1: 0 = changed: ranges apply to the page as it was; 1 =
//! new: ranges apply to a zeroed page, and the page is taken from the free pages; 2 = freed:
//! no ranges), range count (2), then per range offset (2), length (2) and the bytes. Ranges
//! never cover the page checksum, flags or LSN (bytes 0..4, 5 and 16..24): recovery sets the
//! LSN and the checksum is made when the page is written.
//!
//! Object data (`db/object/`) is not logged: its pages are written and synced before the
//! commit that references them. Two more ops record their allocation, for a *run* of pages
//! from the entry's page id: 3 = data allocated (taken from the free pages; their bytes are
//! on disk already, recovery leaves them alone), 4 = data freed. For these the count field
//! is the run's length in pages (1..=65535) and no ranges follow.
//!
//! **Page image** (written before a page's first write-back after a checkpoint, so that a
//! write torn by a crash can be repaired): the page LSN of its content (8), then one page
//! entry with op 1, not an allocation. Recovery applies it only to a page whose LSN is older
//! than the content's, and gives the page the content's LSN (an image logged while recovery
//! itself evicts pages lies past records still to replay: its position says nothing of its
//! age).
//!
//! **Flush end** (the last record of every log write): the LSN where that write began (8),
//! and the LSN below which the log was durable when it began (8).
//!
//! **Checkpoint**: redo LSN (8): recovery replays from there; page count (8); next tree id
//! (8); catalog root (8); free page count n (8); n free page ids (8 each); then, only if the
//! change buffer held entries at the redo LSN, their count m (4, at least 1) and m buffered
//! changes, all puts (recovery starts the change buffer from them).

use crate::buffer::PageChange;
use crate::error::PageId;
use crate::format::diff::next_difference;
use crate::format::page::{read_u16, read_u32, read_u64, PAGE_SIZE};

/// Bytes of the header every record starts with.
pub const RECORD_HEADER_SIZE: usize = 20;
/// Longest record accepted when reading (a checkpoint listing 32 M free pages).
pub const MAX_RECORD_BYTES: usize = 256 << 20;

/// A commit record's kind byte.
pub const KIND_COMMIT: u8 = 1;
/// A checkpoint record's kind byte.
pub const KIND_CHECKPOINT: u8 = 2;
/// A page image's kind byte.
pub const KIND_IMAGE: u8 = 3;
/// A flush end's kind byte.
pub const KIND_FLUSH_END: u8 = 4;

/// A page entry of a page changed: its ranges apply to the page as it was.
pub const OP_CHANGED: u8 = 0;
/// A page entry of a page allocated: its ranges apply to a zeroed page.
pub const OP_NEW: u8 = 1;
/// A page entry of a page freed (no ranges).
pub const OP_FREED: u8 = 2;
/// A run of pages allocated for object data (not logged; written before the record).
pub const OP_DATA_NEW: u8 = 3;
/// A run of object data pages freed.
pub const OP_DATA_FREED: u8 = 4;

/// Page bytes a range never covers: checksum, flags, LSN.
const SKIPPED: [std::ops::Range<usize>; 3] = [0..4, 5..6, 16..24];

/// One page's change inside a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageEntry {
    /// The page (the first of a run, for the data ops).
    pub page_id: PageId,
    /// What happened to it: one of the `OP_*` codes.
    pub op: u8,
    /// `(offset, bytes)`, ascending, non-overlapping.
    pub ranges: Vec<(u16, Vec<u8>)>,
    /// Pages from `page_id` the entry covers: 1, except for the data ops' runs.
    pub pages: u16,
}

impl PageEntry {
    /// Whether the entry allocates or frees a run of object data pages (no page bytes).
    pub fn is_data(&self) -> bool {
        self.op == OP_DATA_NEW || self.op == OP_DATA_FREED
    }

    /// The page ids the entry covers.
    pub fn page_ids(&self) -> std::ops::Range<PageId> {
        self.page_id..self.page_id + self.pages as u64
    }

    /// Applies the ranges to `page` (zeroed first for `OP_NEW`).
    pub fn apply(&self, page: &mut [u8]) {
        if self.op == OP_NEW {
            page.fill(0);
        }
        for (offset, bytes) in &self.ranges {
            let at = *offset as usize;
            page[at..at + bytes.len()].copy_from_slice(bytes);
        }
    }
}

/// A change a commit made to the change buffer (`change_buffer/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BufferedOp {
    /// `key` of tree `tree` has `value`, held in the change buffer (not in its leaf).
    Put {
        /// The tree's id.
        tree: u64,
        /// The key.
        key: Vec<u8>,
        /// Its value.
        value: Vec<u8>,
    },
    /// `key` of tree `tree` left the change buffer: the same record's page changes wrote its
    /// value into its leaf, or overwrote or deleted it there.
    Removed {
        /// The tree's id.
        tree: u64,
        /// The key.
        key: Vec<u8>,
    },
}

const BUFFERED_PUT: u8 = 0;
const BUFFERED_REMOVED: u8 = 1;

/// Appends the buffered-changes section (count, then each change) to a record's body; an
/// empty list appends nothing.
pub fn push_buffered(w: &mut RecordWriter, ops: &[BufferedOp]) {
    if ops.is_empty() {
        return;
    }
    w.u32(ops.len() as u32);
    for op in ops {
        let (code, tree, key, value) = match op {
            BufferedOp::Put { tree, key, value } => (BUFFERED_PUT, tree, key, Some(value)),
            BufferedOp::Removed { tree, key } => (BUFFERED_REMOVED, tree, key, None),
        };
        w.u8(code);
        w.u64(*tree);
        w.u16(key.len() as u16);
        w.bytes.extend_from_slice(key);
        if let Some(value) = value {
            w.u16(value.len() as u16);
            w.bytes.extend_from_slice(value);
        }
    }
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// One committed batch: everything it changed.
    Commit {
        /// The next tree id after the commit.
        next_tree_id: u64,
        /// Its page changes.
        pages: Vec<PageEntry>,
        /// Its changes to the change buffer, in the order made.
        buffered: Vec<BufferedOp>,
    },
    /// A checkpoint: where recovery starts.
    Checkpoint(Checkpoint),
    /// A page's bytes, whose content is as of log position `content_lsn`.
    Image {
        /// The page LSN of the content.
        content_lsn: u64,
        /// The page's bytes, as an entry with op `OP_NEW`.
        entry: PageEntry,
    },
    /// The end of one log write that began at `start`, when the log was durable below
    /// `synced_below`.
    FlushEnd {
        /// Where the write began.
        start: u64,
        /// The durable position when it began.
        synced_below: u64,
    },
}

/// What a checkpoint record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Where recovery replays from: every change before it is in the pages on disk.
    pub redo_lsn: u64,
    /// Page ids handed out at the redo LSN.
    pub page_count: u64,
    /// The next tree id at the redo LSN.
    pub next_tree_id: u64,
    /// The catalog's root page.
    pub catalog_root: PageId,
    /// The free pages at the redo LSN (tree pages and object data pages).
    pub free: Vec<PageId>,
    /// The change buffer at the redo LSN, as puts: `(tree, key, value)`.
    pub buffered: Vec<(u64, Vec<u8>, Vec<u8>)>,
}

/// [`diff_spans`] with the bytes copied out: `(offset, bytes)` per range (tests).
#[cfg(test)]
pub fn diff_ranges(before: &[u8], after: &[u8], out: &mut Vec<(u16, Vec<u8>)>) {
    let mut spans = Vec::new();
    diff_spans(before, after, &mut spans);
    out.extend(
        spans.iter().map(|&(start, end)| (start, after[start as usize..end as usize].to_vec())),
    );
}

/// The ranges where `after` differs from `before` (both `PAGE_SIZE`), as `(start, end)`
/// offsets into the pages (`out` is cleared first), skipping the checksum, flags and LSN
/// bytes; differences closer than 8 bytes share a range. What commits and images encode.
pub fn diff_spans(before: &[u8], after: &[u8], out: &mut Vec<(u16, u16)>) {
    debug_assert_eq!(before.len(), PAGE_SIZE);
    debug_assert_eq!(after.len(), PAGE_SIZE);
    out.clear();
    // The bytes between the skipped ones, each diffed on its own.
    for (from, to) in [(4, 5), (6, 16), (24, PAGE_SIZE)] {
        diff_region(before, after, from, to, out);
    }
}

/// `diff_spans` over `from..to` (`format::diff`).
fn diff_region(before: &[u8], after: &[u8], from: usize, to: usize, out: &mut Vec<(u16, u16)>) {
    let (before, after) = (&before[from..to], &after[from..to]);
    let mut i = 0;
    while let Some((start, end)) = next_difference(before, after, i) {
        out.push(((from + start) as u16, (from + end) as u16));
        i = end;
    }
}

/// Adds the ranges `written` (any order, may overlap, may cover the bytes records skip) to
/// `spans` (from [`diff_spans`]), leaving them as a record takes them: ascending, apart,
/// none empty, none covering a skipped byte.
fn add_written(spans: &mut Vec<(u16, u16)>, written: &[(u16, u16)]) {
    for &(start, end) in written {
        let (start, end) = (usize::from(start), usize::from(end).min(PAGE_SIZE));
        // The parts between the skipped bytes.
        for (from, to) in [(4, 5), (6, 16), (24, PAGE_SIZE)] {
            let (from, to) = (start.max(from), end.min(to));
            if from < to {
                spans.push((from as u16, to as u16));
            }
        }
    }
    spans.sort_unstable();
    // Joined where they overlap or touch (a skipped byte always parts two regions' pieces).
    let mut kept = 0;
    for at in 0..spans.len() {
        let (start, end) = spans[at];
        if kept > 0 && start <= spans[kept - 1].1 {
            spans[kept - 1].1 = spans[kept - 1].1.max(end);
        } else {
            spans[kept] = (start, end);
            kept += 1;
        }
    }
    spans.truncate(kept);
}

/// An encoder of one record into a byte vector; the header is completed by
/// [`RecordWriter::finish`] once the LSN is known.
#[derive(Debug, Default)]
pub struct RecordWriter {
    /// The record so far, header included.
    pub bytes: Vec<u8>,
}

impl RecordWriter {
    /// A record of kind `kind` (one of the `KIND_*` codes), with an empty body.
    pub fn new(kind: u8) -> RecordWriter {
        let mut bytes = Vec::with_capacity(256);
        bytes.resize(RECORD_HEADER_SIZE, 0);
        bytes[16] = kind;
        RecordWriter { bytes }
    }

    /// Appends a byte.
    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    /// Appends `v`, little-endian.
    pub fn u16(&mut self, v: u16) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends `v`, little-endian.
    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends `v`, little-endian.
    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    /// A page entry with `ranges`.
    pub fn page_entry(&mut self, page_id: PageId, op: u8, ranges: &[(u16, Vec<u8>)]) {
        self.page_entry_of(page_id, op, ranges.iter().map(|(offset, bytes)| (*offset, &bytes[..])));
    }

    /// A page entry whose ranges are the `spans` of `page` (from [`diff_spans`]).
    pub fn page_entry_spans(&mut self, page_id: PageId, op: u8, page: &[u8], spans: &[(u16, u16)]) {
        let ranges = spans.iter().map(|&(start, end)| (start, &page[start as usize..end as usize]));
        self.page_entry_of(page_id, op, ranges);
    }

    /// A data op's entry: a run of `pages` object data pages from `first`.
    pub fn data_run(&mut self, first: PageId, op: u8, pages: u16) {
        debug_assert!(op == OP_DATA_NEW || op == OP_DATA_FREED);
        debug_assert!(pages > 0);
        self.u64(first);
        self.u8(op);
        self.u16(pages);
    }

    /// The one encoder of a page entry: id, op, range count, then offset, length and bytes
    /// of each range.
    fn page_entry_of<'a>(
        &mut self,
        page_id: PageId,
        op: u8,
        ranges: impl ExactSizeIterator<Item = (u16, &'a [u8])>,
    ) {
        self.u64(page_id);
        self.u8(op);
        self.u16(ranges.len() as u16);
        for (offset, bytes) in ranges {
            self.u16(offset);
            self.u16(bytes.len() as u16);
            self.bytes.extend_from_slice(bytes);
        }
    }

    /// Completes the header for position `lsn`: length, LSN, checksum.
    pub fn finish(bytes: &mut [u8], lsn: u64) {
        let len = bytes.len() as u32;
        bytes[4..8].copy_from_slice(&len.to_le_bytes());
        bytes[8..16].copy_from_slice(&lsn.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[4..]);
        bytes[0..4].copy_from_slice(&crc.to_le_bytes());
    }
}

static ZERO_PAGE: [u8; PAGE_SIZE] = [0; PAGE_SIZE];

/// The commit record of the page changes one commit made (the buffer pool captures them:
/// `buffer/capture.rs`), without its buffered changes (the caller appends those). A changed
/// page is logged as the differences from its bytes before the commit, a new one as the
/// differences from a zeroed page.
pub fn encode_commit(next_tree_id: u64, changes: &[PageChange<'_>]) -> Vec<u8> {
    let mut w = RecordWriter::new(KIND_COMMIT);
    // Room for a few small changes per page (a commit of TPC-C's New-Order changes about 20
    // pages, tens of bytes each): growing the record as it is written showed in profiles.
    w.bytes.reserve(changes.len() * 128);
    w.u64(next_tree_id);
    w.u32(changes.len() as u32);
    let mut spans = Vec::new();
    for change in changes {
        let (page_id, op, before, now) = match *change {
            PageChange::Changed { page_id, before, written, now } => {
                spans.clear();
                if let Some(before) = before {
                    diff_spans(before, now, &mut spans);
                }
                if !written.is_empty() {
                    add_written(&mut spans, written);
                }
                w.page_entry_spans(page_id, OP_CHANGED, now, &spans);
                continue;
            }
            PageChange::New { page_id, now } => (page_id, OP_NEW, &ZERO_PAGE[..], now),
            PageChange::Freed { page_id } => {
                w.page_entry_spans(page_id, OP_FREED, &[], &[]);
                continue;
            }
            PageChange::DataNew { first, pages } => {
                w.data_run(first, OP_DATA_NEW, pages);
                continue;
            }
            PageChange::DataFreed { first, pages } => {
                w.data_run(first, OP_DATA_FREED, pages);
                continue;
            }
        };
        diff_spans(before, now, &mut spans);
        w.page_entry_spans(page_id, op, now, &spans);
    }
    w.bytes
}

/// The page-image record of `page` (for a write-back after a checkpoint).
pub fn encode_image(page_id: PageId, page: &[u8]) -> Vec<u8> {
    let mut spans = Vec::new();
    diff_spans(&ZERO_PAGE, page, &mut spans);
    let mut w = RecordWriter::new(KIND_IMAGE);
    w.u64(crate::format::page::lsn_of(page));
    w.page_entry_spans(page_id, OP_NEW, page, &spans);
    w.bytes
}

/// A checkpoint record, header not completed (see [`RecordWriter::finish`]).
pub fn encode_checkpoint(checkpoint: &Checkpoint) -> Vec<u8> {
    let mut w = RecordWriter::new(KIND_CHECKPOINT);
    w.u64(checkpoint.redo_lsn);
    w.u64(checkpoint.page_count);
    w.u64(checkpoint.next_tree_id);
    w.u64(checkpoint.catalog_root);
    w.u64(checkpoint.free.len() as u64);
    for &id in &checkpoint.free {
        w.u64(id);
    }
    let ops: Vec<BufferedOp> = checkpoint
        .buffered
        .iter()
        .map(|(tree, key, value)| BufferedOp::Put {
            tree: *tree,
            key: key.clone(),
            value: value.clone(),
        })
        .collect();
    push_buffered(&mut w, &ops);
    w.bytes
}

/// What the first bytes at a position say about the record there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// A plausible header of a record of this many bytes (checksum not yet checked).
    Record {
        /// The record's length, header included.
        len: usize,
    },
    /// Not a record written at this position: the end of the log, or damage.
    Invalid,
}

/// Reads the header at `bytes` (at least `RECORD_HEADER_SIZE` long) for position `lsn`.
pub fn parse_header(bytes: &[u8], lsn: u64) -> Header {
    let len = read_u32(bytes, 4) as usize;
    if read_u64(bytes, 8) != lsn
        || !(RECORD_HEADER_SIZE..=MAX_RECORD_BYTES).contains(&len)
        || !(KIND_COMMIT..=KIND_FLUSH_END).contains(&bytes[16])
    {
        return Header::Invalid;
    }
    Header::Record { len }
}

/// Decodes a whole record read at `lsn`: checksum, then body. Never panics.
pub fn decode(bytes: &[u8], lsn: u64) -> Result<Record, String> {
    if bytes.len() < RECORD_HEADER_SIZE {
        return Err("shorter than a record header".into());
    }
    let Header::Record { len } = parse_header(bytes, lsn) else {
        return Err("no record header".into());
    };
    if len != bytes.len() {
        return Err(format!("length {len} but {} bytes given", bytes.len()));
    }
    let stored = read_u32(bytes, 0);
    let computed = crc32c::crc32c(&bytes[4..]);
    if stored != computed {
        return Err(format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"));
    }
    let mut r = Reader { bytes, at: RECORD_HEADER_SIZE };
    let record = match bytes[16] {
        KIND_COMMIT => {
            let next_tree_id = r.u64()?;
            let count = r.u32()? as usize;
            let mut pages = Vec::with_capacity(count.min(1024));
            for _ in 0..count {
                pages.push(r.page_entry()?);
            }
            let buffered = r.buffered()?;
            Record::Commit { next_tree_id, pages, buffered }
        }
        KIND_CHECKPOINT => {
            let redo_lsn = r.u64()?;
            let page_count = r.u64()?;
            let next_tree_id = r.u64()?;
            let catalog_root = r.u64()?;
            let count = r.u64()? as usize;
            if count > (bytes.len() - r.at) / 8 {
                return Err(format!("lists {count} free pages, more than it holds"));
            }
            let free = (0..count).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
            let buffered = r
                .buffered()?
                .into_iter()
                .map(|op| match op {
                    BufferedOp::Put { tree, key, value } => Ok((tree, key, value)),
                    BufferedOp::Removed { .. } => {
                        Err("a checkpoint lists a removal from the change buffer".to_owned())
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            Record::Checkpoint(Checkpoint {
                redo_lsn,
                page_count,
                next_tree_id,
                catalog_root,
                free,
                buffered,
            })
        }
        KIND_FLUSH_END => Record::FlushEnd { start: r.u64()?, synced_below: r.u64()? },
        _ => {
            let content_lsn = r.u64()?;
            let entry = r.page_entry()?;
            if entry.op != OP_NEW {
                return Err(format!("page image with op {}", entry.op));
            }
            Record::Image { content_lsn, entry }
        }
    };
    if r.at != bytes.len() {
        return Err(format!("{} bytes left after the body", bytes.len() - r.at));
    }
    Ok(record)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.bytes.len() - self.at < n {
            return Err(format!(
                "body ends at byte {} of {} wanted",
                self.bytes.len(),
                self.at + n
            ));
        }
        self.at += n;
        Ok(&self.bytes[self.at - n..self.at])
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(read_u16(self.take(2)?, 0))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(read_u32(self.take(4)?, 0))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(read_u64(self.take(8)?, 0))
    }

    /// The buffered-changes section, if the body goes on (else none).
    fn buffered(&mut self) -> Result<Vec<BufferedOp>, String> {
        if self.at == self.bytes.len() {
            return Ok(Vec::new());
        }
        let count = self.u32()? as usize;
        // A change takes at least 12 bytes (op, tree, key length, one key byte).
        if count == 0 || count > (self.bytes.len() - self.at) / 12 {
            return Err(format!("a buffered-changes section of {count} changes"));
        }
        let mut ops = Vec::with_capacity(count);
        for _ in 0..count {
            let code = self.u8()?;
            let tree = self.u64()?;
            let key_len = self.u16()? as usize;
            if key_len == 0 {
                return Err("a buffered change with an empty key".into());
            }
            let key = self.take(key_len)?.to_vec();
            ops.push(match code {
                BUFFERED_PUT => {
                    let value_len = self.u16()? as usize;
                    BufferedOp::Put { tree, key, value: self.take(value_len)?.to_vec() }
                }
                BUFFERED_REMOVED => BufferedOp::Removed { tree, key },
                other => return Err(format!("a buffered change with op {other}")),
            });
        }
        Ok(ops)
    }

    fn page_entry(&mut self) -> Result<PageEntry, String> {
        let page_id = self.u64()?;
        let op = self.u8()?;
        if op > OP_DATA_FREED {
            return Err(format!("page {page_id}: unknown op {op}"));
        }
        let count = self.u16()? as usize;
        if op == OP_DATA_NEW || op == OP_DATA_FREED {
            if count == 0 {
                return Err(format!("a data run of no pages at page {page_id}"));
            }
            if page_id.checked_add(count as u64).is_none() {
                return Err(format!("a data run of {count} pages at page {page_id} overflows"));
            }
            return Ok(PageEntry { page_id, op, ranges: Vec::new(), pages: count as u16 });
        }
        if op == OP_FREED && count != 0 {
            return Err(format!("freed page {page_id} with {count} ranges"));
        }
        let mut ranges = Vec::with_capacity(count.min(64));
        let mut floor = 0usize;
        for _ in 0..count {
            let offset = self.u16()? as usize;
            let len = self.u16()? as usize;
            if offset < floor || offset + len > PAGE_SIZE || len == 0 {
                return Err(format!("page {page_id}: bad range {offset}+{len}"));
            }
            if SKIPPED.iter().any(|r| offset < r.end && r.start < offset + len) {
                return Err(format!("page {page_id}: range {offset}+{len} covers reserved bytes"));
            }
            floor = offset + len;
            ranges.push((offset as u16, self.take(len)?.to_vec()));
        }
        Ok(PageEntry { page_id, op, ranges, pages: 1 })
    }
}

/// Fuzz body for the record decoder: any bytes decode or are refused without panicking, and
/// what decodes encodes back to the same bytes.
#[doc(hidden)]
pub fn fuzz_record(input: &[u8]) {
    // The segment header and sector decoders take the same bytes.
    use crate::wal::segment::{self, HeaderRead};
    if let HeaderRead::Valid(header) = segment::decode_segment_header(input) {
        let again = segment::encode_segment_header(header.start, header.capacity);
        assert_eq!(segment::decode_segment_header(&again), HeaderRead::Valid(header));
    }
    if input.len() >= segment::SECTOR_BYTES {
        let sector = &input[..segment::SECTOR_BYTES];
        let lsn = read_u64(sector, 8);
        if let segment::SectorRead::Written(payload) = segment::read_sector(sector, lsn) {
            let mut again = vec![0u8; segment::SECTOR_BYTES];
            segment::encode_sector(&mut again, lsn, payload);
            assert_eq!(&again[..], sector, "a written sector re-encodes to its bytes");
        }
    }
    let lsn = if input.len() >= 16 { read_u64(input, 8) } else { 0 };
    let Ok(record) = decode(input, lsn) else { return };
    let mut again = match &record {
        Record::Commit { next_tree_id, pages, buffered } => {
            let mut w = RecordWriter::new(KIND_COMMIT);
            w.u64(*next_tree_id);
            w.u32(pages.len() as u32);
            for p in pages {
                if p.is_data() {
                    w.data_run(p.page_id, p.op, p.pages);
                } else {
                    w.page_entry(p.page_id, p.op, &p.ranges);
                }
            }
            push_buffered(&mut w, buffered);
            w.bytes
        }
        Record::Checkpoint(c) => encode_checkpoint(c),
        Record::Image { content_lsn, entry: p } => {
            let mut w = RecordWriter::new(KIND_IMAGE);
            w.u64(*content_lsn);
            w.page_entry(p.page_id, p.op, &p.ranges);
            w.bytes
        }
        Record::FlushEnd { start, synced_below } => {
            let mut w = RecordWriter::new(KIND_FLUSH_END);
            w.u64(*start);
            w.u64(*synced_below);
            w.bytes
        }
    };
    RecordWriter::finish(&mut again, lsn);
    assert_eq!(decode(&again, lsn), Ok(record));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_with(fill: impl Fn(usize) -> u8) -> Vec<u8> {
        (0..PAGE_SIZE).map(fill).collect()
    }

    #[test]
    fn diff_then_apply_gives_the_new_page_except_reserved_bytes() {
        let before = page_with(|i| (i * 7) as u8);
        let mut after = before.clone();
        for at in [0, 4, 5, 6, 17, 30, 31, 40, 100, 101, 4095] {
            after[at] ^= 0x5a;
        }
        after[200..260].fill(9);
        let mut ranges = Vec::new();
        diff_ranges(&before, &after, &mut ranges);
        let entry = PageEntry { page_id: 3, op: OP_CHANGED, ranges, pages: 1 };
        let mut w = RecordWriter::new(KIND_IMAGE);
        w.u64(0);
        w.page_entry(3, OP_NEW, &entry.ranges);
        let mut bytes = w.bytes;
        RecordWriter::finish(&mut bytes, 0);
        decode(&bytes, 0).expect("diff ranges decode");
        let mut replayed = before.clone();
        entry.apply(&mut replayed);
        for i in 0..PAGE_SIZE {
            let reserved = SKIPPED.iter().any(|r| r.contains(&i));
            assert_eq!(replayed[i], if reserved { before[i] } else { after[i] }, "byte {i}");
        }
        // Nearby differences share a range.
        assert!(entry.ranges.iter().any(|(o, b)| *o == 30 && b.len() == 2));
    }

    /// `diff_region` over a part of two pages: every byte that differs there lies in a
    /// range, each range lies in the part and begins and ends on a differing byte, and two
    /// ranges are parted by at least `GAP` equal bytes (the stretches themselves are
    /// checked against their byte-at-a-time definition in `format::diff`).
    #[test]
    fn region_diffs_cover_the_differences_of_their_part() {
        let mut rng = crate::testing::Rng::new(0x9E37_79B9_7F4A_7C15);
        for round in 0..2_000 {
            let before = page_with(|i| (i * 31 + round) as u8);
            let mut after = before.clone();
            // Scattered bytes, short and long changed stretches, gaps of every size.
            crate::format::diff::scatter_changes(&mut rng, &mut after[..]);
            let from = rng.index(64);
            let to = PAGE_SIZE - rng.index(64);
            let mut got = Vec::new();
            diff_region(&before, &after, from, to, &mut got);
            for (k, &(a, b)) in got.iter().enumerate() {
                let (a, b) = (a as usize, b as usize);
                assert!(from <= a && a < b && b <= to, "round {round}: {got:?}");
                assert!(before[a] != after[a] && before[b - 1] != after[b - 1], "round {round}");
                if k > 0 {
                    let gap = crate::format::diff::GAP;
                    assert!(a >= got[k - 1].1 as usize + gap, "round {round}: {got:?}");
                }
            }
            for at in (from..to).filter(|&at| before[at] != after[at]) {
                let covered = got.iter().any(|&(a, b)| (a as usize..b as usize).contains(&at));
                assert!(covered, "round {round}: byte {at} outside {got:?}");
            }
        }
    }

    #[test]
    fn data_runs_round_trip_and_refuse_nonsense() {
        let encode = |runs: &[(PageId, u8, u16)]| {
            let mut w = RecordWriter::new(KIND_COMMIT);
            w.u64(1);
            w.u32(runs.len() as u32);
            for &(first, op, pages) in runs {
                // (Written field by field: `data_run` refuses the nonsense tested here.)
                w.u64(first);
                w.u8(op);
                w.u16(pages);
            }
            let mut bytes = w.bytes;
            RecordWriter::finish(&mut bytes, 0);
            bytes
        };
        let bytes = encode(&[(100, OP_DATA_NEW, 256), (7, OP_DATA_FREED, 1)]);
        let Ok(Record::Commit { pages, .. }) = decode(&bytes, 0) else { panic!() };
        assert_eq!(pages[0].page_ids(), 100..356);
        assert!(pages[0].is_data() && pages[0].ranges.is_empty());
        assert_eq!((pages[1].op, pages[1].pages), (OP_DATA_FREED, 1));
        fuzz_record(&bytes);
        assert!(decode(&encode(&[(5, OP_DATA_NEW, 0)]), 0).unwrap_err().contains("no pages"));
        let overflow = decode(&encode(&[(u64::MAX - 1, OP_DATA_NEW, 9)]), 0).unwrap_err();
        assert!(overflow.contains("overflows"), "{overflow}");
        // An op past the data ops is refused.
        let mut bad = encode(&[(5, OP_DATA_NEW, 1)]);
        bad[RECORD_HEADER_SIZE + 12 + 8] = OP_DATA_FREED + 1;
        RecordWriter::finish(&mut bad, 0);
        assert!(decode(&bad, 0).unwrap_err().contains("unknown op"));
    }

    #[test]
    fn records_round_trip_and_refuse_damage() {
        let mut w = RecordWriter::new(KIND_COMMIT);
        w.u64(7);
        w.u32(2);
        w.page_entry(9, OP_NEW, &[(24, vec![1, 2, 3]), (4000, vec![4])]);
        w.page_entry(10, OP_FREED, &[]);
        let mut bytes = w.bytes;
        RecordWriter::finish(&mut bytes, 4096);
        let record = decode(&bytes, 4096).unwrap();
        let Record::Commit { next_tree_id: 7, pages, buffered } = &record else {
            panic!("{record:?}")
        };
        assert!(buffered.is_empty());
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[0].ranges[1], (4000, vec![4]));
        assert!(decode(&bytes, 4097).is_err(), "a record read at the wrong position");
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert!(decode(&damaged, 4096).is_err(), "flip at {at} went unnoticed");
        }
        let checkpoint = Checkpoint {
            redo_lsn: 1,
            page_count: 2,
            next_tree_id: 3,
            catalog_root: 4,
            free: vec![5, 6],
            buffered: vec![],
        };
        let mut bytes = encode_checkpoint(&checkpoint);
        RecordWriter::finish(&mut bytes, 0);
        assert_eq!(decode(&bytes, 0), Ok(Record::Checkpoint(checkpoint.clone())));
        let with_buffer =
            Checkpoint { buffered: vec![(3, b"k".to_vec(), vec![9; 300])], ..checkpoint };
        let mut bytes = encode_checkpoint(&with_buffer);
        RecordWriter::finish(&mut bytes, 0);
        assert_eq!(decode(&bytes, 0), Ok(Record::Checkpoint(with_buffer)));
    }

    /// The change buffer's section: a put and a removal come back as written; a section
    /// that lists no change, an unknown op or an empty key is refused.
    #[test]
    fn buffered_changes_round_trip_and_refuse_nonsense() {
        let ops = vec![
            BufferedOp::Put { tree: 5, key: b"apple".to_vec(), value: vec![7; 120] },
            BufferedOp::Removed { tree: 6, key: b"b".to_vec() },
        ];
        let encode = |ops: &[BufferedOp], pages: bool| {
            let mut w = RecordWriter::new(KIND_COMMIT);
            w.u64(9);
            w.u32(pages as u32);
            if pages {
                w.page_entry(4, OP_CHANGED, &[(40, vec![1, 2])]);
            }
            push_buffered(&mut w, ops);
            let mut bytes = w.bytes;
            RecordWriter::finish(&mut bytes, 8192);
            bytes
        };
        for pages in [false, true] {
            let record = decode(&encode(&ops, pages), 8192).unwrap();
            let Record::Commit { buffered, pages: entries, .. } = record else { panic!() };
            assert_eq!(buffered, ops);
            assert_eq!(entries.len(), pages as usize);
        }
        // A section counting zero changes.
        let mut w = RecordWriter::new(KIND_COMMIT);
        w.u64(9);
        w.u32(0);
        w.u32(0);
        let mut bytes = w.bytes;
        RecordWriter::finish(&mut bytes, 0);
        assert!(decode(&bytes, 0).unwrap_err().contains("buffered-changes section"));
        // An unknown op, then an empty key.
        // (Header 20 bytes, tree id 8, page count 4, change count 4: the op at 36, the
        // tree at 37, the key length at 45.)
        for (at, value, wanted) in [(36, 7u8, "op 7"), (45, 0, "empty key")] {
            let mut bytes = encode(&ops[..1], false);
            bytes[at] = value;
            if at == 45 {
                bytes[46] = 0;
            }
            RecordWriter::finish(&mut bytes, 8192);
            let err = decode(&bytes, 8192).unwrap_err();
            assert!(err.contains(wanted), "{err}");
        }
        fuzz_record(&encode(&ops, true));
    }

    #[test]
    fn decoder_survives_garbage() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut w = RecordWriter::new(KIND_COMMIT);
        w.u64(1);
        w.u32(1);
        w.page_entry(2, OP_CHANGED, &[(30, vec![1; 10])]);
        let mut valid = w.bytes;
        RecordWriter::finish(&mut valid, 64);
        for round in 0..5000 {
            let mut input = valid.clone();
            for _ in 0..1 + round % 4 {
                let at = next() as usize % input.len();
                input[at] = next() as u8;
            }
            if round % 3 == 0 {
                // Keep the checksum right so that the body decoder itself is exercised.
                let crc = crc32c::crc32c(&input[4..]);
                input[0..4].copy_from_slice(&crc.to_le_bytes());
            }
            let cut = next() as usize % (input.len() + 1);
            fuzz_record(&input[..if round % 5 == 0 { cut } else { input.len() }]);
        }
        fuzz_record(&valid);
    }

    /// Pages changed by tracked changes are logged as the ranges written, however these
    /// come (unsorted, overlapping, touching, over the bytes records skip), alone or with
    /// a diff from a copy: the record decodes, and rebuilds the page.
    #[test]
    fn written_ranges_encode_sorted_apart_and_rebuild_the_page() {
        let before = page_with(|i| (i * 3) as u8);
        let mut now = before.clone();
        let written: &[(u16, u16)] =
            &[(3000, 3010), (0, 30), (40, 42), (42, 44), (2990, 3005), (4090, 4096), (60, 61)];
        for &(start, end) in written {
            now[start as usize..end as usize].iter_mut().for_each(|b| *b = b.wrapping_add(1));
        }
        // An untracked change after a copy (`diffed` pages log both).
        let copy = now.clone();
        now[500..510].fill(0xee);
        now[3008] = 0;
        for before_diff in [None, Some(&copy[..])] {
            let now_for_record = if before_diff.is_some() { &now } else { &copy };
            let change = PageChange::Changed {
                page_id: 3,
                before: before_diff,
                written,
                now: now_for_record,
            };
            let mut bytes = encode_commit(1, &[change]);
            RecordWriter::finish(&mut bytes, 4096);
            let Record::Commit { pages, .. } = decode(&bytes, 4096).unwrap() else {
                panic!("not a commit record");
            };
            let ranges: Vec<(u16, usize)> =
                pages[0].ranges.iter().map(|(at, bytes)| (*at, bytes.len())).collect();
            assert!(ranges.windows(2).all(|w| w[0].0 as usize + w[0].1 < w[1].0 as usize));
            let mut page = before.clone();
            pages[0].apply(&mut page);
            for i in (0..PAGE_SIZE).filter(|i| !SKIPPED.iter().any(|r| r.contains(i))) {
                assert_eq!(page[i], now_for_record[i], "byte {i}");
            }
        }
    }

    /// Captured page changes encode into a commit record whose entries rebuild each page
    /// (but its reserved bytes) from its before-image, from zeros, or free it; a page's
    /// image rebuilds it from zeros.
    #[test]
    fn captured_changes_and_images_encode_into_records_that_rebuild_the_pages() {
        let before = page_with(|i| (i * 3) as u8);
        let mut changed = before.clone();
        changed[100..140].fill(0xaa);
        let new = page_with(|i| if i % 97 == 0 { 5 } else { 0 });
        let changes = [
            PageChange::Changed { page_id: 7, before: Some(&before), written: &[], now: &changed },
            PageChange::New { page_id: 8, now: &new },
            PageChange::Freed { page_id: 9 },
        ];
        let mut bytes = encode_commit(42, &changes);
        RecordWriter::finish(&mut bytes, 4096);
        let Record::Commit { next_tree_id, pages, buffered } = decode(&bytes, 4096).unwrap() else {
            panic!("not a commit record");
        };
        assert_eq!((next_tree_id, buffered.len()), (42, 0));
        let ids_and_ops: Vec<_> = pages.iter().map(|e| (e.page_id, e.op)).collect();
        assert_eq!(ids_and_ops, [(7, OP_CHANGED), (8, OP_NEW), (9, OP_FREED)]);
        let rebuilt = |entry: &PageEntry, start: &[u8], wanted: &[u8]| {
            let mut page = start.to_vec();
            entry.apply(&mut page);
            for i in (0..PAGE_SIZE).filter(|i| !SKIPPED.iter().any(|r| r.contains(i))) {
                assert_eq!(page[i], wanted[i], "page {} byte {i}", entry.page_id);
            }
        };
        rebuilt(&pages[0], &before, &changed);
        rebuilt(&pages[1], &changed, &new);
        assert!(pages[2].ranges.is_empty());
        let mut image = encode_image(8, &new);
        RecordWriter::finish(&mut image, 8192);
        let Record::Image { entry, .. } = decode(&image, 8192).unwrap() else {
            panic!("not an image record");
        };
        rebuilt(&entry, &before, &new);
    }
}
