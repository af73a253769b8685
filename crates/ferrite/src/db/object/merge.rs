//! The lazy merge of fragments (MixStore's "merged lazily, copy-on-write, once fragments
//! pass a threshold that falls as the tier fills"). Each commit that appends fragment-log
//! entries to an object checks its fragmented blocks against the threshold and queues it; a
//! background thread takes queued objects, reads each fragmented block (its extent data,
//! the entries over it), writes the merged blocks into new pages and swaps them in with one
//! commit per 64 blocks, at most `Options::object_merge_bytes_per_sec`; the commit deletes
//! the entries it folded (newer ones stay, over the new block). When the fragments pass
//! their budget, writers help: each merges one queued object before it writes.
//!
//! Threshold: `max(1, 64 × (1 − fill))` fragmented blocks per object, where `fill` is the
//! fragment bytes of all objects over `Options::object_fragment_bytes` (at 0 an object
//! waits for 64 fragmented blocks; at or past the budget every fragment is merged).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::format::{self, decode_log_entry, log_key, BLOCK};
use super::ops::MapView;
use crate::db::Shared;
use crate::error::Result;
use crate::options::Durability;
use crate::sched::block_on;

/// Most fragmented blocks an object keeps before it is merged (an empty fragment space).
const MAX_BLOCKS: f64 = 64.0;
/// Blocks one merge commit rewrites at most.
const BLOCKS_PER_MERGE: usize = 64;

/// The merge threshold, in fragmented blocks, for fragments of `bytes` out of `budget`.
pub fn threshold(bytes: u64, budget: u64) -> u64 {
    let fill = (bytes as f64 / budget.max(1) as f64).min(1.0);
    (MAX_BLOCKS * (1.0 - fill)).floor().max(1.0) as u64
}

impl Shared {
    /// Rebuilds the fragment log's index from the log's key range (at open) and queues the
    /// objects past the merge threshold.
    pub(crate) fn load_fragment_index(self: &Arc<Self>) -> Result<()> {
        let Some(objects) = self.objects_tree(false)? else { return Ok(()) };
        let (low, high) = (log_key(0), log_key(u64::MAX));
        let mut index = self.object_space.fragments();
        for entry in objects.range(&low[..]..=&high[..]) {
            let (key, value) = entry?;
            let (_, _, seq) = format::parse_key(&key).expect("a key of the range");
            let (id, block, fragments) =
                decode_log_entry(&value).map_err(|r| crate::error::Error::Corrupt {
                    page: 0,
                    file: self.pool.file().path().to_owned(),
                    reason: format!("fragment entry {seq}: {r}"),
                })?;
            index.add(id, block, seq, format::fragment_bytes(&fragments) as u32);
        }
        let budget = self.object_space.fragment_budget();
        let ids: Vec<u64> = index.by_object.keys().copied().collect();
        for id in ids {
            index.queue_if_due(id, budget);
        }
        Ok(())
    }

    /// A writer's share of the merge when the fragments passed their budget: merges one
    /// queued object's blocks (so fragments cannot outgrow the budget by much however fast
    /// writers append them). The only device reads a write may cause.
    pub(crate) fn help_merge_if_full(self: &Arc<Self>) -> Result<()> {
        let budget = self.object_space.fragment_budget();
        let next = {
            let mut index = self.object_space.fragments();
            if index.bytes <= budget {
                return Ok(());
            }
            index.queued.pop_first().or_else(|| index.by_object.keys().next().copied())
        };
        if let Some(id) = next {
            self.merge_object(id)?;
        }
        Ok(())
    }

    /// The merge thread's body: merges queued objects until the database closes.
    pub(crate) fn merge_in_background(self: Arc<Self>, bytes_per_sec: u64) {
        let mut window = (Instant::now(), 0u64);
        while !self.closed.load(Ordering::Acquire) {
            let next = self.object_space.fragments().queued.pop_first();
            let Some(id) = next else {
                // Every queued object wakes the thread: the timeout only bounds a lost wake-up.
                self.object_space.wait_for_work(Duration::from_millis(250));
                continue;
            };
            match self.merge_object(id) {
                Ok(bytes) => {
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
                    log::debug!("merge of object {id} stopped by the close: {e}");
                    return;
                }
                Err(e) => {
                    log::warn!("merging the fragments of object {id} failed: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// Merges up to `BLOCKS_PER_MERGE` fragmented blocks of object `id` into new extents in
    /// one commit; requeues it if more remain over the threshold. Returns the bytes written
    /// (0 if a write, another merge or a delete came first: the caller tries later).
    pub(crate) fn merge_object(self: &Arc<Self>, id: u64) -> Result<u64> {
        let Some(objects) = self.objects_tree(false)? else { return Ok(0) };
        let picked: Vec<u64> = {
            let index = self.object_space.fragments();
            let Some(blocks) = index.by_object.get(&id) else { return Ok(0) };
            blocks.keys().take(BLOCKS_PER_MERGE).copied().collect()
        };
        // Each block's map (its extent, the entries over it) under the map lock: commits
        // delete entries under it.
        let mut views: Vec<(u64, MapView)> = Vec::with_capacity(picked.len());
        {
            let _map = self.object_space.map_read(id);
            for &block in &picked {
                let view = self.read_map(id, block, block)?;
                if view.entries.contains_key(&block) {
                    views.push((block, view));
                }
            }
        }
        if views.is_empty() {
            return Ok(0);
        }
        let mut data: Vec<(u64, Vec<u8>)> = Vec::with_capacity(views.len());
        let mut read = 0u64;
        for (block, view) in &views {
            let mut bytes = vec![0u8; BLOCK as usize];
            self.read_blocks(view, *block, *block, &mut bytes)?;
            read += u64::from(!view.extents.is_empty());
            data.push((*block, bytes));
        }
        let refs: Vec<(u64, &[u8])> = data.iter().map(|(b, d)| (*b, &d[..])).collect();
        let (extents, runs) = self.write_blocks(&refs)?;
        // One view of every extent the blocks lie in (blocks may share one).
        let mut all = MapView::default();
        for (_, view) in &views {
            for e in &view.extents {
                if !all.extents.contains(e) {
                    all.extents.push(*e);
                }
            }
        }
        all.extents.sort_by_key(|e| e.first);
        let mut change = self.replacing(&all, &extents, runs);
        change.retarget_merge(
            views.iter().map(|(b, v)| (*b, v.extents.clone(), v.entries[b].clone())).collect(),
        );
        // A merge changes no byte of the object: it need not wait for the log.
        let merged = block_on(self.commit(Durability::None, async || {
            // A write or a delete of the object since the merge read it: try again later.
            let _map = self.object_space.map_write(id);
            if !self.still_current(id, &change)? {
                return Ok(false);
            }
            self.apply_change(&objects, id, &change).await?;
            Ok(true)
        }));
        match merged {
            Ok(true) => {}
            Ok(false) => {
                self.object_space.give_back(&change.new_runs);
                return Ok(0);
            }
            Err(e) => {
                if self.log()?.check().is_ok() {
                    self.object_space.give_back(&change.new_runs);
                }
                return Err(e);
            }
        }
        // (The commit queued the object again if blocks past the threshold remain.)
        self.object_space.merged(data.len() as u64, read);
        Ok(data.len() as u64 * BLOCK)
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
