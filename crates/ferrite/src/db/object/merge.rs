//! The lazy merge of fragments (MixStore's "merged lazily, copy-on-write, once fragments
//! pass a threshold that falls as the tier fills"). Writers count the fragments they leave
//! per object; an object whose fragmented blocks pass the threshold joins the merge queue;
//! a background thread takes queued objects, reads each fragmented block (its extent data,
//! the fragments over it), writes the merged blocks into new pages and swaps them in with
//! one commit per 64 blocks, at most `Options::object_merge_bytes_per_sec`.
//!
//! Threshold: `max(1, 64 × (1 − fill))` fragmented blocks per object, where `fill` is the
//! fragment bytes of all objects over `Options::object_fragment_bytes` (at 0 an object
//! waits for 64 fragmented blocks; at or past the budget every fragment is merged).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::format::{self, decode_fragments, Fragments, BLOCK, KIND_FRAGMENT};
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
    /// Counts fragments a commit left on object `id` (`(blocks, bytes)` changes) and queues
    /// the object for merging if it passed the threshold.
    pub(crate) fn note_fragments(&self, id: u64, (blocks, bytes): (i64, i64)) {
        if blocks == 0 && bytes == 0 {
            return;
        }
        let budget = self.object_space.fragment_budget();
        let mut counts = self.object_space.fragments();
        let entry = counts.by_object.entry(id).or_default();
        entry.0 = entry.0.saturating_add_signed(blocks);
        entry.1 = entry.1.saturating_add_signed(bytes);
        let (object_blocks, empty) = (entry.0, entry.0 == 0);
        if empty {
            counts.by_object.remove(&id);
        }
        counts.bytes = counts.bytes.saturating_add_signed(bytes);
        if object_blocks > 0 && object_blocks >= threshold(counts.bytes, budget) {
            counts.queued.insert(id);
            drop(counts);
            self.object_space.wake_merger();
        }
    }

    /// The merge thread's body: counts the fragments already in the database, then merges
    /// queued objects until the database closes.
    pub(crate) fn merge_in_background(self: Arc<Self>, bytes_per_sec: u64) {
        if let Err(e) = self.count_fragments() {
            log::warn!("counting object fragments failed, no background merge: {e}");
            return;
        }
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

    /// Counts the fragments of every object (at open) and queues those over the threshold.
    fn count_fragments(self: &Arc<Self>) -> Result<()> {
        let Some(objects) = self.objects_tree(false)? else { return Ok(()) };
        let mut found: Vec<(u64, (i64, i64))> = Vec::new();
        for entry in objects.iter() {
            let (key, value) = entry?;
            if let Some((id, KIND_FRAGMENT, _)) = format::parse_key(&key) {
                let bytes = decode_fragments(&value).map(|f| format::fragment_bytes(&f));
                let bytes = bytes.unwrap_or(0) as i64;
                match found.last_mut() {
                    Some((last, counts)) if *last == id => {
                        counts.0 += 1;
                        counts.1 += bytes;
                    }
                    _ => found.push((id, (1, bytes))),
                }
            }
        }
        for (id, delta) in found {
            self.note_fragments(id, delta);
        }
        Ok(())
    }

    /// Merges up to `BLOCKS_PER_MERGE` fragmented blocks of object `id` into new extents in
    /// one commit; requeues it if more remain over the threshold. Returns the bytes written.
    pub(crate) fn merge_object(self: &Arc<Self>, id: u64) -> Result<u64> {
        let Some(objects) = self.objects_tree(false)? else { return Ok(0) };
        let low = format::key(id, KIND_FRAGMENT, 0);
        let high = format::key(id, KIND_FRAGMENT, u64::MAX);
        let mut blocks: Vec<(u64, Vec<u8>, Fragments)> = Vec::new();
        for entry in objects.range(&low[..]..=&high[..]) {
            let (key, value) = entry?;
            let (_, _, block) = format::parse_key(&key).expect("a key of the range");
            let fragments = decode_fragments(&value).map_err(|r| crate::error::Error::Corrupt {
                page: 0,
                file: self.pool.file().path().to_owned(),
                reason: format!("object {id} block {block}: {r}"),
            })?;
            blocks.push((block, value, fragments));
            if blocks.len() == BLOCKS_PER_MERGE {
                break;
            }
        }
        if blocks.is_empty() {
            self.object_space.fragments().forget(id);
            return Ok(0);
        }
        let (first, last) = (blocks[0].0, blocks[blocks.len() - 1].0);
        let view = self.read_map(id, first, last)?;
        let view_extents = view.extents.clone();
        let mut data: Vec<(u64, Vec<u8>)> = Vec::with_capacity(blocks.len());
        for (block, _, fragments) in &blocks {
            let single = MapView {
                extents: view.extents.clone(),
                fragments: [(*block, fragments.clone())].into(),
            };
            let mut bytes = vec![0u8; BLOCK as usize];
            self.read_blocks(&single, *block, *block, &mut bytes)?;
            data.push((*block, bytes));
        }
        let refs: Vec<(u64, &[u8])> = data.iter().map(|(b, d)| (*b, &d[..])).collect();
        let (extents, runs) = self.write_blocks(&refs)?;
        let mut change = self.replacing(&view, &extents, runs);
        change.planned_on = Some((first, last, view));
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
        let bytes: i64 = blocks.iter().map(|(_, _, f)| format::fragment_bytes(f) as i64).sum();
        self.note_fragments(id, (-(blocks.len() as i64), -bytes));
        let read = blocks
            .iter()
            .filter(|(b, _, _)| view_extents.iter().any(|e| e.first <= *b && *b <= e.last))
            .count();
        self.object_space.merged(blocks.len() as u64, read as u64);
        let more = self.object_space.fragments().by_object.get(&id).map_or(0, |c| c.0);
        let budget = self.object_space.fragment_budget();
        let bytes_now = self.object_space.fragments().bytes;
        if more > 0 && more >= threshold(bytes_now, budget) {
            self.object_space.fragments().queued.insert(id);
        }
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
