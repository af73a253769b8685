//! The B+tree's operations, written as *attempts*: each runs synchronously, never waits
//! while holding a latch, and ends either with its result or with an [`Interrupt`] (a page to
//! load, or a restart). A driver (`btree::run` for blocking callers) handles the interrupt
//! and runs the attempt again from the root; inner nodes are hot, so restarting is cheap
//! next to a read from disk.
//!
//! Reads are optimistic: each node is copied and the copy validated against the node's
//! version, and a child is only trusted after its parent is validated again. Writers lock
//! exactly the nodes they change, by upgrading the version they read (no blocking waits, so
//! no deadlocks), always parent before child and left before right.
//!
//! Descents trust no page's word about another: each node entered must hold the key followed
//! (else its parent is corrupt), and where fences steer (the leaf a scan copies, every node
//! on a writer's copying descent) they must be exactly the separators around the node in its
//! parent. Nodes themselves were validated when they came from disk (`Node::validate`).
//!
//! Structure changes follow LeanStore: a full node is split by locking it and its parent
//! (splitting the parent first if it is full too), the right half keeping the node's page;
//! the root keeps its page forever (a full root moves both halves into new pages and becomes
//! their parent), so the catalog never changes when a tree grows. A node left under a quarter
//! full by a delete is merged into its sibling when the two fit in one page; a root left with
//! a single child absorbs it.

use crate::btree::node::{self, Node, NodeMut, Payload, MAX_INLINE_ENTRY};
use crate::btree::probe::Probe;
use crate::btree::scratch::Scratch;
use crate::buffer::{Attempt, BufferPool, Interrupt};
use crate::error::{Error, PageId};
use crate::format::page::{PageKind, PAGE_SIZE};
use crate::format::value;
use crate::io::AlignedPage;

/// Where a descent goes.
#[derive(Debug, Clone, Copy)]
pub enum Seek<'a> {
    /// To the leaf whose range holds this key.
    Key(&'a [u8]),
    /// To the rightmost leaf.
    Last,
}

impl Seek<'_> {
    /// Whether `node`'s range is where this descent may go: it holds the key, or (`Last`)
    /// it is unbounded above.
    fn held_by(&self, node: Node<'_>) -> bool {
        match self {
            Seek::Key(key) => node.holds(key),
            Seek::Last => node.upper_fence().is_empty(),
        }
    }
    /// The fault of a parent whose child `child` is not where the descent goes.
    fn fault(&self, child: PageId) -> String {
        match self {
            Seek::Key(_) => format!(
                "its child {child} does not hold the key the node sends it to (the child's \
                 fences do not bracket it)"
            ),
            Seek::Last => format!("its last child {child} has an upper fence"),
        }
    }
}

/// What a descent found: the node, its version, and which scratch page holds its copy.
#[derive(Debug, Clone, Copy)]
pub struct Descent {
    /// The node's page.
    pub page_id: PageId,
    /// Its version when copied (the copy is valid while the page still has it).
    pub version: u64,
    /// The scratch page holding the copy.
    pub copy: usize,
    /// The parent (page, version, child index), and its copy in scratch page `1 - copy`.
    pub parent: Option<(PageId, u64, usize)>,
}

/// Where a lookup that missed a page goes on: the page, and its parent (page, version,
/// level) as the lookup saw it. See [`BTree::get_resuming`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Resume {
    at: Option<(PageId, (PageId, u64, u16))>,
    /// The leaf that answered a finished lookup, and its version then, when its answer lies
    /// wholly in that leaf (the key's absence, or a value held in the leaf itself).
    leaf: Option<(PageId, u64)>,
}

impl Resume {
    /// The leaf (page, version) that answered the lookup, if the answer lies wholly in it:
    /// while the page keeps that version, the tree's answer for the key is the same (any
    /// change to the key, a split or a merge changes the leaf, and so its version). `None`
    /// for a value on a Value page of its own, which can change without the leaf.
    pub fn leaf(&self) -> Option<(PageId, u64)> {
        self.leaf
    }
}

/// One B+tree, known by its root page, which never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BTree {
    /// The root page (a full root moves both halves into new pages and keeps its own).
    pub root: PageId,
    /// The id every node of the tree carries.
    pub tree_id: u64,
}

fn corrupt(pool: &BufferPool, page: PageId, reason: impl Into<String>) -> Interrupt {
    Interrupt::Error(Error::Corrupt {
        page,
        file: pool.file().path().to_owned(),
        reason: reason.into(),
    })
}

/// The fault of a parent whose child `child` has other fences than the keys around it.
fn fences_differ(child: PageId) -> String {
    format!("the fences of its child {child} are not the separators around it")
}

/// The root is gone: the tree was dropped under a handle.
fn tree_gone() -> Interrupt {
    Interrupt::Error(Error::TreeNotFound { name: String::new() })
}

/// Where to split `node` so that `key` can go in. Appending past the last key of the
/// rightmost leaf (a sequential load) leaves the left half full instead of half full, when the
/// longer upper fence still fits; everything else splits in the middle (`Node::split_point`).
fn split_point(node: Node<'_>, key: &[u8]) -> (usize, Vec<u8>) {
    let count = node.count();
    if node.is_leaf() && count > 0 && node.upper_fence().is_empty() {
        let mut last = Vec::new();
        node.key_into(count - 1, &mut last);
        if key > last.as_slice() && node.free_bytes_after_compaction() >= last.len() {
            return (count - 1, last);
        }
    }
    node.split_point()
}

fn under_full(node: Node<'_>) -> bool {
    node.free_bytes_after_compaction() >= PAGE_SIZE * 3 / 4
}

impl BTree {
    /// Formats `page` as the empty root leaf of a new tree.
    pub fn init_root(page: &mut [u8], root: PageId, tree_id: u64) {
        NodeMut::new(page).init(root, true, 0, tree_id, &[], &[], 0);
    }

    /// Reads `page_id` into scratch page `slot`, checking it is a node of this tree.
    /// `parent` is validated first when the page cannot be read, so that a stale pointer
    /// turns into a restart, not a load of a page that is no longer part of the tree.
    /// `at`: as snapshot `at` sees the page (`BufferPool::read_copy_at`); `None`: as it is.
    fn read_node(
        &self,
        pool: &BufferPool,
        page_id: PageId,
        scratch: &mut Scratch,
        slot: usize,
        parent: Option<(PageId, u64)>,
        at: Option<u64>,
    ) -> Attempt<u64> {
        let copied = match at {
            None => pool.read_copy(page_id, &mut scratch.pages[slot]),
            Some(seq) => pool.read_copy_at(page_id, seq, &mut scratch.pages[slot]),
        };
        let version = match copied {
            Ok(version) => version,
            Err(e) => {
                if let Some((parent_id, parent_version)) = parent {
                    if !pool.validate(parent_id, parent_version) {
                        return Err(Interrupt::Restart);
                    }
                }
                return Err(e);
            }
        };
        if let Some((parent_id, parent_version)) = parent {
            if !pool.validate(parent_id, parent_version) {
                return Err(Interrupt::Restart);
            }
        }
        let node = Node::new(scratch.pages[slot].bytes());
        let kind = crate::format::page::kind_of(scratch.pages[slot].bytes());
        let is_node = matches!(kind, Some(PageKind::Leaf) | Some(PageKind::Inner));
        if !is_node || node.tree_id() != self.tree_id {
            if parent.is_none() {
                return Err(tree_gone());
            }
            return Err(corrupt(pool, page_id, format!("not a node of tree {}", self.tree_id)));
        }
        Ok(version)
    }

    /// Descends from the root towards `seek`, stopping at a leaf, or at page `stop_at` (the
    /// caller compares: a leaf other than `stop_at` means that page is no longer on the path).
    pub fn descend(
        &self,
        pool: &BufferPool,
        seek: Seek<'_>,
        stop_at: Option<PageId>,
        scratch: &mut Scratch,
    ) -> Attempt<Descent> {
        self.descend_at(pool, seek, stop_at, scratch, None)
    }

    /// [`BTree::descend`] through the tree as snapshot `at` sees it (`None`: as it is now).
    pub fn descend_at(
        &self,
        pool: &BufferPool,
        seek: Seek<'_>,
        stop_at: Option<PageId>,
        scratch: &mut Scratch,
        at: Option<u64>,
    ) -> Attempt<Descent> {
        let mut copy = 0;
        let mut page_id = self.root;
        let mut version = self.read_node(pool, page_id, scratch, copy, None, at)?;
        if !seek.held_by(Node::new(scratch.pages[copy].bytes())) {
            return Err(corrupt(pool, page_id, "the root's fences are not infinite"));
        }
        let mut parent = None;
        loop {
            if Some(page_id) == stop_at {
                return Ok(Descent { page_id, version, copy, parent });
            }
            let node = Node::new(scratch.pages[copy].bytes());
            if node.is_leaf() {
                // With `stop_at`, reaching a leaf means that page left this key's path.
                return Ok(Descent { page_id, version, copy, parent });
            }
            let index = match seek {
                Seek::Key(key) => node.lower_bound(key).0,
                Seek::Last => node.count(),
            };
            let child = node.child(index);
            let level = node.level();
            let next = 1 - copy;
            let child_version =
                self.read_node(pool, child, scratch, next, Some((page_id, version)), at)?;
            // Both copies are consistent and the parent was validated after the child's:
            // what they disagree on is in the pages.
            let child_node = Node::new(scratch.pages[next].bytes());
            if u32::from(child_node.level()) + 1 != u32::from(level) {
                return Err(corrupt(
                    pool,
                    child,
                    format!("level does not follow parent {page_id}"),
                ));
            }
            if !seek.held_by(child_node) {
                return Err(corrupt(pool, page_id, seek.fault(child)));
            }
            // Writers split and merge by these fences, and reverse scans move on by them.
            let node = Node::new(scratch.pages[copy].bytes());
            if !node.bounds_child(index, child_node.lower_fence(), child_node.upper_fence()) {
                return Err(corrupt(pool, page_id, fences_differ(child)));
            }
            parent = Some((page_id, version, index));
            page_id = child;
            version = child_version;
            copy = next;
        }
    }

    /// Begins reading `page_id` in place, checking it is a node of this tree whose range
    /// holds `key` (the key the descent follows). `parent` is validated first when the page
    /// cannot be read or is not what it should be, so that a stale pointer turns into a
    /// restart, not a load of a page no longer in the tree.
    #[inline]
    fn probe_node<'p>(
        &self,
        pool: &'p BufferPool,
        page_id: PageId,
        parent: Option<(PageId, u64, u16)>,
        key: &[u8],
    ) -> Attempt<(u64, Probe<'p>)> {
        let begun = pool.read_begin(page_id);
        if let Some((parent_id, parent_version, _)) = parent {
            if !pool.validate(parent_id, parent_version) {
                return Err(Interrupt::Restart);
            }
        }
        let (version, view) = begun?;
        let probe = Probe::new(view);
        let level_ok =
            parent.is_none_or(|(_, _, level)| u32::from(probe.level()) + 1 == u32::from(level));
        if !probe.is_node() || probe.tree_id() != self.tree_id || !level_ok {
            // Only a consistent header is evidence.
            if !pool.validate(page_id, version) {
                return Err(Interrupt::Restart);
            }
            if parent.is_none() {
                return Err(tree_gone());
            }
            let reason = if level_ok {
                format!("not a node of tree {}", self.tree_id)
            } else {
                format!("level does not follow parent {}", parent.unwrap().0)
            };
            return Err(corrupt(pool, page_id, reason));
        }
        if !probe.holds(key) {
            // Evidence only if neither page moved since: the parent still sends `key` here.
            let parent_moved = parent.is_some_and(|(id, version, _)| !pool.validate(id, version));
            if parent_moved || !pool.validate(page_id, version) {
                return Err(Interrupt::Restart);
            }
            return Err(match parent {
                Some((parent_id, _, _)) => corrupt(pool, parent_id, Seek::Key(key).fault(page_id)),
                None => corrupt(pool, page_id, "the root's fences are not infinite"),
            });
        }
        Ok((version, probe))
    }

    /// Copies the leaf whose range holds `key` into `out` and returns its page and version.
    /// Inner nodes are read in place (`probe.rs`), only the leaf is copied: the scans' way to
    /// their next leaf.
    pub fn leaf_copy(
        &self,
        pool: &BufferPool,
        key: &[u8],
        out: &mut AlignedPage,
    ) -> Attempt<(PageId, u64)> {
        let found = self.probe_leaf(pool, key, None)?;
        let found = found.expect("a descent as of now never falls back");
        self.copy_found_leaf(pool, found, out)
    }

    /// [`BTree::leaf_copy`] as snapshot `seq` sees the tree, reading nodes in place while
    /// no page on the path has old versions (`BufferPool::versioned`); `None` when one has
    /// (then descend by copies: [`BTree::descend_at`]).
    pub fn leaf_copy_at(
        &self,
        pool: &BufferPool,
        key: &[u8],
        seq: u64,
        out: &mut AlignedPage,
    ) -> Attempt<Option<(PageId, u64)>> {
        if !pool.snapshot_ready(seq) {
            return Err(Interrupt::Restart);
        }
        match self.probe_leaf(pool, key, Some(seq))? {
            Some(found) => self.copy_found_leaf(pool, found, out).map(Some),
            None => Ok(None),
        }
    }

    #[allow(clippy::type_complexity)]
    fn copy_found_leaf(
        &self,
        pool: &BufferPool,
        (page_id, version, probe, parent): (
            PageId,
            u64,
            Probe<'_>,
            Option<(PageId, u64, Probe<'_>, usize)>,
        ),
        out: &mut AlignedPage,
    ) -> Attempt<(PageId, u64)> {
        probe.copy_page(out.bytes_mut());
        if !pool.validate(page_id, version) {
            return Err(Interrupt::Restart);
        }
        // A scan moves on by the leaf's fences: they must be exactly the separators around
        // it (a fence that merely holds the key could skip keys of the next leaf).
        if let Some((parent_id, parent_version, parent, index)) = parent {
            let leaf = Node::new(out.bytes());
            if !parent.bounds_child(index, leaf.lower_fence(), leaf.upper_fence()) {
                if !pool.validate(parent_id, parent_version) {
                    return Err(Interrupt::Restart);
                }
                return Err(corrupt(pool, parent_id, fences_differ(page_id)));
            }
        }
        Ok((page_id, version))
    }

    /// The upper end of the key range of the leaf that holds `key` (its keys are `<=` it;
    /// `None`: the last leaf, unbounded), read from the leaf's parent, without the leaf.
    /// Copies the parent into `out`. A root that is a leaf is the last leaf.
    pub fn leaf_upper_bound(
        &self,
        pool: &BufferPool,
        key: &[u8],
        out: &mut AlignedPage,
    ) -> Attempt<Option<Vec<u8>>> {
        let mut page_id = self.root;
        let (mut version, mut probe) = self.probe_node(pool, page_id, None, key)?;
        if probe.is_leaf() {
            return Ok(None);
        }
        while probe.level() > 1 {
            let child = probe.child(probe.lower_bound(key).0);
            let parent = (page_id, version, probe.level());
            (version, probe) = self.probe_node(pool, child, Some(parent), key)?;
            page_id = child;
        }
        probe.copy_page(out.bytes_mut());
        if !pool.validate(page_id, version) {
            return Err(Interrupt::Restart);
        }
        let node = Node::new(out.bytes());
        let (slot, _) = node.lower_bound(key);
        if slot < node.count() {
            let mut upper = Vec::new();
            node.key_into(slot, &mut upper);
            return Ok(Some(upper));
        }
        let fence = node.upper_fence();
        Ok((!fence.is_empty()).then(|| fence.to_vec()))
    }

    /// The leaf whose range holds `key`, and its version, found reading every node in place
    /// (`probe.rs`): the way of writers, which then latch the leaf with that version (so a
    /// leaf changed since fails the latch and the attempt restarts).
    pub fn locate_leaf(&self, pool: &BufferPool, key: &[u8]) -> Attempt<(PageId, u64)> {
        let (page_id, version, _, _) = self.probe_leaf(pool, key, None)?.expect("as of now");
        Ok((page_id, version))
    }

    /// Descends in place to the leaf whose range holds `key`: its page, version and probe
    /// (not yet validated past its header), and its parent's (page, version, probe, the
    /// leaf's index in it), unless the root is the leaf. `at`: for snapshot `at`, which
    /// reads a page in place only if it has no old versions (asked after its state word
    /// was loaded, as `BufferPool::read_copy_at` asks); `None` (with `at` only) when one on
    /// the path has.
    #[allow(clippy::type_complexity)]
    #[inline]
    fn probe_leaf<'p>(
        &self,
        pool: &'p BufferPool,
        key: &[u8],
        at: Option<u64>,
    ) -> Attempt<Option<(PageId, u64, Probe<'p>, Option<(PageId, u64, Probe<'p>, usize)>)>> {
        let mut page_id = self.root;
        let (mut version, mut probe) = self.probe_node(pool, page_id, None, key)?;
        if at.is_some() && pool.versioned(page_id) {
            return Ok(None);
        }
        let mut parent = None;
        while !probe.is_leaf() {
            let index = probe.lower_bound(key).0;
            let child = probe.child(index);
            let (child_version, child_probe) =
                self.probe_node(pool, child, Some((page_id, version, probe.level())), key)?;
            if at.is_some() && pool.versioned(child) {
                return Ok(None);
            }
            parent = Some((page_id, version, probe, index));
            (page_id, version, probe) = (child, child_version, child_probe);
        }
        Ok(Some((page_id, version, probe, parent)))
    }

    /// The leaf `key` belongs in, its path loaded into the pool: a prefetch before a commit.
    pub fn leaf_for(&self, pool: &BufferPool, key: &[u8]) -> Attempt<PageId> {
        let (page_id, version, _, _) = self.probe_leaf(pool, key, None)?.expect("as of now");
        match pool.validate(page_id, version) {
            true => Ok(page_id),
            false => Err(Interrupt::Restart),
        }
    }

    /// Whether page `leaf` is in the pool and is this tree's leaf for `key`: then a prefetch
    /// of `key` has nothing to load. One node probed, not a descent (sorted batches meet the
    /// same leaf again and again). A page that moved on is simply not the leaf.
    pub fn resident_leaf_holds(&self, pool: &BufferPool, leaf: PageId, key: &[u8]) -> bool {
        self.resident_leaf_version(pool, leaf, key).is_some()
    }

    /// The version of page `leaf` if it is in memory, a leaf of this tree, and its range
    /// holds `key` (all read at that version).
    fn resident_leaf_version(&self, pool: &BufferPool, leaf: PageId, key: &[u8]) -> Option<u64> {
        let (version, view) = pool.read_begin(leaf).ok()?;
        let probe = Probe::new(view);
        let holds = probe.is_leaf() && probe.tree_id() == self.tree_id && probe.holds(key);
        (holds && pool.validate(leaf, version)).then_some(version)
    }

    /// One level of a descent to `key`, for descents of several keys that go down together
    /// (`together.rs`): reads the node `resume` stops at (the root at first) and, when it
    /// is an inner node, leaves `resume` at the child the key goes to and returns that
    /// child, for the caller to prefetch while it takes the other keys down a level.
    /// `None` at a leaf (whose entry for the key it prefetches). [`BTree::get_resuming`]
    /// with the same `resume` ends the descent there; as after a miss, it validates the
    /// parent first, and starts at the root if the parent changed.
    pub fn descend_step(
        &self,
        pool: &BufferPool,
        key: &[u8],
        resume: &mut Resume,
    ) -> Attempt<Option<PageId>> {
        let (page_id, parent) = match resume.at {
            Some((child, parent)) => (child, Some(parent)),
            None => (self.root, None),
        };
        let (version, probe) = self.probe_node(pool, page_id, parent, key)?;
        if probe.is_leaf() {
            // The lookup will read the key's entry: ask for its lines now, while the other
            // descents go on (the search reads only slots, `order_past_heads`).
            if let (slot, true) = probe.lower_bound(key) {
                probe.prefetch_entry(slot);
            }
            return Ok(None);
        }
        let child = probe.child(probe.lower_bound(key).0);
        resume.at = Some((child, (page_id, version, probe.level())));
        Ok(Some(child))
    }

    /// Calls `read` with the value of `key`, if present. Reads nodes in place (`probe.rs`)
    /// rather than copying them: this is the point-lookup path.
    pub fn get<R>(
        &self,
        pool: &BufferPool,
        key: &[u8],
        scratch: &mut Scratch,
        read: &mut impl FnMut(&[u8]) -> R,
    ) -> Attempt<Option<R>> {
        self.get_resuming(pool, key, scratch, read, &mut Resume::default(), false)
    }

    /// [`BTree::get`] for a driver that runs the attempts of one lookup with the same
    /// `resume`: when an attempt stops at a page that is not in memory, the next one starts
    /// at that page (if its parent did not change meanwhile) instead of at the root.
    /// `committed`: a reader's lookup, which waits (restarts) while the commit in progress
    /// has changed the leaf or Value page (`BufferPool::committed`), so that it never sees
    /// part of a commit.
    pub fn get_resuming<R>(
        &self,
        pool: &BufferPool,
        key: &[u8],
        scratch: &mut Scratch,
        read: &mut impl FnMut(&[u8]) -> R,
        resume: &mut Resume,
        committed: bool,
    ) -> Attempt<Option<R>> {
        let mut page_id = self.root;
        resume.leaf = None;
        let resumed = resume.at.take().and_then(|(child, parent)| {
            // `probe_node` validates the parent: the child is still where the key goes.
            self.probe_node(pool, child, Some(parent), key).ok().map(|found| (child, found))
        });
        let (mut version, mut probe) = match resumed {
            Some((child, found)) => {
                page_id = child;
                found
            }
            None => self.probe_node(pool, page_id, None, key)?,
        };
        while !probe.is_leaf() {
            let child = probe.child(probe.lower_bound(key).0);
            let parent = (page_id, version, probe.level());
            (version, probe) = match self.probe_node(pool, child, Some(parent), key) {
                Ok(found) => found,
                Err(Interrupt::Miss(missing)) if missing == child => {
                    resume.at = Some((child, parent));
                    return Err(Interrupt::Miss(missing));
                }
                Err(e) => return Err(e),
            };
            page_id = child;
        }
        let (slot, exact) = probe.lower_bound(key);
        if !exact {
            if !pool.validate(page_id, version) {
                return Err(Interrupt::Restart);
            }
            if committed {
                pool.committed(page_id)?;
            }
            resume.leaf = Some((page_id, version));
            return Ok(None);
        }
        let (value_buf, other) = scratch.pages.split_at_mut(1);
        let value_buf: &mut [u8; PAGE_SIZE] =
            value_buf[0].bytes_mut().try_into().expect("a scratch page is a page");
        let (len, out_of_line) = probe.payload_into(slot, &mut *value_buf);
        if !pool.validate(page_id, version) {
            return Err(Interrupt::Restart);
        }
        if committed {
            pool.committed(page_id)?;
        }
        if !out_of_line {
            resume.leaf = Some((page_id, version));
            return Ok(Some(read(&value_buf[..len])));
        }
        let (id, tail) = value_buf[..len].split_at(8.min(len));
        let value_page = node::decode_page_id(id);
        let copied = pool.read_copy(value_page, &mut other[0]);
        if !pool.validate(page_id, version) {
            return Err(Interrupt::Restart);
        }
        copied?;
        if committed {
            pool.committed(value_page)?;
        }
        self.out_of_line(pool, value_page, &other[0], tail, &mut scratch.value, read)
    }

    /// Calls `read` with the value stored on Value page `value_page` (copied into `page`)
    /// and, for a value longer than a page, its `tail`, which follows in the leaf (joined in
    /// `joined`).
    fn out_of_line<R>(
        &self,
        pool: &BufferPool,
        value_page: PageId,
        page: &AlignedPage,
        tail: &[u8],
        joined: &mut Vec<u8>,
        read: &mut impl FnMut(&[u8]) -> R,
    ) -> Attempt<Option<R>> {
        let bytes = value::decode(page.bytes(), self.tree_id)
            .map_err(|reason| corrupt(pool, value_page, reason))?;
        if tail.is_empty() {
            return Ok(Some(read(bytes)));
        }
        joined.clear();
        joined.extend_from_slice(bytes);
        joined.extend_from_slice(tail);
        Ok(Some(read(joined)))
    }

    /// Calls `read` with the value of `key` as snapshot `seq` sees the tree, if present
    /// there. Every node is copied (`BufferPool::read_copy_at`): an old version of a page is
    /// a copy already.
    pub fn get_at<R>(
        &self,
        pool: &BufferPool,
        key: &[u8],
        seq: u64,
        scratch: &mut Scratch,
        read: &mut impl FnMut(&[u8]) -> R,
    ) -> Attempt<Option<R>> {
        let found = self.descend_at(pool, Seek::Key(key), None, scratch, Some(seq))?;
        let (leaf, rest) = scratch.pages.split_at_mut(found.copy.max(1));
        let (leaf, other) = match found.copy {
            0 => (&leaf[0], &mut rest[0]),
            _ => (&rest[0], &mut leaf[0]),
        };
        let node = Node::new(leaf.bytes());
        let (slot, exact) = node.lower_bound(key);
        if !exact {
            return Ok(None);
        }
        let (value_page, tail) = match node.value(slot) {
            node::Payload::Inline(bytes) => return Ok(Some(read(bytes))),
            node::Payload::OutOfLine { page, tail } => (page, tail),
        };
        pool.read_copy_at(value_page, seq, other)?;
        if !pool.validate(found.page_id, found.version) {
            return Err(Interrupt::Restart);
        }
        self.out_of_line(pool, value_page, other, tail, &mut scratch.value, read)
    }

    /// Inserts `key` or overwrites its value.
    pub fn put(
        &self,
        pool: &BufferPool,
        key: &[u8],
        value: &[u8],
        scratch: &mut Scratch,
    ) -> Attempt<()> {
        self.put_near(pool, key, value, scratch, None).map(drop)
    }

    /// [`BTree::put`] that first tries page `near` (a leaf the caller met lately: the one the
    /// previous key of a sorted batch went to, or the one a transaction read this key from)
    /// instead of descending from the root: when it is in memory, a leaf of this tree, and
    /// its range holds `key`, it is the leaf for `key` (a leaf that leaves the tree is freed,
    /// and a split or merge changes the fences of those it keeps, all under their latches).
    /// Returns the leaf the entry went into.
    pub fn put_near(
        &self,
        pool: &BufferPool,
        key: &[u8],
        value: &[u8],
        scratch: &mut Scratch,
        near: Option<PageId>,
    ) -> Attempt<PageId> {
        let found = near.and_then(|leaf| self.resident_leaf_version(pool, leaf, key));
        let (leaf_id, version) = match found {
            Some(version) => (near.expect("found through it"), version),
            None => self.locate_leaf(pool, key)?,
        };
        let out_of_line = key.len() + value.len() > MAX_INLINE_ENTRY;
        let (in_page, tail) = value::split(value);
        let payload_len = if out_of_line { 8 + tail.len() } else { value.len() };
        let mut guard = pool.lock_exclusive(leaf_id, version)?;
        let (slot, exact, fits, old) = {
            let leaf = Node::new(guard.page());
            let (slot, exact) = leaf.lower_bound(key);
            let free = leaf.free_bytes_after_compaction();
            let (fits, old) = if exact {
                let old_len = leaf.payload(slot).len();
                let fits = free + leaf.space_needed(key.len(), old_len)
                    >= leaf.space_needed(key.len(), payload_len);
                (fits, Some(leaf.value(slot)))
            } else {
                (leaf.has_space_for(key.len(), payload_len), None)
            };
            (
                slot,
                exact,
                fits,
                old.map(|p| match p {
                    Payload::OutOfLine { page, .. } => Some(page),
                    Payload::Inline(_) => None,
                }),
            )
        };
        if !fits {
            drop(guard);
            self.split(pool, leaf_id, key, scratch)?;
            return Err(Interrupt::Restart);
        }
        let mut stored = [0; 8 + node::MAX_TAIL];
        let payload: &[u8] = if out_of_line {
            let mut value_guard = pool.allocate()?;
            let value_page = value_guard.page_id();
            value::encode(value_guard.page_mut(), value_page, self.tree_id, in_page);
            stored[..8].copy_from_slice(&value_page.to_le_bytes());
            stored[8..payload_len].copy_from_slice(tail);
            &stored[..payload_len]
        } else {
            value
        };
        if let Some(Some(old_page)) = old {
            pool.free_by_id(old_page)?;
        }
        let done = guard.change_tracked(|page, written| {
            let mut leaf = NodeMut::tracked(page, written);
            match exact {
                true => leaf.set_payload(slot, payload, out_of_line),
                false => leaf.insert(key, payload, out_of_line),
            }
        });
        assert!(done, "leaf {leaf_id} had room for the entry but refused it");
        Ok(leaf_id)
    }

    /// Removes `key`; returns whether it was there, and the leaf to offer to
    /// [`BTree::try_merge`] when the removal left it under-full.
    pub fn delete(
        &self,
        pool: &BufferPool,
        key: &[u8],
        scratch: &mut Scratch,
    ) -> Attempt<(bool, Option<PageId>)> {
        let found = self.descend(pool, Seek::Key(key), None, scratch)?;
        let (slot, exact) = Node::new(scratch.pages[found.copy].bytes()).lower_bound(key);
        if !exact {
            return Ok((false, None));
        }
        let mut guard = pool.lock_exclusive(found.page_id, found.version)?;
        if let Payload::OutOfLine { page: value_page, .. } = Node::new(guard.page()).value(slot) {
            pool.free_by_id(value_page)?;
        }
        let under_full = guard.change_tracked(|page, written| {
            let mut leaf = NodeMut::tracked(page, written);
            leaf.remove_at(slot);
            under_full(leaf.as_node())
        });
        let merge = under_full && found.page_id != self.root;
        Ok((true, merge.then_some(found.page_id)))
    }

    /// Applies `change` to the value of `key` in place, under the leaf's exclusive latch.
    /// Returns whether the key was there. `change` runs at most once, when the attempt
    /// succeeds.
    pub fn update<F: FnOnce(&mut [u8])>(
        &self,
        pool: &BufferPool,
        key: &[u8],
        change: &mut Option<F>,
        scratch: &mut Scratch,
    ) -> Attempt<bool> {
        let found = self.descend(pool, Seek::Key(key), None, scratch)?;
        let (slot, exact) = Node::new(scratch.pages[found.copy].bytes()).lower_bound(key);
        if !exact {
            return Ok(false);
        }
        let mut guard = pool.lock_exclusive(found.page_id, found.version)?;
        match Node::new(guard.page()).value(slot) {
            Payload::Inline(_) => {
                let change = change.take().expect("update applied twice");
                guard.change_tracked(|page, written| {
                    change(NodeMut::tracked(page, written).payload_mut(slot));
                });
            }
            Payload::OutOfLine { page: value_page, tail: [] } => {
                let mut value_guard = pool.lock_exclusive_any(value_page)?;
                let change = change.take().expect("update applied twice");
                change(value::value_mut(value_guard.page_mut()));
            }
            Payload::OutOfLine { page: value_page, tail } => {
                // Cut between the page and the leaf: changed joined, then cut again the same
                // way (the length does not change).
                let tail_len = tail.len();
                let mut value_guard = pool.lock_exclusive_any(value_page)?;
                let change = change.take().expect("update applied twice");
                let in_page = value::value_mut(value_guard.page_mut());
                let mut joined = [&in_page[..], tail].concat();
                change(&mut joined);
                in_page.copy_from_slice(&joined[..in_page.len()]);
                guard.change_tracked(|page, written| {
                    let mut leaf = NodeMut::tracked(page, written);
                    let payload = leaf.payload_mut(slot);
                    let at = payload.len() - tail_len;
                    payload[at..].copy_from_slice(&joined[joined.len() - tail_len..]);
                });
            }
        }
        Ok(true)
    }

    /// Splits page `page_id` (on `key`'s path), splitting its parent first when the parent
    /// has no room for the separator.
    pub fn split(
        &self,
        pool: &BufferPool,
        page_id: PageId,
        key: &[u8],
        scratch: &mut Scratch,
    ) -> Attempt<()> {
        if page_id == self.root {
            return self.split_root(pool, key, scratch);
        }
        let found = self.descend(pool, Seek::Key(key), Some(page_id), scratch)?;
        if found.page_id != page_id {
            // Someone else split it meanwhile: the caller restarts and sees.
            return Ok(());
        }
        let (parent_id, parent_version, _) = found.parent.expect("a non-root node has a parent");
        let (sep_slot, separator) = split_point(Node::new(scratch.pages[found.copy].bytes()), key);
        if !Node::new(scratch.pages[1 - found.copy].bytes()).has_space_for(separator.len(), 8) {
            self.split(pool, parent_id, key, scratch)?;
            return Err(Interrupt::Restart);
        }
        let mut parent = pool.lock_exclusive(parent_id, parent_version)?;
        let mut target = pool.lock_exclusive(page_id, found.version)?;
        let mut left = pool.allocate()?;
        let left_id = left.page_id();
        let right_copy = &mut scratch.pages[2];
        node::split_into(
            Node::new(target.page()),
            sep_slot,
            &separator,
            &mut NodeMut::new(left.page_mut()),
            left_id,
            &mut NodeMut::new(right_copy.bytes_mut()),
            page_id,
        );
        target.page_mut().copy_from_slice(right_copy.bytes());
        let inserted =
            NodeMut::new(parent.page_mut()).insert(&separator, &left_id.to_le_bytes(), false);
        assert!(inserted, "parent {parent_id} had room for the separator but refused it");
        Ok(())
    }

    fn split_root(&self, pool: &BufferPool, key: &[u8], scratch: &mut Scratch) -> Attempt<()> {
        let version = self.read_node(pool, self.root, scratch, 0, None, None)?;
        let mut root = pool.lock_exclusive(self.root, version)?;
        let node = Node::new(root.page());
        if node.count() == 0 {
            return Ok(());
        }
        let (sep_slot, separator) = split_point(node, key);
        let level = node.level() + 1;
        let mut left = pool.allocate()?;
        let mut right = match pool.allocate() {
            Ok(right) => right,
            Err(e) => {
                pool.free(left);
                return Err(e.into());
            }
        };
        let (left_id, right_id) = (left.page_id(), right.page_id());
        node::split_into(
            node,
            sep_slot,
            &separator,
            &mut NodeMut::new(left.page_mut()),
            left_id,
            &mut NodeMut::new(right.page_mut()),
            right_id,
        );
        let mut new_root = NodeMut::new(root.page_mut());
        new_root.init(self.root, false, level, self.tree_id, &[], &[], right_id);
        assert!(new_root.insert(&separator, &left_id.to_le_bytes(), false));
        Ok(())
    }

    /// Merges under-full page `page_id` (on `key`'s path) with a sibling when both fit in
    /// one page, then tries the parent; a root left with one child absorbs it.
    pub fn try_merge(
        &self,
        pool: &BufferPool,
        page_id: PageId,
        key: &[u8],
        scratch: &mut Scratch,
    ) -> Attempt<()> {
        if page_id == self.root {
            return self.collapse_root(pool, scratch);
        }
        let found = self.descend(pool, Seek::Key(key), Some(page_id), scratch)?;
        if found.page_id != page_id {
            return Ok(()); // merged or split by someone else meanwhile
        }
        let (parent_id, parent_version, index) = found.parent.expect("non-root has a parent");
        let parent_copy = 1 - found.copy;
        let parent = Node::new(scratch.pages[parent_copy].bytes());
        let count = parent.count();
        if count == 0 {
            return self.try_merge(pool, parent_id, key, scratch);
        }
        let left_index = if index < count { index } else { index - 1 };
        let mut separator = std::mem::take(&mut scratch.key);
        parent.key_into(left_index, &mut separator);
        let (left_id, right_id) = (parent.child(left_index), parent.child(left_index + 1));
        let sibling = if left_id == page_id { right_id } else { left_id };
        let sibling_version = match self.read_node(
            pool,
            sibling,
            scratch,
            2,
            Some((parent_id, parent_version)),
            None,
        ) {
            Ok(v) => v,
            Err(e) => {
                scratch.key = separator;
                return Err(e);
            }
        };
        let (left_copy, right_copy) =
            if left_id == page_id { (found.copy, 2) } else { (2, found.copy) };
        // Fences change only with the parent latched, and the parent did not move since both
        // copies: siblings that do not meet at their separator are corrupt, and merging them
        // would make a node of keys outside its fences.
        let meet = Node::new(scratch.pages[left_copy].bytes()).upper_fence() == &separator[..]
            && Node::new(scratch.pages[right_copy].bytes()).lower_fence() == &separator[..];
        if !meet {
            scratch.key = separator;
            let reason =
                format!("children {left_id} and {right_id} do not meet at their separator");
            return Err(corrupt(pool, parent_id, reason));
        }
        let merged = {
            let (before, out) = scratch.pages.split_at_mut(3);
            node::merge_into(
                Node::new(before[left_copy].bytes()),
                &separator,
                Node::new(before[right_copy].bytes()),
                &mut NodeMut::new(out[0].bytes_mut()),
                right_id,
            )
        };
        scratch.key = separator;
        if !merged {
            return Ok(());
        }
        let (left_version, right_version) = if left_id == page_id {
            (found.version, sibling_version)
        } else {
            (sibling_version, found.version)
        };
        let mut parent_guard = pool.lock_exclusive(parent_id, parent_version)?;
        let left_guard = pool.lock_exclusive(left_id, left_version)?;
        let mut right_guard = pool.lock_exclusive(right_id, right_version)?;
        right_guard.page_mut().copy_from_slice(scratch.pages[3].bytes());
        let mut parent_node = NodeMut::new(parent_guard.page_mut());
        parent_node.remove_at(left_index);
        let parent_under_full = under_full(parent_node.as_node());
        pool.free(left_guard);
        drop(right_guard);
        drop(parent_guard);
        if parent_under_full {
            return self.try_merge(pool, parent_id, key, scratch);
        }
        Ok(())
    }

    /// A root with no separator left takes over its only child's contents.
    fn collapse_root(&self, pool: &BufferPool, scratch: &mut Scratch) -> Attempt<()> {
        let version = self.read_node(pool, self.root, scratch, 0, None, None)?;
        let root = Node::new(scratch.pages[0].bytes());
        if root.is_leaf() || root.count() > 0 {
            return Ok(());
        }
        let child = root.upper_child();
        let child_version =
            self.read_node(pool, child, scratch, 1, Some((self.root, version)), None)?;
        let only_child = Node::new(scratch.pages[1].bytes());
        if !only_child.lower_fence().is_empty() || !only_child.upper_fence().is_empty() {
            return Err(corrupt(pool, self.root, format!("its only child {child} has fences")));
        }
        let mut root_guard = pool.lock_exclusive(self.root, version)?;
        let child_guard = pool.lock_exclusive(child, child_version)?;
        let page = root_guard.page_mut();
        page.copy_from_slice(child_guard.page());
        crate::format::page::write_u64(page, crate::format::page::OFFSET_PAGE_ID, self.root);
        pool.free(child_guard);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::PageFile;
    use crate::testing::run;
    use tempfile::TempDir;

    /// The upper bound the parent gives for a key's leaf is the leaf's own upper fence, for
    /// keys inside, between and beyond the keys of a tree of several levels.
    #[test]
    fn a_leafs_upper_bound_from_its_parent_is_its_upper_fence() {
        let dir = TempDir::with_prefix("leaf-upper").unwrap();
        let file = PageFile::open(&dir.path().join("pages"), true, true, true, 1 << 20).unwrap();
        let pool = BufferPool::new(file, 1024, 1 << 16, 0, Vec::new()).unwrap();
        let mut guard = pool.allocate().unwrap();
        let tree = BTree { root: guard.page_id(), tree_id: 3 };
        BTree::init_root(guard.page_mut(), tree.root, tree.tree_id);
        drop(guard);
        let key = |i: u64| format!("key-{:06}", i * 7919 % 100_000).into_bytes();
        let mut out = AlignedPage::zeroed();
        let fence_of = |k: &[u8]| {
            run(&pool, |scratch| {
                let page = &mut scratch.pages[0];
                tree.leaf_copy(&pool, k, page)?;
                let fence = Node::new(page.bytes()).upper_fence();
                Ok((!fence.is_empty()).then(|| fence.to_vec()))
            })
            .unwrap()
        };
        // A root that is a leaf: unbounded.
        run(&pool, |scratch| tree.put(&pool, &key(1), b"v", scratch)).unwrap();
        assert_eq!(run(&pool, |_| tree.leaf_upper_bound(&pool, &key(1), &mut out)).unwrap(), None);
        for i in 2..6000 {
            run(&pool, |scratch| tree.put(&pool, &key(i), &[i as u8; 100], scratch)).unwrap();
        }
        let mut levels = 0;
        let mut bounded = 0;
        for i in 0..3000 {
            let mut query = key(i * 3);
            if i % 3 == 1 {
                query.push(b'!');
            }
            let from_parent =
                run(&pool, |_| tree.leaf_upper_bound(&pool, &query, &mut out)).unwrap();
            assert_eq!(from_parent, fence_of(&query), "{query:?}");
            bounded += from_parent.is_some() as u32;
            levels = levels.max(Node::new(out.bytes()).level());
        }
        assert!(levels >= 1 && bounded > 2900, "a tree of several leaves: {levels} {bounded}");
    }

    /// A tree of keys `key(0..keys)` with 100-byte values, in a pool that holds all of it
    /// (and checks no page as it loads: corruption made in memory reaches the descents).
    fn tree_of(dir: &TempDir, keys: u64) -> (BufferPool, BTree) {
        let file = PageFile::open(&dir.path().join("pages"), true, true, true, 1 << 24).unwrap();
        let pool = BufferPool::new(file, 1024, 1 << 16, 0, Vec::new()).unwrap();
        let mut guard = pool.allocate().unwrap();
        let tree = BTree { root: guard.page_id(), tree_id: 3 };
        BTree::init_root(guard.page_mut(), tree.root, tree.tree_id);
        drop(guard);
        for i in 0..keys {
            run(&pool, |scratch| tree.put(&pool, &key(i), &[i as u8; 100], scratch)).unwrap();
        }
        (pool, tree)
    }

    fn key(i: u64) -> Vec<u8> {
        format!("key-{i:06}").into_bytes()
    }

    /// Descents taken down together stop at the leaf that holds each key (present, absent,
    /// before the first and after the last), leave a row without a key as it was, and the
    /// lookups that end there answer as lookups from the root do; after splits under them,
    /// still, since a stale parent sends the lookup back to the root.
    #[test]
    fn descents_taken_together_end_at_each_keys_leaf() {
        let dir = TempDir::with_prefix("together").unwrap();
        let (pool, tree) = tree_of(&dir, 20_000);
        let queries: Vec<Vec<u8>> = [key(0), key(17), key(9_999), key(19_999), b"a".to_vec()]
            .into_iter()
            .chain([b"zzz".to_vec(), b"key-004242!".to_vec()])
            .chain((0..40).map(|i| key(i * 7_919 % 20_000)))
            .collect();
        let mut rows: Vec<Option<(BTree, &[u8])>> =
            queries.iter().map(|q| Some((tree, q.as_slice()))).collect();
        rows[3] = None;
        let mut resumes = vec![Resume::default(); rows.len()];
        super::super::together::descend_together(&pool, &rows, &mut resumes);
        let mut page = AlignedPage::zeroed();
        pool.read_copy(tree.root, &mut page).unwrap();
        let height = Node::new(page.bytes()).level();
        assert!(height >= 2, "a tree of three levels or more: its root is of level {height}");
        for (i, query) in queries.iter().enumerate() {
            if rows[i].is_none() {
                assert!(resumes[i].at.is_none() && resumes[i].leaf.is_none(), "row {i} untouched");
                continue;
            }
            let (leaf, _) = run(&pool, |_| tree.leaf_copy(&pool, query, &mut page)).unwrap();
            let (at, _) = resumes[i].at.expect("a tree of several levels");
            assert_eq!(at, leaf, "{}", query.escape_ascii());
        }
        let read = |query: &[u8], resume: &mut Resume| {
            run(&pool, |scratch| {
                let mut read = |v: &[u8]| v.to_vec();
                tree.get_resuming(&pool, query, scratch, &mut read, resume, false)
            })
            .unwrap()
        };
        let from_root = |query: &[u8]| read(query, &mut Resume::default());
        for (i, query) in queries.iter().enumerate() {
            let mut resume = resumes[i];
            assert_eq!(read(query, &mut resume), from_root(query), "{}", query.escape_ascii());
        }
        // Splits under the parents the rows stopped at: their resumes are stale now.
        for i in 0..20_000 {
            let mut other = key(i);
            other.push(b'+');
            run(&pool, |scratch| tree.put(&pool, &other, &[1; 100], scratch)).unwrap();
        }
        for (i, query) in queries.iter().enumerate() {
            let mut resume = resumes[i];
            assert_eq!(read(query, &mut resume), from_root(query), "{}", query.escape_ascii());
        }
    }

    /// `put_near` puts into the leaf a descent finds whatever page it is handed: the right
    /// leaf, another leaf of the tree, a leaf of another tree, an inner node, a freed leaf
    /// (whose fences would hold every key), a page never allocated; and what it put reads
    /// back through descents.
    #[test]
    fn put_near_takes_only_the_leaf_that_holds_the_key() {
        let dir = TempDir::with_prefix("put-near").unwrap();
        let (pool, tree) = tree_of(&dir, 3000);
        let mut guard = pool.allocate().unwrap();
        let other = BTree { root: guard.page_id(), tree_id: 4 };
        BTree::init_root(guard.page_mut(), other.root, other.tree_id);
        drop(guard);
        for i in 0..1000 {
            run(&pool, |scratch| other.put(&pool, &key(i), &[1; 100], scratch)).unwrap();
        }
        // A leaf of the tree, with infinite fences, freed.
        let mut guard = pool.allocate().unwrap();
        let freed = guard.page_id();
        BTree::init_root(guard.page_mut(), freed, tree.tree_id);
        pool.free(guard);
        let pages = freed + 3;
        let mut rng = 0x9e37_79b9_u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut expected: Vec<u8> = (0..4000).map(|i| i as u8).collect();
        for i in (0..3000).step_by(60) {
            let value = [i as u8; 100];
            let put =
                |scratch: &mut Scratch| tree.put_near(&pool, &key(i), &value, scratch, Some(freed));
            assert_ne!(run(&pool, put).unwrap(), freed, "a freed page is not the tree's");
        }
        let mut hits = 0;
        for round in 0..4000u64 {
            let i = next() % 4000;
            let near = match round % 3 {
                0 => freed,
                1 => next() % (pages + 1),
                _ => run(&pool, |_| tree.locate_leaf(&pool, &key(i))).unwrap().0,
            };
            let value = [round as u8; 100];
            let leaf =
                run(&pool, |scratch| tree.put_near(&pool, &key(i), &value, scratch, Some(near)))
                    .unwrap();
            // (The freed page may be a leaf of the tree again, once a split reused it.)
            assert_eq!(leaf, run(&pool, |_| tree.locate_leaf(&pool, &key(i))).unwrap().0);
            hits += usize::from(leaf == near);
            expected[i as usize] = round as u8;
        }
        assert!(hits > 1000, "the right leaf was taken {hits} times: put_near never used it");
        for (i, want) in expected.iter().enumerate() {
            let found = run(&pool, |scratch| {
                tree.get(&pool, &key(i as u64), scratch, &mut |v: &[u8]| v[0])
            });
            let unset = i >= 3000 && found.as_ref().unwrap().is_none();
            assert!(unset || found.unwrap() == Some(*want), "key {i}");
        }
    }

    /// Fails unless `result` is `Error::Corrupt` naming `page` for `wanted`.
    fn assert_corrupt<T: std::fmt::Debug>(result: crate::Result<T>, page: PageId, wanted: &str) {
        match result {
            Err(Error::Corrupt { page: named, reason, .. }) => {
                assert_eq!(named, page, "{reason}");
                assert!(reason.contains(wanted), "{reason:?} should say {wanted:?}");
            }
            other => panic!("expected corruption of page {page}, got {other:?}"),
        }
    }

    /// The leftmost node of level 1 (whose children are leaves).
    fn leftmost_parent_of_leaves(pool: &BufferPool, tree: BTree) -> PageId {
        let mut page_id = tree.root;
        loop {
            let page = crate::testing::read_page(pool, page_id).unwrap();
            let node = Node::new(page.bytes());
            if node.level() == 1 {
                assert!(node.count() >= 2, "a parent of several leaves");
                return page_id;
            }
            page_id = node.child(0);
        }
    }

    use crate::testing::scan;

    /// A parent whose child pointers are swapped (separators intact) sends keys to a child
    /// whose fences do not hold them: every descent, the lookups' in place and the copying
    /// ones of writers and scans, reports the parent as corrupt instead of answering from
    /// the wrong leaf or scanning it over and over.
    #[test]
    fn a_child_that_does_not_hold_the_key_is_corrupt_naming_its_parent() {
        let dir = TempDir::with_prefix("guard-descent").unwrap();
        let (pool, tree) = tree_of(&dir, 3000);
        assert_eq!(scan(&pool, tree, false).unwrap().len(), 3000);
        let parent = leftmost_parent_of_leaves(&pool, tree);
        {
            let mut guard = pool.lock_exclusive_any(parent).unwrap();
            let mut node = NodeMut::new(guard.page_mut());
            let (first, second) = (node.as_node().child(0), node.as_node().child(1));
            node.set_child(0, second);
            node.set_child(1, first);
        }
        let fault = "does not hold the key";
        let get = run(&pool, |scratch| tree.get(&pool, &key(0), scratch, &mut |v| v.to_vec()));
        assert_corrupt(get, parent, fault);
        let put = run(&pool, |scratch| tree.put(&pool, &key(0), b"v", scratch));
        assert_corrupt(put, parent, fault);
        let delete = run(&pool, |scratch| tree.delete(&pool, &key(0), scratch));
        assert_corrupt(delete, parent, fault);
        let found = run(&pool, |scratch| tree.descend(&pool, Seek::Key(&key(0)), None, scratch));
        assert_corrupt(found, parent, fault);
        assert_corrupt(scan(&pool, tree, false), parent, fault);
        assert_corrupt(scan(&pool, tree, true), parent, fault);
        // Keys beyond the two swapped children are found as before.
        let last = run(&pool, |scratch| tree.get(&pool, &key(2999), scratch, &mut |v| v[0]));
        assert_eq!(last.unwrap(), Some(2999u64 as u8));
    }

    /// Rewrites node `page_id` in memory with lower fence `lower`, keeping its entries (a
    /// node valid on its own, as a resealed page with that change would be).
    fn move_lower_fence(pool: &BufferPool, page_id: PageId, lower: &[u8]) {
        let mut guard = pool.lock_exclusive_any(page_id).unwrap();
        let old = guard.page().to_vec();
        let old = Node::new(&old);
        let mut node = NodeMut::new(guard.page_mut());
        let (leaf, level, upper) = (old.is_leaf(), old.level(), old.upper_fence());
        node.init(page_id, leaf, level, old.tree_id(), lower, upper, old.upper_child());
        let mut key = Vec::new();
        for slot in 0..old.count() {
            old.key_into(slot, &mut key);
            assert!(node.insert(&key, old.payload(slot), old.is_out_of_line(slot)));
        }
        node.as_node().validate().expect("a valid node on its own");
    }

    /// The first key of node `page_id`.
    fn first_key(pool: &BufferPool, page_id: PageId) -> Vec<u8> {
        let page = crate::testing::read_page(pool, page_id).unwrap();
        let mut key = Vec::new();
        Node::new(page.bytes()).key_into(0, &mut key);
        key
    }

    /// A leaf whose lower fence reaches below the separator before it still holds every key
    /// its parent sends it, so lookups answer; but scans move on by fences, and a fence that
    /// is not exactly the separator would make one skip keys: corrupt, in either direction.
    #[test]
    fn a_leaf_whose_fences_are_not_its_separators_is_corrupt_to_scans() {
        let dir = TempDir::with_prefix("guard-fences").unwrap();
        let (pool, tree) = tree_of(&dir, 3000);
        let parent = leftmost_parent_of_leaves(&pool, tree);
        let second = Node::new(crate::testing::read_page(&pool, parent).unwrap().bytes()).child(1);
        let first = Node::new(crate::testing::read_page(&pool, parent).unwrap().bytes()).child(0);
        move_lower_fence(&pool, second, &first_key(&pool, first));
        let fault = format!("the fences of its child {second} are not the separators");
        assert_corrupt(scan(&pool, tree, false), parent, &fault);
        assert_corrupt(scan(&pool, tree, true), parent, &fault);
        // The copying descent of writers checks the same.
        let key_in_second = first_key(&pool, second);
        let found = run(&pool, |s| tree.descend(&pool, Seek::Key(&key_in_second), None, s));
        assert_corrupt(found, parent, &fault);
        // Lookups go by the parent's separators, which still send each key to its leaf.
        for i in 0..3000 {
            let got = run(&pool, |scratch| tree.get(&pool, &key(i), scratch, &mut |v| v[0]));
            assert_eq!(got.unwrap(), Some(i as u8));
        }
    }

    /// Two parents of leaves that disagree with the root (the second's lower fence, and its
    /// first leaf's, moved below the separator between them): each leaf agrees with its own
    /// parent, so only the scan, stepping from the first parent's last leaf to the second's
    /// first, sees that they do not meet. Reverse scans meet the moved parent first, on the
    /// copying descent to the last leaf.
    #[test]
    fn a_scan_whose_next_leaf_does_not_start_where_the_last_ended_is_corrupt() {
        let dir = TempDir::with_prefix("guard-scan").unwrap();
        let (pool, tree) = tree_of(&dir, 3000);
        let root = Node::new(crate::testing::read_page(&pool, tree.root).unwrap().bytes()).level();
        assert_eq!(root, 2, "a root over parents of leaves");
        let root = crate::testing::read_page(&pool, tree.root).unwrap();
        let root = Node::new(root.bytes());
        let (left_parent, right_parent) = (root.child(0), root.child(1));
        let left_parent = crate::testing::read_page(&pool, left_parent).unwrap();
        let left_parent = Node::new(left_parent.bytes());
        let last_leaf = left_parent.child(left_parent.count());
        let right_parent_page = crate::testing::read_page(&pool, right_parent).unwrap();
        let first_leaf = Node::new(right_parent_page.bytes()).child(0);
        let lower = first_key(&pool, last_leaf);
        move_lower_fence(&pool, right_parent, &lower);
        move_lower_fence(&pool, first_leaf, &lower);
        assert_corrupt(scan(&pool, tree, false), first_leaf, "lower fence is not the upper fence");
        let fault = format!("the fences of its child {right_parent} are not the separators");
        assert_corrupt(scan(&pool, tree, true), tree.root, &fault);
    }

    /// What `Node::validate` (run on every node read from disk) and `Node::check` cost per
    /// page, on the nodes of trees shaped like `ferrite bench lookup`'s: 8-byte big-endian
    /// keys with 120-byte values, loaded in key order (full leaves, the benchmark's data) and
    /// in random order. Prints the numbers; asserts nothing about time. Run with
    /// `cargo test --release -p ferrite-kv --lib validation_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, run by hand in release"]
    fn validation_cost() {
        const KEYS: u64 = 200_000;
        for (shape, scramble) in [("key order", false), ("random order", true)] {
            let dir = TempDir::with_prefix("validation-cost").unwrap();
            let file =
                PageFile::open(&dir.path().join("pages"), true, true, true, 1 << 30).unwrap();
            let pool = BufferPool::new(file, 1 << 16, 1 << 18, 0, Vec::new()).unwrap();
            let mut guard = pool.allocate().unwrap();
            let tree = BTree { root: guard.page_id(), tree_id: 3 };
            BTree::init_root(guard.page_mut(), tree.root, tree.tree_id);
            drop(guard);
            for i in 0..KEYS {
                // An odd multiplier permutes 0..2^32; the keys stay those of the benchmark.
                let n = if scramble { i.wrapping_mul(0x9e37_79b1) % (1 << 32) } else { i };
                let key = n.to_be_bytes();
                run(&pool, |scratch| tree.put(&pool, &key, &[n as u8; 120], scratch)).unwrap();
            }
            let (mut leaves, mut inner) = (Vec::new(), Vec::new());
            for page_id in 0..pool.page_count() {
                let page = crate::testing::read_page(&pool, page_id).unwrap();
                match crate::format::page::kind_of(page.bytes()) {
                    Some(PageKind::Leaf) => leaves.push(page),
                    Some(PageKind::Inner) => inner.push(page),
                    _ => {}
                }
            }
            // All pages (more than the CPU's caches hold, as a page just read from the
            // device is), and 16 of them (in cache: the computing alone).
            let (hot_leaves, hot_inner) = (&leaves[leaves.len() / 2..][..16], &inner[..16]);
            for (kind, pages) in [
                ("leaf", &leaves[..]),
                ("inner", &inner[..]),
                ("leaf (cached)", hot_leaves),
                ("inner (cached)", hot_inner),
            ] {
                let slots: usize = pages.iter().map(|p| Node::new(p.bytes()).count()).sum();
                // The fastest of 30 batches of about 20,000 pages: the machine is shared,
                // and a batch that lost the CPU meanwhile says nothing about the code.
                let per_page = |f: &dyn Fn(&[u8]) -> bool| {
                    let rounds = (20_000 / pages.len()).max(1);
                    let batch = || {
                        let start = std::time::Instant::now();
                        for _ in 0..rounds {
                            for page in pages.iter() {
                                assert!(f(std::hint::black_box(page.bytes())));
                            }
                        }
                        start.elapsed().as_nanos() as f64 / (rounds * pages.len()) as f64
                    };
                    (0..30).map(|_| batch()).fold(f64::MAX, f64::min)
                };
                let validate = per_page(&|page| Node::new(page).validate().is_ok());
                let check = per_page(&|page| {
                    let page_id = crate::format::page::page_id_of(page);
                    let expect = node::Expect { page_id, ..Default::default() };
                    Node::new(page).check(&expect).is_ok()
                });
                println!(
                    "{shape}: {} {kind} pages, {:.1} slots each: validate {validate:.0} ns/page, \
                     check {check:.0} ns/page",
                    pages.len(),
                    slots as f64 / pages.len() as f64
                );
            }
        }
    }
}
