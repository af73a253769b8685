//! Recovery at open: find the last checkpoint, read the log from its redo LSN to the end,
//! cut a torn tail, refuse damage before it, and replay every record into the pages whose
//! LSN is older. Then the allocator gets the checkpoint's free pages with the log's
//! allocations and frees applied, and the caller takes a checkpoint.
//!
//! Tail or damage: every log write ends with a flush-end record naming how far the log was
//! durable when the write began. A crash only tears bytes that were not yet durable. When a
//! record at position `p` fails its checks, recovery looks beyond `p` for valid flush-end
//! records: if one says the log was durable beyond `p` when its write began, the bytes at `p`
//! had been synced: damage, `Error::LogCorrupt`. Otherwise `p` lies in writes that never
//! completed: a torn tail, cut (and erased, so that a later crash cannot mistake it for new
//! records).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::log::{decode_segment_header, read_stream, segment_name, Log, Segment};
use super::record::{
    self, BufferedOp, Checkpoint, Header, PageEntry, Record, KIND_FLUSH_END, OP_CHANGED, OP_FREED,
    OP_NEW, RECORD_HEADER_SIZE,
};
use crate::buffer::BufferPool;
use crate::error::{Error, PageId, Result};
use crate::io::Storage;
use crate::store::page::{self, read_u64};

/// What recovery did, for the caller to report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Log position replay started from (the checkpoint's redo LSN).
    pub redo_lsn: u64,
    /// Log position where the log ended (after any cut).
    pub end_lsn: u64,
    /// Commit and page-image records replayed.
    pub records: u64,
    /// Page changes applied (entries whose page was older than the record).
    pub pages_applied: u64,
    /// Bytes of a torn last write that were cut, if any.
    pub torn_bytes: u64,
    /// Entries in the change buffer once replayed (puts that were not yet in their leaves).
    pub buffered: u64,
    pub duration: Duration,
}

/// The log, ready to append, and the allocator state after replay.
#[derive(Debug)]
pub struct Recovered {
    pub log: Arc<Log>,
    pub page_count: u64,
    pub free: Vec<PageId>,
    pub next_tree_id: u64,
    /// The change buffer as the log leaves it: `(tree, key)` to value.
    pub buffered: BTreeMap<(u64, Vec<u8>), Vec<u8>>,
    pub report: RecoveryReport,
}

fn corrupt(segments: &[Segment], lsn: u64, reason: impl Into<String>) -> Error {
    let path = segments
        .iter()
        .find(|s| s.start <= lsn && lsn < s.end())
        .or(segments.last())
        .map(|s| s.device.path().to_owned())
        .unwrap_or_default();
    Error::LogCorrupt { lsn, path, reason: reason.into() }
}

/// The segment files that exist, by slot: `(segments with a valid header, slot count)`.
fn discover(storage: &dyn Storage) -> Result<(Vec<Segment>, u32)> {
    let mut segments = Vec::new();
    let mut slot = 0u32;
    loop {
        let name = segment_name(slot);
        let Some(device) =
            storage.open(&name, false).map_err(|e| Error::io(format!("opening {name}"), e))?
        else {
            break;
        };
        let mut header = [0u8; 32];
        let got = device
            .read_at(&mut header, 0)
            .map_err(|e| Error::io(format!("reading the header of {name}"), e))?;
        if let (32, Some((start, capacity))) = (got, decode_segment_header(&header)) {
            segments.push(Segment::new(slot, start, capacity, device));
        }
        slot += 1;
    }
    segments.sort_by_key(|s| s.start);
    Ok((segments, slot))
}

/// The record at `lsn`, if a valid one is there.
fn read_record(segments: &[Segment], lsn: u64) -> Result<Option<(Record, usize)>> {
    let mut header = [0u8; RECORD_HEADER_SIZE];
    if !read_stream(segments, lsn, &mut header)? {
        return Ok(None);
    }
    let Header::Record { len } = record::parse_header(&header, lsn) else { return Ok(None) };
    let mut bytes = vec![0u8; len];
    if !read_stream(segments, lsn, &mut bytes)? {
        return Ok(None);
    }
    Ok(record::decode(&bytes, lsn).ok().map(|r| (r, len)))
}

/// Decides whether the bad record at `bad` is a torn tail (`Ok`) or damage (`Err`). For a
/// torn tail, returns where the last thing that looks like a record of this position ends:
/// bytes of writes that never completed, which recovery erases before the log goes on (a
/// later crash must not find them behind new records and take them for new ones).
fn judge_tail(segments: &[Segment], bad: u64) -> Result<u64> {
    let end = segments.last().map_or(bad, |s| s.end());
    let mut rest = vec![0u8; (end - bad) as usize];
    read_stream(segments, bad, &mut rest)?;
    let mut furthest = bad;
    let mut offset = 0;
    while offset + RECORD_HEADER_SIZE <= rest.len() {
        let lsn = bad + offset as u64;
        if read_u64(&rest, offset + 8) != lsn {
            offset += 1;
            continue;
        }
        if let Header::Record { len } = record::parse_header(&rest[offset..], lsn) {
            furthest = furthest.max((lsn + len as u64).min(end));
        }
        if offset > 0 && rest[offset + 16] == KIND_FLUSH_END {
            if let Some((Record::FlushEnd { synced_below, .. }, _)) = read_record(segments, lsn)? {
                if synced_below > bad {
                    return Err(corrupt(
                        segments,
                        bad,
                        format!(
                            "a damaged record in bytes that were durable (a later write began \
                             when the log was durable up to {synced_below})"
                        ),
                    ));
                }
            }
        }
        offset += 1;
    }
    Ok(furthest)
}

/// Overwrites log bytes `from..to` with zeros and syncs them.
fn erase(segments: &[Segment], from: u64, to: u64) -> Result<()> {
    for segment in segments {
        let (lo, hi) = (from.max(segment.start), to.min(segment.end()));
        if lo >= hi {
            continue;
        }
        let zeros = vec![0u8; (hi - lo) as usize];
        let offset = super::log::SEGMENT_HEADER_BYTES + (lo - segment.start);
        let path = segment.device.path().display().to_string();
        segment
            .device
            .write_at(&zeros, offset)
            .and_then(|()| segment.device.sync())
            .map_err(|e| Error::io(format!("erasing the torn end of the log in {path}"), e))?;
    }
    Ok(())
}

/// The checkpoint record at `checkpoint_lsn`, read without changing anything (a read-only
/// open takes the free pages from it).
pub fn read_checkpoint(storage: &dyn Storage, checkpoint_lsn: u64) -> Result<Checkpoint> {
    let (all, _) = discover(storage)?;
    match read_record(&all, checkpoint_lsn)? {
        Some((Record::Checkpoint(checkpoint), _)) => Ok(checkpoint),
        _ => Err(corrupt(&all, checkpoint_lsn, "the checkpoint record is unreadable")),
    }
}

/// What [`check_log`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogReport {
    /// Segment files with a valid header, and slots existing.
    pub segments: usize,
    pub slots: u32,
    pub checkpoint_lsn: u64,
    pub redo_lsn: u64,
    /// Where the readable log ends.
    pub end_lsn: u64,
    /// Records from the redo LSN to the end, each checksum-verified, and their kinds.
    pub records: u64,
    pub commits: u64,
    pub images: u64,
    /// Entries of the change buffer the checkpoint record lists, and buffered changes
    /// (puts and removals) the commits from the redo LSN on log: what recovery rebuilds the
    /// change buffer from.
    pub checkpoint_buffered: u64,
    pub buffered_changes: u64,
    /// Bytes after the end that a crash left half-written (recovery will cut them).
    pub torn_bytes: u64,
}

/// Verifies the log of `storage` without changing anything: the checkpoint record at
/// `checkpoint_lsn`, then every record from its redo LSN to the end (checksums, positions,
/// decoding), and whether what follows is a torn tail (fine) or damage (`LogCorrupt`).
pub fn check_log(storage: &dyn Storage, checkpoint_lsn: u64) -> Result<LogReport> {
    let (all, slots) = discover(storage)?;
    let mut report = LogReport { segments: all.len(), slots, checkpoint_lsn, ..Default::default() };
    let Some((Record::Checkpoint(checkpoint), _)) = read_record(&all, checkpoint_lsn)? else {
        return Err(corrupt(&all, checkpoint_lsn, "the checkpoint record is unreadable"));
    };
    report.redo_lsn = checkpoint.redo_lsn;
    report.checkpoint_buffered = checkpoint.buffered.len() as u64;
    let segments = chain_from(&all, checkpoint.redo_lsn)?;
    let mut lsn = checkpoint.redo_lsn;
    while let Some((record, len)) = read_record(&segments, lsn)? {
        report.records += 1;
        match record {
            Record::Commit { buffered, .. } => {
                report.commits += 1;
                report.buffered_changes += buffered.len() as u64;
            }
            Record::Image { .. } => report.images += 1,
            _ => {}
        }
        lsn += len as u64;
    }
    report.end_lsn = lsn;
    report.torn_bytes = judge_tail(&segments, lsn)? - lsn;
    Ok(report)
}

/// The contiguous run of segments from the one holding `lsn`.
fn chain_from(all: &[Segment], lsn: u64) -> Result<Vec<Segment>> {
    let from = all
        .iter()
        .position(|s| s.start <= lsn && lsn < s.end())
        .ok_or_else(|| corrupt(all, lsn, "no log segment holds the redo position"))?;
    let mut segments = vec![all[from].clone()];
    for segment in &all[from + 1..] {
        if segment.start != segments.last().expect("one").end() {
            break;
        }
        segments.push(segment.clone());
    }
    Ok(segments)
}

/// Opens the log of a directory whose last checkpoint record is at `checkpoint_lsn`
/// (`None`: a new directory, no log yet) and replays it into `pool`.
pub fn recover(
    storage: Arc<dyn Storage>,
    segment_bytes: u64,
    checkpoint_lsn: Option<u64>,
    pool: &BufferPool,
    fresh: (u64, Vec<PageId>, u64),
    direct: bool,
    read_ahead: usize,
) -> Result<Recovered> {
    let started = Instant::now();
    let (all, slot_count) = discover(storage.as_ref())?;
    let Some(checkpoint_lsn) = checkpoint_lsn else {
        let log = Arc::new(Log::new(storage, segment_bytes, Vec::new(), slot_count, 0, direct));
        pool.attach_log(Arc::clone(&log));
        let (page_count, free, next_tree_id) = fresh;
        return Ok(Recovered {
            log,
            page_count,
            free,
            next_tree_id,
            buffered: BTreeMap::new(),
            report: Default::default(),
        });
    };
    let Some((Record::Checkpoint(checkpoint), _)) = read_record(&all, checkpoint_lsn)? else {
        return Err(corrupt(&all, checkpoint_lsn, "the checkpoint record is unreadable"));
    };
    let Checkpoint { redo_lsn, page_count, next_tree_id, free, buffered, .. } = checkpoint;
    // The change buffer as of the redo LSN; the records replayed below change it in order.
    let mut buffered: BTreeMap<(u64, Vec<u8>), Vec<u8>> =
        buffered.into_iter().map(|(tree, key, value)| ((tree, key), value)).collect();
    // The contiguous run of segments that reaches from the redo LSN.
    let mut segments = chain_from(&all, redo_lsn)?;
    // Pass 1: read to the end, checking every record.
    let mut records = Vec::new();
    let mut lsn = redo_lsn;
    while let Some((record, len)) = read_record(&segments, lsn)? {
        records.push((lsn, record));
        lsn += len as u64;
    }
    let torn_end = judge_tail(&segments, lsn)?;
    let end_lsn = lsn;
    if torn_end > end_lsn {
        erase(&segments, end_lsn, torn_end)?;
    }
    let torn_bytes = torn_end - end_lsn;
    let mut report = RecoveryReport { redo_lsn, end_lsn, torn_bytes, ..Default::default() };
    // Segments beyond the one the log continues in hold nothing needed.
    let keep = segments.iter().position(|s| end_lsn < s.end()).map_or(segments.len(), |i| i + 1);
    segments.truncate(keep);
    let log = Arc::new(Log::new(storage, segment_bytes, segments, slot_count, end_lsn, direct));
    pool.attach_log(Arc::clone(&log));
    // Pass 2: replay.
    let mut free: BTreeSet<PageId> = free.into_iter().collect();
    let mut page_count = page_count;
    let mut next_tree_id = next_tree_id;
    let mut torn = Deferred::new();
    let mut read_until = 0;
    for (index, (lsn, record)) in records.iter().enumerate() {
        if read_ahead > 0 && index == read_until {
            read_until = read_ahead_from(pool, &records, index, read_ahead);
        }
        let lsn = *lsn;
        let entries = match record {
            Record::Commit { next_tree_id: next, pages, buffered: ops } => {
                next_tree_id = next_tree_id.max(*next);
                for op in ops {
                    match op {
                        BufferedOp::Put { tree, key, value } => {
                            buffered.insert((*tree, key.clone()), value.clone());
                        }
                        BufferedOp::Removed { tree, key } => {
                            buffered.remove(&(*tree, key.clone()));
                        }
                    }
                }
                for entry in pages {
                    match entry.op {
                        OP_FREED => {
                            free.insert(entry.page_id);
                        }
                        OP_NEW => {
                            free.remove(&entry.page_id);
                        }
                        _ => {}
                    }
                    // Freed pages too: a page allocated and freed in one commit is logged as
                    // freed only, and it did raise the page count.
                    page_count = page_count.max(entry.page_id + 1);
                }
                pages
            }
            Record::Image { content_lsn, entry } => {
                // Applied by its content's age, not its position.
                report.records += 1;
                if replay(pool, *content_lsn, entry, &mut torn)? {
                    report.pages_applied += 1;
                }
                continue;
            }
            Record::Checkpoint(_) | Record::FlushEnd { .. } => continue,
        };
        report.records += 1;
        for entry in entries {
            if replay(pool, lsn, entry, &mut torn)? {
                report.pages_applied += 1;
            }
        }
    }
    for &page_id in torn.keys() {
        if !free.contains(&page_id) {
            return Err(Error::Corrupt {
                page: page_id,
                file: pool.file().path().to_owned(),
                reason: "torn by a crash, and the log holds no image of it".into(),
            });
        }
    }
    report.duration = started.elapsed();
    report.buffered = buffered.len() as u64;
    Ok(Recovered {
        log,
        page_count,
        free: free.into_iter().collect(),
        next_tree_id,
        buffered,
        report,
    })
}

/// Threads reading pages ahead of the replay: reads in flight at once.
const READ_AHEAD_THREADS: usize = 32;

/// Reads into the pool, many at a time, the pages that the records from `first` on touch,
/// up to `pages` distinct ones; returns the index of the first record not covered.
fn read_ahead_from(
    pool: &BufferPool,
    records: &[(u64, Record)],
    first: usize,
    pages: usize,
) -> usize {
    let mut ids = Vec::with_capacity(pages);
    let mut seen = std::collections::HashSet::with_capacity(pages);
    let mut next = first;
    while next < records.len() && ids.len() < pages {
        let entries: &[PageEntry] = match &records[next].1 {
            Record::Commit { pages, .. } => pages,
            Record::Image { entry, .. } => std::slice::from_ref(entry),
            Record::Checkpoint(_) | Record::FlushEnd { .. } => &[],
        };
        for entry in entries {
            if entry.op != OP_FREED && seen.insert(entry.page_id) {
                ids.push(entry.page_id);
            }
        }
        next += 1;
    }
    let share = ids.len().div_ceil(READ_AHEAD_THREADS).max(1);
    std::thread::scope(|scope| {
        for chunk in ids.chunks(share) {
            scope.spawn(move || {
                for &page_id in chunk {
                    // Errors are the replay's to meet, when it reads the page itself.
                    if pool.read_ahead_for_recovery(page_id).is_err() {
                        return;
                    }
                }
            });
        }
    });
    next
}

/// Changes read for torn pages, waiting for an image of them: `(lsn, entry)` in log order.
type Deferred = BTreeMap<PageId, Vec<(u64, PageEntry)>>;

/// Applies one page entry of the record at `lsn` (for an image: the LSN of its content) if
/// the page is older; returns whether it did. A change to a torn page waits in `torn` for a
/// full image of the page (a page image, or the page allocated anew); once one comes, the
/// changes newer than it are applied on top, in order. (An image can lie in the log after
/// changes newer than its content: one logged while a recovery evicted pages.)
fn replay(pool: &BufferPool, lsn: u64, entry: &PageEntry, torn: &mut Deferred) -> Result<bool> {
    if entry.op == OP_FREED {
        torn.remove(&entry.page_id);
        return Ok(false);
    }
    let mut applied = false;
    pool.recover_page(entry.page_id, |memory, valid| {
        if !valid {
            if entry.op == OP_CHANGED {
                torn.entry(entry.page_id).or_default().push((lsn, entry.clone()));
                return false;
            }
            entry.apply(memory);
            page::set_lsn(memory, lsn);
            for (later, change) in torn.remove(&entry.page_id).unwrap_or_default() {
                if later > lsn {
                    change.apply(memory);
                    page::set_lsn(memory, later);
                }
            }
            applied = true;
            return true;
        }
        if page::lsn_of(memory) >= lsn {
            return false;
        }
        entry.apply(memory);
        page::set_lsn(memory, lsn);
        applied = true;
        true
    })?;
    Ok(applied)
}
