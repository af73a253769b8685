//! The lazy merge of fragments (MixStore's "merged lazily, copy-on-write, once fragments
//! pass a threshold that falls as the tier fills"). Each commit that appends fragment-log
//! entries to an object checks its fragmented blocks against the threshold and wakes the
//! background merge while any object is past it. The merge folds the log's *oldest* entries
//! first: it scans from the log's head until it has 64 blocks (the entries of a block found
//! from the head are its oldest), reads each block's extent data, lays the entries over it,
//! writes the merged blocks into new pages and swaps them in with one commit, at most
//! `Options::object_merge_bytes_per_sec`; the commit deletes the entries it folded (newer
//! ones stay, over the new block). In log order the merge reads the entries with the leaves
//! that hold them, in order, never one at random (MixStore's fast tier reads at random for
//! free; a log on the SSD does not). When the fragments pass their budget, writers help:
//! each runs one merge before it writes.
//!
//! Threshold: `max(1, 64 × (1 − fill))` fragmented blocks per object, where `fill` is the
//! fragment bytes of all objects over `Options::object_fragment_bytes` (at 0 an object
//! waits for 64 fragmented blocks; at or past the budget every fragment is merged).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use super::format::{self, decode_log_entry, log_key, Fragments, BLOCK};
use super::ops::{Change, MapView};
use crate::db::{Shared, Tree};
use crate::error::{PageId, Result};
use crate::io::engine::IoEngine;
use crate::io::AlignedBlock;
use crate::options::Durability;
use crate::sched::block_on;

/// Most fragmented blocks an object keeps before it is merged (an empty fragment space).
const MAX_BLOCKS: f64 = 64.0;
/// Blocks one merge commit rewrites at most.
const BLOCKS_PER_MERGE: usize = 256;

/// The merge threshold, in fragmented blocks, for fragments of `bytes` out of `budget`.
pub fn threshold(bytes: u64, budget: u64) -> u64 {
    let fill = (bytes as f64 / budget.max(1) as f64).min(1.0);
    (MAX_BLOCKS * (1.0 - fill)).floor().max(1.0) as u64
}

/// How long the idle merge thread waits before it looks again unwoken, in milliseconds.
static IDLE_WAIT_MS: AtomicU64 = AtomicU64::new(250);

/// Sets [`IDLE_WAIT_MS`] for the whole process (tests: a long wait shows a missing wake-up).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn set_idle_wait(wait: Duration) {
    IDLE_WAIT_MS.store(wait.as_millis() as u64, Ordering::Relaxed);
}

impl Shared {
    /// The fragment log's entries from its head, in order: `(sequence number, object id,
    /// block, fragments)`.
    fn log_entries<'a>(
        &'a self,
        objects: &Tree,
    ) -> impl Iterator<Item = Result<(u64, u64, u64, Fragments)>> + 'a {
        let (low, high) = (log_key(0), log_key(u64::MAX));
        objects.range(&low[..]..=&high[..]).map(move |entry| {
            let (key, value) = entry?;
            let (_, _, seq) = format::parse_key(&key).expect("a key of the range");
            let (id, block, fragments) =
                decode_log_entry(&value).map_err(|r| crate::error::Error::Corrupt {
                    page: 0,
                    file: self.pool.file().path().to_owned(),
                    reason: format!("fragment entry {seq}: {r}"),
                })?;
            Ok((seq, id, block, fragments))
        })
    }

    /// Rebuilds the fragment log's index from the log's key range (at open) and queues the
    /// objects past the merge threshold.
    pub(crate) fn load_fragment_index(self: &Arc<Self>) -> Result<()> {
        let Some(objects) = self.objects_tree(false)? else { return Ok(()) };
        let mut index = self.object_space.fragments();
        for entry in self.log_entries(&objects) {
            let (seq, id, block, fragments) = entry?;
            index.add(id, block, seq, format::fragment_bytes(&fragments) as u32);
        }
        let budget = self.object_space.fragment_budget();
        let ids: Vec<u64> = index.by_object.keys().copied().collect();
        for id in ids {
            index.queue_if_due(id, budget);
        }
        Ok(())
    }

    /// Backpressure when the fragments passed their budget: a writer waits for the merge
    /// thread to make room, or, with no merge thread, runs one merge itself (the only device
    /// reads a write may then cause).
    pub(crate) fn help_merge_if_full(self: &Arc<Self>) -> Result<()> {
        let space = &self.object_space;
        let over = || space.fragments().bytes > space.fragment_budget();
        if !over() {
            return Ok(());
        }
        let started = Instant::now();
        while over() && space.merge_thread() && started.elapsed() < Duration::from_secs(10) {
            space.wake_merger();
            space.wait_for_room(Duration::from_millis(20));
            self.check_writable()?;
        }
        if over() {
            // No merge thread (or one that is stuck): merge here, one at a time.
            let _merging = space.merge_lock();
            if over() {
                self.merge_oldest(None)?;
            }
        }
        Ok(())
    }

    /// The merge thread's body: merges while some object's fragments are past the threshold,
    /// until the database closes.
    pub(crate) fn merge_in_background(
        self: Arc<Self>,
        bytes_per_sec: u64,
        mut engine: Option<Box<dyn IoEngine>>,
    ) {
        self.object_space.set_merge_thread(true);
        self.merge_loop(bytes_per_sec, &mut engine);
        self.object_space.set_merge_thread(false);
    }

    fn merge_loop(self: &Arc<Self>, bytes_per_sec: u64, engine: &mut Option<Box<dyn IoEngine>>) {
        let mut window = (Instant::now(), 0u64);
        while !self.closed.load(Ordering::Acquire) {
            let due = {
                let budget = self.object_space.fragment_budget();
                let mut index = self.object_space.fragments();
                index.queued.clear();
                index.due(budget) || index.bytes > budget
            };
            if !due {
                // A commit that puts an object past the threshold wakes the thread, and so
                // does the close: the timeout only bounds a lost wake-up.
                let idle = IDLE_WAIT_MS.load(Ordering::Relaxed);
                self.object_space.wait_for_work(Duration::from_millis(idle));
                continue;
            }
            let merged = {
                let _merging = self.object_space.merge_lock();
                self.merge_oldest(engine.as_deref_mut())
            };
            match merged {
                Ok(bytes) => {
                    if bytes == 0 {
                        // Every block it read was changed meanwhile: let the writers go on.
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    // Rate: sleep off what this window's merges wrote beyond the budget.
                    window.1 += bytes;
                    let allowed = window.0.elapsed().as_secs_f64() * bytes_per_sec as f64;
                    if window.1 as f64 > allowed {
                        let ahead = (window.1 as f64 - allowed) / bytes_per_sec as f64;
                        std::thread::sleep(Duration::from_secs_f64(ahead.min(1.0)));
                    }
                    if window.0.elapsed() > Duration::from_secs(1) {
                        window = (Instant::now(), 0);
                    }
                }
                Err(e) if self.closed.load(Ordering::Acquire) => {
                    log::debug!("a merge stopped by the close: {e}");
                    return;
                }
                Err(e) => {
                    log::warn!("merging object fragments failed: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// Merges the fragment log's oldest entries: those of the first `BLOCKS_PER_MERGE`
    /// blocks found from the log's head, folded into new extents in one commit. Returns the
    /// bytes written (0 if the log is empty, or if writes, truncations or deletes changed
    /// every block meanwhile: the caller tries later).
    pub(crate) fn merge_oldest(
        self: &Arc<Self>,
        engine: Option<&mut (dyn IoEngine + 'static)>,
    ) -> Result<u64> {
        let Some(objects) = self.objects_tree(false)? else { return Ok(0) };
        // Per object and block: the entries from the log's head, overlaid, and their numbers.
        let mut found: BTreeMap<(u64, u64), (Fragments, Vec<u64>)> = BTreeMap::new();
        for entry in self.log_entries(&objects) {
            let (seq, id, block, fragments) = entry?;
            if found.len() == BLOCKS_PER_MERGE && !found.contains_key(&(id, block)) {
                break;
            }
            let (overlay, seqs) = found.entry((id, block)).or_default();
            for (offset, bytes) in &fragments {
                *overlay = format::overlay_fragment(overlay, *offset as usize, bytes);
            }
            seqs.push(seq);
        }
        if found.is_empty() {
            return Ok(0);
        }
        // Per object: its blocks' data, written into new pages, and the change that swaps
        // them in (planned on each block's extents; the commit checks them and that the
        // entries are still the block's oldest).
        let mut changes: Vec<(u64, Change)> = Vec::new();
        let mut ids: Vec<u64> = found.keys().map(|k| k.0).collect();
        ids.dedup();
        // Every block's extents, then the blocks with data read from the device at once.
        let mut views: Vec<((u64, u64), MapView)> = Vec::with_capacity(found.len());
        for (&(id, block), (overlay, _)) in &found {
            let view = MapView {
                extents: self.read_extents(id, block, block)?,
                fragments: [(block, overlay.clone())].into(),
            };
            views.push(((id, block), view));
        }
        let mut reads: Vec<(PageId, AlignedBlock)> = views
            .iter()
            .filter_map(|((_, block), view)| {
                let extent = view.extents.iter().find(|e| e.first <= *block && *block <= e.last)?;
                Some((extent.page_of(*block), AlignedBlock::zeroed(BLOCK as usize)))
            })
            .collect();
        let read = reads.len() as u64;
        self.read_pages_at_once(engine, &mut reads)?;
        let mut reads = reads.into_iter();
        let written = (|| -> Result<()> {
            for id in ids {
                let mut all = MapView::default();
                let mut data: Vec<(u64, Vec<u8>)> = Vec::new();
                let mut planned: Vec<(u64, Vec<format::Extent>, Vec<u64>)> = Vec::new();
                for ((_, block), view) in views.iter().filter(|((i, _), _)| *i == id) {
                    let mut bytes = vec![0u8; BLOCK as usize];
                    if view.extents.iter().any(|e| e.first <= *block && *block <= e.last) {
                        bytes.copy_from_slice(reads.next().expect("a read per block").1.as_slice());
                    }
                    format::apply_fragments(&mut bytes, &view.fragments[block]);
                    for e in &view.extents {
                        if !all.extents.contains(e) {
                            all.extents.push(*e);
                        }
                    }
                    data.push((*block, bytes));
                    planned.push((*block, view.extents.clone(), found[&(id, *block)].1.clone()));
                }
                all.extents.sort_by_key(|e| e.first);
                let refs: Vec<(u64, &[u8])> = data.iter().map(|(b, d)| (*b, &d[..])).collect();
                let (extents, runs) = self.write_blocks(&refs)?;
                let mut change = self.replacing(&all, &extents, runs);
                change.retarget_merge(planned);
                changes.push((id, change));
            }
            Ok(())
        })();
        if let Err(e) = written {
            for (_, change) in &changes {
                self.object_space.give_back(&change.new_runs);
            }
            return Err(e);
        }
        // A merge changes no byte of any object: it need not wait for the log.
        let outcome = block_on(self.commit(Durability::None, async || {
            let mut applied = Vec::with_capacity(changes.len());
            for (id, change) in &changes {
                let _map = self.object_space.map_write(*id);
                let current = self.still_current(*id, change)?;
                if current {
                    self.apply_change(&objects, *id, change).await?;
                }
                applied.push(current);
            }
            Ok(applied)
        }));
        let applied = match outcome {
            Ok(applied) => applied,
            Err(e) => {
                if self.log()?.check().is_ok() {
                    for (_, change) in &changes {
                        self.object_space.give_back(&change.new_runs);
                    }
                }
                return Err(e);
            }
        };
        let mut merged = 0u64;
        for ((_, change), applied) in changes.iter().zip(applied) {
            if applied {
                merged += change.merged_blocks();
            } else {
                // A write, a truncation or a delete of the object came first.
                self.object_space.give_back(&change.new_runs);
            }
        }
        self.object_space.merged(merged, read.min(merged));
        Ok(merged * BLOCK)
    }
}

#[cfg(test)]
mod tests {
    use super::threshold;

    #[test]
    fn the_threshold_falls_as_fragments_fill_their_budget() {
        assert_eq!(threshold(0, 100), 64);
        assert_eq!(threshold(50, 100), 32);
        assert_eq!(threshold(99, 100), 1);
        assert_eq!(threshold(500, 100), 1);
        let mut last = u64::MAX;
        for bytes in (0..=100).step_by(5) {
            let t = threshold(bytes, 100);
            assert!(t <= last, "never rises as fragments grow");
            last = t;
        }
    }
}
