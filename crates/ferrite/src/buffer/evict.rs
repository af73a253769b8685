//! Clock eviction over the resident set (`resident.rs`): a page the hand passes is marked
//! (`UNLOCKED -> MARKED`); any access clears the mark (second chance); a page still marked
//! when the hand comes round again is a victim: latched, written back if dirty
//! (`write_back.rs`, which follows the log's rule first), then evicted (`-> EVICTED` with a
//! new version, so that optimistic readers of it fail their check) and its frame freed.
//!
//! The clock counts reuse: a page used in many laps of the hand gathers *heat* (up to
//! `HEAT_MAX` laps), and a marked page with heat left spends a lap of it instead of being
//! chosen, so a page used often outlives one used once as recently (see `SEEN`).
//!
//! An inner node gets more chances than a leaf: the clock spares one it chose 31 times in 32
//! (`INNER_CHANCES`). An inner node is on the path of every key below it, so its eviction
//! costs a read for the next access to each of its children: `bench serve` reading 1.3 M
//! items of 1 KiB uniformly through a 128 MiB server read 1.265 pages per GET with no bias,
//! 1.154 with 8 chances and 1.123 with 32 (docs/benchmarks.md). A node an access touched
//! since the hand passed is never chosen, so the bias only decides among cold pages, and a
//! pool of nothing but inner nodes still evicts (one choice in 32).
//!
//! A leaf gets more chances than a Value page in the same way, 63 in 64 (`LEAF_CHANCES`),
//! but only while the clock also chooses Value pages (one of the last `VALUE_WINDOW`
//! choices was one): a leaf holds the keys of tens of values, a Value page one value, so of
//! two pages as cold as each other the Value page is the cheaper to read again. Where
//! leaves hold every value (no Value pages), sparing leaves would only lengthen the sweep,
//! so the clock then takes the first leaf it chooses; and the window bounds the sweep's
//! extra work where Value pages are rare. `bench serve` reading 330 k items of 4 KiB
//! uniformly through a 128 MiB server read 1.49–1.51 pages per GET with no leaf bias, 1.31
//! –1.35 with 4 chances, 1.20 with 16 and 1.14 with 64 (docs/benchmarks.md); its leaves
//! are about half the pool.
//!
//! Two ways in: `evict_batch`, run inline (blocking) by whoever runs short of frames, and
//! `pick_victims` + `write_back_start` + `finish_write_back` / `abort_evict`, the workers'
//! way, cut where the write happens and run on each worker's own share of the clock. A
//! worker writes a dirty victim from a copy and unlatches it for the write's length; the
//! page is evicted when the write lands only if nothing touched it meanwhile (a cooling
//! stage: a victim still in use is kept, and nobody waits for its write).

use std::sync::atomic::{fence, Ordering};

use super::state::{PageState, EVICTED, LOCKED, MARKED, UNLOCKED};
use super::write_back::WriteCheck;
use super::BufferPool;
use crate::error::{Error, PageId, Result};
use crate::format::page::{self, PageKind};
use crate::worker_context;

/// Most victims chosen per eviction round.
const EVICT_BATCH: usize = 64;
/// Pages an eviction round writes in one run at most (victims and their dirty neighbours).
const MAX_RUN: usize = 32;

/// Victims per eviction round for a pool of `pool_pages`: up to 64, but a small fraction of
/// the pool, so that a round never throws out pages that were just read for a waiting user.
pub fn evict_batch_size(pool_pages: u64) -> usize {
    (pool_pages as usize / 16).clamp(1, EVICT_BATCH)
}

/// An inner node the clock chooses is evicted once in this many choices, and spared (its
/// mark cleared) the other times.
const INNER_CHANCES: u32 = 32;

/// A leaf the clock chooses, while it also chooses Value pages, is evicted once in this many
/// choices.
const LEAF_CHANCES: u32 = 64;

/// Leaves are spared only if one of the clock's last this many choices was a Value page.
const VALUE_WINDOW: u32 = 256;

/// Whether the clock's choice number `choice` is the one in `chances` that evicts: decided by
/// a hash of the number, not by `choice % chances`. The hand meets the same pages in the same
/// order every lap, so with a plain remainder a lap of a multiple of `chances` choices would
/// hand the evicting turn to the same page every time, and if that page cannot go (dirty in
/// a read-only open, whose replay is never written) no other page of its kind would go
/// either: a read-only open in the power-cut suite gave up with `PoolExhausted` so. (A
/// multiplicative hash is not enough: laps near a multiple of its period drift slowly.)
fn one_in(choice: u32, chances: u32) -> bool {
    // A 32-bit integer mixer (two multiply-xorshift rounds), then a multiply-shift
    // reduction to `0..chances`.
    let mut x = choice;
    x ^= x >> 16;
    x = x.wrapping_mul(0x7FEB_352D);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846C_A68B);
    x ^= x >> 16;
    (x as u64 * chances as u64) >> 32 == 0
}

/// Per frame (`BufferPool::heat`): `SEEN` once the hand has passed its page, and below it
/// the page's *heat*, the laps of the clock it was used in since (counted when the hand
/// finds it unmarked again), less the laps it spent unused, at most `HEAT_MAX`. A marked
/// page the hand finds with heat left loses one and stays marked instead of being chosen:
/// a page used in many laps outlives a page used once just as recently, so the clock
/// counts reuse without a write on the access path (an access only clears the mark, as
/// before). TPC-C out of memory (4 warehouses, 40 MiB): its read-only item table, each page
/// about 17x as hot as a stock leaf, missed 14 % of its lookups under the plain clock, the
/// stream of stock leaves pushing out its colder pages. Device reads per transaction with
/// `HEAT_MAX` 0 (the plain clock), 1, 3, 7, 15 and 31: 5.44, 5.32, 5.21, 5.14, 5.13, 5.13,
/// page writes 3.66 to 3.37 (docs/benchmarks.md). The larger the bound, the longer a page
/// that was hot lasts once its use stops: 7 laps at most.
const SEEN: u8 = 0x80;
pub(super) const HEAT_MAX: u8 = 7;

/// Fruitless eviction rounds, and time since the first, before a frame is given up for.
const EXHAUSTED_ROUNDS: u32 = 10_000;
pub(super) const EXHAUSTED_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

impl BufferPool {
    /// Takes a free frame, evicting when none is left. Gives up with `PoolExhausted` only
    /// after `EXHAUSTED_ROUNDS` fruitless rounds *and* `EXHAUSTED_AFTER`: on a loaded machine
    /// the holders of the latches may be off the CPU for longer than ten thousand yields take
    /// (a test failed so, with 256 frames, under the parallel test suite on 2 cores).
    pub(super) fn reserve_frame(&self) -> Result<u32> {
        let mut idle_rounds = 0;
        let mut idle_since = None;
        loop {
            if let Some(frame) = self.frame_alloc.take() {
                return Ok(frame);
            }
            if self.evict_batch()? == 0 {
                idle_rounds += 1;
                let since = *idle_since.get_or_insert_with(std::time::Instant::now);
                if idle_rounds > EXHAUSTED_ROUNDS && since.elapsed() >= EXHAUSTED_AFTER {
                    return Err(Error::PoolExhausted { pool_pages: self.pool_pages });
                }
                std::thread::yield_now();
            }
        }
    }

    /// One round of the clock: marks unmarked pages, and evicts up to a batch of pages that
    /// stayed marked since the hand last passed, writing the dirty ones first. Returns how
    /// many pages it evicted.
    pub fn evict_batch(&self) -> Result<usize> {
        let mut victims = [0 as PageId; EVICT_BATCH];
        let batch = evict_batch_size(self.pool_pages);
        let mut found = 0;
        let mut swept = 0;
        // One pass of the hand at most: a page marked now is only evicted if it is still
        // untouched when the hand comes round again (second chance).
        let limit = self.resident.capacity();
        while found < batch && swept < limit {
            self.resident.sweep(64, |page_id| {
                let now = self.table.load(page_id);
                match now.state() {
                    MARKED
                        if found < batch
                            && !self.cooled(page_id)
                            && self.latch_victim(page_id, now) =>
                    {
                        victims[found] = page_id;
                        found += 1;
                    }
                    UNLOCKED => {
                        self.warm(page_id);
                        self.table.cas(page_id, now, now.with_state(MARKED));
                    }
                    _ => {}
                }
            });
            swept += 64;
        }
        // Latched by the sweep (`latch_victim`); given back unchanged if not evicted.
        let unlatch = |page_id: PageId| {
            self.chill(page_id);
            let now = self.table.load(page_id);
            self.table.store(page_id, now.bumped(UNLOCKED));
        };
        let (written, failure) = self.write_victims(&mut victims[..found], &unlatch);
        // `finish_evict_many` counts the evictions.
        self.finish_evict_many(&written);
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(written.len())
    }

    /// Writes the dirty ones of the latched `victims` back, as eviction one by one
    /// would one by one, but with one wait for the log for all of them and one write per run
    /// of consecutive pages (a bulk load evicts its leaves in the order it filled them:
    /// dozens of writes become one). Returns the victims that may be evicted (clean, or
    /// written) and the first error; every other victim is given to `unlatch`.
    fn write_victims(
        &self,
        victims: &mut [PageId],
        unlatch: &dyn Fn(PageId),
    ) -> (Vec<PageId>, Option<Error>) {
        let mut done = Vec::with_capacity(victims.len());
        let mut to_write = Vec::with_capacity(victims.len());
        let mut log_first = 0;
        let mut failure = None;
        for &page_id in victims.iter() {
            match self.write_check(page_id) {
                Ok(WriteCheck::Clean) => done.push(page_id),
                Ok(WriteCheck::Ready) => to_write.push(page_id),
                // A worker whose own ring carries the log's flush cannot wait for it here.
                Ok(WriteCheck::LogFirst(_)) if worker_context::log_flush_in_flight() => {
                    unlatch(page_id)
                }
                Ok(WriteCheck::LogFirst(lsn)) => {
                    log_first = log_first.max(lsn);
                    to_write.push(page_id);
                }
                Ok(WriteCheck::Pinned) => unlatch(page_id),
                Err(e) => {
                    failure.get_or_insert(e);
                    unlatch(page_id);
                }
            }
        }
        if failure.is_none() && log_first > 0 {
            if let Err(e) = self.attached_log().flush(log_first) {
                failure = Some(e);
            }
        }
        if failure.is_some() {
            // After a failure the batch stays in memory.
            to_write.iter().for_each(|&page_id| unlatch(page_id));
            return (done, failure);
        }
        to_write.sort_unstable();
        let mut rest = &to_write[..];
        let mut run = Vec::with_capacity(MAX_RUN);
        while let Some(&first) = rest.first() {
            let victims = 1 + rest.windows(2).take_while(|w| w[1] == w[0] + 1).count();
            let (pages, later) = rest.split_at(victims.min(MAX_RUN));
            rest = later;
            if failure.is_some() {
                pages.iter().for_each(|&page_id| unlatch(page_id));
                continue;
            }
            // Dirty pages right after the run go out with it and stay in memory, clean.
            run.clear();
            run.extend_from_slice(pages);
            let neighbours = self.latch_dirty_neighbours(&mut run, rest.first().copied());
            match self.write_run(first, &run) {
                Ok(()) => done.extend_from_slice(pages),
                Err(e) => {
                    pages.iter().for_each(|&page_id| unlatch(page_id));
                    failure = Some(e);
                }
            }
            drop(neighbours);
        }
        (done, failure)
    }

    /// Extends `run` (consecutive latched pages) with the pages after it that are in memory,
    /// free to latch at once, dirty and ready to write (`WriteCheck::Ready`), up to
    /// [`MAX_RUN`] pages and not into `stop` (the next victim). Returns their latches. Pages
    /// written in order with their neighbours make one write where a bulk load's leaves would
    /// each be evicted, later, with a write of their own.
    fn latch_dirty_neighbours(
        &self,
        run: &mut Vec<PageId>,
        stop: Option<PageId>,
    ) -> Vec<super::ExclusiveGuard<'_>> {
        let mut guards = Vec::new();
        while run.len() < MAX_RUN {
            let next = run.last().expect("a run holds its victims") + 1;
            if Some(next) == stop || next >= self.page_count() {
                break;
            }
            let Ok(guard) = self.lock_exclusive_any(next) else { break };
            let memory = self.page_mut(next);
            let dirty = memory[page::OFFSET_FLAGS] & page::FLAG_DIRTY != 0;
            // `write_check` only for a dirty page: on a clean one it could append an image.
            if !dirty || !matches!(self.write_check(next), Ok(WriteCheck::Ready)) {
                break;
            }
            run.push(next);
            guards.push(guard);
        }
        guards
    }

    /// Slots in the resident set, for callers that keep their own clock hand.
    pub fn clock_slots(&self) -> u64 {
        self.resident.capacity()
    }

    /// One sweep of a caller's clock hand over slots `start..start + count`: marks unmarked
    /// pages and latches (exclusively) up to `max` pages that stayed marked, into `victims`.
    /// Each victim then goes to `write_back_start` and `finish_evict_many` (or `abort_evict`).
    pub fn pick_victims(&self, start: u64, count: u64, max: usize, victims: &mut Vec<PageId>) {
        self.resident.sweep_slots(start, count, |page_id| {
            if victims.len() >= max {
                return;
            }
            let now = self.table.load(page_id);
            match now.state() {
                MARKED if !self.cooled(page_id) && self.latch_victim(page_id, now) => {
                    victims.push(page_id)
                }
                UNLOCKED => {
                    self.warm(page_id);
                    self.table.cas(page_id, now, now.with_state(MARKED));
                }
                _ => {}
            }
        });
    }

    /// The hand found `page_id` used since it last passed: one more lap of use.
    #[inline]
    fn warm(&self, page_id: PageId) {
        // (Unlatched: the frame may change hands meanwhile; the heat is a hint.)
        let Some(heat) = self.heat.get(self.table.frame(page_id) as usize) else { return };
        let now = heat.load(Ordering::Relaxed);
        let next = match now & SEEN {
            0 => SEEN,
            _ => SEEN | ((now & !SEEN) + 1).min(HEAT_MAX),
        };
        heat.store(next, Ordering::Relaxed);
    }

    /// The hand found `page_id` unused for a whole lap: true (and one lap less) if it has
    /// laps of use to spend, so it stays marked.
    #[inline]
    fn cooled(&self, page_id: PageId) -> bool {
        let Some(heat) = self.heat.get(self.table.frame(page_id) as usize) else { return false };
        let now = heat.load(Ordering::Relaxed);
        if now & !SEEN == 0 {
            return false;
        }
        heat.store(now - 1, Ordering::Relaxed);
        true
    }

    /// Victim `page_id`, latched, goes back unmarked but unused: the hand's next pass must
    /// not count a lap of use (with `SEEN` cleared it only sets it). Its heat was nothing
    /// (`cooled`).
    fn chill(&self, page_id: PageId) {
        if let Some(heat) = self.heat.get(self.table.frame(page_id) as usize) {
            heat.store(0, Ordering::Relaxed);
        }
    }

    /// Latches marked page `page_id` (state word `now`) as a victim; false if it changed
    /// meanwhile, or if the clock spares it this time: an inner node, 31 choices in 32
    /// (`INNER_CHANCES`); a leaf, 63 in 64 while Value pages are chosen too (`LEAF_CHANCES`).
    /// (The caller checked first that it had no heat left: `cooled`.)
    /// A spared page is unmarked (back to `UNLOCKED` at the same version: nothing changed),
    /// so it gets a full second chance. One latch serves both the look at the page's kind
    /// and the eviction.
    fn latch_victim(&self, page_id: PageId, now: PageState) -> bool {
        if !self.table.cas(page_id, now, now.with_state(LOCKED)) {
            return false;
        }
        fence(Ordering::Release);
        // Latched: the frame holds this page until released.
        let spare = &self.clock_spares;
        let choice = spare.choices.fetch_add(1, Ordering::Relaxed);
        let spared = match page::kind_of(self.page_mut(page_id)) {
            Some(PageKind::Inner) => !one_in(choice, INNER_CHANCES),
            Some(PageKind::Leaf) => {
                choice.wrapping_sub(spare.last_value.load(Ordering::Relaxed)) < VALUE_WINDOW
                    && !one_in(choice, LEAF_CHANCES)
            }
            Some(PageKind::Value) => {
                spare.last_value.store(choice, Ordering::Relaxed);
                false
            }
            _ => false,
        };
        if spared {
            self.chill(page_id);
            self.table.store(page_id, now.with_state(UNLOCKED));
            return false;
        }
        true
    }

    /// Evicts latched victims whose contents are on disk, putting their frames back on the
    /// free list in one batch.
    pub fn finish_evict_many(&self, page_ids: &[PageId]) {
        if page_ids.is_empty() {
            return;
        }
        let mut frames = [0u32; EVICT_BATCH];
        for chunk in page_ids.chunks(EVICT_BATCH) {
            for (frame, &page_id) in frames.iter_mut().zip(chunk) {
                let now = self.table.load(page_id);
                debug_assert_eq!(now.state(), LOCKED);
                *frame = self.table.frame(page_id);
                self.offer_to_tier(page_id);
                self.resident.remove(page_id);
                // From here on optimistic readers of the page fail their version check, so
                // its frame may go to another page.
                self.table.store(page_id, now.bumped(EVICTED));
            }
            self.give_frames(frames[..chunk.len()].iter().copied());
        }
        self.counters.evictions.fetch_add(page_ids.len() as u64, Ordering::Relaxed);
    }

    /// Gives up evicting a latched victim (it must wait for the log, for its commit, or for
    /// its write in flight): it stays, dirty or clean as it was.
    ///
    /// Regression: this marked the page dirty. A victim chosen again while its copy was
    /// being written (`WRITING`, clean since the seal) was dirtied by nothing but this, so
    /// the landed write never freed it and it was written again, for ever: with a 2 MiB
    /// pool the workers rewrote the same ~480 pages about 100,000 times a second and never
    /// shut down (the bench's `every_workload_runs_as_tasks_and_as_threads`, 1 run in 3).
    pub fn abort_evict(&self, page_id: PageId) {
        self.chill(page_id);
        self.unlock_exclusive(page_id, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every page the hand meets gets the evicting turn now and then, whatever the lap's
    /// length: for laps of 1 to 70,000 choices, each of four places in the lap is the
    /// evicting choice within 40 times `chances` laps. Regression: with `choice % chances`
    /// a lap of 64 leaf choices gave the turn to one page forever, and a read-only open in
    /// the power-cut suite, that page dirty, gave up with `PoolExhausted`.
    #[test]
    fn every_place_in_a_lap_gets_the_evicting_turn() {
        for chances in [INNER_CHANCES, LEAF_CHANCES] {
            for lap in 1..=70_000u32 {
                for place in [0, lap / 3, lap / 2, lap - 1] {
                    let turn = (0..40 * chances)
                        .any(|k| one_in(place.wrapping_add(k.wrapping_mul(lap)), chances));
                    assert!(turn, "lap {lap}, place {place}, 1 in {chances}: never evicted");
                }
            }
        }
        // And the turns are about one in `chances`.
        let evicting = (0..1 << 20).filter(|&c| one_in(c, LEAF_CHANCES)).count();
        assert!((evicting as f64 / (1 << 20) as f64 - 1.0 / 64.0).abs() < 0.001);
    }
}
