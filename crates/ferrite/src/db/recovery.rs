//! Recovery at open, above the log: the log's reading and judging (`wal/recover.rs`) hands
//! over every record from the last checkpoint's redo position to the end; this replays them
//! into the pages whose LSN is older, rebuilds the allocator (the checkpoint's free pages
//! with the log's allocations and frees applied) and the change buffer, and reports what it
//! did. The caller then takes a checkpoint. A read-only open replays the same way into
//! memory and writes nothing.
//!
//! Replay refuses a page whose LSN is at or beyond the end: the write-ahead rule never lets
//! a page reach the disk before the log is durable past its LSN, so such a page proves the
//! log lost durable records. A page torn by a crash (its checksum fails) waits for a full
//! image of itself in the log; one that never gets it is damage, unless it was freed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::buffer::BufferPool;
use crate::error::{Error, PageId, Result};
use crate::format::page;
use crate::format::superblock::Superblock;
use crate::options::Options;
use crate::wal::record::{
    BufferedOp, Checkpoint, PageEntry, Record, OP_CHANGED, OP_DATA_FREED, OP_DATA_NEW, OP_FREED,
    OP_NEW,
};
use crate::wal::recover::LogScan;

/// What recovery did, for the caller to report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
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
    /// How long recovery took, from the first read of the log to the end of the replay.
    pub duration: Duration,
}

/// The change buffer as a replay leaves it: `(tree, key)` to value.
pub(super) type BufferedEntries = BTreeMap<(u64, Vec<u8>), Vec<u8>>;

/// Where the replay leaves the allocator and the change buffer.
#[derive(Debug)]
struct Replayed {
    page_count: u64,
    free: Vec<PageId>,
    next_tree_id: u64,
    /// The change buffer as the log leaves it.
    buffered: BufferedEntries,
    report: RecoveryReport,
}

/// Brings `pool` and `sb` to the state the log leaves (`scan`, into memory only when
/// read-only), or to what the superblock says when there is no log yet (`chained_free`:
/// the free list of format version 1); returns the report and the change buffer's entries.
pub(super) fn recover(
    scan: Option<LogScan>,
    pool: &BufferPool,
    options: &Options,
    sb: &mut Superblock,
    chained_free: Vec<PageId>,
) -> Result<(RecoveryReport, BufferedEntries)> {
    let Some(scan) = scan else {
        pool.set_allocation(sb.page_count, chained_free)?;
        return Ok((RecoveryReport::default(), BTreeMap::new()));
    };
    // A simulated disk's draws must not depend on the threads' timing: no read-ahead there.
    let read_ahead = match options.storage {
        Some(_) => 0,
        None => options.recovery_read_ahead_pages.min(options.pool_pages() / 4) as usize,
    };
    let replayed = replay(scan, pool, read_ahead, options.read_only)?;
    pool.set_allocation(replayed.page_count, replayed.free)?;
    sb.page_count = replayed.page_count;
    sb.next_tree_id = replayed.next_tree_id;
    Ok((replayed.report, replayed.buffered))
}

/// Replays every record of `scan` into `pool` (see the module documentation); with
/// `read_ahead`, reads the pages of the next records ahead, many at a time.
fn replay(
    scan: LogScan,
    pool: &BufferPool,
    read_ahead: usize,
    in_memory: bool,
) -> Result<Replayed> {
    let (torn_bytes, started) = (scan.torn_bytes(), scan.started());
    let LogScan { checkpoint, records, end_lsn, .. } = scan;
    let Checkpoint { redo_lsn, page_count, next_tree_id, free, buffered, .. } = checkpoint;
    // The change buffer as of the redo LSN; the records replayed below change it in order.
    let mut buffered: BTreeMap<(u64, Vec<u8>), Vec<u8>> =
        buffered.into_iter().map(|(tree, key, value)| ((tree, key), value)).collect();
    let mut report =
        RecoveryReport { redo_lsn, end_lsn, torn_bytes, in_memory, ..Default::default() };
    let mut free: BTreeSet<PageId> = free.into_iter().collect();
    let checkpoint_pages = page_count;
    // Ids past the checkpoint's page count that a record names: the others were handed out
    // for object data whose commit never came (data is allocated before its commit).
    let mut named_after: BTreeSet<PageId> = BTreeSet::new();
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
                        OP_DATA_NEW => {
                            // Object data now: whatever node the replay left in memory there
                            // is gone, and must not be written over the data.
                            for page_id in entry.page_ids() {
                                free.remove(&page_id);
                                torn.remove(&page_id);
                                pool.discard(page_id)?;
                            }
                        }
                        OP_DATA_FREED => free.extend(entry.page_ids()),
                        _ => {}
                    }
                    // Freed pages too: a page allocated and freed in one commit is logged
                    // as freed only, and it did raise the page count.
                    page_count = page_count.max(entry.page_ids().end);
                    if entry.page_ids().end > checkpoint_pages {
                        named_after.extend(entry.page_ids().filter(|&id| id >= checkpoint_pages));
                    }
                }
                pages
            }
            Record::Image { content_lsn, entry } => {
                // Applied by its content's age, not its position.
                report.records += 1;
                if replay_entry(pool, *content_lsn, entry, &mut torn, end_lsn)? {
                    report.pages_applied += 1;
                }
                continue;
            }
            Record::Checkpoint(_) | Record::FlushEnd { .. } => continue,
        };
        report.records += 1;
        for entry in entries.iter().filter(|e| !e.is_data()) {
            if replay_entry(pool, lsn, entry, &mut torn, end_lsn)? {
                report.pages_applied += 1;
            }
        }
    }
    free.extend((checkpoint_pages..page_count).filter(|id| !named_after.contains(id)));
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
    Ok(Replayed { page_count, free: free.into_iter().collect(), next_tree_id, buffered, report })
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
            if entry.op != OP_FREED && !entry.is_data() && seen.insert(entry.page_id) {
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
fn replay_entry(
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
