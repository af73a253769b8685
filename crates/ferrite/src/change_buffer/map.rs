//! The change buffer's map: puts into leaves that are not in memory, held in memory until
//! their leaf is read anyway, so that a random insert out of memory costs no read of its own.
//!
//! A put whose leaf is not in the pool (`Tree::put`, `Tree::put_async`) does not read the
//! leaf: its commit record carries the key and value as a *buffered put* (`wal/record.rs`),
//! and the entry goes into this map once the record is appended. Once the map holds more than
//! its budget (`Options::change_buffer_bytes`, memory taken from the pool's), the committer
//! that pushed it over *drains* a leaf: every buffered entry whose key falls in that leaf's
//! range is put into the leaf in one commit, whose record names them as removed from the
//! buffer. A random insert then costs a leaf read and a later write-back shared by all the
//! entries drained together (as InnoDB's change buffer does for secondary indexes, and as an
//! LSM's memtable does for everything).
//!
//! **Which leaf.** Drains *sweep* the buffer in key order (`next_victim`): the next drain
//! takes the leaf of the first entry after the previous drain's leaf, wrapping around at the
//! end. Every leaf with entries is drained once per sweep, so each has gathered entries for
//! the longest time any order allows, and no entry stays forever (an entry of a leaf nobody
//! touches again would, were drains to pick the drainer's own leaf).
//!
//! **The invariant.** If the buffer holds a key, its value there is the key's newest. So
//! readers look here first (`Tree::get*`: a key found here is the answer; scans merge it in),
//! and every other change of a key (put into a resident leaf, delete, update, batch,
//! transaction, drain) first *removes* the key from here, in the same commit. A removal is
//! staged with the commit and applied when its record is appended, after the commit's page
//! changes: at every moment a key's newest value is here, in its leaf, or in both, never in
//! neither (what scans rely on, `db/cursor.rs`).
//!
//! **Durability.** Buffered puts and removals are in the commit records; a checkpoint record
//! lists the whole buffer, copied after its redo LSN was fixed (`snapshot`, without the
//! commit lock), so recovery starts from that list and replays the changes after the LSN. A
//! clean close drains everything, so a closed directory's data is all in its pages (read-only
//! opens and `ferrite check` need no log).
//!
//! **Keys it certainly lacks.** Every read of a tree with entries here asks the map first,
//! under its lock; a counting filter of the keys held (`KeyFilter`) answers most of those
//! asks for keys the map lacks without the lock. YCSB-A out of memory (half the operations
//! updates) had spent about 0.3 µs per operation in `ChangeBuffer::get`, the lock and the
//! map's walk, mostly for keys that were not there. The counters (one per 32 bytes of the
//! budget) are memory beside the pool's, not taken from it.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use crate::btree::BTree;
use crate::id_hash::IdHasher;
use crate::wal::record::BufferedOp;

/// Which `(tree, key)`s the map may hold, readable without the map's lock: two 8-bit
/// counters per key, at places its hash chooses. A key the map holds always finds both of
/// its counters above zero; a key it lacks mostly finds one at zero (else the map is
/// asked, as before). Counters change only under the map's lock, and one that reached 255
/// stays there (it never counts down again: a false "may hold" for good, never a false
/// "lacks").
#[derive(Debug)]
struct KeyFilter {
    counts: Box<[AtomicU8]>,
    /// log2 of the counters.
    bits: u32,
}

impl KeyFilter {
    /// Counters for a buffer of `budget` bytes: about one per 32 bytes (an entry costs at
    /// least `ENTRY_OVERHEAD`), between 4 Ki and 2 Mi.
    fn for_budget(budget: u64) -> KeyFilter {
        let slots = (budget / 32).clamp(1 << 12, 1 << 21).next_power_of_two();
        KeyFilter {
            counts: (0..slots).map(|_| AtomicU8::new(0)).collect(),
            bits: slots.trailing_zeros(),
        }
    }

    /// The two counters of `key` in `tree`: from the hash's high bits, which a multiply
    /// mixes best.
    #[inline]
    fn places(&self, tree: u64, key: &[u8]) -> [usize; 2] {
        let mut hasher = IdHasher::default();
        hasher.write_u64(tree);
        hasher.write(key);
        let hash = hasher.finish();
        let mask = (1u64 << self.bits) - 1;
        [(hash >> (64 - self.bits)) as usize, ((hash >> (64 - 2 * self.bits)) & mask) as usize]
    }

    /// False when the map certainly does not hold `key` in `tree`.
    #[inline]
    fn may_hold(&self, tree: u64, key: &[u8]) -> bool {
        self.places(tree, key).iter().all(|&at| self.counts[at].load(Ordering::Acquire) != 0)
    }

    /// The map took `key` in `tree` (the caller holds the map's lock).
    fn add(&self, tree: u64, key: &[u8]) {
        for at in self.places(tree, key) {
            let count = self.counts[at].load(Ordering::Relaxed);
            if count < u8::MAX {
                self.counts[at].store(count + 1, Ordering::Release);
            }
        }
    }

    /// The map dropped `key` in `tree` (the caller holds the map's lock).
    fn remove(&self, tree: u64, key: &[u8]) {
        for at in self.places(tree, key) {
            let count = self.counts[at].load(Ordering::Relaxed);
            if count != u8::MAX && count != 0 {
                self.counts[at].store(count - 1, Ordering::Release);
            }
        }
    }

    fn clear(&self) {
        for count in self.counts.iter() {
            count.store(0, Ordering::Release);
        }
    }
}

/// Memory one entry costs beyond its key and value: the map's node share and the two
/// vectors' headers and allocation rounding, about.
pub const ENTRY_OVERHEAD: u64 = 64;

/// What an entry of `key` and `value` counts against the budget.
pub fn entry_cost(key: &[u8], value: &[u8]) -> u64 {
    key.len() as u64 + value.len() as u64 + ENTRY_OVERHEAD
}

/// Places of `ChangeBuffer::held`: tree ids share one when equal modulo this.
const TREE_PLACES: usize = 64;

/// `tree`'s place in `ChangeBuffer::held`.
fn tree_place(tree: u64) -> usize {
    (tree % TREE_PLACES as u64) as usize
}

/// `(N, what the buffer held for a key before commit N)`.
type OldEntry = (u64, Option<Vec<u8>>);

#[derive(Debug, Default)]
struct Inner {
    map: BTreeMap<(u64, Vec<u8>), Vec<u8>>,
    /// The tree of each tree id with entries here (for draining at close).
    trees: HashMap<u64, BTree>,
    /// The changes of the commit under way (the commit lock's holder's), applied with its
    /// record.
    staged: Vec<BufferedOp>,
    /// Where the drains' sweep is: the next victim is the first entry after it.
    sweep: Option<(u64, Vec<u8>)>,
    /// For snapshots (`buffer/versions.rs`): each key's entries before the commits that
    /// changed it, oldest first: `(N, what the buffer held for it before commit N)`. Kept
    /// as the pool keeps page images, only where a live snapshot reads them.
    undo: BTreeMap<(u64, Vec<u8>), Vec<OldEntry>>,
    /// The keys each commit kept old entries of, to drop them in commit order.
    undo_by_commit: BTreeMap<u64, Vec<(u64, Vec<u8>)>>,
}

/// Whether an old entry taken at commit `n`, after one taken at `prev`, serves one of the
/// live snapshots `live` (ascending commit numbers): one that is `>= prev` and `< n`.
fn serves(live: &[u64], prev: u64, n: u64) -> bool {
    let at = live.partition_point(|&s| s < prev);
    live.get(at).is_some_and(|&s| s < n)
}

/// See the module documentation.
#[derive(Debug)]
pub struct ChangeBuffer {
    budget: u64,
    /// `entry_cost` summed over the map (0 exactly when it is empty).
    bytes: AtomicU64,
    /// Entries held per place of their tree's id (`tree_place`), updated with the map: a
    /// read of a tree whose place holds none skips the map's lock (`holds_tree`), so that
    /// entries of one tree cost nothing to the readers of the others.
    held: [AtomicU32; TREE_PLACES],
    /// Whether the commit under way staged anything: every commit asks (`take_staged`), and
    /// every direct change of a key (`stage_remove`), so that with nothing held or staged
    /// neither takes the lock.
    staged_any: AtomicBool,
    /// Whether old entries are kept for snapshots (`Inner::undo`).
    undo_any: AtomicBool,
    /// Drains done (`Db`'s sweep) and the entries they moved into leaves, since open.
    drains: AtomicU64,
    drained: AtomicU64,
    /// Whether the pool was asked to lend its flex frames to the buffer (`policy.rs`).
    pub(super) lent: AtomicBool,
    /// Flex frames asked for transactions' share alone, before `lent` (`policy.rs`).
    pub(super) lent_for_transactions: AtomicU64,
    /// The keys `inner.map` may hold (see the module documentation).
    filter: KeyFilter,
    inner: Mutex<Inner>,
}

impl ChangeBuffer {
    /// A buffer of at most about `budget` bytes; 0 turns buffering off.
    pub fn new(budget: u64) -> ChangeBuffer {
        ChangeBuffer {
            budget,
            bytes: AtomicU64::new(0),
            held: std::array::from_fn(|_| AtomicU32::new(0)),
            staged_any: AtomicBool::new(false),
            undo_any: AtomicBool::new(false),
            drains: AtomicU64::new(0),
            drained: AtomicU64::new(0),
            lent: AtomicBool::new(false),
            lent_for_transactions: AtomicU64::new(0),
            filter: KeyFilter::for_budget(budget),
            inner: Mutex::default(),
        }
    }

    /// The most it may hold, in bytes (`Db` lets it hold what the frames lent to it hold,
    /// up to this).
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Whether puts may be buffered at all.
    pub fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// Bytes held (by `entry_cost`).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }

    /// Whether no entry waits.
    pub fn is_empty(&self) -> bool {
        self.bytes() == 0
    }

    /// Whether entries of tree `tree` may wait (false: certainly none; true also when
    /// another tree's id shares its place).
    #[inline]
    pub fn holds_tree(&self, tree: u64) -> bool {
        self.held[tree_place(tree)].load(Ordering::Acquire) != 0
    }

    /// Counts a drain that moved `entries` into their leaf.
    pub fn count_drain(&self, entries: usize) {
        self.drains.fetch_add(1, Ordering::Relaxed);
        self.drained.fetch_add(entries as u64, Ordering::Relaxed);
    }

    /// Drains done since open, and the entries they moved into leaves.
    pub fn drain_counts(&self) -> (u64, u64) {
        (self.drains.load(Ordering::Relaxed), self.drained.load(Ordering::Relaxed))
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().map.len()
    }

    /// The value of `key` in tree `tree`, if held here (then it is the key's newest).
    pub fn get(&self, tree: u64, key: &[u8]) -> Option<Vec<u8>> {
        if !self.holds_tree(tree) || !self.filter.may_hold(tree, key) {
            return None;
        }
        let inner = self.inner.lock().unwrap();
        inner.map.get(&(tree, key.to_vec())).cloned()
    }

    /// The entries of tree `tree` with keys between `low` and `high`, ascending.
    pub fn range(
        &self,
        tree: u64,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        if !self.holds_tree(tree) || is_empty_range(low, high) {
            return Vec::new();
        }
        let bounds = map_bounds(tree, low, high);
        let inner = self.inner.lock().unwrap();
        inner.map.range(bounds).map(|((_, k), v)| (k.clone(), v.clone())).collect()
    }

    /// The entries of tree `tree` with keys between `low` and `high`, ascending, as snapshot
    /// `seq` saw them here.
    pub fn range_at(
        &self,
        tree: u64,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        seq: u64,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        if !self.undo_any.load(Ordering::Acquire) || is_empty_range(low, high) {
            return self.range(tree, low, high);
        }
        let bounds = map_bounds(tree, low, high);
        // Under one lock, so that the entries and the old ones are of the same moment.
        let inner = self.inner.lock().unwrap();
        if inner.undo.range(bounds.clone()).next().is_none() {
            return inner.map.range(bounds).map(|((_, k), v)| (k.clone(), v.clone())).collect();
        }
        let mut entries: BTreeMap<Vec<u8>, Vec<u8>> =
            inner.map.range(bounds.clone()).map(|((_, k), v)| (k.clone(), v.clone())).collect();
        for ((_, key), kept) in inner.undo.range(bounds) {
            match kept.iter().find(|(n, _)| *n > seq) {
                Some((_, Some(old))) => {
                    entries.insert(key.clone(), old.clone());
                }
                Some((_, None)) => {
                    entries.remove(key);
                }
                None => {}
            }
        }
        entries.into_iter().collect()
    }
}

/// Bounds over the map's `(tree, key)` entries.
type MapBounds = (Bound<(u64, Vec<u8>)>, Bound<(u64, Vec<u8>)>);

/// The bounds, in the map's `(tree, key)` order, of tree `tree`'s keys between `low` and
/// `high`.
/// Whether no key lies between `low` and `high` (`BTreeMap::range` panics on such bounds when
/// `low` is past `high`). Scans (`db/`'s cursor) and transactions' range reads ask it too.
pub fn is_empty_range(low: Bound<&[u8]>, high: Bound<&[u8]>) -> bool {
    match (low, high) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(h))
        | (Bound::Excluded(l), Bound::Included(h)) => l >= h,
        _ => false,
    }
}

fn map_bounds(tree: u64, low: Bound<&[u8]>, high: Bound<&[u8]>) -> MapBounds {
    {
        let at = |b: Bound<&[u8]>, beyond: u64| match b {
            Bound::Included(k) => Bound::Included((tree, k.to_vec())),
            Bound::Excluded(k) => Bound::Excluded((tree, k.to_vec())),
            Bound::Unbounded => Bound::Excluded((beyond, Vec::new())),
        };
        // An unbounded low end starts after (tree - 1, everything), that is at (tree, "").
        let low = match low {
            Bound::Unbounded => Bound::Included((tree, Vec::new())),
            b => at(b, tree),
        };
        let high = match high {
            Bound::Unbounded if tree == u64::MAX => Bound::Unbounded,
            b => at(b, tree + 1),
        };
        (low, high)
    }
}

impl ChangeBuffer {
    /// The entry whose leaf the next drain takes, with its tree: the first after the
    /// sweep's position, or the first of all past the end. The position moves past the
    /// victim's leaf, whose upper bound `upper_of` gives (`Some(None)`: unbounded, the
    /// tree's last leaf; `None`: unknown, then past the victim alone), so that drains running
    /// together take different leaves. `None` if the buffer is empty.
    pub fn next_victim(
        &self,
        upper_of: impl FnOnce(BTree, &[u8]) -> Option<Option<Vec<u8>>>,
    ) -> Option<(BTree, Vec<u8>)> {
        if self.is_empty() {
            return None;
        }
        let mut guard = self.inner.lock().unwrap();
        let inner = &mut *guard;
        let after = inner.sweep.take().and_then(|position| {
            inner.map.range((Bound::Excluded(position), Bound::Unbounded)).next()
        });
        let (tree, key) = after.or_else(|| inner.map.iter().next()).map(|(at, _)| at.clone())?;
        let Some(&btree) = inner.trees.get(&tree) else {
            // A tree the buffer was not told of (damage; the close's drain reports it): the
            // sweep goes past it rather than stopping at it for good.
            inner.sweep = tree.checked_add(1).map(|next| (next, Vec::new()));
            return None;
        };
        inner.sweep = match upper_of(btree, &key) {
            Some(Some(upper)) if upper >= key => Some((tree, upper)),
            // Past every key of the tree: (tree + 1, "") precedes only keys of later trees
            // (keys are never empty); past the last tree id, the sweep starts over.
            Some(None) => tree.checked_add(1).map(|next| (next, Vec::new())),
            _ => Some((tree, key.clone())),
        };
        Some((btree, key))
    }

    /// Stages a buffered put with the commit under way (the caller holds the commit lock).
    pub fn stage_put(&self, tree: BTree, key: &[u8], value: &[u8]) {
        let mut inner = self.inner.lock().unwrap();
        self.staged_any.store(true, Ordering::Release);
        inner.trees.insert(tree.tree_id, tree);
        inner.staged.push(BufferedOp::Put {
            tree: tree.tree_id,
            key: key.to_vec(),
            value: value.to_vec(),
        });
    }

    /// Stages the removal of `key` with the commit under way, if the buffer holds it (or
    /// this commit put it there); returns the value it had here.
    pub fn stage_remove(&self, tree: u64, key: &[u8]) -> Option<Vec<u8>> {
        // (What this commit staged is in `staged` alone: with nothing staged, the map is
        // all there is to ask.)
        if !self.staged_any.load(Ordering::Acquire)
            && (self.is_empty() || !self.filter.may_hold(tree, key))
        {
            return None;
        }
        let mut inner = self.inner.lock().unwrap();
        let staged = inner.staged.iter().rev().find_map(|op| match op {
            BufferedOp::Put { tree: t, key: k, value } if *t == tree && k == key => {
                Some(Some(value.clone()))
            }
            BufferedOp::Removed { tree: t, key: k } if *t == tree && k == key => Some(None),
            _ => None,
        });
        let value = match staged {
            Some(value) => value,
            None => inner.map.get(&(tree, key.to_vec())).cloned(),
        };
        value.inspect(|_| {
            self.staged_any.store(true, Ordering::Release);
            inner.staged.push(BufferedOp::Removed { tree, key: key.to_vec() })
        })
    }

    /// The changes staged by the commit under way, taken (to be logged, then `apply`d).
    pub fn take_staged(&self) -> Vec<BufferedOp> {
        if !self.staged_any.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut self.inner.lock().unwrap().staged)
    }

    /// Applies logged changes, in order. `versioning`: the commit's number and the commit
    /// numbers of the live snapshots, when one lives: what the changes replace is kept for
    /// the snapshots that read it.
    pub fn apply(&self, ops: &[BufferedOp], versioning: Option<(u64, Vec<u64>)>) {
        if ops.is_empty() {
            return;
        }
        let mut inner = self.inner.lock().unwrap();
        if let Some((n, live)) = versioning {
            for op in ops {
                let (BufferedOp::Put { tree, key, .. } | BufferedOp::Removed { tree, key }) = op;
                let id = (*tree, key.clone());
                let old = inner.map.get(&id).cloned();
                let kept = inner.undo.entry(id).or_default();
                let prev = match kept.last() {
                    Some(&(last, _)) if last == n => continue,
                    Some(&(last, _)) => last,
                    None => 0,
                };
                if serves(&live, prev, n) {
                    kept.push((n, old));
                    inner.undo_by_commit.entry(n).or_default().push((*tree, key.clone()));
                }
            }
            inner.undo.retain(|_, kept| !kept.is_empty());
            self.undo_any.store(!inner.undo.is_empty(), Ordering::Release);
        }
        let mut bytes = self.bytes.load(Ordering::Acquire);
        for op in ops {
            match op {
                BufferedOp::Put { tree, key, value } => {
                    let old = inner.map.insert((*tree, key.clone()), value.clone());
                    bytes += entry_cost(key, value);
                    match old {
                        Some(old) => bytes -= entry_cost(key, &old),
                        None => {
                            // (A reader who passes these before they count the entry reads
                            // as if this commit came after it, as with `held`.)
                            self.held[tree_place(*tree)].fetch_add(1, Ordering::AcqRel);
                            self.filter.add(*tree, key);
                        }
                    }
                }
                BufferedOp::Removed { tree, key } => {
                    if let Some(old) = inner.map.remove(&(*tree, key.clone())) {
                        bytes -= entry_cost(key, &old);
                        self.held[tree_place(*tree)].fetch_sub(1, Ordering::AcqRel);
                        self.filter.remove(*tree, key);
                    }
                }
            }
        }
        self.bytes.store(bytes, Ordering::Release);
    }

    /// The value of `key` in tree `tree` as snapshot `seq` saw it here, if held then.
    pub fn get_at(&self, tree: u64, key: &[u8], seq: u64) -> Option<Vec<u8>> {
        if !self.undo_any.load(Ordering::Acquire) {
            return self.get(tree, key);
        }
        let inner = self.inner.lock().unwrap();
        let id = (tree, key.to_vec());
        match inner.undo.get(&id).and_then(|kept| kept.iter().find(|(n, _)| *n > seq)) {
            Some((_, old)) => old.clone(),
            None => inner.map.get(&id).cloned(),
        }
    }

    /// Whether old entries are kept for snapshots.
    pub fn has_old(&self) -> bool {
        self.undo_any.load(Ordering::Acquire)
    }

    /// Drops the old entries no live snapshot reads any more: those of commits up to
    /// `oldest`, the oldest live snapshot (every one if none lives), found through
    /// `undo_by_commit` (the cost is the entries dropped).
    pub fn collect_old(&self, oldest: Option<u64>) {
        if !self.undo_any.load(Ordering::Acquire) {
            return;
        }
        let mut inner = self.inner.lock().unwrap();
        let (due, limit) = crate::buffer::due_through(&mut inner.undo_by_commit, oldest);
        for id in due.into_values().flatten() {
            let Some(kept) = inner.undo.get_mut(&id) else { continue };
            let stale = kept.iter().take_while(|(n, _)| *n <= limit).count();
            kept.drain(..stale);
            if kept.is_empty() {
                inner.undo.remove(&id);
            }
        }
        self.undo_any.store(!inner.undo.is_empty(), Ordering::Release);
    }

    /// Starts from what recovery found (`trees` names every tree id that has entries).
    pub fn load(&self, map: BTreeMap<(u64, Vec<u8>), Vec<u8>>, trees: HashMap<u64, BTree>) {
        let bytes = map.iter().map(|((_, k), v)| entry_cost(k, v)).sum();
        for held in &self.held {
            held.store(0, Ordering::Release);
        }
        self.filter.clear();
        for (tree, key) in map.keys() {
            self.held[tree_place(*tree)].fetch_add(1, Ordering::AcqRel);
            self.filter.add(*tree, key);
        }
        let mut inner = self.inner.lock().unwrap();
        inner.map = map;
        inner.trees = trees;
        self.bytes.store(bytes, Ordering::Release);
    }

    /// Every entry, for a checkpoint record: `(tree, key, value)`, copied a chunk at a time
    /// (the map's lock is let go between chunks, so commits go on meanwhile). Each entry is
    /// as it was at some moment of the copy, not all at the same one: that is enough, since
    /// the checkpoint copies after fixing its redo LSN and recovery replays every change
    /// logged from that LSN on over the copy, so a key ends as its last change left it (and
    /// a key no change touched since is as it was at the redo LSN, whenever it was copied).
    pub fn snapshot(&self) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
        const CHUNK: usize = 1024;
        let mut out = Vec::new();
        let mut after: Bound<(u64, Vec<u8>)> = Bound::Unbounded;
        while !self.is_empty() {
            let inner = self.inner.lock().unwrap();
            let chunk = inner.map.range((after, Bound::Unbounded)).take(CHUNK);
            let before = out.len();
            out.extend(chunk.map(|((t, k), v)| (*t, k.clone(), v.clone())));
            drop(inner);
            let Some((tree, key, _)) = out.last().filter(|_| out.len() - before == CHUNK) else {
                break;
            };
            after = Bound::Excluded((*tree, key.clone()));
        }
        out
    }

    /// Up to `count` entries from the first, with their trees (draining at close; `None`:
    /// a tree the buffer was not told of, which is damage).
    pub fn first(&self, count: usize) -> Vec<(Option<BTree>, Vec<u8>, Vec<u8>)> {
        let inner = self.inner.lock().unwrap();
        inner
            .map
            .iter()
            .take(count)
            .map(|((t, k), v)| (inner.trees.get(t).copied(), k.clone(), v.clone()))
            .collect()
    }

    /// Entries held, per tree id (for `Db::check`).
    pub fn counts_by_tree(&self) -> BTreeMap<u64, u64> {
        let mut counts = BTreeMap::new();
        if self.is_empty() {
            return counts;
        }
        let inner = self.inner.lock().unwrap();
        for (tree, _) in inner.map.keys() {
            *counts.entry(*tree).or_default() += 1;
        }
        counts
    }

    /// The keys of tree `tree` held here (its drop removes them).
    pub fn keys_of(&self, tree: u64) -> Vec<Vec<u8>> {
        self.range(tree, Bound::Unbounded, Bound::Unbounded).into_iter().map(|(k, _)| k).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(id: u64) -> BTree {
        BTree { root: 100 + id, tree_id: id }
    }

    /// The filter never says a held key is missing, through puts, overwrites, removals and
    /// a reload, with a buffer small enough for its counters to collide: `get` and
    /// `stage_remove` answer as the map does for every key.
    #[test]
    fn the_key_filter_never_hides_a_held_key() {
        let b = ChangeBuffer::new(1);
        assert_eq!(b.filter.counts.len(), 1 << 12, "the fewest counters");
        let mut rng = crate::testing::rng::Rng::new(0x2545_f491_4f6c_dd1d);
        let mut next = move |n: u64| rng.below(n);
        let key = |k: u64| format!("key{k}").into_bytes();
        let mut held: BTreeMap<(u64, Vec<u8>), Vec<u8>> = BTreeMap::new();
        for round in 0..40 {
            let ops: Vec<BufferedOp> = (0..500)
                .map(|_| {
                    let (t, k) = (next(3), key(next(20_000)));
                    match next(3) {
                        0 => BufferedOp::Removed { tree: t, key: k },
                        _ => BufferedOp::Put { tree: t, key: k, value: vec![round as u8] },
                    }
                })
                .collect();
            b.apply(&ops, None);
            for op in &ops {
                match op {
                    BufferedOp::Put { tree, key, value } => {
                        held.insert((*tree, key.clone()), value.clone());
                    }
                    BufferedOp::Removed { tree, key } => {
                        held.remove(&(*tree, key.clone()));
                    }
                }
            }
            if round == 20 {
                b.load(held.clone(), HashMap::new());
            }
            for ((t, k), v) in &held {
                assert!(b.filter.may_hold(*t, k), "round {round}: {t} {k:?}");
                assert_eq!(b.get(*t, k).as_ref(), Some(v));
            }
            for k in (0..20_000).step_by(97).map(key) {
                assert_eq!(b.get(1, &k), held.get(&(1, k.clone())).cloned());
            }
        }
        // Nothing staged: a removal asks the map alone, filter first.
        let ((t, k), v) = held.iter().next().map(|(id, v)| (id.clone(), v.clone())).unwrap();
        assert_eq!(b.stage_remove(t, &k), Some(v));
        assert!(b.filter.may_hold(t, &k), "staged, not yet applied: still held");
    }

    /// A counter that reached 255 stays there: keys sharing it are never hidden.
    #[test]
    fn a_full_counter_never_counts_down() {
        let filter = KeyFilter::for_budget(0);
        for _ in 0..300 {
            filter.add(7, b"k");
        }
        for _ in 0..300 {
            filter.remove(7, b"k");
        }
        assert!(filter.may_hold(7, b"k"), "saturated: held for good");
        filter.add(7, b"other");
        filter.remove(7, b"other");
        let [a, b] = filter.places(7, b"other");
        let counts = [a, b].map(|at| filter.counts[at].load(Ordering::Relaxed));
        assert!(counts.iter().all(|&c| c == 0 || c == u8::MAX), "{counts:?}");
        filter.clear();
        assert!(!filter.may_hold(7, b"k"));
    }

    #[test]
    fn drains_sweep_the_entries_in_key_order_a_leaf_at_a_time_and_wrap_around() {
        let buffer = ChangeBuffer::new(1 << 20);
        assert_eq!(buffer.next_victim(|_, _| unreachable!("empty")), None);
        for (t, k) in [(1, "a"), (1, "b"), (1, "c"), (1, "m"), (2, "a"), (2, "z")] {
            buffer.stage_put(tree(t), k.as_bytes(), b"v");
        }
        let ops = buffer.take_staged();
        buffer.apply(&ops, None);
        let victim = |upper: Option<Option<&str>>| {
            let upper = upper.map(|u| u.map(|u| u.as_bytes().to_vec()));
            let (btree, key) = buffer.next_victim(|_, _| upper).unwrap();
            (btree.tree_id, String::from_utf8(key).unwrap())
        };
        // A leaf holding a..=c: the next victim is past it.
        assert_eq!(victim(Some(Some("c"))), (1, "a".into()));
        // The parent could not tell: past the victim alone.
        assert_eq!(victim(None), (1, "m".into()));
        // The tree's last leaf: the sweep goes past every key of the tree (2, "z" too)...
        buffer.stage_put(tree(3), b"q", b"v");
        let ops = buffer.take_staged();
        buffer.apply(&ops, None);
        assert_eq!(victim(Some(None)), (2, "a".into()));
        assert_eq!(victim(Some(None)), (3, "q".into()));
        // ... and after the last entry, starts over.
        assert_eq!(victim(None), (1, "a".into()));
        // An upper bound below the victim (inconsistent) moves past the victim alone.
        assert_eq!(victim(Some(Some("0"))), (1, "b".into()));
        assert_eq!(victim(None), (1, "c".into()));
        // Entries of a tree it was not told of (damage) are passed over, not stopped at.
        buffer
            .apply(&[BufferedOp::Put { tree: 0, key: b"x".to_vec(), value: b"v".to_vec() }], None);
        assert_eq!(victim(None), (1, "m".into()));
        assert_eq!(victim(Some(None)), (2, "a".into()));
        assert_eq!(victim(Some(None)), (3, "q".into()));
        assert_eq!(buffer.next_victim(|_, _| None), None, "tree 0's entry, unknown: passed");
        assert_eq!(victim(None), (1, "a".into()));
    }

    #[test]
    fn a_snapshot_copies_every_entry_in_order_across_chunks() {
        let buffer = ChangeBuffer::new(1 << 30);
        assert!(buffer.snapshot().is_empty());
        let keys: Vec<(u64, Vec<u8>)> = (0..2_600u32)
            .map(|i| (u64::from(i % 3), format!("k{:05}", i * 7 % 2_600).into_bytes()))
            .collect();
        for (t, k) in &keys {
            buffer.stage_put(tree(*t), k, &k[1..]);
        }
        let ops = buffer.take_staged();
        buffer.apply(&ops, None);
        let mut want: Vec<_> = keys.iter().map(|(t, k)| (*t, k.clone(), k[1..].to_vec())).collect();
        want.sort();
        want.dedup();
        let got = buffer.snapshot();
        assert_eq!(got.len(), buffer.len());
        assert!(got == want, "{} entries against {}", got.len(), want.len());
    }

    #[test]
    fn staged_changes_count_once_applied_and_the_newest_wins() {
        let b = ChangeBuffer::new(1 << 20);
        b.stage_put(tree(1), b"k", b"v1");
        assert_eq!(b.get(1, b"k"), None, "staged is not yet held");
        let ops = b.take_staged();
        b.apply(&ops, None);
        assert_eq!(b.get(1, b"k"), Some(b"v1".to_vec()));
        assert_eq!(b.bytes(), entry_cost(b"k", b"v1"));
        // An overwrite, then a removal in one commit: the removal sees the staged value.
        b.stage_put(tree(1), b"k", b"value2");
        assert_eq!(b.stage_remove(1, b"k"), Some(b"value2".to_vec()));
        assert_eq!(b.stage_remove(1, b"k"), None, "already removed in this commit");
        assert_eq!(b.stage_remove(1, b"other"), None);
        let ops = b.take_staged();
        assert_eq!(ops.len(), 2);
        b.apply(&ops, None);
        assert!(b.is_empty());
        assert_eq!(b.len(), 0);
        assert_eq!(b.get(1, b"k"), None);
    }

    /// Each tree's entries are counted as they come and go (an overwrite is not a second
    /// entry), and at a load: a tree with none is skipped without the lock, a tree sharing
    /// its place with another (ids 64 apart) is looked up.
    #[test]
    fn entries_are_counted_per_tree() {
        let b = ChangeBuffer::new(1 << 20);
        let commit = |puts: &[(u64, &str)], removals: &[(u64, &str)]| {
            for &(t, k) in puts {
                b.stage_put(tree(t), k.as_bytes(), b"v");
            }
            for &(t, k) in removals {
                b.stage_remove(t, k.as_bytes());
            }
            b.apply(&b.take_staged(), None);
        };
        commit(&[(1, "a"), (1, "b"), (1, "a"), (65, "x")], &[]);
        assert_eq!(b.held[1].load(Ordering::Acquire), 3, "a, b and 65's x");
        assert!(b.holds_tree(1) && b.holds_tree(65) && b.holds_tree(129), "one place");
        assert!(!b.holds_tree(2) && !b.holds_tree(0));
        assert_eq!(b.get(129, b"x"), None, "a tree sharing the place finds nothing of it");
        assert_eq!(b.get(65, b"x"), Some(b"v".to_vec()));
        commit(&[(2, "c")], &[(1, "a"), (1, "missing")]);
        assert_eq!(b.held[1].load(Ordering::Acquire), 2);
        assert!(b.holds_tree(2));
        commit(&[], &[(1, "b"), (65, "x"), (2, "c")]);
        assert!(b.held.iter().all(|h| h.load(Ordering::Acquire) == 0));
        assert!(!b.holds_tree(1) && b.is_empty());
        assert!(b.range(1, Bound::Unbounded, Bound::Unbounded).is_empty());
        // A load counts what it brings.
        let map = BTreeMap::from([((3, b"k".to_vec()), b"v".to_vec()), ((67, vec![1]), vec![])]);
        b.load(map, HashMap::from([(3, tree(3)), (67, tree(67))]));
        assert_eq!(b.held[3].load(Ordering::Acquire), 2);
        assert_eq!(b.get(3, b"k"), Some(b"v".to_vec()));
    }

    #[test]
    fn ranges_stay_inside_their_tree() {
        let b = ChangeBuffer::new(1 << 20);
        for (t, k) in [(1, "a"), (1, "c"), (2, ""), (2, "b"), (2, "d"), (3, "a")] {
            b.stage_put(tree(t), k.as_bytes(), b"v");
        }
        b.apply(&b.take_staged(), None);
        let keys = |low, high| -> Vec<Vec<u8>> {
            b.range(2, low, high).into_iter().map(|(k, _)| k).collect()
        };
        assert_eq!(keys(Bound::Unbounded, Bound::Unbounded), [&b""[..], b"b", b"d"]);
        assert_eq!(keys(Bound::Excluded(b"b"), Bound::Unbounded), [b"d"]);
        assert_eq!(keys(Bound::Included(b"b"), Bound::Excluded(b"d")), [b"b"]);
        assert_eq!(keys(Bound::Unbounded, Bound::Included(b"b")), [&b""[..], b"b"]);
        assert_eq!(b.keys_of(1), [b"a", b"c"]);
        assert_eq!(b.keys_of(4), Vec::<Vec<u8>>::new());
        assert_eq!(b.snapshot().len(), 6);
        assert_eq!(b.first(2).len(), 2);
        assert_eq!(b.bytes(), b.snapshot().iter().map(|(_, k, v)| entry_cost(k, v)).sum::<u64>());
    }

    #[test]
    fn snapshots_see_the_entries_of_their_moment() {
        let put =
            |k: &[u8], v: &[u8]| BufferedOp::Put { tree: 1, key: k.to_vec(), value: v.to_vec() };
        let removed = |k: &[u8]| BufferedOp::Removed { tree: 1, key: k.to_vec() };
        let b = ChangeBuffer::new(1 << 20);
        b.apply(&[put(b"a", b"1"), put(b"b", b"1")], None); // commit 1
                                                            // Snapshots at 1 and 3 live from here on.
        b.apply(&[put(b"a", b"2"), removed(b"b"), put(b"c", b"2")], Some((2, vec![1, 3])));
        b.apply(&[put(b"a", b"3")], Some((3, vec![1, 3])));
        b.apply(&[put(b"a", b"4"), put(b"a", b"4b"), removed(b"c")], Some((4, vec![1, 3])));
        let get = |k: &[u8], seq| b.get_at(1, k, seq);
        assert_eq!(
            (get(b"a", 1), get(b"b", 1), get(b"c", 1)),
            (Some(b"1".to_vec()), Some(b"1".to_vec()), None)
        );
        assert_eq!(
            (get(b"a", 3), get(b"b", 3), get(b"c", 3)),
            (Some(b"3".to_vec()), None, Some(b"2".to_vec()))
        );
        assert_eq!((get(b"a", 4), get(b"c", 4)), (Some(b"4b".to_vec()), None));
        let all = |seq| b.range_at(1, Bound::Unbounded, Bound::Unbounded, seq);
        assert_eq!(all(1), [(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"1".to_vec())]);
        assert_eq!(all(3), [(b"a".to_vec(), b"3".to_vec()), (b"c".to_vec(), b"2".to_vec())]);
        let from_b = b.range_at(1, Bound::Included(&b"b"[..]), Bound::Unbounded, 1);
        assert_eq!(from_b, [(b"b".to_vec(), b"1".to_vec())]);
        // Commit 3's old entry of "a" served no snapshot (none was taken between 2 and 3).
        assert_eq!(b.inner.lock().unwrap().undo[&(1, b"a".to_vec())].len(), 2);
        // The snapshot at 1 ends: only what 3 reads stays.
        b.collect_old(Some(3));
        assert_eq!(get(b"a", 3), Some(b"3".to_vec()));
        assert_eq!(b.inner.lock().unwrap().undo.len(), 2, "a and c, for snapshot 3");
        b.collect_old(None);
        assert!(b.inner.lock().unwrap().undo.is_empty());
        assert_eq!(get(b"a", 1), Some(b"4b".to_vec()), "no snapshot: the entries now");
    }
}
