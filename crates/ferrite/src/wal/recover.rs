//! The log's side of recovery at open: find the last checkpoint, read the log from its redo
//! position to the end and judge where it ends (a tail torn by a crash is cut; anything else
//! is refused). The records found ([`LogScan`]) are replayed into the pages above the log, by
//! `db/recovery.rs`; a writable open then goes on writing the log where it ends
//! ([`LogScan::continue_log`]). Also here: `check`'s reading of the log, and the checks that
//! keep a new log from being started over an old one.
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
//! The end found here is also what replay holds pages against: a page on disk with an LSN
//! at or past it proves the log lost durable records.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::chain::{self, damaged, Discovered};
use super::log::{read_stream, Log, Slots};
use super::record::{
    self, Checkpoint, Header, Record, KIND_FLUSH_END, OP_FREED, RECORD_HEADER_SIZE,
};
use super::segment::{
    segment_name, Segment, Stop, StreamReader, LOG_DIR_NAME, SECTOR_BYTES, SECTOR_HEADER_BYTES,
    SECTOR_PAYLOAD,
};
use crate::error::{Error, Result};
use crate::format::page::read_u64;
use crate::io::Storage;

/// What reading the log found, before anything was replayed or changed.
#[derive(Debug)]
pub struct LogScan {
    /// Log position of the checkpoint record the scan began from.
    pub checkpoint_lsn: u64,
    /// That record.
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

    /// When the scan began (recovery's duration counts from here).
    pub fn started(&self) -> Instant {
        self.started
    }
}

/// What [`check_log`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogReport {
    /// Segment files with a valid header.
    pub segments: usize,
    /// One past the highest segment slot with a file (files not in use are kept for reuse).
    pub slots: u32,
    /// Log position of the last checkpoint's record (the superblock names it).
    pub checkpoint_lsn: u64,
    /// Log position recovery replays from (the checkpoint's redo position).
    pub redo_lsn: u64,
    /// Where the readable log ends.
    pub end_lsn: u64,
    /// Records from the redo LSN to the end, each checksum-verified.
    pub records: u64,
    /// Of those, commit records.
    pub commits: u64,
    /// Of those, page images (a page's first write-back after a checkpoint logs it whole).
    pub images: u64,
    /// Entries of the change buffer the checkpoint record lists, and buffered changes
    /// (puts and removals) the commits from the redo LSN on log: what recovery rebuilds the
    /// change buffer from.
    pub checkpoint_buffered: u64,
    /// See `checkpoint_buffered`.
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
