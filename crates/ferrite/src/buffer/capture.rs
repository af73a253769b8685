//! What one commit changed, page by page, gathered while it runs and handed, when it ends,
//! to the log that encodes it as the commit's record (`WriteAhead::encode_commit`).
//!
//! Only one commit runs at a time (the database's commit lock), so the pool keeps a single
//! capture. A page enters it on its first change in the commit, with a copy of its bytes
//! before the change (*changed*, logged as its differences from the copy), as a page the
//! commit allocated (*new*: logged against a zeroed page), or as freed. A change made
//! through `ExclusiveGuard::change_tracked` (a leaf's put or delete, the commits' usual
//! change) needs no copy: it reports the byte ranges it wrote, which are logged as they are
//! at the commit's end. A page changed both ways is logged as the ranges reported plus its
//! differences from a copy made at its first untracked change. A page first changed and
//! then freed is just freed; a page freed and allocated again is new. While a commit runs, every page it changed is *pinned* (a bit
//! in the pool's translation table, `page_table.rs`), so no write-back takes it before its
//! record is in the log; `BufferPool::stamp` then gives it the record's LSN and unpins it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::page_table::{set_epoch, PINNED};
use super::{Attempt, BufferPool, Interrupt};
use crate::error::PageId;
use crate::format::page;

#[derive(Debug)]
enum Change {
    /// Changed: the ranges tracked changes wrote, and the page's bytes before its first
    /// untracked change (`diffed`), if it had one. In debug builds a page changed only by
    /// tracked changes keeps its bytes before them here too (`diffed` false), to check at
    /// the commit's end that the ranges cover every byte that changed.
    Changed {
        before: Option<Box<[u8]>>,
        diffed: bool,
        written: Vec<(u16, u16)>,
    },
    New,
    Freed,
}

/// The pages one commit changed.
#[derive(Debug, Default)]
pub struct Capture {
    /// Where each page is in `pages`, kept only once a commit has more than
    /// `LINEAR_PAGES` (most change one leaf or two: a scan of `pages` is cheaper).
    index: HashMap<PageId, usize>,
    pages: Vec<(PageId, Change)>,
    /// Runs of object data pages allocated (`true`) or freed: `(first, pages, allocated)`.
    data: Vec<(PageId, u16, bool)>,
    /// Page copies of earlier commits, reused for the next before-images.
    spare: Vec<Box<[u8]>>,
}

/// Adds `ranges` (`(start, end)` byte offsets, any order) to `written`, which stays sorted and
/// holds no two ranges that overlap or touch. A leaf that takes ten inserts in a commit
/// (TPC-C's order lines) is written in the same header fields, hints and growing runs of
/// slots and heap each time: kept merged, its ranges stay a handful, and the commit's record
/// sorts a handful instead of fifty (the sort was 1.3 % of TPC-C's CPU in memory).
fn add_ranges(written: &mut Vec<(u16, u16)>, ranges: &[(u16, u16)]) {
    for &(start, end) in ranges {
        if start >= end {
            continue;
        }
        // The ranges that overlap or touch the new one: from the first that ends at or after
        // its start to the last that starts at or before its end.
        let first = written.partition_point(|&(_, e)| e < start);
        let mut last = first;
        let (mut joined_start, mut joined_end) = (start, end);
        while last < written.len() && written[last].0 <= end {
            joined_start = joined_start.min(written[last].0);
            joined_end = joined_end.max(written[last].1);
            last += 1;
        }
        if first == last {
            written.insert(first, (start, end));
        } else {
            written[first] = (joined_start, joined_end);
            written.drain(first + 1..last);
        }
    }
}

/// Pages a commit may change before `Capture` indexes them.
const LINEAR_PAGES: usize = 8;
/// Page copies kept for reuse between commits.
const SPARE_COPIES: usize = 16;

impl Capture {
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty() && self.data.is_empty()
    }

    pub fn clear(&mut self) {
        self.index.clear();
        self.data.clear();
        for (_, change) in self.pages.drain(..) {
            if let Change::Changed { before: Some(copy), .. } = change {
                if self.spare.len() < SPARE_COPIES {
                    self.spare.push(copy);
                }
            }
        }
    }

    fn position(&self, page_id: PageId) -> Option<usize> {
        if self.pages.len() <= LINEAR_PAGES {
            self.pages.iter().position(|(id, _)| *id == page_id)
        } else {
            self.index.get(&page_id).copied()
        }
    }

    fn entry(&mut self, page_id: PageId) -> Option<&mut Change> {
        let at = self.position(page_id)?;
        Some(&mut self.pages[at].1)
    }

    fn push(&mut self, page_id: PageId, change: Change) {
        self.pages.push((page_id, change));
        if self.pages.len() == LINEAR_PAGES + 1 {
            self.index.extend(self.pages.iter().enumerate().map(|(at, (id, _))| (*id, at)));
        } else if self.pages.len() > LINEAR_PAGES {
            self.index.insert(page_id, self.pages.len() - 1);
        }
    }

    /// A copy of `page`, in a spare buffer if there is one.
    fn copy(&mut self, page: &[u8]) -> Box<[u8]> {
        match self.spare.pop() {
            Some(mut copy) if copy.len() == page.len() => {
                copy.copy_from_slice(page);
                copy
            }
            _ => page.into(),
        }
    }

    /// Notes an untracked change to `page_id`, whose bytes are `before`; returns whether it
    /// is the page's first in this commit (the caller then pins it).
    pub fn note_change(&mut self, page_id: PageId, before: &[u8]) -> bool {
        let Some(at) = self.position(page_id) else {
            let copy = self.copy(before);
            let written = Vec::new();
            self.push(page_id, Change::Changed { before: Some(copy), diffed: true, written });
            return true;
        };
        if let Change::Changed { diffed: false, .. } = &self.pages[at].1 {
            // Tracked changes so far: diffed from here on.
            #[cfg(debug_assertions)]
            if let Change::Changed { before: Some(start), written, .. } = &self.pages[at].1 {
                check_written(page_id, start, before, written);
            }
            let copy = self.copy(before);
            if let Change::Changed { before: old, diffed, .. } = &mut self.pages[at].1 {
                if let Some(old) = old.replace(copy) {
                    self.spare.push(old);
                }
                *diffed = true;
            }
        }
        false
    }

    /// Notes that a tracked change (`note_written`) is about to change `page_id`, whose
    /// bytes are `before`; returns whether it is the page's first change in this commit.
    pub fn note_tracked(&mut self, page_id: PageId, before: &[u8]) -> bool {
        if self.position(page_id).is_some() {
            return false;
        }
        // (Kept only to check the ranges: see `Change::Changed`.)
        let before = cfg!(debug_assertions).then(|| self.copy(before));
        self.push(page_id, Change::Changed { before, diffed: false, written: Vec::new() });
        true
    }

    /// `note_tracked` and `note_written` at once, after the change: the ranges a tracked
    /// change of `page_id` wrote, merged into the page's (`add_ranges`); returns whether it
    /// is the page's first change in this commit (the caller then pins it).
    pub fn note_tracked_after(&mut self, page_id: PageId, ranges: Vec<(u16, u16)>) -> bool {
        match self.entry(page_id) {
            Some(Change::Changed { written, .. }) => {
                add_ranges(written, &ranges);
                false
            }
            Some(Change::New | Change::Freed) => false,
            None => {
                let mut written = Vec::with_capacity(ranges.len());
                add_ranges(&mut written, &ranges);
                let change = Change::Changed { before: None, diffed: false, written };
                self.push(page_id, change);
                true
            }
        }
    }

    /// Notes the ranges a tracked change of `page_id` wrote.
    pub fn note_written(&mut self, page_id: PageId, ranges: &[(u16, u16)]) {
        match self.entry(page_id) {
            Some(Change::Changed { written, .. }) => add_ranges(written, ranges),
            // (A new page is logged whole; a freed one is not changed.)
            Some(Change::New | Change::Freed) => {}
            None => panic!("page {page_id} written by a tracked change it was not noted for"),
        }
    }

    /// Notes that the commit allocated `page_id` (zeroed).
    pub fn note_new(&mut self, page_id: PageId) {
        match self.entry(page_id) {
            Some(change) => *change = Change::New,
            None => self.push(page_id, Change::New),
        }
    }

    /// Notes that the commit freed `page_id`.
    pub fn note_freed(&mut self, page_id: PageId) {
        match self.entry(page_id) {
            Some(change) => *change = Change::Freed,
            None => self.push(page_id, Change::Freed),
        }
    }

    /// Notes a run of object data pages the commit allocated (`allocated`) or freed.
    pub fn note_data(&mut self, first: PageId, pages: u16, allocated: bool) {
        self.data.push((first, pages, allocated));
    }

    /// Pages whose bytes the commit leaves (changed or new): they get the record's LSN.
    pub fn kept_pages(&self) -> impl Iterator<Item = PageId> + '_ {
        self.pages.iter().filter(|(_, c)| !matches!(c, Change::Freed)).map(|(id, _)| *id)
    }

    /// The changes, in the order first made: `page(id)` gives a page's bytes now.
    pub fn changes<'a>(&'a self, page: impl Fn(PageId) -> &'a [u8]) -> Vec<PageChange<'a>> {
        let change = |(page_id, change): &'a (PageId, Change)| {
            let page_id = *page_id;
            match change {
                Change::Changed { before, diffed, written } => {
                    let now = page(page_id);
                    #[cfg(debug_assertions)]
                    if let (Some(start), false) = (before, diffed) {
                        check_written(page_id, start, now, written);
                    }
                    let before = before.as_deref().filter(|_| *diffed);
                    PageChange::Changed { page_id, before, written, now }
                }
                Change::New => PageChange::New { page_id, now: page(page_id) },
                Change::Freed => PageChange::Freed { page_id },
            }
        };
        let data = self.data.iter().map(|&(first, pages, allocated)| match allocated {
            true => PageChange::DataNew { first, pages },
            false => PageChange::DataFreed { first, pages },
        });
        self.pages.iter().map(change).chain(data).collect()
    }
}

/// Panics unless `written` covers every byte (but those a commit record skips) in which
/// `now` differs from `before`: a tracked change that wrote outside the ranges it noted
/// would be lost by recovery.
#[cfg(debug_assertions)]
fn check_written(page_id: PageId, before: &[u8], now: &[u8], written: &[(u16, u16)]) {
    // (The checksum, the flags byte and the LSN: set at write-back and by the stamp.)
    let skipped = |at: usize| at < 4 || at == page::OFFSET_FLAGS || (16..24).contains(&at);
    for at in (0..before.len()).filter(|&at| before[at] != now[at] && !skipped(at)) {
        let covered =
            written.iter().any(|&(from, to)| usize::from(from) <= at && at < usize::from(to));
        assert!(covered, "page {page_id}: byte {at} changed outside the ranges noted: {written:?}");
    }
}

/// One page's change in a commit, as the log encodes it.
#[derive(Debug, Clone, Copy)]
pub enum PageChange<'a> {
    /// Changed: the ranges tracked changes wrote, and its differences from `before`.
    Changed {
        /// The page.
        page_id: PageId,
        /// Its bytes before its first untracked change in the commit, if it had one.
        before: Option<&'a [u8]>,
        /// The ranges tracked changes wrote, `(start, end)`: in any order, may overlap.
        written: &'a [(u16, u16)],
        /// Its bytes now.
        now: &'a [u8],
    },
    /// Allocated by the commit: its bytes now, logged against a zeroed page.
    New {
        /// The page.
        page_id: PageId,
        /// Its bytes now.
        now: &'a [u8],
    },
    /// Freed by the commit.
    Freed {
        /// The page.
        page_id: PageId,
    },
    /// A run of object data pages the commit allocated (their bytes are not logged).
    DataNew {
        /// The run's first page.
        first: PageId,
        /// Pages in the run.
        pages: u16,
    },
    /// A run of object data pages the commit freed.
    DataFreed {
        /// The run's first page.
        first: PageId,
        /// Pages in the run.
        pages: u16,
    },
}

/// The capture as the pool keeps it: the changes, and whether a commit is capturing (read
/// without the lock on every page change).
#[derive(Debug, Default)]
pub(super) struct CaptureState {
    changes: Mutex<Capture>,
    capturing: AtomicBool,
    /// A commit failed after changing pages: they stay pinned for good (`abandon_capture`).
    abandoned: AtomicBool,
}

thread_local! {
    /// Whether this thread is running the commit in progress (a poll of its body,
    /// [`in_commit`]): its reads see its own changes.
    static IN_COMMIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

thread_local! {
    /// Whether this thread's reads may see the commit in progress (`read_uncommitted`).
    static UNCOMMITTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Lets this thread's reads see pages the commit in progress changed (`true`) instead of
/// waiting for them, or not; returns the earlier setting. For readers that hold a lock a
/// commit may wait for (an object's map lock), whose lock keeps what they read whole.
pub fn read_uncommitted(on: bool) -> bool {
    UNCOMMITTED.replace(on)
}

/// Whether this thread's reads must not wait for the commit in progress: they are its own
/// (`in_commit`), they hold a lock it may wait for (`read_uncommitted`), or they are a
/// blocking call inside a task, which may be waiting for a commit only its own worker's
/// loop can finish.
pub fn reads_must_not_wait() -> bool {
    IN_COMMIT.get() || UNCOMMITTED.get() || crate::worker_context::in_blocking_call_on_worker()
}

/// Runs `body`, a commit's body, with every poll of it marked as the commit's own (so its
/// reads see the pages it changed, which other readers wait for: [`BufferPool::committed`]).
/// Marked per poll, not per thread: a task that yields lets other tasks of its worker run
/// as plain readers.
pub async fn in_commit<T>(body: impl std::future::Future<Output = T>) -> T {
    /// Puts the flag back as it was, even if the poll panics (a worker catches a task's
    /// panic and runs other tasks on the thread).
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_COMMIT.set(self.0);
        }
    }
    let mut body = std::pin::pin!(body);
    std::future::poll_fn(|cx| {
        let _restore = Restore(IN_COMMIT.replace(true));
        body.as_mut().poll(cx)
    })
    .await
}

/// A commit's changes, as the pool gathers them and the log gets them.
impl BufferPool {
    /// Whether page `page_id`, just read (its version validated), holds only committed
    /// changes: `Restart` while a commit in progress has changed it (pinned), so that no reader
    /// sees part of a commit (a batch or transaction is visible whole or not at all; the
    /// commit unpins its pages once its record is appended). The commit's own reads pass;
    /// after a commit that failed half-way (the log is failed), its pages fail every read.
    #[inline(always)]
    pub fn committed(&self, page_id: PageId) -> Attempt<()> {
        if self.table.log_state(page_id).load(Ordering::Acquire) & PINNED == 0 {
            return Ok(());
        }
        self.pinned_read(page_id)
    }

    #[cold]
    fn pinned_read(&self, page_id: PageId) -> Attempt<()> {
        if reads_must_not_wait() {
            return Ok(());
        }
        if self.capture.abandoned.load(Ordering::Acquire) {
            return Err(Interrupt::Error(crate::error::Error::LogFailed {
                reason: format!(
                    "page {page_id} holds changes of a commit that failed half-way; reopen the database"
                ),
            }));
        }
        Err(Interrupt::Restart)
    }

    /// Whether a commit's changes are being captured.
    #[inline(always)]
    pub(super) fn capturing(&self) -> bool {
        self.capture.capturing.load(Ordering::Acquire)
    }

    /// Whether a commit is being captured and changed pages already.
    pub(super) fn captured_changes(&self) -> bool {
        self.capturing() && !self.capture.changes.lock().unwrap().is_empty()
    }

    /// Starts capturing a commit's changes (the caller holds the commit lock).
    pub fn begin_capture(&self) {
        debug_assert!(self.capture.changes.lock().unwrap().is_empty());
        self.versions.begin();
        self.capture.capturing.store(true, Ordering::Release);
    }

    pub(super) fn note_change(&self, page_id: PageId) {
        let memory = self.page_mut(page_id);
        if self.capture.changes.lock().unwrap().note_change(page_id, memory) {
            self.keep_image(page_id, memory);
            self.table.log_state(page_id).fetch_or(PINNED, Ordering::AcqRel);
        }
    }

    pub(super) fn note_tracked(&self, page_id: PageId) {
        let memory = self.page_mut(page_id);
        if self.capture.changes.lock().unwrap().note_tracked(page_id, memory) {
            self.keep_image(page_id, memory);
            self.table.log_state(page_id).fetch_or(PINNED, Ordering::AcqRel);
        }
    }

    /// Whether a tracked change of `page_id` may be noted after it is made, in one step
    /// (`note_tracked_change`): when no snapshot needs an image of the page from before it.
    /// (A snapshot that begins during the commit reads the commit's result, and needs no
    /// image of it.) Debug builds take this way for odd page ids only: the even ones keep
    /// the check of their ranges against a copy from before (`Capture::changes`), and the
    /// tests, which run debug builds, recover commits noted both ways.
    pub(super) fn notes_after_change(&self, page_id: PageId) -> bool {
        (!cfg!(debug_assertions) || page_id % 2 == 1) && !self.versions.imaging()
    }

    /// `note_tracked` and `note_written` in one, after the change (`notes_after_change`):
    /// one lock of the capture instead of two. The caller held the page's exclusive latch since before the change, so the page is
    /// pinned before anyone else can see it changed.
    pub(super) fn note_tracked_change(&self, page_id: PageId, ranges: Vec<(u16, u16)>) {
        if self.capture.changes.lock().unwrap().note_tracked_after(page_id, ranges) {
            self.table.log_state(page_id).fetch_or(PINNED, Ordering::AcqRel);
        }
    }

    pub(super) fn note_written(&self, page_id: PageId, ranges: &[(u16, u16)]) {
        self.capture.changes.lock().unwrap().note_written(page_id, ranges);
    }

    pub(super) fn note_new(&self, page_id: PageId) {
        if !self.capturing() {
            return;
        }
        self.capture.changes.lock().unwrap().note_new(page_id);
        // Logged whole: counts as an image for the current epoch.
        let epoch = self.epochs.started.load(Ordering::Acquire);
        let log_state = self.table.log_state(page_id);
        set_epoch(log_state, epoch);
        log_state.fetch_or(PINNED, Ordering::AcqRel);
    }

    pub(super) fn note_freed(&self, page_id: PageId) {
        if let Some(tier) = &self.tier {
            tier.invalidate(page_id);
        }
        if self.capturing() {
            self.capture.changes.lock().unwrap().note_freed(page_id);
        }
    }

    /// Notes, in the running commit, a run of object data pages it allocated (`allocated`)
    /// or freed. Such pages never enter the pool: only their allocation is logged.
    pub fn note_data(&self, first: PageId, pages: u16, allocated: bool) {
        assert!(self.capturing(), "object data pages change only inside a commit");
        self.capture.changes.lock().unwrap().note_data(first, pages, allocated);
    }

    /// Ends the capture: the commit record of what changed, encoded by the attached log
    /// (`None` if nothing changed), and the pages to stamp with its LSN once appended
    /// (`stamp`).
    pub fn finish_capture(&self, next_tree_id: u64) -> Option<(Vec<u8>, Vec<PageId>)> {
        self.capture.capturing.store(false, Ordering::Release);
        let mut capture = self.capture.changes.lock().unwrap();
        if capture.is_empty() {
            return None;
        }
        let log = self.log.get().expect("a commit needs a log");
        // The pages are pinned (not written, not evicted while dirty) and only this commit
        // changes them, so their bytes are stable here.
        let record = log.encode_commit(next_tree_id, &capture.changes(|id| &*self.page_mut(id)));
        let pages = capture.kept_pages().collect();
        capture.clear();
        Some((record, pages))
    }

    /// Gives the pages a commit changed its record's LSN, which unpins them.
    pub fn stamp(&self, pages: &[PageId], lsn: u64) {
        for &page_id in pages {
            loop {
                match self.lock_exclusive_any(page_id) {
                    Ok(guard) => {
                        page::set_lsn(self.page_mut(page_id), lsn);
                        self.table.log_state(page_id).fetch_and(!PINNED, Ordering::AcqRel);
                        drop(guard);
                        break;
                    }
                    Err(Interrupt::Restart) => std::hint::spin_loop(),
                    Err(e) => panic!("page {page_id}, pinned by its commit, is gone: {e:?}"),
                }
            }
        }
    }

    /// Abandons the capture of a commit that failed half-way: its pages stay pinned (they
    /// hold changes no record describes), so nothing of it can reach the disk; the caller
    /// fails the log, and the database must be reopened.
    pub fn abandon_capture(&self) -> bool {
        self.capture.capturing.store(false, Ordering::Release);
        let mut capture = self.capture.changes.lock().unwrap();
        let changed = !capture.is_empty();
        capture.clear();
        if changed {
            self.capture.abandoned.store(true, Ordering::Release);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::page::PAGE_SIZE;

    fn page(fill: u8) -> Vec<u8> {
        vec![fill; PAGE_SIZE]
    }

    /// `add_ranges` keeps a page's written ranges sorted, apart and covering exactly the
    /// bytes of every range added (against a byte map), for random ranges, empty ones,
    /// nested ones and ones that only touch.
    #[test]
    fn written_ranges_stay_sorted_apart_and_cover_what_was_added() {
        let mut rng = crate::testing::Rng::new(0x5a5e);
        for round in 0..200 {
            let mut written = Vec::new();
            let mut covered = vec![false; 600];
            for _ in 0..(1 + round % 40) {
                let start = rng.index(560) as u16;
                let end = start + rng.index(40) as u16;
                let batch = [(start, end), (end, end + rng.index(3) as u16)];
                add_ranges(&mut written, &batch);
                for (s, e) in batch {
                    covered[usize::from(s)..usize::from(e)].fill(true);
                }
                assert!(written.windows(2).all(|w| w[0].1 < w[1].0), "{written:?}");
                assert!(written.iter().all(|&(s, e)| s < e), "{written:?}");
                let mut noted = vec![false; 600];
                for &(s, e) in &written {
                    noted[usize::from(s)..usize::from(e)].fill(true);
                }
                assert_eq!(noted, covered, "round {round}: {written:?}");
            }
        }
    }

    /// A tracked change noted after it is made (`note_tracked_after`: release builds with
    /// no snapshot) leaves the capture as noting the page before the change and its ranges
    /// after does: each page once, in the order first changed, with all its ranges in
    /// order; a page the commit allocated stays new. Past the linear scan too.
    #[test]
    fn tracked_changes_noted_after_match_those_noted_before() {
        let (mut two_steps, mut one_step) = (Capture::default(), Capture::default());
        two_steps.note_new(11);
        one_step.note_new(11);
        let mut steps: Vec<(PageId, Vec<(u16, u16)>)> = vec![
            (3, vec![(10, 20)]),
            (5, vec![(30, 40), (50, 60)]),
            (3, vec![(100, 110)]),
            (9, vec![]),
            (11, vec![(1, 2)]),
            (5, vec![(70, 80)]),
        ];
        steps.extend((0..3 * LINEAR_PAGES as u64).map(|i| (100 + i % 13, vec![(i as u16, 200)])));
        let unchanged = page(0);
        for (id, ranges) in &steps {
            let first = two_steps.note_tracked(*id, &unchanged);
            two_steps.note_written(*id, ranges);
            assert_eq!(one_step.note_tracked_after(*id, ranges.clone()), first, "page {id}");
        }
        type Summary = Vec<(PageId, &'static str, Vec<(u16, u16)>)>;
        let summary = |capture: &Capture| -> Summary {
            let changes = capture.changes(|_| &unchanged[..]);
            changes
                .iter()
                .map(|change| match *change {
                    PageChange::Changed { page_id, before, written, .. } => {
                        assert!(before.is_none(), "page {page_id}: tracked changes only");
                        (page_id, "changed", written.to_vec())
                    }
                    PageChange::New { page_id, .. } => (page_id, "new", Vec::new()),
                    _ => panic!("only changed and new pages were noted"),
                })
                .collect()
        };
        let expected = summary(&two_steps);
        assert_eq!(expected.len(), 4 + 13, "11, 3, 5, 9 and thirteen more");
        assert_eq!(expected[2], (5, "changed", vec![(30, 40), (50, 60), (70, 80)]));
        assert_eq!(summary(&one_step), expected);
    }

    #[test]
    fn pages_are_noted_once_past_the_linear_scan_and_again_after_clear() {
        let mut capture = Capture::default();
        for round in 0..3u8 {
            // More pages than the linear scan covers, so the index takes over mid-commit.
            for id in 0..(3 * LINEAR_PAGES as u64) {
                assert!(capture.note_change(id * 7, &page(round)), "first change of {id}");
                assert!(!capture.note_change(id * 7, &page(99)), "second change of {id}");
            }
            capture.note_freed(7);
            capture.note_new(7);
            capture.note_freed(14 * 7);
            capture.note_new(1000);
            let kept: Vec<PageId> = capture.kept_pages().collect();
            assert_eq!(kept.len(), 3 * LINEAR_PAGES + 1 - 1, "all but the freed one, plus 1000");
            assert!(kept.contains(&7) && kept.contains(&1000) && !kept.contains(&(14 * 7)));
            // The before-images are the first ones (reused copies are overwritten).
            let now = page(round + 1);
            let changes = capture.changes(|_| &now[..]);
            assert_eq!(changes.len(), 3 * LINEAR_PAGES + 1);
            for change in &changes {
                match *change {
                    PageChange::Changed { page_id, before, now, .. } => {
                        let before = before.expect("untracked changes are diffed");
                        assert!(before.iter().all(|&b| b == round), "page {page_id} before");
                        assert!(now.iter().all(|&b| b == round + 1), "page {page_id} now");
                    }
                    PageChange::New { page_id, .. } => assert!([7, 1000].contains(&page_id)),
                    PageChange::Freed { page_id } => assert_eq!(page_id, 14 * 7),
                    PageChange::DataNew { .. } | PageChange::DataFreed { .. } => {
                        panic!("no data runs were noted")
                    }
                }
            }
            capture.clear();
            assert!(capture.is_empty());
            assert!(capture.kept_pages().next().is_none());
        }
    }
}
