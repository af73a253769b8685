//! Recovery at open: find the last checkpoint, read the log from its redo position to the
//! end, judge where it ends (a tail torn by a crash is cut; anything else is refused), and
//! replay every record into the pages whose LSN is older. Then the allocator gets the
//! checkpoint's free pages with the log's allocations and frees applied, and the caller takes
//! a checkpoint. A read-only open replays the same way into memory and writes nothing.
//!
//! Where the log ends, and why (segments and sectors: `segment.rs`; the chain: `chain.rs`):
//! records are read while their bytes are written sectors. Where they stop, at position
//! `p`:
//! - a record whose bytes were all written but which does not decode is damage (a crash
//!   tears writes only at sector boundaries, and every sector's checksum held);
//! - a damaged sector, there or anywhere after, is damage;
//! - a stream that runs to the end of the chain's last segment is a cut log: a segment is
//!   made before a write reaches the end of the one before, so the next one is missing;
//! - a flush-end record after `p` saying the log was durable beyond `p` when its write began
//!   proves the bytes at `p` had been synced: damage (a hole, say a lost write);
//! - otherwise `p` lies in the one write a crash interrupted: a torn tail. It is cut, and its
//!   written sectors are zeroed (a later crash must not take them for new records), and
//!   the segments after the one the log continues in are retired.
//!
//! Replay then refuses a page whose LSN is at or beyond the end: the write-ahead rule never
//! lets a page reach the disk before the log is durable past its LSN, so such a page proves
//! the log lost durable records.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::chain::{self, damaged, Discovered};
use super::log::{read_stream, Log, Slots};
use super::record::{
    self, BufferedOp, Checkpoint, Header, PageEntry, Record, KIND_FLUSH_END, OP_CHANGED, OP_FREED,
    OP_NEW, RECORD_HEADER_SIZE,
};
use super::segment::{
    segment_name, Segment, Stop, StreamReader, LOG_DIR_NAME, SECTOR_BYTES, SECTOR_HEADER_BYTES,
    SECTOR_PAYLOAD,
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
    /// Bytes of a torn last write that were cut (a read-only open only leaves them).
    pub torn_bytes: u64,
    /// Entries in the change buffer once replayed (puts that were not yet in their leaves).
    pub buffered: u64,
    /// Whether the replay was kept in memory only (a read-only open): pages changed by it
    /// stay in the pool, never written.
    pub in_memory: bool,
    /// Whether the directory had been closed cleanly (its superblock said so at open).
    pub closed_cleanly: bool,
    pub duration: Duration,
}

/// The change buffer as a replay leaves it: `(tree, key)` to value.
pub type BufferedEntries = BTreeMap<(u64, Vec<u8>), Vec<u8>>;

/// Where the replay leaves the allocator and the change buffer.
#[derive(Debug)]
pub struct Replayed {
    pub page_count: u64,
    pub free: Vec<PageId>,
    pub next_tree_id: u64,
    /// The change buffer as the log leaves it.
    pub buffered: BufferedEntries,
    pub report: RecoveryReport,
}

/// What reading the log found, before anything was replayed or changed.
#[derive(Debug)]
pub struct LogScan {
    pub checkpoint_lsn: u64,
    pub checkpoint: Checkpoint,
    /// Every record from the redo position to the end, in order.
    pub records: Vec<(u64, Record)>,
    /// Where the log ends (the torn tail, if any, starts here).
    pub end_lsn: u64,
    found: Discovered,
    /// The segments from the one holding the redo position to the last.
    chain: Vec<Segment>,
    torn: TornTail,
    started: Instant,
}

/// The written bytes of a torn last write, after the end.
#[derive(Debug, Default)]
struct TornTail {
    /// Stream bytes found written after the end.
    bytes: u64,
    /// Written sectors after the end's own: `(chain index, file offset)`, to zero.
    sectors: Vec<(usize, u64)>,
}

/// The file and offset of log position `lsn` in `chain`, for messages.
fn locate(chain: &[Segment], lsn: u64) -> (PathBuf, Option<u64>) {
    match chain.iter().find(|s| s.holds(lsn)) {
        Some(s) => {
            let sector = s.sector_of(lsn);
            let within = (lsn - s.sector_lsn(sector)) as usize;
            (
                s.path().to_owned(),
                Some(Segment::sector_offset(sector) + (SECTOR_HEADER_BYTES + within) as u64),
            )
        }
        None => (chain.last().map(|s| s.path().to_owned()).unwrap_or_default(), None),
    }
}

fn damaged_at(chain: &[Segment], lsn: u64, reason: impl Into<String>) -> Error {
    let (path, offset) = locate(chain, lsn);
    damaged(path, offset, Some(lsn), reason)
}

/// Reads the checkpoint record at `checkpoint_lsn`.
fn read_checkpoint(found: &Discovered, checkpoint_lsn: u64, log_dir: &Path) -> Result<Checkpoint> {
    let chain = chain::chain_from(found, checkpoint_lsn, log_dir)?;
    let mut reader = StreamReader::new(&chain, checkpoint_lsn);
    let unreadable = |why: String| {
        damaged_at(
            &chain,
            checkpoint_lsn,
            format!("the checkpoint record the superblock names {why}"),
        )
    };
    // Where the written bytes stop short of the record: why.
    let short = |reader: &StreamReader<'_>| match reader.stop() {
        Some((lsn, Stop::Damaged { path, offset, reason })) => {
            damaged(path.clone(), Some(*offset), Some(*lsn), reason.clone())
        }
        _ => unreadable("is not written whole".into()),
    };
    let Some(head) = reader.bytes(checkpoint_lsn, RECORD_HEADER_SIZE)? else {
        return Err(short(&reader));
    };
    let Header::Record { len } = record::parse_header(head, checkpoint_lsn) else {
        return Err(unreadable("is not there (no record header)".into()));
    };
    let Some(bytes) = reader.bytes(checkpoint_lsn, len)? else {
        return Err(short(&reader));
    };
    match record::decode(bytes, checkpoint_lsn) {
        Ok(Record::Checkpoint(checkpoint)) if checkpoint.redo_lsn <= checkpoint_lsn => {
            Ok(checkpoint)
        }
        Ok(_) => Err(unreadable("is another kind of record".into())),
        Err(reason) => Err(unreadable(format!("is damaged ({reason})"))),
    }
}

/// How much of the log after its end [`scan`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judge {
    /// The rest of the chain, sector by sector (after a crash: a torn tail, or damage).
    Rest,
    /// Nothing after the end: the directory was closed cleanly (its last write completed),
    /// so no write can have been torn. Spares every open of a closed directory reading the
    /// rest of a segment (up to 64 MiB) for nothing.
    EndOnly,
}

/// Reads the log of `storage` from the checkpoint at `checkpoint_lsn` to its end and judges
/// the end (module documentation), changing nothing.
pub fn scan(storage: &dyn Storage, checkpoint_lsn: u64, judge: Judge) -> Result<LogScan> {
    let started = Instant::now();
    let log_dir = storage.path(LOG_DIR_NAME);
    let found = chain::discover(storage)?;
    let checkpoint = read_checkpoint(&found, checkpoint_lsn, &log_dir)?;
    let chain = chain::chain_from(&found, checkpoint.redo_lsn, &log_dir)?;
    let mut reader = StreamReader::new(&chain, checkpoint.redo_lsn);
    let mut records = Vec::new();
    let mut lsn = checkpoint.redo_lsn;
    while let Some(head) = reader.bytes(lsn, RECORD_HEADER_SIZE)? {
        let Header::Record { len } = record::parse_header(head, lsn) else {
            return Err(damaged_at(&chain, lsn, "no record starts where the last one ended, although the bytes there were written whole"));
        };
        let Some(bytes) = reader.bytes(lsn, len)? else { break };
        match record::decode(bytes, lsn) {
            Ok(record) => records.push((lsn, record)),
            Err(reason) => {
                return Err(damaged_at(
                    &chain,
                    lsn,
                    format!("a record written whole does not decode: {reason}"),
                ));
            }
        }
        lsn += len as u64;
        reader.consume_to(lsn);
    }
    let end_lsn = lsn;
    let (stop_lsn, stop) = reader.stop().cloned().expect("the stream stopped");
    let torn = match stop {
        Stop::Damaged { path, offset, reason } => {
            return Err(damaged(path, Some(offset), Some(stop_lsn), reason));
        }
        Stop::ChainEnd => {
            let last = chain.last().expect("a chain");
            return Err(damaged(
                last.path(),
                None,
                Some(stop_lsn),
                "the log runs to the end of this segment, but no segment follows it (the next \
                 segment is missing, or its header was damaged or retired)",
            ));
        }
        Stop::Unwritten if judge == Judge::EndOnly => TornTail::default(),
        Stop::Unwritten => judge_tail(&chain, reader, end_lsn, stop_lsn)?,
    };
    Ok(LogScan { checkpoint_lsn, checkpoint, records, end_lsn, found, chain, torn, started })
}

/// The stream's records end at `end` and its written bytes at `stop` (>= `end`): a torn
/// tail, or damage (module documentation).
fn judge_tail(
    chain: &[Segment],
    reader: StreamReader<'_>,
    end: u64,
    stop: u64,
) -> Result<TornTail> {
    let rest = reader.rest()?;
    if let Some((lsn, Stop::Damaged { path, offset, reason })) = rest.damaged {
        return Err(damaged(
            path,
            Some(offset),
            Some(lsn),
            format!("a damaged sector after the end of the log's records at {end}: {reason}"),
        ));
    }
    for (run_lsn, bytes) in &rest.runs {
        if let Some(synced_below) = durable_mark_beyond(bytes, *run_lsn, end) {
            return Err(damaged_at(
                chain,
                end,
                format!(
                    "the log's records stop here, but a later write began when the log was \
                     durable up to {synced_below}: bytes that had been synced are missing"
                ),
            ));
        }
    }
    // Written sectors after the end's own: those up to the stop, and those after it.
    let mut sectors = Vec::new();
    let mut at = sector_after(chain, end);
    while let Some((index, sector)) = at.filter(|&(index, _)| index < chain.len()) {
        if chain[index].sector_lsn(sector) >= stop {
            break;
        }
        sectors.push((index, Segment::sector_offset(sector)));
        at = Some(next_sector(chain, (index, sector)));
    }
    sectors.extend(rest.written.iter().map(|written| (written.segment, written.offset)));
    let rest_bytes: u64 = rest.runs.iter().map(|(_, bytes)| bytes.len() as u64).sum();
    Ok(TornTail { bytes: stop - end + rest_bytes, sectors })
}

/// The sector after the one holding `lsn`: `(chain index, sector index)`.
fn sector_after(chain: &[Segment], lsn: u64) -> Option<(usize, u64)> {
    let index = chain.iter().position(|s| s.holds(lsn))?;
    Some(next_sector(chain, (index, chain[index].sector_of(lsn))))
}

fn next_sector(chain: &[Segment], (index, sector): (usize, u64)) -> (usize, u64) {
    if sector + 1 < chain[index].capacity / SECTOR_PAYLOAD as u64 {
        (index, sector + 1)
    } else {
        (index + 1, 0)
    }
}

/// The durable mark of a valid flush-end record in `bytes` (stream bytes from `lsn`) that
/// says the log was durable beyond `end`, if there is one.
fn durable_mark_beyond(bytes: &[u8], lsn: u64, end: u64) -> Option<u64> {
    for offset in 0..bytes.len().saturating_sub(RECORD_HEADER_SIZE - 1) {
        let at = lsn + offset as u64;
        if read_u64(bytes, offset + 8) != at || bytes[offset + 16] != KIND_FLUSH_END {
            continue;
        }
        let Header::Record { len } = record::parse_header(&bytes[offset..], at) else { continue };
        let Some(whole) = bytes.get(offset..offset + len) else { continue };
        if let Ok(Record::FlushEnd { synced_below, .. }) = record::decode(whole, at) {
            if synced_below > end {
                return Some(synced_below);
            }
        }
    }
    None
}

impl LogScan {
    /// Distinct pages the records change (what an in-memory replay keeps in the pool).
    pub fn pages_touched(&self) -> u64 {
        let mut seen = HashSet::new();
        for (_, record) in &self.records {
            match record {
                Record::Commit { pages, .. } => {
                    seen.extend(pages.iter().filter(|e| e.op != OP_FREED).map(|e| e.page_id))
                }
                Record::Image { entry, .. } => {
                    seen.insert(entry.page_id);
                }
                Record::Checkpoint(_) | Record::FlushEnd { .. } => {}
            }
        }
        seen.len() as u64
    }

    /// Bytes of a torn last write found after the end.
    pub fn torn_bytes(&self) -> u64 {
        self.torn.bytes
    }

    /// What [`check_log`] reports.
    fn report(&self) -> LogReport {
        let mut report = LogReport {
            segments: self.found.segments.len(),
            slots: self.found.next_slot,
            checkpoint_lsn: self.checkpoint_lsn,
            redo_lsn: self.checkpoint.redo_lsn,
            end_lsn: self.end_lsn,
            checkpoint_buffered: self.checkpoint.buffered.len() as u64,
            torn_bytes: self.torn.bytes,
            ..Default::default()
        };
        for (_, record) in &self.records {
            report.records += 1;
            match record {
                Record::Commit { buffered, .. } => {
                    report.commits += 1;
                    report.buffered_changes += buffered.len() as u64;
                }
                Record::Image { .. } => report.images += 1,
                _ => {}
            }
        }
        report
    }

    /// Makes the log ready to go on at the end (a writable open): the torn tail's sectors
    /// zeroed (the sector holding the end rewritten with the bytes before it), the segments
    /// after the one holding the end retired. Returns the log, continuing at the end.
    pub fn continue_log(
        &self,
        storage: Arc<dyn Storage>,
        segment_bytes: u64,
        direct: bool,
    ) -> Result<Arc<Log>> {
        let end = self.end_lsn;
        let keep = self.chain.iter().position(|s| s.holds(end)).map_or(self.chain.len(), |i| i + 1);
        if self.torn.bytes > 0 {
            self.erase_tail()?;
        }
        chain::retire(&self.chain[keep..])?;
        let segments = self.chain[..keep].to_vec();
        let in_use: HashSet<u32> = segments.iter().map(|s| s.slot).collect();
        let free = self
            .found
            .segments
            .iter()
            .map(|s| s.slot)
            .chain(self.found.unused.iter().map(|(slot, _)| *slot))
            .filter(|slot| !in_use.contains(slot))
            .collect();
        let slots = Slots { free, next: self.found.next_slot };
        Ok(Arc::new(Log::new(storage, segment_bytes, segments, slots, end, direct)))
    }

    /// Zeroes the torn tail's written sectors and cuts the one holding the end at the end.
    fn erase_tail(&self) -> Result<()> {
        let end = self.end_lsn;
        let fail = |segment: &Segment, e| {
            Error::io(format!("erasing the torn end of the log in {}", segment.path().display()), e)
        };
        let mut touched = BTreeSet::new();
        if let Some(index) = self.chain.iter().position(|s| s.holds(end)) {
            let segment = &self.chain[index];
            let sector = segment.sector_of(end);
            let from = segment.sector_lsn(sector);
            let mut image = vec![0u8; SECTOR_BYTES];
            if end > from {
                let mut kept = vec![0u8; (end - from) as usize];
                if !read_stream(&self.chain, from, &mut kept)? {
                    return Err(damaged_at(
                        &self.chain,
                        from,
                        "the log's last sector does not read back",
                    ));
                }
                super::segment::encode_sector(&mut image, from, &kept);
            }
            segment
                .device
                .write_at(&image, Segment::sector_offset(sector))
                .map_err(|e| fail(segment, e))?;
            touched.insert(index);
        }
        let zeros = vec![0u8; SECTOR_BYTES];
        for &(index, offset) in &self.torn.sectors {
            let segment = &self.chain[index];
            segment.device.write_at(&zeros, offset).map_err(|e| fail(segment, e))?;
            touched.insert(index);
        }
        for index in touched {
            let segment = &self.chain[index];
            segment.device.sync().map_err(|e| fail(segment, e))?;
        }
        Ok(())
    }

    /// Replays every record into `pool` (see the module documentation); with `read_ahead`,
    /// reads the pages of the next records ahead, many at a time.
    pub fn replay(self, pool: &BufferPool, read_ahead: usize, in_memory: bool) -> Result<Replayed> {
        let Checkpoint { redo_lsn, page_count, next_tree_id, free, buffered, .. } = self.checkpoint;
        let end_lsn = self.end_lsn;
        // The change buffer as of the redo LSN; the records replayed below change it in order.
        let mut buffered: BTreeMap<(u64, Vec<u8>), Vec<u8>> =
            buffered.into_iter().map(|(tree, key, value)| ((tree, key), value)).collect();
        let mut report = RecoveryReport {
            redo_lsn,
            end_lsn,
            torn_bytes: self.torn.bytes,
            in_memory,
            ..Default::default()
        };
        let records = self.records;
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
                        // Freed pages too: a page allocated and freed in one commit is logged
                        // as freed only, and it did raise the page count.
                        page_count = page_count.max(entry.page_id + 1);
                    }
                    pages
                }
                Record::Image { content_lsn, entry } => {
                    // Applied by its content's age, not its position.
                    report.records += 1;
                    if replay(pool, *content_lsn, entry, &mut torn, end_lsn)? {
                        report.pages_applied += 1;
                    }
                    continue;
                }
                Record::Checkpoint(_) | Record::FlushEnd { .. } => continue,
            };
            report.records += 1;
            for entry in entries {
                if replay(pool, lsn, entry, &mut torn, end_lsn)? {
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
        report.duration = self.started.elapsed();
        report.buffered = buffered.len() as u64;
        Ok(Replayed {
            page_count,
            free: free.into_iter().collect(),
            next_tree_id,
            buffered,
            report,
        })
    }
}

/// What [`check_log`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogReport {
    /// Segment files with a valid header, and one past the highest slot.
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
/// `checkpoint_lsn`, then every record from its redo LSN to the end, and how it ends.
pub fn check_log(storage: &dyn Storage, checkpoint_lsn: u64) -> Result<LogReport> {
    Ok(scan(storage, checkpoint_lsn, Judge::Rest)?.report())
}

/// The log of a directory whose superblock names no checkpoint yet (a new database, or one
/// whose first open crashed before its first checkpoint was recorded): a new log at 0. A log
/// that holds anything but such a first open's records is refused: the superblock would have
/// lost its checkpoint, and starting a new log over the old one would lose it all.
pub fn new_log(storage: Arc<dyn Storage>, segment_bytes: u64, direct: bool) -> Result<Arc<Log>> {
    let found = chain::discover(storage.as_ref())?;
    check_no_log(storage.as_ref(), &found)?;
    // What a crashed first open left goes: its sectors sit at the positions the new log
    // writes again, and must not be read as its continuation.
    let slots = found.segments.iter().map(|s| s.slot).chain(found.unused.iter().map(|u| u.0));
    for slot in slots.collect::<Vec<_>>() {
        let name = segment_name(slot);
        storage.remove(&name).map_err(|e| Error::io(format!("removing {name}"), e))?;
    }
    if !found.is_empty() {
        storage.sync_names().map_err(|e| Error::io("syncing the log directory", e))?;
    }
    Ok(Arc::new(Log::new(storage, segment_bytes, Vec::new(), Slots::default(), 0, direct)))
}

/// Fails unless the segments `found` hold at most a crashed first open's records.
pub fn check_no_log(storage: &dyn Storage, found: &Discovered) -> Result<()> {
    let refuse = |segment: &Segment, why: String| {
        damaged(
            segment.path(),
            None,
            None,
            format!(
                "the superblock names no checkpoint, but the log holds {why}: the superblock was \
                 damaged or replaced, or the page file belongs to another log; refusing to start \
                 a new log over this one"
            ),
        )
    };
    let _ = storage;
    for segment in &found.segments {
        if segment.start > 0 {
            return Err(refuse(segment, format!("a segment from log position {}", segment.start)));
        }
    }
    let Some(first) = found.segments.first() else { return Ok(()) };
    let chain = std::slice::from_ref(first);
    let mut reader = StreamReader::new(chain, 0);
    let mut lsn = 0;
    while let Some(head) = reader.bytes(lsn, RECORD_HEADER_SIZE)? {
        let Header::Record { len } = record::parse_header(head, lsn) else { break };
        let Some(bytes) = reader.bytes(lsn, len)? else { break };
        match record::decode(bytes, lsn) {
            Ok(Record::Checkpoint(_) | Record::FlushEnd { .. }) => {}
            Ok(_) => return Err(refuse(first, format!("changes (a record at position {lsn})"))),
            Err(_) => break,
        }
        lsn += len as u64;
        reader.consume_to(lsn);
    }
    Ok(())
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
/// changes newer than its content: one logged while a recovery evicted pages.) A page on
/// disk whose LSN is at or past `end` (where the log ends) is refused: the log lost records.
fn replay(
    pool: &BufferPool,
    lsn: u64,
    entry: &PageEntry,
    torn: &mut Deferred,
    end: u64,
) -> Result<bool> {
    if entry.op == OP_FREED {
        torn.remove(&entry.page_id);
        return Ok(false);
    }
    let mut applied = false;
    let mut beyond = None;
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
        let page_lsn = page::lsn_of(memory);
        if page_lsn >= end {
            beyond = Some(page_lsn);
            return false;
        }
        if page_lsn >= lsn {
            return false;
        }
        entry.apply(memory);
        page::set_lsn(memory, lsn);
        applied = true;
        true
    })?;
    if let Some(page_lsn) = beyond {
        return Err(Error::LogCorrupt {
            path: pool.file().path().to_owned(),
            offset: Some(entry.page_id * page::PAGE_SIZE as u64),
            lsn: Some(end),
            reason: format!(
                "page {} carries log position {page_lsn}, at or past where the log ends ({end}): \
                 a page is written only once the log is durable past it, so the log lost \
                 records (a segment missing, damaged or replaced)",
                entry.page_id
            ),
        });
    }
    Ok(applied)
}
