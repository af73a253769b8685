//! Old versions of pages, for snapshots (`Db::snapshot`): what a page held before a commit
//! changed it, kept while a snapshot taken before that commit may still read it.
//!
//! Commits are numbered in the order they are published (`published`: the last one whose
//! record was appended and whose pages were unpinned). A snapshot is a commit number `S`,
//! taken under the commit lock (so no commit is half-applied at that moment): it sees every
//! commit up to `S` and none after. While any snapshot lives, the first change a commit `N`
//! makes to a page keeps the page's bytes before it as the page's *image* `N` (the capture
//! copies them anyway, for the log's diffs), and a page freed without being read (never in
//! memory) is read from the file first. A snapshot `S` reads a page as its image with the
//! smallest `N > S`, or, where there is none, as the page is now: no commit after `S`
//! changed it.
//!
//! Images are kept only where some snapshot needs them: image `N` of a page serves the
//! snapshots between the page's image before it and `N`, so a commit skips the image when
//! no snapshot was taken since the page's last one, and a snapshot's end drops every image
//! no live snapshot reads. A page with images carries the `VERSIONED` bit in its
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
    /// Commits published since open.
    published: AtomicU64,
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
            published: AtomicU64::new(0),
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
        self.live.load(Ordering::Acquire) > 0
    }

    /// The number the commit in progress will have (the caller holds the commit lock).
    pub fn next_commit(&self) -> u64 {
        self.published.load(Ordering::Acquire) + 1
    }

    /// Marks the commit in progress published (its record appended, its pages unpinned).
    pub fn publish(&self) {
        self.published.fetch_add(1, Ordering::AcqRel);
    }

    /// A new snapshot of every commit published so far (the caller holds the commit lock, so
    /// none is half-applied).
    pub fn take(&self) -> Arc<SnapshotState> {
        let mut inner = self.inner.lock().unwrap();
        let seq = self.published.load(Ordering::Acquire);
        inner.next_id += 1;
        let state =
            Arc::new(SnapshotState { seq, expired: AtomicBool::new(false), id: inner.next_id });
        inner.live.insert((seq, state.id), state.clone());
        self.live.fetch_add(1, Ordering::AcqRel);
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

    /// Drops every image no live snapshot reads.
    fn collect(&self, table: &PageTable, inner: &mut Inner) {
        let mut dropped = 0u64;
        let live = std::mem::take(&mut inner.live);
        let probe = Inner { live, ..Inner::default() };
        inner.images.retain(|&page_id, images| {
            let mut prev = 0;
            let before = images.len();
            images.retain(|&(n, _)| {
                let keep = probe.serves(prev, n);
                prev = n;
                keep
            });
            dropped += (before - images.len()) as u64;
            if images.is_empty() {
                table.log_state(page_id).fetch_and(!VERSIONED, Ordering::AcqRel);
            }
            !images.is_empty()
        });
        inner.live = probe.live;
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

    /// A snapshot of every commit published so far (the caller holds the commit lock).
    pub fn take_snapshot(&self) -> Arc<SnapshotState> {
        self.versions.take()
    }

    /// Ends a snapshot.
    pub fn release_snapshot(&self, state: &SnapshotState) {
        self.versions.release(&self.table, state);
    }

    /// Marks the commit in progress published (the caller holds the commit lock, its record
    /// is appended and its pages are stamped).
    pub fn publish_commit(&self) {
        self.versions.publish();
    }

    /// The number the commit in progress gets when published, and whether commits keep old
    /// versions for snapshots now (the caller holds the commit lock).
    pub fn commit_versioning(&self) -> Option<u64> {
        self.versions.imaging().then(|| self.versions.next_commit())
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
        for _ in 0..=64 {
            // The state first: an image kept before the change it shows is then found.
            let begun = self.read_begin(page_id);
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
