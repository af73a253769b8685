//! The object operations: reads of extent maps and data, the writes (copy-on-write extents
//! for whole blocks, fragments for the rest), truncation, whole-object puts, frees, and the
//! merge of fragments into new extents. See `format.rs` for the layout and `space.rs` for
//! when freed data pages may be written again.
//!
//! Every change of an object is one commit, which its data writes precede; writers take no
//! lock while they plan and write, and the commit applies only if the map they planned on
//! is still the map (`Shared::still_current`), else they plan again: new extents are written before the commit that points at them
//! is logged, and the page file is synced before any log flush that could make that commit
//! durable (the log's before-flush hook), so a crash never leaves an extent map pointing at
//! unwritten pages. The extent map a commit
//! replaces is changed under the object's map lock, which readers take shared while they
//! read the map (not while they read the data: their epoch pin keeps the old pages).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

use super::format::{
    self, decode_log_entry, decode_stub, encode_log_entry, encode_stub, log_key, Extent, Fragments,
    BLOCK, KIND_EXTENT, OBJECTS_TREE,
};
use super::space::MAX_RUN_PAGES;
use crate::db::{Shared, Tree};
use crate::error::{Error, PageId, Result};
use crate::io::AlignedBlock;
use crate::sched::block_on;

/// A key's value as stored: absent, a plain value, or an object's stub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stored {
    Absent,
    Plain(Vec<u8>),
    Object { id: u64, len: u64 },
}

/// An object's map for a range of blocks, as read under its map lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MapView {
    /// Extents overlapping the blocks, in order.
    pub extents: Vec<Extent>,
    /// Fragments of blocks in the range, every entry over a block overlaid in order.
    pub fragments: BTreeMap<u64, Fragments>,
}

/// What one commit changes in an object (besides its stub).
#[derive(Debug, Default)]
pub(crate) struct Change {
    extent_deletes: Vec<u64>,
    extent_puts: Vec<Extent>,
    /// Blocks `first..=last` whose fragments all go (replaced or cut away): every entry over
    /// them when the change applies, however new, is older than it.
    drop_fragments: Vec<(u64, u64)>,
    /// Fragment-log entries to append: `(block, fragments of one entry)`.
    appends: Vec<(u64, Fragments)>,
    /// A truncation inside block `.0`: zeros from byte `.1` to the block's end, appended if
    /// the block holds data when the change applies (so old bytes never come back).
    zero_tail: Option<(u64, usize)>,
    /// Entries a merge folded into new blocks: `(block, their numbers, oldest first)`.
    merged: Vec<(u64, Vec<u64>)>,
    pub new_runs: Vec<(PageId, u64)>,
    freed_runs: Vec<(PageId, u64)>,
    /// The extents of blocks `first..=last` the change was planned against: it applies only
    /// if they are still the extents at the commit (writers take no lock while they plan
    /// and write their data; a writer that lost the race plans again).
    pub planned_on: Vec<(u64, u64, Vec<Extent>)>,
}

impl MapView {
    /// The extents' pieces within blocks `first..=last`: `(first page, where its bytes go in
    /// a buffer of those blocks, bytes)`.
    pub(crate) fn spans(
        &self,
        first: u64,
        last: u64,
    ) -> impl Iterator<Item = (PageId, usize, usize)> + '_ {
        self.extents.iter().filter_map(move |extent| {
            let from = extent.first.max(first);
            let to = extent.last.min(last);
            (from <= to).then(|| {
                let at = ((from - first) * BLOCK) as usize;
                (extent.page_of(from), at, ((to - from + 1) * BLOCK) as usize)
            })
        })
    }

    /// Lays the fragments of blocks `first..=last` over `out`, those blocks' data.
    pub(crate) fn overlay(&self, first: u64, last: u64, out: &mut [u8]) {
        for (&block, fragments) in self.fragments.range(first..=last) {
            let at = ((block - first) * BLOCK) as usize;
            format::apply_fragments(&mut out[at..at + BLOCK as usize], fragments);
        }
    }
}

impl Change {
    /// Makes a change that replaces blocks by whole new extents a merge's: `blocks` are
    /// `(block, the extents it was read from, the entries folded into it)`. The entries a
    /// merge did not read (appended since) stay, over the new block.
    pub(crate) fn retarget_merge(&mut self, blocks: Vec<(u64, Vec<Extent>, Vec<u64>)>) {
        self.drop_fragments.clear();
        self.planned_on.clear();
        for (block, extents, seqs) in blocks {
            self.planned_on.push((block, block, extents));
            self.merged.push((block, seqs));
        }
    }

    /// Blocks a merge's change rewrites.
    pub(crate) fn merged_blocks(&self) -> u64 {
        self.merged.len() as u64
    }
}

/// An object write planned and waiting in the group commit's queue
/// (`Tree::commit_grouped`).
#[derive(Debug)]
pub(crate) struct Pending {
    tree: Tree,
    key: Vec<u8>,
    stored: Stored,
    id: u64,
    change: Change,
    stub: Option<Vec<u8>>,
    state: Mutex<PendingState>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct PendingState {
    /// Whether the change applied, and the log position its commit needs durable.
    outcome: Option<Result<(bool, u64)>>,
    /// Woken to lead the next group.
    turn: bool,
}

impl Pending {
    fn complete(&self, outcome: Result<(bool, u64)>) {
        self.state.lock().unwrap().outcome = Some(outcome);
        self.wake.notify_one();
    }

    fn give_turn(&self) {
        self.state.lock().unwrap().turn = true;
        self.wake.notify_one();
    }

    /// Sleeps until the change is done or it is this writer's turn, at most `timeout`.
    fn wait_turn(&self, timeout: std::time::Duration) {
        let state = self.state.lock().unwrap();
        let (mut state, _) = self
            .wake
            .wait_timeout_while(state, timeout, |s| s.outcome.is_none() && !s.turn)
            .unwrap();
        state.turn = false;
    }
}

impl Shared {
    /// After a release of the commit lock: the first object write in line may lead the next
    /// group (called by every commit's release, the object writers' and the others').
    pub(crate) fn pass_object_turn(&self) {
        if let Some(next) = self.object_space.commits().front() {
            next.give_turn();
        }
    }

    /// Applies `batch` (queued object writes) in one commit under `guard` and gives each
    /// its outcome. A change whose map moved is not applied (its writer plans again); if
    /// one fails, the commit fails: the failed one gets the error, the others the log's
    /// failure, or a new try if the log is sound (nothing of theirs was kept).
    fn lead_commits(
        self: &Arc<Self>,
        objects: &Tree,
        guard: crate::wal::commit::CommitGuard<'_>,
        batch: Vec<Arc<Pending>>,
    ) {
        let mut failed_at = None;
        let result = block_on(self.commit_locked(guard, async || {
            let mut applied = Vec::with_capacity(batch.len());
            for (i, p) in batch.iter().enumerate() {
                let stub = p.stub.as_deref();
                match p
                    .tree
                    .apply_if_current(objects, &p.key, &p.stored, p.id, &p.change, stub)
                    .await
                {
                    Ok(done) => applied.push(done),
                    Err(e) => {
                        failed_at = Some(i);
                        return Err(e);
                    }
                }
            }
            Ok(applied)
        }));
        match result {
            Ok((applied, end)) => {
                for (p, done) in batch.iter().zip(applied) {
                    p.complete(Ok((done, end)));
                }
            }
            Err(e) => {
                let mut error = Some(e);
                for (i, p) in batch.iter().enumerate() {
                    let outcome = match (failed_at == Some(i), self.log().and_then(|l| l.check())) {
                        (true, _) => Err(error.take().expect("one failed change")),
                        (false, Ok(())) => Ok((false, 0)),
                        (false, Err(failure)) => Err(failure),
                    };
                    p.complete(outcome);
                }
                if let Some(e) = error {
                    // The commit failed past the changes (its record): the log is failed.
                    log::warn!("a group of object writes failed to commit: {e}");
                }
            }
        }
    }
}

/// A run of pages: first page, pages.
type Run = (PageId, u64);

/// What a write of `len` bytes at `offset` (at the value's end if `at_end`) does to a key
/// that holds `stored` (`Shared::write_target`).
pub(super) struct WriteTarget<'a> {
    /// The object written: the key's, or a new one for an absent key or a plain value.
    pub id: u64,
    pub old_len: u64,
    /// A new object's first bytes (the plain value it replaces; empty for an absent key).
    pub base: Option<&'a [u8]>,
    /// Where the write lands.
    pub offset: u64,
    /// The length after it (an empty write changes no length, as `pwrite` of nothing).
    pub new_len: u64,
}

impl WriteTarget<'_> {
    /// The pieces to write in order: a new object's first bytes, then the write's.
    pub fn pieces<'b>(&'b self, bytes: &'b [u8]) -> Vec<(u64, &'b [u8])> {
        let mut pieces = Vec::with_capacity(2);
        if let Some(base) = self.base.filter(|b| !b.is_empty()) {
            pieces.push((0, base));
        }
        if !bytes.is_empty() {
            pieces.push((self.offset, bytes));
        }
        pieces
    }
}

impl Shared {
    /// See [`WriteTarget`]; fails if the write would end past the largest object.
    pub(super) fn write_target<'a>(
        &self,
        stored: &'a Stored,
        offset: u64,
        len: u64,
        at_end: bool,
    ) -> Result<WriteTarget<'a>> {
        let (id, old_len, base) = match stored {
            Stored::Object { id, len } => (*id, *len, None),
            Stored::Absent => (self.new_object_id(), 0, Some(&[][..])),
            Stored::Plain(v) => (self.new_object_id(), v.len() as u64, Some(&v[..])),
        };
        let offset = if at_end { old_len } else { offset };
        super::check_object_end(offset, len)?;
        let new_len = if len == 0 { old_len } else { old_len.max(offset + len) };
        Ok(WriteTarget { id, old_len, base, offset, new_len })
    }
}

/// A block a write covers whole, and its bytes (the caller's, or laid together from several
/// pieces).
pub(super) type WholeBlock<'a> = (u64, Cow<'a, [u8]>);

/// Pages in limbo past which a writer writes the log out (32 MiB of data pages).
const LIMBO_FLUSH_PAGES: u64 = 8192;

impl Shared {
    /// Freed pages wait in limbo until their frees are durable: when many wait (commits
    /// that do not wait for the log), a writer writes the log out rather than grow the file.
    pub(super) fn limbo_wants_log(&self) -> bool {
        let Some(log) = self.log.as_ref() else { return false };
        // (A small database flushes sooner: its limbo is a larger share of it.)
        let limit = LIMBO_FLUSH_PAGES.min(self.pool.max_pages() / 16);
        self.object_space.limbo_pages() > limit && log.durable() < log.tail()
    }

    /// Whether a full database may find room by making the log durable: object data
    /// pages wait in limbo until the commits that freed them are durable.
    pub(super) fn limbo_waits_for_log(&self, log: &crate::wal::Log) -> bool {
        self.object_space.limbo_pages() > 0 && log.durable() < log.tail()
    }
}

pub(super) fn corrupt(shared: &Shared, reason: String) -> Error {
    Error::Corrupt { page: 0, file: shared.pool.file().path().to_owned(), reason }
}

/// The fragment-log entries `seqs` over block `block` of object `id`, laid over each other
/// in order; `fetch` reads an entry's value by its key (now, or at a snapshot).
pub(super) fn overlay_entries(
    shared: &Shared,
    id: u64,
    block: u64,
    seqs: &[u64],
    mut fetch: impl FnMut(&[u8]) -> Result<Option<Vec<u8>>>,
) -> Result<Fragments> {
    let mut overlay = Fragments::new();
    for &seq in seqs {
        let value = fetch(&log_key(seq))?.ok_or_else(|| {
            corrupt(shared, format!("object {id} block {block}: fragment entry {seq} is missing"))
        })?;
        let (owner, at, fragments) = decode_log_entry(&value)
            .map_err(|r| corrupt(shared, format!("fragment entry {seq}: {r}")))?;
        if (owner, at) != (id, block) {
            return Err(corrupt(
                shared,
                format!(
                    "fragment entry {seq} is of object {owner} block {at}, indexed as {id} \
                     block {block}"
                ),
            ));
        }
        for (offset, bytes) in &fragments {
            overlay = format::overlay_fragment(&overlay, *offset as usize, bytes);
        }
    }
    Ok(overlay)
}

impl Shared {
    /// The objects tree, created if `create` and missing.
    pub(crate) fn objects_tree(self: &Arc<Self>, create: bool) -> Result<Option<Tree>> {
        // The handle's parts are kept: every object call takes it, and `handle` takes a lock
        // and allocates.
        if let Some((btree, name, dropped)) = self.objects_root.get() {
            let (name, dropped) = (Arc::clone(name), Arc::clone(dropped));
            return Ok(Some(Tree { shared: Arc::clone(self), btree: *btree, name, dropped }));
        }
        let found = {
            let _guard = self.catalog_lock.lock().unwrap();
            self.lookup_tree(OBJECTS_TREE)?
        };
        let btree = match found {
            Some(btree) => btree,
            // Two writers may both find it missing: creating it opens it if the other won.
            None if create => self.create_tree_named(OBJECTS_TREE, true)?,
            None => return Ok(None),
        };
        let tree = self.handle(OBJECTS_TREE, btree);
        let parts = (btree, Arc::clone(&tree.name), Arc::clone(&tree.dropped));
        // In use before anyone can take the handle: commits retire staged frees only then.
        self.objects_in_use.store(true, Ordering::Release);
        let _ = self.objects_root.set(parts);
        Ok(Some(tree))
    }

    fn objects(self: &Arc<Self>) -> Result<Tree> {
        Ok(self.objects_tree(true)?.expect("created"))
    }

    /// A fresh object id (ids share the tree-id counter, which every commit logs).
    pub(super) fn new_object_id(&self) -> u64 {
        self.next_tree_id.fetch_add(1, Ordering::AcqRel)
    }

    /// Reads the extents of object `id` over blocks `first..=last`.
    pub(crate) fn read_extents(
        self: &Arc<Self>,
        id: u64,
        first: u64,
        last: u64,
    ) -> Result<Vec<Extent>> {
        let mut extents = Vec::new();
        let Some(objects) = self.objects_tree(false)? else { return Ok(extents) };
        if first == last {
            // One block (a small write's): an extent that ends at it is found by a point
            // lookup, which reads the leaf in place (a scan copies it). Random writes leave
            // mostly one-block extents, so this is the common case.
            if let Some(value) = objects.get_raw(&format::key(id, KIND_EXTENT, first))? {
                let extent = Extent::decode(first, &value)
                    .map_err(|r| corrupt(self, format!("object {id}: {r}")))?;
                extents.push(extent);
                return Ok(extents);
            }
        }
        let low = format::key(id, KIND_EXTENT, first);
        let high = format::key(id, KIND_EXTENT, u64::MAX);
        for entry in objects.range(&low[..]..=&high[..]) {
            let (key, value) = entry?;
            let (_, _, end) = format::parse_key(&key).expect("a key of the range");
            let extent = Extent::decode(end, &value)
                .map_err(|r| corrupt(self, format!("object {id}: {r}")))?;
            if extent.first > last {
                break;
            }
            extents.push(extent);
        }
        Ok(extents)
    }

    /// Reads the map of object `id` for blocks `first..=last`: its extents, and the
    /// fragment-log entries over them. The caller holds the object's map lock (commits
    /// change the entries and the index under it).
    pub(crate) fn read_map(self: &Arc<Self>, id: u64, first: u64, last: u64) -> Result<MapView> {
        let mut view =
            MapView { extents: self.read_extents(id, first, last)?, ..MapView::default() };
        let listed = self.object_space.fragments().listed(id, first, last);
        if listed.is_empty() {
            return Ok(view);
        }
        let objects = self.objects()?;
        for (block, seqs) in listed {
            let overlay = overlay_entries(self, id, block, &seqs, |key| objects.get_raw(key))?;
            view.fragments.insert(block, overlay);
        }
        Ok(view)
    }

    /// Writes `blocks` (whole blocks of data, in block order: `(block, bytes)`) into new runs
    /// of pages and makes them durable; returns the new extents (consecutive blocks in
    /// consecutive pages share one) and the runs.
    pub(crate) fn write_blocks(
        self: &Arc<Self>,
        blocks: &[(u64, &[u8])],
    ) -> Result<(Vec<Extent>, Vec<Run>)> {
        if blocks.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let log = self.log()?;
        if self.limbo_wants_log() {
            log.flush(log.tail())?;
        }
        let pages = blocks.len() as u64;
        let runs = match self.object_space.allocate(&self.pool, pages, log.durable()) {
            Err(Error::DatabaseFull { .. }) if self.limbo_waits_for_log(log) => {
                log.flush(log.tail())?;
                self.object_space.allocate(&self.pool, pages, log.durable())?
            }
            runs => runs?,
        };
        let written = (|| {
            let mut extents: Vec<Extent> = Vec::new();
            let mut next = 0usize;
            let file = self.pool.file();
            for &(first_page, pages) in &runs {
                let buf = fill_run(&blocks[next..next + pages as usize], first_page, &mut extents);
                file.write_pages(first_page, buf.as_slice())?;
                next += pages as usize;
            }
            // Durable before any log flush carries the commit that points at them (the
            // log's before-flush hook: `Space::sync_written`), not now: writers that do
            // not wait for the log never wait for the page file either.
            self.object_space.wrote();
            Ok(extents)
        })();
        match written {
            Ok(extents) => Ok((extents, runs)),
            Err(e) => {
                self.object_space.give_back(&runs);
                Err(e)
            }
        }
    }

    /// Reads one page into each buffer of `reads`: all at once through `engine` (the merge
    /// thread's ring), or one by one without one.
    pub(crate) fn read_pages_at_once(
        &self,
        engine: Option<&mut (dyn crate::io::IoEngine + 'static)>,
        reads: &mut [(PageId, AlignedBlock)],
    ) -> Result<()> {
        let file = self.pool.file();
        let Some(engine) = engine else {
            for (page, buf) in reads.iter_mut() {
                file.read_pages(*page, buf.as_mut_slice())?;
            }
            return Ok(());
        };
        let count = reads.len();
        let mut requests: Vec<(usize, u64, &mut [u8])> = reads
            .iter_mut()
            .map(|(page, buf)| {
                let (device, offset) = file.locate(*page);
                (device, offset, buf.as_mut_slice())
            })
            .collect();
        crate::io::engine::read_all(engine, &mut requests)
            .map_err(|e| Error::io(format!("reading {count} blocks of object data for a merge"), e))
    }

    /// Reads the data of blocks `first..=last` of an object whose map is `view` into `out`
    /// (`(last - first + 1) * BLOCK` bytes): extents read with one I/O per contiguous piece,
    /// holes as zeros, then fragments over them.
    pub(crate) fn read_blocks(
        &self,
        view: &MapView,
        first: u64,
        last: u64,
        out: &mut [u8],
    ) -> Result<()> {
        out.fill(0);
        let file = self.pool.file();
        for (page, at, bytes) in view.spans(first, last) {
            let mut buf = AlignedBlock::zeroed(bytes);
            file.read_pages(page, buf.as_mut_slice())?;
            out[at..at + bytes].copy_from_slice(buf.as_slice());
        }
        view.overlay(first, last, out);
        Ok(())
    }

    /// The changes to replace blocks of `view` by whole new `extents` (their blocks'
    /// fragments go, the old pages are freed, old extents cut around them).
    pub(super) fn replace_blocks(view: &MapView, extents: &[Extent], change: &mut Change) {
        let covered = |b: u64| extents.iter().any(|e| e.first <= b && b <= e.last);
        Shared::drop_blocks(view, covered, change);
        change.extent_puts.extend_from_slice(extents);
        for e in extents {
            match change.drop_fragments.last_mut() {
                Some(range) if range.1 + 1 == e.first => range.1 = e.last,
                _ => change.drop_fragments.push((e.first, e.last)),
            }
        }
    }

    /// The changes that take the blocks `covered` says out of `view`'s extents: extents are
    /// cut around them, their pages freed (their fragments are the caller's).
    fn drop_blocks(view: &MapView, covered: impl Fn(u64) -> bool, change: &mut Change) {
        for old in &view.extents {
            if !(old.first..=old.last).any(&covered) {
                continue;
            }
            change.extent_deletes.push(old.last);
            // Keep the old extent's pieces that stay.
            let mut piece: Option<Extent> = None;
            for b in old.first..=old.last {
                if covered(b) {
                    change.freed_runs.push((old.page_of(b), 1));
                    if let Some(p) = piece.take() {
                        change.extent_puts.push(p);
                    }
                } else {
                    match &mut piece {
                        Some(p) => p.last = b,
                        None => piece = Some(Extent { first: b, last: b, page: old.page_of(b) }),
                    }
                }
            }
            if let Some(p) = piece {
                change.extent_puts.push(p);
            }
        }
        change.freed_runs = coalesce_runs(std::mem::take(&mut change.freed_runs));
    }

    /// The changes that cut object `id` to `len` bytes, planned on its extents as they are.
    fn cut_to(self: &Arc<Self>, id: u64, len: u64, change: &mut Change) -> Result<()> {
        let keep_blocks = len.div_ceil(BLOCK);
        let tail_block = len / BLOCK;
        let extents = self.read_extents(id, tail_block, u64::MAX)?;
        let view = MapView { extents, ..MapView::default() };
        Shared::drop_blocks(&view, |b| b >= keep_blocks, change);
        change.drop_fragments.push((keep_blocks, u64::MAX));
        // The last block kept, if the new end cuts it: its bytes past the end must read as
        // zeros if the object grows again (zeros appended over them).
        let tail = (len % BLOCK) as usize;
        if tail > 0 {
            change.zero_tail = Some((tail_block, tail));
        }
        change.planned_on.push((tail_block, u64::MAX, view.extents));
        Ok(())
    }

    /// The change that puts `extents` (written in `runs`) in place of their blocks.
    pub(crate) fn replacing(
        &self,
        view: &MapView,
        extents: &[Extent],
        runs: Vec<(PageId, u64)>,
    ) -> Change {
        let mut change = Change::default();
        Shared::replace_blocks(view, extents, &mut change);
        change.new_runs = runs;
        change
    }

    /// Inside a commit, under the object's map lock: whether the extents `change` was
    /// planned against are still the extents, and the entries a merge folded are still the
    /// oldest over their blocks.
    pub(crate) fn still_current(self: &Arc<Self>, id: u64, change: &Change) -> Result<bool> {
        for (first, last, extents) in &change.planned_on {
            if self.read_extents(id, *first, *last)? != *extents {
                return Ok(false);
            }
        }
        if !change.merged.is_empty() {
            let index = self.object_space.fragments();
            if !change.merged.iter().all(|(block, seqs)| index.are_oldest(id, *block, seqs)) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Applies `change` to object `id` inside a commit (under its map lock, checked by
    /// `still_current`, or for a new object no reader can reach yet).
    pub(crate) async fn apply_change(
        self: &Arc<Self>,
        objects: &Tree,
        id: u64,
        change: &Change,
    ) -> Result<()> {
        // Deletes before puts: a cut extent may be put back under the same last block. (A
        // key put again is not deleted first: the put replaces it. A block rewritten whole
        // in place of a one-block extent, the common random write, is one put.)
        for &last in &change.extent_deletes {
            if change.extent_puts.iter().any(|e| e.last == last) {
                continue;
            }
            objects.apply_delete_raw(&format::key(id, KIND_EXTENT, last)).await?;
        }
        for e in &change.extent_puts {
            objects.apply_put_raw(&format::key(id, KIND_EXTENT, e.last), &e.value()).await?;
        }
        // The index first (its lock is not held across an await), then the entries. The
        // commit's sequence numbers are taken under the commit lock: entries apply in the
        // order of their commits.
        let (gone, appended, due) = {
            let mut index = self.object_space.fragments();
            let mut gone = Vec::new();
            for &(first, last) in &change.drop_fragments {
                gone.extend(index.take_blocks(id, first, last));
            }
            for (block, seqs) in &change.merged {
                index.take_oldest(id, *block, seqs.len());
                gone.extend_from_slice(seqs);
            }
            // (A truncation's zeros, if the block holds data; the write's own entries are
            // encoded straight from the change, not copied first.)
            let mut zeros: Vec<(u64, Fragments)> = Vec::new();
            if let Some((block, from)) = change.zero_tail {
                let has_data = index.has(id, block)
                    || change.planned_on.iter().any(|(_, _, extents)| {
                        extents.iter().any(|e| e.first <= block && block <= e.last)
                    });
                if has_data {
                    let tail = vec![(from as u16, vec![0u8; BLOCK as usize - from])];
                    zeros.extend(format::split_entries(&tail).into_iter().map(|f| (block, f)));
                }
            }
            let mut appended = Vec::with_capacity(change.appends.len() + zeros.len());
            for (block, fragments) in change.appends.iter().chain(&zeros) {
                let seq = index.next_seq;
                index.add(id, *block, seq, format::fragment_bytes(fragments) as u32);
                appended.push((seq, encode_log_entry(id, *block, fragments)));
            }
            let due = index.queue_if_due(id, self.object_space.fragment_budget());
            (gone, appended, due)
        };
        for seq in gone {
            objects.apply_delete_raw(&log_key(seq)).await?;
        }
        for (seq, value) in &appended {
            objects.apply_put_raw(&log_key(*seq), value).await?;
        }
        if due {
            self.object_space.wake_merger();
        }
        for &(first, pages) in &change.new_runs {
            note_runs(&self.pool, first, pages, true);
        }
        self.object_space.committed(&change.new_runs);
        self.stage_frees(&change.freed_runs);
        Ok(())
    }

    /// Frees runs of data pages in the running commit: logged as freed, reusable once the
    /// commit is durable and no reader sees them (`Space::retire`, after the commit).
    fn stage_frees(&self, runs: &[(PageId, u64)]) {
        for &(first, pages) in runs {
            note_runs(&self.pool, first, pages, false);
        }
        self.object_space.stage_free(runs);
    }

    /// Inside a commit: removes every entry of object `id` and frees its pages.
    pub(crate) async fn free_object(self: &Arc<Self>, id: u64) -> Result<()> {
        let Some(objects) = self.objects_tree(false)? else { return Ok(()) };
        let _map = self.object_space.map_write(id);
        let low = format::key(id, 0, 0);
        let high = format::key(id, u8::MAX, u64::MAX);
        let mut runs = Vec::new();
        let mut keys = Vec::new();
        for entry in objects.range(&low[..]..=&high[..]) {
            let (key, value) = entry?;
            let (_, kind, index) = format::parse_key(&key).expect("a key of the range");
            if kind == KIND_EXTENT {
                let e = Extent::decode(index, &value)
                    .map_err(|r| corrupt(self, format!("object {id}: {r}")))?;
                runs.push((e.page, e.blocks()));
            }
            keys.push(key);
        }
        for key in keys {
            objects.apply_delete_raw(&key).await?;
        }
        let seqs = self.object_space.fragments().forget(id);
        for seq in seqs {
            objects.apply_delete_raw(&log_key(seq)).await?;
        }
        self.stage_frees(&runs);
        Ok(())
    }
}

/// Notes runs of data pages in the running commit, in pieces the log's run length holds.
fn note_runs(pool: &crate::buffer::BufferPool, first: PageId, pages: u64, allocated: bool) {
    let mut at = 0;
    while at < pages {
        let n = (pages - at).min(u16::MAX as u64);
        pool.note_data(first + at, n as u16, allocated);
        at += n;
    }
}

/// The buffer of a run of new pages from `first_page` holding `blocks` (`(block, bytes)`,
/// one page each, in order), with their extents added to `extents` (consecutive blocks in
/// consecutive pages share one).
pub(super) fn fill_run(
    blocks: &[(u64, &[u8])],
    first_page: PageId,
    extents: &mut Vec<Extent>,
) -> AlignedBlock {
    // Every byte is written below: a short block's tail with zeros.
    let mut buf = AlignedBlock::reused(blocks.len() * BLOCK as usize);
    for (i, &(block, bytes)) in blocks.iter().enumerate() {
        let at = i * BLOCK as usize;
        let slot = &mut buf.as_mut_slice()[at..at + BLOCK as usize];
        slot[..bytes.len()].copy_from_slice(bytes);
        slot[bytes.len()..].fill(0);
        let page = first_page + i as u64;
        match extents.last_mut() {
            Some(e) if e.last + 1 == block && e.page_of(e.last) + 1 == page => e.last = block,
            _ => extents.push(Extent { first: block, last: block, page }),
        }
    }
    buf
}

/// Per block `pieces` (`(offset, bytes)`, in order) touch, except those `skip` names: its
/// new bytes as fragments over what it holds, later pieces over earlier ones.
fn touched_blocks(pieces: &[(u64, &[u8])], skip: impl Fn(u64) -> bool) -> BTreeMap<u64, Fragments> {
    let mut touched: BTreeMap<u64, Fragments> = BTreeMap::new();
    for &(offset, bytes) in pieces {
        let mut at = 0usize;
        while at < bytes.len() {
            let pos = offset + at as u64;
            let block = pos / BLOCK;
            let in_block = (pos % BLOCK) as usize;
            let n = (BLOCK as usize - in_block).min(bytes.len() - at);
            if !skip(block) {
                let entry = touched.entry(block).or_default();
                *entry = format::overlay_fragment(entry, in_block, &bytes[at..at + n]);
            }
            at += n;
        }
    }
    touched
}

fn coalesce_runs(mut runs: Vec<(PageId, u64)>) -> Vec<(PageId, u64)> {
    runs.sort_unstable();
    let mut out: Vec<(PageId, u64)> = Vec::with_capacity(runs.len());
    for (first, pages) in runs {
        match out.last_mut() {
            Some(last) if last.0 + last.1 == first => last.1 += pages,
            _ => out.push((first, pages)),
        }
    }
    out
}

impl Tree {
    /// `key`'s value as stored (a stub is not followed). Outside a commit.
    pub(crate) fn stored(&self, key: &[u8]) -> Result<Stored> {
        match self.get_raw(key)? {
            None => Ok(Stored::Absent),
            Some(value) => self.classify(value),
        }
    }

    pub(crate) fn classify(&self, value: Vec<u8>) -> Result<Stored> {
        match decode_stub(&value) {
            Ok(None) => Ok(Stored::Plain(value)),
            Ok(Some((id, len))) => Ok(Stored::Object { id, len }),
            Err(reason) => Err(corrupt(&self.shared, format!("tree {:?}: {reason}", self.name))),
        }
    }

    /// Reads `buf.len()` bytes at `offset` of object `id` (within its length), consistent
    /// with one moment of its map.
    pub(crate) fn read_object(&self, id: u64, offset: u64, buf: &mut [u8]) -> Result<()> {
        // (`block_on` hides a worker: the data is read with blocking reads.)
        block_on(self.read_object_async(id, offset, buf))
    }

    /// The whole value of `key` if it is an object's `stub` (for `get`).
    pub(crate) fn read_whole_object(&self, id: u64, len: u64) -> Result<Vec<u8>> {
        block_on(self.read_whole_object_async(id, len))
    }

    /// Inside a commit: applies `change` to object `id` and puts `stub` (if any) as `key`'s
    /// value, if the key still holds `stored` and the map is still the one the change was
    /// planned on (another write, a merge, a truncation, a put or a delete may have come
    /// first); `false`, with nothing changed, if not: the caller plans again.
    pub(super) async fn apply_if_current(
        &self,
        objects: &Tree,
        key: &[u8],
        stored: &Stored,
        id: u64,
        change: &Change,
        stub: Option<&[u8]>,
    ) -> Result<bool> {
        let shared = &self.shared;
        // A tree dropped since the plan: nothing applies (its writer, planning again, is
        // told the tree is gone). Not an error here: in a group, an error would fail the
        // commit after the changes of the writers before it.
        if self.dropped.load(Ordering::Acquire) {
            return Ok(false);
        }
        if self.stored_in_commit(key).await? != *stored {
            return Ok(false);
        }
        let _map = shared.object_space.map_write(id);
        if !shared.still_current(id, change)? {
            return Ok(false);
        }
        shared.apply_change(objects, id, change).await?;
        if let Some(stub) = stub {
            self.apply_put_raw(key, stub).await?;
        }
        Ok(true)
    }

    /// Writes `pieces` (`(offset, bytes)`, applied in order) into `key`'s value, or at its
    /// end when `at_end`; returns the new length. One commit; see the module documentation.
    pub(crate) fn write_pieces(
        &self,
        key: &[u8],
        offset: u64,
        bytes: &[u8],
        at_end: bool,
        durability: crate::options::Durability,
    ) -> Result<u64> {
        let shared = &self.shared;
        shared.check_writable()?;
        crate::db::check_key(key)?;
        let objects = shared.objects()?;
        shared.help_merge_if_full()?;
        loop {
            let stored = self.stored(key)?;
            let target = shared.write_target(&stored, offset, bytes.len() as u64, at_end)?;
            let (id, old_len, new_len) = (target.id, target.old_len, target.new_len);
            let pieces = target.pieces(bytes);
            let change = self.plan(id, &pieces)?;
            let stub = encode_stub(id, new_len);
            let new_object = target.base.is_some();
            // (A plain value that becomes this object has nothing to free.)
            let stub = (new_object || new_len != old_len).then_some(&stub[..]);
            let new_runs = change.new_runs.clone();
            let pending = Arc::new(Pending {
                tree: self.clone(),
                key: key.to_vec(),
                stored,
                id,
                change,
                stub: stub.map(<[u8]>::to_vec),
                state: Mutex::new(PendingState::default()),
                wake: Condvar::new(),
            });
            let outcome = self.commit_grouped(&objects, pending, durability);
            match outcome {
                Ok(true) => return Ok(new_len),
                Ok(false) => shared.object_space.give_back(&new_runs),
                Err(e) => {
                    if shared.log()?.check().is_ok() {
                        // No record names the new runs: they are free again.
                        shared.object_space.give_back(&new_runs);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Commits a planned write (`pending`) in a group: writers queue their changes, and
    /// whichever takes the commit lock applies every queued change in one commit (one
    /// record, one lock hand-off for the group; each change is still checked against the
    /// map it was planned on). The others sleep until theirs is done, or until it is their
    /// turn to lead. Returns whether the change applied (`false`: plan again).
    fn commit_grouped(
        &self,
        objects: &Tree,
        pending: Arc<Pending>,
        durability: crate::options::Durability,
    ) -> Result<bool> {
        let shared = &self.shared;
        shared.log()?.check()?;
        shared.object_space.commits().push_back(Arc::clone(&pending));
        loop {
            if let Some(outcome) = pending.state.lock().unwrap().outcome.take() {
                let (applied, end) = outcome?;
                if applied {
                    block_on(shared.wait_durable(end, durability))?;
                    if !shared.closed.load(Ordering::Acquire) {
                        shared.maybe_checkpoint();
                    }
                }
                return Ok(applied);
            }
            if let Some(guard) = shared.commit_lock.try_lock() {
                let batch: Vec<Arc<Pending>> = shared.object_space.commits().drain(..).collect();
                if batch.is_empty() {
                    // A leader took ours and is finishing it.
                    drop(guard);
                    std::thread::yield_now();
                    continue;
                }
                // (The release wakes the next in line to lead the next group.)
                shared.lead_commits(objects, guard, batch);
                continue;
            }
            // Every release of the commit lock wakes the first in line (`pass_object_turn`);
            // the timeout is a safety net.
            pending.wait_turn(std::time::Duration::from_millis(2));
        }
    }

    /// The changes that write `pieces` into object `id`: whole blocks are written
    /// copy-on-write now (into new pages), planned on the extents as they are now; the rest
    /// become fragment-log entries, appended by the commit without reading anything.
    fn plan(&self, id: u64, pieces: &[(u64, &[u8])]) -> Result<Change> {
        let shared = &self.shared;
        let (mut change, whole) = self.plan_fragments(pieces);
        let (Some(first), Some(last)) = (whole.first().map(|w| w.0), whole.last().map(|w| w.0))
        else {
            return Ok(change);
        };
        // The extents only where whole blocks replace them.
        let extents = shared.read_extents(id, first, last)?;
        let refs: Vec<(u64, &[u8])> = whole.iter().map(|(b, d)| (*b, &d[..])).collect();
        let (new, runs) = shared.write_blocks(&refs)?;
        let view = MapView { extents, ..MapView::default() };
        Shared::replace_blocks(&view, &new, &mut change);
        change.new_runs = runs;
        change.planned_on.push((first, last, view.extents));
        Ok(change)
    }

    /// The first half of a plan: the change appending the fragments of `pieces`, and the
    /// blocks they cover whole (`(block, bytes)`, in order), left to the caller to write.
    /// One piece (a plain write) lends its whole blocks as they are, uncopied; several (a
    /// small value becoming an object, then the write) are laid over each other first.
    pub(super) fn plan_fragments<'a>(
        &self,
        pieces: &[(u64, &'a [u8])],
    ) -> (Change, Vec<WholeBlock<'a>>) {
        let mut change = Change::default();
        let mut whole: Vec<WholeBlock<'a>> = Vec::new();
        if let [(offset, bytes)] = *pieces {
            let end = offset + bytes.len() as u64;
            let (first, past) = (offset.div_ceil(BLOCK), end / BLOCK);
            for block in first..past {
                let at = (block * BLOCK - offset) as usize;
                whole.push((block, Cow::Borrowed(&bytes[at..at + BLOCK as usize])));
            }
            // The head and tail around them (or the whole write, inside one block).
            let mut rest: Vec<(u64, &[u8])> = Vec::new();
            let head_end = (first * BLOCK).min(end);
            if offset < head_end {
                rest.push((offset, &bytes[..(head_end - offset) as usize]));
            }
            let tail_start = (past * BLOCK).max(head_end);
            if tail_start < end {
                rest.push((tail_start, &bytes[(tail_start - offset) as usize..]));
            }
            for (block, new) in touched_blocks(&rest, |_| false) {
                change.appends.extend(format::split_entries(&new).into_iter().map(|f| (block, f)));
            }
            return (change, whole);
        }
        for (block, new) in touched_blocks(pieces, |_| false) {
            if new.len() == 1 && new[0].0 == 0 && new[0].1.len() == BLOCK as usize {
                whole.push((block, Cow::Owned(new.into_iter().next().unwrap().1)));
            } else {
                change.appends.extend(format::split_entries(&new).into_iter().map(|f| (block, f)));
            }
        }
        (change, whole)
    }

    /// Sets the length of `key`'s value; see [`Tree::truncate`].
    pub(crate) fn truncate_to(&self, key: &[u8], len: u64) -> Result<bool> {
        let shared = &self.shared;
        shared.check_writable()?;
        crate::db::check_key(key)?;
        if len > super::MAX_OBJECT_LEN {
            return Err(Error::ValueTooLarge {
                len: usize::MAX,
                max: super::MAX_OBJECT_LEN as usize,
            });
        }
        loop {
            let stored = self.stored(key)?;
            let (id, old_len) = match &stored {
                Stored::Absent => return Ok(false),
                Stored::Plain(v) => {
                    let mut v = v.clone();
                    if len as usize <= crate::format::value::MAX_VALUE_LEN {
                        v.resize(len as usize, 0);
                        self.put(key, &v)?;
                        return Ok(true);
                    }
                    // Grows past a plain value: an object holding it, then longer.
                    self.write_pieces(key, 0, &[], false, shared.durability)?;
                    continue;
                }
                Stored::Object { id, len } => (*id, *len),
            };
            let objects = shared.objects()?;
            let mut change = Change::default();
            if len < old_len {
                shared.cut_to(id, len, &mut change)?;
            }
            let stub = encode_stub(id, len);
            let done = block_on(shared.commit(shared.durability, async || {
                self.apply_if_current(&objects, key, &stored, id, &change, Some(&stub)).await
            }));
            let done = match done {
                Ok(done) => done,
                Err(e) => {
                    if shared.log()?.check().is_ok() {
                        shared.object_space.give_back(&change.new_runs);
                    }
                    return Err(e);
                }
            };
            if done {
                return Ok(true);
            }
            shared.object_space.give_back(&change.new_runs);
        }
    }

    /// Puts the bytes of `source` as `key`'s value, streamed into new extents, swapped in by
    /// one commit; returns the length. A short value without the stub magic is put plain.
    pub(crate) fn put_stream(&self, key: &[u8], source: &mut dyn std::io::Read) -> Result<u64> {
        let shared = &self.shared;
        shared.check_writable()?;
        crate::db::check_key(key)?;
        let prepared = match shared.prepare_object(source)? {
            Err(small) => {
                self.put(key, &small)?;
                return Ok(small.len() as u64);
            }
            Ok(prepared) => prepared,
        };
        let outcome =
            block_on(shared.commit(shared.durability, async || {
                shared.apply_prepared(self, key, &prepared).await
            }));
        if let Err(e) = outcome {
            shared.abandon_prepared(&prepared);
            return Err(e);
        }
        Ok(prepared.len)
    }
}

/// The whole blocks of a write in a batch or transaction, written into new pages before
/// its commit (`Shared::prepare_blocks`); the commit decides what they replace
/// (`Tree::apply_write_at`).
#[derive(Debug, Default)]
pub(crate) struct PreparedBlocks {
    extents: Vec<Extent>,
    runs: Vec<Run>,
}

impl Shared {
    /// Writes the blocks that `bytes` at `offset` cover whole into new pages (blocking
    /// writes), for a batch's or transaction's `write_at`.
    pub(crate) fn prepare_blocks(
        self: &Arc<Self>,
        offset: u64,
        bytes: &[u8],
    ) -> Result<PreparedBlocks> {
        let end = offset + bytes.len() as u64;
        let (first, past) = (offset.div_ceil(BLOCK), end / BLOCK);
        let mut prepared = PreparedBlocks::default();
        let mut block = first;
        while block < past {
            // A bounded run of blocks at a time (each run is one buffer and one write).
            let stop = past.min(block + MAX_RUN_PAGES);
            let pieces: Vec<(u64, &[u8])> = (block..stop)
                .map(|b| {
                    let at = (b * BLOCK - offset) as usize;
                    (b, &bytes[at..at + BLOCK as usize])
                })
                .collect();
            match self.write_blocks(&pieces) {
                Ok((extents, runs)) => {
                    prepared.extents.extend(extents);
                    prepared.runs.extend(runs);
                }
                Err(e) => {
                    self.object_space.give_back(&prepared.runs);
                    return Err(e);
                }
            }
            block = stop;
        }
        Ok(prepared)
    }

    /// Prepared blocks whose commit failed: free again (unless the log failed).
    pub(crate) fn abandon_blocks(&self, prepared: &PreparedBlocks) {
        if self.log().is_ok_and(|log| log.check().is_ok()) {
            self.object_space.give_back(&prepared.runs);
        }
    }
}

impl Tree {
    /// Inside a commit (a batch's or a transaction's): writes `bytes` at `offset` of `key`'s
    /// value, as [`Tree::write_at`] does, its whole blocks already written in `blocks`. The
    /// commit lock keeps the map as read here until the change applies: nothing to recheck.
    pub(crate) async fn apply_write_at(
        &self,
        key: &[u8],
        offset: u64,
        bytes: &[u8],
        blocks: &PreparedBlocks,
    ) -> Result<()> {
        let shared = &self.shared;
        let objects = shared.objects()?;
        let stored = self.stored_in_commit(key).await?;
        let target = shared.write_target(&stored, offset, bytes.len() as u64, false)?;
        let (id, old_len, new_len) = (target.id, target.old_len, target.new_len);
        let written_whole = |b: u64| blocks.extents.iter().any(|e| e.first <= b && b <= e.last);
        let pieces = target.pieces(bytes);
        let mut change = Change::default();
        for (block, fragments) in touched_blocks(&pieces, written_whole) {
            change
                .appends
                .extend(format::split_entries(&fragments).into_iter().map(|f| (block, f)));
        }
        let _map = shared.object_space.map_write(id);
        if let (Some(first), Some(last)) = (blocks.extents.first(), blocks.extents.last()) {
            let view = MapView {
                extents: shared.read_extents(id, first.first, last.last)?,
                ..MapView::default()
            };
            Shared::replace_blocks(&view, &blocks.extents, &mut change);
            change.new_runs = blocks.runs.clone();
        }
        shared.apply_change(&objects, id, &change).await?;
        if target.base.is_some() || new_len != old_len {
            self.apply_put_raw(key, &encode_stub(id, new_len)).await?;
        }
        Ok(())
    }

    /// Inside a commit: sets the length of `key`'s value, as [`Tree::truncate`] does
    /// (nothing if the key is absent).
    pub(crate) async fn apply_truncate(&self, key: &[u8], len: u64) -> Result<()> {
        let shared = &self.shared;
        match self.stored_in_commit(key).await? {
            Stored::Absent => Ok(()),
            Stored::Plain(mut v) => {
                if len as usize <= crate::format::value::MAX_VALUE_LEN {
                    v.resize(len as usize, 0);
                    if !format::needs_object(v.len() as u64, &v) {
                        return self.apply_put_raw(key, &v).await;
                    }
                }
                // An object holding what stays of the value (no data I/O: its bytes are
                // less than a block, fragments), then the length.
                let objects = shared.objects()?;
                let id = shared.new_object_id();
                let kept = &v[..v.len().min(len as usize)];
                let mut change = Change::default();
                for (block, fragments) in touched_blocks(&[(0, kept)], |_| false) {
                    change
                        .appends
                        .extend(format::split_entries(&fragments).into_iter().map(|f| (block, f)));
                }
                shared.apply_change(&objects, id, &change).await?;
                self.apply_put_raw(key, &encode_stub(id, len)).await
            }
            Stored::Object { id, len: old_len } => {
                if len == old_len {
                    return Ok(());
                }
                let objects = shared.objects()?;
                let _map = shared.object_space.map_write(id);
                let mut change = Change::default();
                if len < old_len {
                    shared.cut_to(id, len, &mut change)?;
                }
                shared.apply_change(&objects, id, &change).await?;
                self.apply_put_raw(key, &encode_stub(id, len)).await
            }
        }
    }
}

/// A new object whose data is written and durable, waiting for the commit that puts its
/// stub (`Shared::apply_prepared`).
#[derive(Debug)]
pub(crate) struct Prepared {
    id: u64,
    len: u64,
    change: Change,
}

impl Shared {
    /// Writes the bytes of `source` into a new object's extents (1 MiB runs, synced) and
    /// returns it, or, for a short value without the stub magic, the value itself.
    pub(crate) fn prepare_object(
        self: &Arc<Self>,
        source: &mut dyn std::io::Read,
    ) -> Result<std::result::Result<Prepared, Vec<u8>>> {
        let chunk = (MAX_RUN_PAGES * BLOCK) as usize;
        let mut buf = vec![0u8; chunk];
        let read_full = |buf: &mut [u8], source: &mut dyn std::io::Read| -> Result<usize> {
            let mut n = 0;
            while n < buf.len() {
                match source.read(&mut buf[n..]) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Error::io("reading the value to put", e)),
                }
            }
            Ok(n)
        };
        let n = read_full(&mut buf, source)?;
        if !format::needs_object(n as u64, &buf[..n.min(8)]) && n < chunk {
            buf.truncate(n);
            return Ok(Err(buf));
        }
        self.objects()?;
        let id = self.new_object_id();
        let mut extents: Vec<Extent> = Vec::new();
        let mut runs: Vec<(PageId, u64)> = Vec::new();
        let mut len = 0u64;
        let mut filled = n;
        let written = (|| -> Result<()> {
            while filled > 0 {
                let first_block = len / BLOCK;
                let blocks = filled.div_ceil(BLOCK as usize);
                buf[filled..blocks * BLOCK as usize].fill(0);
                let pieces: Vec<(u64, &[u8])> = (0..blocks)
                    .map(|i| {
                        let at = i * BLOCK as usize;
                        (first_block + i as u64, &buf[at..at + BLOCK as usize])
                    })
                    .collect();
                let (new, new_runs) = self.write_blocks(&pieces)?;
                runs.extend(new_runs);
                append_extents(&mut extents, new);
                len += filled as u64;
                if len > super::MAX_OBJECT_LEN {
                    return Err(Error::ValueTooLarge {
                        len: usize::MAX,
                        max: super::MAX_OBJECT_LEN as usize,
                    });
                }
                if filled < chunk {
                    break;
                }
                filled = read_full(&mut buf, source)?;
            }
            Ok(())
        })();
        if let Err(e) = written {
            self.object_space.give_back(&runs);
            return Err(e);
        }
        let change = Change { extent_puts: extents, new_runs: runs, ..Change::default() };
        Ok(Ok(Prepared { id, len, change }))
    }

    /// [`Shared::prepare_object`] of a value in memory, for a task: its blocks go out through
    /// the worker's ring, a run of up to `MAX_RUN_PAGES` at a time (blocking writes off a
    /// worker). The whole blocks are written from `value` itself; only a last partial block
    /// is copied, padded with zeros. The objects tree must exist.
    pub(crate) async fn prepare_object_async(self: &Arc<Self>, value: &[u8]) -> Result<Prepared> {
        let len = value.len() as u64;
        if len > super::MAX_OBJECT_LEN {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: super::MAX_OBJECT_LEN as usize,
            });
        }
        let id = self.new_object_id();
        let block_len = BLOCK as usize;
        let (whole, blocks) = (value.len() / block_len, value.len().div_ceil(block_len));
        let mut padded = vec![0u8; block_len];
        padded[..value.len() - whole * block_len].copy_from_slice(&value[whole * block_len..]);
        let block =
            |i: usize| if i < whole { &value[i * block_len..(i + 1) * block_len] } else { &padded };
        let mut extents: Vec<Extent> = Vec::new();
        let mut runs: Vec<(PageId, u64)> = Vec::new();
        let run_blocks = MAX_RUN_PAGES as usize;
        let mut written = Ok(());
        for start in (0..blocks).step_by(run_blocks) {
            let pieces: Vec<(u64, &[u8])> =
                (start..blocks.min(start + run_blocks)).map(|i| (i as u64, block(i))).collect();
            let outcome = match crate::sched::on_worker() {
                true => self.write_blocks_async(&pieces).await,
                false => self.write_blocks(&pieces),
            };
            match outcome {
                Ok((new, new_runs)) => {
                    runs.extend(new_runs);
                    append_extents(&mut extents, new);
                }
                Err(e) => {
                    written = Err(e);
                    break;
                }
            }
        }
        if let Err(e) = written {
            self.object_space.give_back(&runs);
            return Err(e);
        }
        let change = Change { extent_puts: extents, new_runs: runs, ..Change::default() };
        Ok(Prepared { id, len, change })
    }

    /// Inside a commit: puts the prepared object as `key`'s value in `tree` (freeing the
    /// object the key held before, if any).
    pub(crate) async fn apply_prepared(
        self: &Arc<Self>,
        tree: &Tree,
        key: &[u8],
        prepared: &Prepared,
    ) -> Result<()> {
        let objects = self.objects()?;
        // No reader can reach the new object before its stub is in: no map lock (and
        // `apply_put` takes the old object's, to free it).
        self.apply_change(&objects, prepared.id, &prepared.change).await?;
        tree.apply_put(key, &encode_stub(prepared.id, prepared.len)).await
    }

    /// A prepared object whose commit failed: its pages are free again (unless the log
    /// failed: then the database must be reopened, and recovery decides).
    pub(crate) fn abandon_prepared(&self, prepared: &Prepared) {
        if self.log().is_ok_and(|log| log.check().is_ok()) {
            self.object_space.give_back(&prepared.change.new_runs);
        }
    }

    /// The ids of the objects tree `btree` holds (to free them when it is dropped).
    pub(crate) fn object_ids_of(&self, btree: crate::btree::BTree) -> Result<Vec<u64>> {
        if self.objects_root.get().is_none() {
            return Ok(Vec::new());
        }
        let mut cursor = crate::db::cursor::Cursor::new(
            btree,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
        )
        .with_change_buffer(Arc::clone(&self.change_buffer));
        let mut ids = Vec::new();
        while let Some((_, value)) =
            crate::db::iter::next_blocking(&mut cursor, &self.pool, || Ok(()))?
        {
            if let Ok(Some((id, _))) = decode_stub(&value) {
                ids.push(id);
            }
        }
        Ok(ids)
    }
}

/// Appends a write's `new` extents to an object's `extents`, in order: a run that continues
/// the last extent in the next pages joins it (while it fits an extent's block count).
fn append_extents(extents: &mut Vec<Extent>, mut new: Vec<Extent>) {
    if let (Some(prev), Some(next)) = (extents.last_mut(), new.first()) {
        if prev.last + 1 == next.first
            && prev.page_of(prev.last) + 1 == next.page
            && prev.blocks() + next.blocks() <= u16::MAX as u64
        {
            prev.last = next.last;
            new.remove(0);
        }
    }
    extents.extend(new);
}

#[cfg(test)]
mod tests {
    use super::OBJECTS_TREE;
    use crate::{Db, Error, Options};

    /// Regression: two writers making a database's first object both found the objects tree
    /// missing, and the one that created it second failed with `TreeExists`. The race is a
    /// few instructions wide, so the interleaving is replayed step by step here.
    #[test]
    fn the_loser_of_a_race_to_make_the_objects_tree_opens_the_winners() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options { workers: 0, ..Options::default() }).unwrap();
        let shared = &db.shared;
        // Writer A looks and finds nothing...
        let seen_by_a = {
            let _guard = shared.catalog_lock.lock().unwrap();
            shared.lookup_tree(OBJECTS_TREE).unwrap()
        };
        assert!(seen_by_a.is_none());
        // ...writer B makes the tree...
        let made_by_b = shared.objects_tree(true).unwrap().expect("made").btree;
        // ...and A, creating it in turn, gets B's tree rather than an error.
        let got_by_a = shared.create_tree_named(OBJECTS_TREE, true).unwrap();
        assert_eq!((got_by_a.root, got_by_a.tree_id), (made_by_b.root, made_by_b.tree_id));
        // A plain create still refuses a tree that exists.
        assert!(matches!(
            shared.create_tree_named(OBJECTS_TREE, false),
            Err(Error::TreeExists { .. })
        ));
    }
}
