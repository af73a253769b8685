//! Range scans. A cursor copies one leaf at a time (a consistent snapshot of that leaf), hands
//! out its entries, and moves to the next leaf by descending again just past the leaf's fence,
//! so it holds no latch between calls and never skips or repeats a key whatever concurrent
//! splits and merges do. It is not a snapshot of the whole tree: a key changed in a part the
//! scan has not reached yet is seen changed. Each leaf it loads must hold the key it resumes
//! at (and start where the last one ended, while that one is unchanged), so a scan of
//! damaged pages fails with `Error::Corrupt` instead of going round in circles.
//!
//! The cursor is steps, not a driver: loading the next leaf is an attempt
//! ([`Cursor::load_attempt`], run by the scheduler's driver like any other), and handing out
//! entries never waits ([`Cursor::next_in_leaf`] says which page to load when a value lives
//! in a Value page that is not in memory). `db/iter.rs` drives it, as `Tree::range`'s
//! iterator and as `Tree::scan_async`.
//!
//! Entries of the change buffer (`change_buffer/`) are merged in, leaf by leaf: after copying a
//! leaf the cursor takes the buffered entries of that leaf's range, then checks the leaf did
//! not change meanwhile (else it copies it again). A buffered key shadows the leaf's. Since a
//! key leaves the change buffer only after its leaf holds its value, and it is read after
//! the leaf copy but validated against it, a key is never missed between the two.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::btree::node::{Node, Payload};
use crate::btree::tree::{BTree, Seek};
use crate::btree::Scratch;
use crate::buffer::{Attempt, BufferPool, Interrupt};
use crate::change_buffer::ChangeBuffer;
use crate::error::{Error, PageId, Result};
use crate::format::value;
use crate::io::AlignedPage;

/// What [`Cursor::next_in_leaf`] found.
#[derive(Debug)]
pub enum Step {
    /// The next entry: key and value.
    Entry(Vec<u8>, Vec<u8>),
    /// No leaf is loaded (the last one is used up, or changed): load one, then step again.
    Leaf,
    /// The next value lives in this Value page, not in memory: load it, then step again.
    Page(PageId),
    /// The scan has ended.
    Done,
}

/// A position in a scan over one tree, in either direction.
#[derive(Debug)]
pub struct Cursor {
    tree: BTree,
    reverse: bool,
    /// Where the scan resumes: the next leaf is found by descending to this bound.
    resume: Bound<Vec<u8>>,
    /// The far end: keys beyond it end the scan.
    end: Bound<Vec<u8>>,
    leaf: AlignedPage,
    leaf_id: PageId,
    leaf_version: u64,
    loaded: bool,
    /// Forward: the next slot; reverse: one past the next slot.
    pos: usize,
    done: bool,
    /// The change buffer to merge, if any.
    change_buffer: Option<Arc<ChangeBuffer>>,
    /// Its entries in the loaded leaf's part of the range, ascending.
    extra: Vec<(Vec<u8>, Vec<u8>)>,
    /// Extra entries handed out (from the front forward, from the back in reverse).
    extra_used: usize,
    /// The leaf the scan just left by its fence, and its version: while it is unchanged, the
    /// next leaf must start exactly where it ended (`check_follows`).
    left_behind: Option<(PageId, u64)>,
    /// A Value page could not be read (latched, or changed by the commit in progress): the
    /// next leaf load restarts once first, so that the driver backs off (or lets the
    /// worker's other tasks run) before the scan looks again.
    back_off: std::sync::atomic::AtomicBool,
    /// The snapshot the scan reads the tree as (`None`: as it is now).
    at: Option<u64>,
    /// Leaves loaded so far (`witness`).
    leaves: u32,
    /// The scan read something a leaf's version does not vouch for: a value on a Value page
    /// of its own, or entries of the change buffer (it held some).
    unvouched: bool,
}

/// A bound over owned keys as one over borrowed ones.
pub(crate) fn as_slice(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(&k[..]),
        Bound::Excluded(k) => Bound::Excluded(&k[..]),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The keys a node holds, as bounds: lower < k <= upper, an empty fence infinite.
pub(crate) fn key_range(node: Node<'_>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let (lower, upper) = (node.lower_fence(), node.upper_fence());
    (
        if lower.is_empty() { Bound::Unbounded } else { Bound::Excluded(lower.to_vec()) },
        if upper.is_empty() { Bound::Unbounded } else { Bound::Included(upper.to_vec()) },
    )
}

/// The tighter of two upper bounds.
fn min_upper(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    use Bound::*;
    match (a, b) {
        (Unbounded, x) | (x, Unbounded) => x,
        (Included(x), Included(y)) => Included(x.min(y)),
        (Excluded(x), Excluded(y)) => Excluded(x.min(y)),
        (Included(i), Excluded(e)) | (Excluded(e), Included(i)) => {
            if e <= i {
                Excluded(e)
            } else {
                Included(i)
            }
        }
    }
}

/// The tighter of two lower bounds.
fn max_lower(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    use Bound::*;
    match (a, b) {
        (Unbounded, x) | (x, Unbounded) => x,
        (Included(x), Included(y)) => Included(x.max(y)),
        (Excluded(x), Excluded(y)) => Excluded(x.max(y)),
        (Included(i), Excluded(e)) | (Excluded(e), Included(i)) => {
            if e >= i {
                Excluded(e)
            } else {
                Included(i)
            }
        }
    }
}

impl Cursor {
    /// A scan over the keys between `lower` and `upper`, ascending, or descending if `reverse`.
    pub fn new(tree: BTree, lower: Bound<Vec<u8>>, upper: Bound<Vec<u8>>, reverse: bool) -> Self {
        // A range whose start lies past its end holds nothing: done before any leaf.
        let done = crate::change_buffer::is_empty_range(as_slice(&lower), as_slice(&upper));
        let (resume, end) = if reverse { (upper, lower) } else { (lower, upper) };
        Cursor {
            tree,
            reverse,
            resume,
            end,
            leaf: AlignedPage::zeroed(),
            leaf_id: 0,
            leaf_version: 0,
            loaded: false,
            pos: 0,
            done,
            change_buffer: None,
            extra: Vec::new(),
            extra_used: 0,
            left_behind: None,
            back_off: std::sync::atomic::AtomicBool::new(false),
            at: None,
            leaves: 0,
            unvouched: false,
        }
    }

    /// Reads the tree as snapshot `seq` sees it (`buffer/versions.rs`).
    pub fn at(mut self, seq: u64) -> Self {
        self.at = Some(seq);
        self
    }

    /// Merges the entries `change_buffer` holds for this tree into the scan.
    pub fn with_change_buffer(mut self, change_buffer: Arc<ChangeBuffer>) -> Self {
        self.change_buffer = Some(change_buffer);
        self
    }

    /// What the next leaf's descent seeks, and the key it is bound by (owned, so that the
    /// attempt can run while the cursor is borrowed for the copy).
    fn seek(&self) -> (bool, Vec<u8>) {
        match &self.resume {
            Bound::Included(k) | Bound::Excluded(k) => (false, k.clone()),
            Bound::Unbounded => (self.reverse, Vec::new()),
        }
    }

    /// One attempt at loading the leaf the scan resumes at (a consistent copy of it, with the
    /// change buffer's entries of its part of the range): run it to its end with the
    /// scheduler's driver whenever [`Cursor::needs_leaf`].
    pub fn load_attempt(&mut self, pool: &BufferPool, scratch: &mut Scratch) -> Attempt<()> {
        if self.back_off.swap(false, Ordering::Relaxed) {
            return Err(Interrupt::Restart);
        }
        let (last, key) = self.seek();
        // A snapshot's scan reads nodes in place too while they have no old versions.
        let in_place = match self.at {
            Some(seq) if !last => self.tree.leaf_copy_at(pool, &key, seq, &mut self.leaf)?,
            _ => None,
        };
        let (leaf_id, version) = if let Some(found) = in_place {
            found
        } else if last || self.at.is_some() {
            let seek = if last { Seek::Last } else { Seek::Key(&key) };
            let found = self.tree.descend_at(pool, seek, None, scratch, self.at)?;
            self.leaf.bytes_mut().copy_from_slice(scratch.pages[found.copy].bytes());
            (found.page_id, found.version)
        } else {
            self.tree.leaf_copy(pool, &key, &mut self.leaf)?
        };
        if self.at.is_none() {
            // Not a leaf the commit in progress changed (it is shown whole, once logged).
            pool.committed(leaf_id)?;
        }
        match self.after_load(pool, leaf_id, version) {
            Ok(true) => Ok(()),
            // The leaf changed while the buffered entries were taken: copy it again.
            Ok(false) => Err(Interrupt::Restart),
            Err(e) => Err(Interrupt::Error(e)),
        }
    }

    /// Whether the next step needs a leaf loaded (`load_attempt`).
    pub fn needs_leaf(&self) -> bool {
        !self.loaded && !self.done
    }

    /// Whether the scan has ended.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Positions the cursor in the leaf just copied and takes the buffered entries of its
    /// part of the range; `false` if the leaf changed meanwhile (copy it again).
    fn after_load(&mut self, pool: &BufferPool, leaf_id: PageId, version: u64) -> Result<bool> {
        self.check_follows(pool, leaf_id)?;
        self.leaf_id = leaf_id;
        self.leaf_version = version;
        let node = Node::new(self.leaf.bytes());
        self.extra.clear();
        self.extra_used = 0;
        let (at, tree_id) = (self.at, self.tree.tree_id);
        if let Some(changes) =
            self.change_buffer.as_ref().filter(|b| b.holds_tree(tree_id) || at.is_some())
        {
            self.unvouched = true;
            let (leaf_low, leaf_high) = key_range(node);
            let (low, high) = if self.reverse {
                (max_lower(leaf_low, self.end.clone()), min_upper(leaf_high, self.resume.clone()))
            } else {
                (max_lower(leaf_low, self.resume.clone()), min_upper(leaf_high, self.end.clone()))
            };
            let (tree, low, high) = (self.tree.tree_id, as_slice(&low), as_slice(&high));
            self.extra = match at {
                None => changes.range(tree, low, high),
                Some(seq) => changes.range_at(tree, low, high, seq),
            };
            if !pool.validate(leaf_id, version) {
                return Ok(false);
            }
        }
        self.pos = match (&self.resume, self.reverse) {
            (Bound::Unbounded, false) => 0,
            (Bound::Unbounded, true) => node.count(),
            (Bound::Included(k), false) => node.lower_bound(k).0,
            (Bound::Excluded(k), false) => {
                let (pos, exact) = node.lower_bound(k);
                pos + exact as usize
            }
            (Bound::Included(k), true) => {
                let (pos, exact) = node.lower_bound(k);
                pos + exact as usize
            }
            (Bound::Excluded(k), true) => node.lower_bound(k).0,
        };
        self.loaded = true;
        self.left_behind = None;
        self.leaves += 1;
        Ok(true)
    }

    /// The leaf (page, version) that answered the whole scan so far, when one did: the scan
    /// loaded no other leaf, read nothing from the change buffer or a Value page, and reads
    /// the tree as it is now. Every key of the part of the range scanned so far then lies in
    /// that leaf's range: the scan began at the leaf holding its first key, and ended in it
    /// (at a key beyond the range, at a fence beyond it, or where its caller stopped). While
    /// the leaf keeps that version and the change buffer stays empty, that part of the tree
    /// holds the same entries.
    pub fn witness(&self) -> Option<(PageId, u64)> {
        (self.leaves == 1 && !self.unvouched && self.at.is_none())
            .then_some((self.leaf_id, self.leaf_version))
    }

    /// The leaf just copied (page `leaf_id`) must hold the key the scan resumes at. Then
    /// every leaf the scan moves to lies beyond the one it left (forward, its upper fence is
    /// above that one's; in reverse its lower fence below), so a scan never comes back to a
    /// leaf and always ends. And while the leaf the scan left is unchanged, the new one must
    /// start exactly where that one ended (splits and merges move fences only by changing
    /// both). Either failing is corruption; the descents' own guard (`BTree::probe_node`,
    /// `BTree::descend`) normally names the parent first.
    fn check_follows(&self, pool: &BufferPool, leaf_id: PageId) -> Result<()> {
        let corrupt = |reason: String| Error::Corrupt {
            page: leaf_id,
            file: pool.file().path().to_owned(),
            reason,
        };
        let node = Node::new(self.leaf.bytes());
        let holds = match &self.resume {
            Bound::Included(key) | Bound::Excluded(key) => node.holds(key),
            Bound::Unbounded if self.reverse => node.upper_fence().is_empty(),
            Bound::Unbounded => node.lower_fence().is_empty(),
        };
        if !holds {
            return Err(corrupt(
                "the leaf does not hold the key the scan resumes at: the scan would not advance"
                    .into(),
            ));
        }
        let Some((left_id, left_version)) = self.left_behind else {
            return Ok(());
        };
        if !pool.validate(left_id, left_version) {
            return Ok(());
        }
        // `leave_leaf` resumes forward just past the left leaf's upper fence, in reverse at
        // its lower fence.
        let (fence, expected) = match (&self.resume, self.reverse) {
            (Bound::Included(key), false) => (node.lower_fence(), &key[..key.len() - 1]),
            (Bound::Included(key), true) => (node.upper_fence(), &key[..]),
            _ => return Ok(()),
        };
        if fence != expected {
            let (ours, theirs) = if self.reverse { ("upper", "lower") } else { ("lower", "upper") };
            return Err(corrupt(format!(
                "its {ours} fence is not the {theirs} fence of leaf {left_id} beside it"
            )));
        }
        Ok(())
    }

    /// The next buffered entry of the loaded leaf in scan order, if any is left.
    fn next_extra(&self) -> Option<&(Vec<u8>, Vec<u8>)> {
        let left = self.extra.len() - self.extra_used;
        if left == 0 {
            None
        } else if self.reverse {
            self.extra.get(left - 1)
        } else {
            self.extra.get(self.extra_used)
        }
    }

    /// Whether the buffered entry with `key` comes before (or shadows) the leaf's `leaf_key`.
    fn extra_first(&self, key: &[u8], leaf_key: Option<&[u8]>) -> bool {
        match leaf_key {
            None => true,
            Some(l) if self.reverse => key >= l,
            Some(l) => key <= l,
        }
    }

    fn beyond_end(&self, key: &[u8]) -> bool {
        match (&self.end, self.reverse) {
            (Bound::Unbounded, _) => false,
            (Bound::Included(e), false) => key > e.as_slice(),
            (Bound::Excluded(e), false) => key >= e.as_slice(),
            (Bound::Included(e), true) => key < e.as_slice(),
            (Bound::Excluded(e), true) => key <= e.as_slice(),
        }
    }

    /// The next entry of the loaded leaf, never waiting: see [`Step`].
    pub fn next_in_leaf(&mut self, pool: &BufferPool) -> Result<Step> {
        if self.done {
            return Ok(Step::Done);
        }
        if !self.loaded {
            return Ok(Step::Leaf);
        }
        let node = Node::new(self.leaf.bytes());
        let slot = if self.reverse {
            self.pos.checked_sub(1)
        } else {
            (self.pos < node.count()).then_some(self.pos)
        };
        let mut key = Vec::new();
        let mut ended = false;
        let slot = slot.filter(|&slot| {
            node.key_into(slot, &mut key);
            ended = self.beyond_end(&key);
            !ended
        });
        if let Some((extra_key, extra_value)) = self.next_extra() {
            if self.extra_first(extra_key, slot.map(|_| &key[..])) {
                let entry = (extra_key.clone(), extra_value.clone());
                if slot.is_some() && key == entry.0 {
                    // The buffered value shadows the leaf's.
                    self.step();
                }
                self.extra_used += 1;
                self.resume = Bound::Excluded(entry.0.clone());
                return Ok(Step::Entry(entry.0, entry.1));
            }
        }
        let Some(slot) = slot else {
            if ended {
                self.done = true;
                return Ok(Step::Done);
            }
            self.leave_leaf();
            return Ok(if self.done { Step::Done } else { Step::Leaf });
        };
        let value = match node.value(slot) {
            Payload::Inline(bytes) => bytes.to_vec(),
            Payload::OutOfLine { page, tail } => match self.try_read_value(pool, page, tail)? {
                Ok(bytes) => {
                    self.unvouched = true;
                    bytes
                }
                Err(Some(page)) => return Ok(Step::Page(page)),
                Err(None) => {
                    // The leaf changed under us: resume at this key.
                    self.resume = Bound::Included(key);
                    self.loaded = false;
                    return Ok(Step::Leaf);
                }
            },
        };
        self.step();
        self.resume = Bound::Excluded(key.clone());
        Ok(Step::Entry(key, value))
    }

    /// Moves past the current slot.
    fn step(&mut self) {
        if self.reverse {
            self.pos -= 1;
        } else {
            self.pos += 1;
        }
    }

    /// Visits up to `limit` entries of the loaded leaf (forward scans), passing `visit` the key
    /// (built in `key`, reused) and the value as borrowed bytes: no allocation per entry, and
    /// it never blocks. Returns how many it visited, and the Value page to load first when an
    /// entry's value lives in one that is not in memory (the scan then resumes at that entry,
    /// after the caller loaded the page). When the leaf is used up the next call needs a
    /// leaf (`load_attempt`).
    pub fn visit_in_leaf(
        &mut self,
        pool: &BufferPool,
        limit: usize,
        key: &mut Vec<u8>,
        visit: &mut impl FnMut(&[u8], &[u8]),
    ) -> Result<(usize, Option<PageId>)> {
        assert!(!self.reverse, "visit_in_leaf is for forward scans");
        let mut visited = 0;
        let mut missing = None;
        while visited < limit && self.loaded && !self.done {
            let node = Node::new(self.leaf.bytes());
            let mut ended = false;
            let slot = (self.pos < node.count()).then_some(self.pos).filter(|&slot| {
                node.key_into(slot, key);
                ended = self.beyond_end(key);
                !ended
            });
            if let Some((extra_key, _)) = self.next_extra() {
                if self.extra_first(extra_key, slot.map(|_| &key[..])) {
                    let shadows = slot.is_some() && key == extra_key;
                    let (extra_key, extra_value) = &self.extra[self.extra_used];
                    visit(extra_key, extra_value);
                    key.clear();
                    key.extend_from_slice(extra_key);
                    if shadows {
                        // The buffered value shadows the leaf's.
                        self.pos += 1;
                    }
                    self.extra_used += 1;
                    visited += 1;
                    continue;
                }
            }
            if slot.is_none() {
                if ended {
                    self.done = true;
                } else {
                    self.leave_leaf();
                }
                break;
            }
            match node.value(self.pos) {
                Payload::Inline(bytes) => visit(key, bytes),
                Payload::OutOfLine { page, tail } => match self.try_read_value(pool, page, tail)? {
                    Ok(bytes) => {
                        self.unvouched = true;
                        visit(key, &bytes)
                    }
                    Err(need) => {
                        // The leaf changed under us, or the value is not in memory: resume
                        // at this key (with the page loaded, if that was it).
                        missing = need;
                        self.resume = Bound::Included(key.clone());
                        self.loaded = false;
                        break;
                    }
                },
            }
            self.pos += 1;
            visited += 1;
        }
        if visited == limit && visited > 0 && self.loaded && !self.done {
            // Stopped by the limit: a later call goes on after the last key visited (when
            // the leaf ran out, `leave_leaf` set where to go on instead).
            self.resume = Bound::Excluded(key.clone());
        }
        Ok((visited, missing))
    }

    /// Moves past the current leaf, by its fence.
    fn leave_leaf(&mut self) {
        let node = Node::new(self.leaf.bytes());
        self.loaded = false;
        self.left_behind = Some((self.leaf_id, self.leaf_version));
        // Where the next leaf's keys start, unless this leaf ends the tree. When that lies
        // past the scan's end (a fence beyond it: separators need not be keys of the range),
        // the scan is over.
        let next = if self.reverse {
            let lower = node.lower_fence();
            // Keys at or below the lower fence live in the leaves to the left.
            (!lower.is_empty()).then(|| lower.to_vec())
        } else {
            let upper = node.upper_fence();
            // The smallest key above the fence leads into the next leaf.
            (!upper.is_empty()).then(|| [upper, &[0]].concat())
        };
        match next {
            Some(key) if !self.beyond_end(&key) => self.resume = Bound::Included(key),
            _ => self.done = true,
        }
    }

    /// One attempt at an out-of-line value (`tail`: its tail, from the leaf's copy), never
    /// blocking: the bytes, or `Err(Some(page))` when the Value page must be loaded first, or
    /// `Err(None)` when the leaf changed meanwhile (or the page stayed latched): look again.
    fn try_read_value(
        &self,
        pool: &BufferPool,
        value_page: PageId,
        tail: &[u8],
    ) -> Result<std::result::Result<Vec<u8>, Option<PageId>>> {
        let mut copy = AlignedPage::zeroed();
        let copied = match self.at {
            None => pool.read_copy(value_page, &mut copy),
            Some(seq) => pool.read_copy_at(value_page, seq, &mut copy),
        };
        if !pool.validate(self.leaf_id, self.leaf_version) {
            return Ok(Err(None));
        }
        match copied.and_then(|_| match self.at {
            None => pool.committed(value_page),
            Some(_) => Ok(()),
        }) {
            Ok(()) => {}
            Err(Interrupt::Miss(page)) => return Ok(Err(Some(page))),
            Err(Interrupt::Restart) => {
                self.back_off.store(true, Ordering::Relaxed);
                return Ok(Err(None));
            }
            Err(Interrupt::Error(e)) => return Err(e),
        }
        let bytes = value::decode(copy.bytes(), self.tree.tree_id).map_err(|reason| {
            Error::Corrupt { page: value_page, file: pool.file().path().to_owned(), reason }
        })?;
        Ok(Ok([bytes, tail].concat()))
    }
}
