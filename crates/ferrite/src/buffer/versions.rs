//! Old versions of pages, for snapshots (`Db::snapshot`): what a page held before a commit
//! changed it, kept while a snapshot taken before that commit may still read it.
//!
//! Commits are numbered in the order they end (`Versions::word`: twice the number of the
//! last commit ended, plus one while a commit runs; every commit counts, even one that
//! changed nothing). A snapshot is a commit number `S`: it sees every commit up to `S` and
//! none after. It is taken without a lock: it counts itself live, then reads the word. If
//! no commit runs, `S` is the last one; a commit that begins later sees the snapshot live
//! and keeps images of everything it changes. If one runs, it may have changed pages before
//! it could see the snapshot, so `S` is that commit, and reads through the snapshot wait
//! until it ended (`BufferPool::read_copy_at`, `Snapshot`'s reads). While any snapshot
//! lives, the first change a commit `N`
//! makes to a page keeps the page's bytes before it as the page's *image* `N` (the capture
//! copies them anyway, for the log's diffs), and a page freed without being read (never in
//! memory) is read from the file first. A snapshot `S` reads a page as its image with the
//! smallest `N > S`, or, where there is none, as the page is now: no commit after `S`
//! changed it.
//!
//! Images are kept only where some snapshot needs them: image `N` of a page serves the
//! snapshots between the page's image before it and `N`, so a commit skips the image when
//! no snapshot was taken since the page's last one, and a snapshot's end drops the images
//! of every commit up to the oldest snapshot still live. A page with images carries the `VERSIONED` bit in its
//! translation entry, so a snapshot read of any other page costs no lookup here.
//!
//! Memory is bounded (`Options::snapshot_bytes`): a commit that would keep more ends the
//! oldest snapshots (their reads fail with `Error::SnapshotTooOld`) and drops their images.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::page_table::{PageTable, VERSIONED};
use crate::error::PageId;
use crate::format::page::PAGE_SIZE;

/// The images' memory bound until the database sets its own (`Options::snapshot_bytes`).
pub const DEFAULT_SNAPSHOT_BYTES: u64 = 64 << 20;

/// The version a read of an image reports: it never changes, so it always validates.
pub const IMAGE_VERSION: u64 = u64::MAX;

/// One snapshot, as the pool tracks it.
#[derive(Debug)]
pub struct SnapshotState {
    /// The last commit it sees.
    pub seq: u64,
    /// The commit word it was taken at (`Versions::word`).
    pub word: u64,
    /// Ended early to bound the images' memory: its reads fail.
    expired: AtomicBool,
    id: u64,
}

impl SnapshotState {
    /// Whether its images were dropped (then reads at it may be wrong: they must fail).
    pub fn expired(&self) -> bool {
        self.expired.load(Ordering::Acquire)
    }
}

/// `(N, a page's bytes before commit N)`.
type Image = (u64, Arc<[u8]>);

#[derive(Debug, Default)]
struct Inner {
    /// Live snapshots by (commit number, id).
    live: BTreeMap<(u64, u64), Arc<SnapshotState>>,
    /// Each versioned page's images, oldest first: `(N, bytes before commit N)`.
    images: HashMap<PageId, Vec<Image>>,
    /// The pages each commit kept images of, to drop them in commit order.
    by_commit: BTreeMap<u64, Vec<PageId>>,
    next_id: u64,
}

impl Inner {
    /// Whether an image taken at commit `n`, after one taken at commit `prev`, serves a
    /// live snapshot (one that is `>= prev` and `< n`).
    fn serves(&self, prev: u64, n: u64) -> bool {
        self.live.range((prev, 0)..).next().is_some_and(|(&(s, _), _)| s < n)
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct Versions {
    /// Twice the commits ended since open, plus one while a commit runs.
    word: AtomicU64,
    /// Live snapshots (read without the lock on every page change).
    live: AtomicUsize,
    /// Bytes of images kept.
    bytes: AtomicU64,
    /// The most bytes of images to keep.
    limit: AtomicU64,
    /// Snapshots ended early to bound the images' memory, since open.
    expired: AtomicU64,
    inner: Mutex<Inner>,
}

impl Versions {
    pub fn new(limit: u64) -> Self {
        Versions {
            word: AtomicU64::new(0),
            live: AtomicUsize::new(0),
            bytes: AtomicU64::new(0),
            limit: AtomicU64::new(limit),
            expired: AtomicU64::new(0),
            inner: Mutex::default(),
        }
    }

    /// Sets the most bytes of images to keep.
    pub fn set_limit(&self, bytes: u64) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    /// Whether commits keep images (a snapshot lives).
    #[inline(always)]
    pub fn imaging(&self) -> bool {
        self.live.load(Ordering::SeqCst) > 0
    }

    /// The number the commit in progress has (the caller holds the commit lock).
    pub fn next_commit(&self) -> u64 {
        self.word.load(Ordering::Acquire) / 2 + 1
    }

    /// The commit word: twice the commits ended, plus one while a commit runs.
    pub fn word(&self) -> u64 {
        self.word.load(Ordering::SeqCst)
    }

    /// How many commits ended.
    pub fn ended(&self) -> u64 {
        self.word.load(Ordering::Acquire) / 2
    }

    /// A commit begins (the caller holds the commit lock), before it changes anything.
    pub fn begin(&self) {
        self.word.fetch_or(1, Ordering::SeqCst);
    }

    /// The commit in progress ended (its record appended and its pages stamped, or it
    /// failed).
    pub fn end(&self) {
        debug_assert_eq!(self.word.load(Ordering::Acquire) & 1, 1, "no commit runs");
        self.word.fetch_add(1, Ordering::SeqCst);
    }

    /// A new snapshot: of every commit ended so far, or, if one runs, of that one too (see
    /// the module documentation).
    pub fn take(&self) -> Arc<SnapshotState> {
        let mut inner = self.inner.lock().unwrap();
        // Live first, then the word: a commit that begins after the read sees it live.
        self.live.fetch_add(1, Ordering::SeqCst);
        let word = self.word.load(Ordering::SeqCst);
        let seq = word / 2 + (word & 1);
        inner.next_id += 1;
        let state = Arc::new(SnapshotState {
            seq,
            word,
            expired: AtomicBool::new(false),
            id: inner.next_id,
        });
        inner.live.insert((seq, state.id), state.clone());
        state
    }

    /// Ends snapshot `state`: the images only it read are dropped.
    pub fn release(&self, table: &PageTable, state: &SnapshotState) {
        let mut inner = self.inner.lock().unwrap();
        if inner.live.remove(&(state.seq, state.id)).is_some() {
            self.live.fetch_sub(1, Ordering::AcqRel);
            self.collect(table, &mut inner);
        }
    }

    /// Keeps `before`, page `page_id`'s bytes before the commit in progress changes it, if
    /// a live snapshot will read it. The caller holds the commit lock and the page's
    /// exclusive latch, and has not changed the page yet.
    pub fn keep(&self, table: &PageTable, page_id: PageId, before: &[u8]) {
        let n = self.next_commit();
        let mut inner = self.inner.lock().unwrap();
        let prev = match inner.images.get(&page_id).and_then(|images| images.last()) {
            Some(&(last, _)) if last == n => return,
            Some(&(last, _)) => last,
            None => 0,
        };
        if !inner.serves(prev, n) {
            return;
        }
        inner.images.entry(page_id).or_default().push((n, before.into()));
        inner.by_commit.entry(n).or_default().push(page_id);
        table.log_state(page_id).fetch_or(VERSIONED, Ordering::AcqRel);
        let bytes = self.bytes.fetch_add(PAGE_SIZE as u64, Ordering::AcqRel) + PAGE_SIZE as u64;
        if bytes > self.limit.load(Ordering::Relaxed) {
            self.expire_oldest(table, &mut inner);
        }
    }

    /// The image snapshot `seq` reads for page `page_id`, if it has one (else the page as it
    /// is now is the snapshot's). Asked after the page's state word was loaded, so an image
    /// kept before the change that state shows is found.
    #[inline]
    pub fn image(&self, table: &PageTable, page_id: PageId, seq: u64) -> Option<Arc<[u8]>> {
        if table.log_state(page_id).load(Ordering::Acquire) & VERSIONED == 0 {
            return None;
        }
        let inner = self.inner.lock().unwrap();
        let images = inner.images.get(&page_id)?;
        images.iter().find(|(n, _)| *n > seq).map(|(_, bytes)| bytes.clone())
    }

    /// Ends the oldest snapshots until the images fit the limit again (at least one, while
    /// any lives).
    fn expire_oldest(&self, table: &PageTable, inner: &mut Inner) {
        while self.bytes.load(Ordering::Acquire) > self.limit.load(Ordering::Relaxed) {
            let Some((_, state)) = inner.live.pop_first() else { break };
            state.expired.store(true, Ordering::Release);
            self.live.fetch_sub(1, Ordering::AcqRel);
            self.expired.fetch_add(1, Ordering::Relaxed);
            self.collect(table, inner);
        }
    }

    /// Drops the images no live snapshot reads any more: those of commits up to the oldest
    /// live snapshot (image `N` serves only snapshots older than `N`), found through
    /// `by_commit`, so the cost is the images dropped, not the images kept. (An image
    /// between two live snapshots that serves neither stays until the older one ends.)
    fn collect(&self, table: &PageTable, inner: &mut Inner) {
        let oldest = inner.live.keys().next().map(|&(seq, _)| seq);
        let (due, limit) = due_through(&mut inner.by_commit, oldest);
        let mut dropped = 0u64;
        for page_id in due.into_values().flatten() {
            let Some(images) = inner.images.get_mut(&page_id) else { continue };
            let stale = images.iter().take_while(|(n, _)| *n <= limit).count();
            images.drain(..stale);
            dropped += stale as u64;
            if images.is_empty() {
                inner.images.remove(&page_id);
                table.log_state(page_id).fetch_and(!VERSIONED, Ordering::AcqRel);
            }
        }
        self.bytes.fetch_sub(dropped * PAGE_SIZE as u64, Ordering::AcqRel);
    }

    /// Live snapshots, bytes of images kept, and snapshots ended early since open.
    pub fn stats(&self) -> (u64, u64, u64) {
        (
            self.live.load(Ordering::Acquire) as u64,
            self.bytes.load(Ordering::Acquire),
            self.expired.load(Ordering::Relaxed),
        )
    }

    /// The oldest commit a live snapshot sees, if any lives (the change buffer keeps its old
    /// values for the same snapshots).
    pub fn live_seqs(&self) -> Vec<u64> {
        let inner = self.inner.lock().unwrap();
        let mut seqs: Vec<u64> = inner.live.keys().map(|&(s, _)| s).collect();
        seqs.dedup();
        seqs
    }
}

/// Takes out of `by_commit` (what each commit kept, by commit number) the entries no live
/// snapshot reads any more: those of commits up to `oldest`, the oldest live snapshot
/// (all of them when none lives). Returns them, and the highest commit number taken (so
/// that, per page or key, the old versions up to it can be dropped).
pub(crate) fn due_through<T>(
    by_commit: &mut BTreeMap<u64, Vec<T>>,
    oldest: Option<u64>,
) -> (BTreeMap<u64, Vec<T>>, u64) {
    match oldest {
        Some(oldest) => {
            let keep = by_commit.split_off(&(oldest + 1));
            (std::mem::replace(by_commit, keep), oldest)
        }
        None => (std::mem::take(by_commit), u64::MAX),
    }
}

/// Snapshots, as the database sees them through the pool.
impl super::BufferPool {
    /// Sets the most bytes of page images snapshots may keep (`Options::snapshot_bytes`).
    pub fn set_snapshot_limit(&self, bytes: u64) {
        self.versions.set_limit(bytes);
    }

    /// The most bytes of page images snapshots may keep.
    pub fn snapshot_limit(&self) -> u64 {
        self.versions.limit.load(Ordering::Relaxed)
    }

    /// A snapshot of every commit ended so far, or of the one running too (`versions.rs`).
    pub fn take_snapshot(&self) -> Arc<SnapshotState> {
        self.versions.take()
    }

    /// Whether page `page_id` has old versions kept for snapshots (ask after loading its
    /// state word: an image kept before the change that word shows is then seen).
    #[inline(always)]
    pub fn versioned(&self, page_id: PageId) -> bool {
        self.table.log_state(page_id).load(Ordering::Acquire) & VERSIONED != 0
    }

    /// The commit word (`versions.rs`): equal words mean no commit began or ended between.
    pub fn commit_word(&self) -> u64 {
        self.versions.word()
    }

    /// Whether snapshot `seq` can be read: the commit it ends with has ended.
    pub fn snapshot_ready(&self, seq: u64) -> bool {
        self.versions.ended() >= seq
    }

    /// Ends a snapshot.
    pub fn release_snapshot(&self, state: &SnapshotState) {
        self.versions.release(&self.table, state);
    }

    /// The commit in progress ended (the caller holds the commit lock; its record is
    /// appended and its pages are stamped, or it failed).
    pub fn end_commit(&self) {
        self.versions.end();
    }

    /// The number the commit in progress gets when published, and whether commits keep old
    /// versions for snapshots now (the caller holds the commit lock).
    pub fn commit_versioning(&self) -> Option<u64> {
        self.versions.imaging().then(|| self.versions.next_commit())
    }

    /// The commit number the oldest live snapshot sees, if any lives.
    pub fn oldest_snapshot(&self) -> Option<u64> {
        self.versions.inner.lock().unwrap().live.keys().next().map(|&(seq, _)| seq)
    }

    /// The commit numbers live snapshots see, ascending.
    pub fn snapshot_seqs(&self) -> Vec<u64> {
        self.versions.live_seqs()
    }

    /// Live snapshots, bytes of page images kept for them, and snapshots ended early to
    /// bound that memory, since open.
    pub fn snapshot_stats(&self) -> (u64, u64, u64) {
        self.versions.stats()
    }

    /// Keeps page `page_id`'s bytes before the commit in progress changes them, if a
    /// snapshot needs them (`capture.rs`, on the page's first change in the commit).
    pub(super) fn keep_image(&self, page_id: PageId, before: &[u8]) {
        if self.versions.imaging() {
            self.versions.keep(&self.table, page_id, before);
        }
    }

    /// Copies page `page_id` as snapshot `seq` sees it into `out`: its image from before the
    /// first commit after `seq` that changed it (version [`IMAGE_VERSION`], which always
    /// validates), or the page as it is now, as [`BufferPool::read_copy`] does.
    pub fn read_copy_at(
        &self,
        page_id: PageId,
        seq: u64,
        out: &mut crate::io::AlignedPage,
    ) -> super::Attempt<u64> {
        if !self.snapshot_ready(seq) {
            // The snapshot ends with the commit running: wait for it.
            return Err(super::Interrupt::Restart);
        }
        for _ in 0..=64 {
            // The state first: an image kept before the change it shows is then found. (A
            // page id past the file is an error, never looked up.)
            let begun = self.read_begin(page_id);
            if let Err(super::Interrupt::Error(e)) = begun {
                return Err(super::Interrupt::Error(e));
            }
            if let Some(image) = self.versions.image(&self.table, page_id, seq) {
                out.bytes_mut().copy_from_slice(&image);
                return Ok(IMAGE_VERSION);
            }
            let (version, view) = begun?;
            view.copy(0, out.bytes_mut());
            if self.validate(page_id, version) {
                return Ok(version);
            }
            std::hint::spin_loop();
        }
        Err(super::Interrupt::Restart)
    }
}
