//! Transactions: reads and writes over several trees that commit all together, or not at
//! all when something they read changed meanwhile.
//!
//! Concurrency control is optimistic. A transaction's writes stay in the transaction until
//! it commits, and its reads see them first (read-your-writes). Every value it read from a
//! tree is remembered, with the leaf that answered and the leaf's version. The commit takes
//! the commit lock and checks each key: a key whose leaf still has that version holds what
//! was read (every change to a leaf moves its version on); any other is read again and
//! compared. If one changed, the commit fails with [`Error::Conflict`] and changes nothing;
//! otherwise the writes apply as one commit, exactly as a [`WriteBatch`] would. Commits are
//! applied one at a time under that lock, so a committed transaction behaves as if it ran
//! whole at its commit: transactions are serializable.
//!
//! Ranges too ([`Transaction::scan`]): the part of a range an answer covers is remembered
//! with the entries the tree held there, and read again at the commit, so that a key
//! inserted there (a phantom), removed or changed since is a conflict as well.
//!
//! Counters ([`Transaction::add`]) change a key without reading it: the sum is taken at the
//! commit, under the lock, so transactions that only add to one key do not conflict.
//!
//! What is not protected: the values a transaction returned before a failed commit may
//! not be consistent with each other (they were read at different moments; the commit
//! finds that out).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use super::batch::{apply_ops, tree_slot, BatchOp};
use super::intents::{Claim, Intents};
use super::{check_key, check_value, Shared, Tree, WriteBatch};
use crate::change_buffer::entry_cost;
use crate::error::{Error, PageId, Result};
use crate::id_hash::IdHasher;
use crate::options::Durability;

/// A key of one tree: the tree's id (8 bytes, big-endian), then the key. Tree keys order as
/// (tree id, key) do, and a lookup borrows the bytes from `Transaction::probe` instead of
/// allocating a key (two allocations of every read before).
type TreeKey = Vec<u8>;

/// The tree key of `key` in tree `tree_id`.
fn tree_key(tree_id: u64, key: &[u8]) -> TreeKey {
    let mut id = Vec::with_capacity(8 + key.len());
    id.extend_from_slice(&tree_id.to_be_bytes());
    id.extend_from_slice(key);
    id
}

/// [`tree_key`] built in `probe` (reused): for lookups.
fn probe_key<'p>(probe: &'p mut Vec<u8>, tree_id: u64, key: &[u8]) -> &'p [u8] {
    probe.clear();
    probe.extend_from_slice(&tree_id.to_be_bytes());
    probe.extend_from_slice(key);
    probe
}

/// The tree id and the key of a tree key.
fn split_key(id: &[u8]) -> (u64, &[u8]) {
    let (tree_id, key) = id.split_at(8);
    (u64::from_be_bytes(tree_id.try_into().expect("8 bytes")), key)
}

/// A transaction over any trees of one database: see [`Db::transaction`](super::Db::transaction).
/// Dropping it without committing discards its writes.
#[derive(Debug)]
pub struct Transaction {
    shared: Arc<Shared>,
    /// The trees it read or wrote, each once; reads and writes name theirs by its place
    /// here (`tree_slot`): a handle per read and write would clone and drop three shared
    /// reference counts each time, fifty times in a TPC-C New-Order.
    trees: Vec<Tree>,
    /// What each key read from a tree held then, by (tree id, key). Hashed with `IdHasher`
    /// (a multiply per 8 bytes) rather than SipHash: a New-Order hashes its 23 rows' keys
    /// three times each. Keys chosen to collide only slow the transaction that reads them.
    reads: HashMap<TreeKey, Read, BuildHasherDefault<IdHasher>>,
    /// The last write of each key, by (tree id, key), and its tree's place in `trees`.
    writes: BTreeMap<TreeKey, (usize, Write)>,
    /// The ranges read from trees, each with what the tree held there.
    ranges: Vec<RangeRead>,
    durability: Option<Durability>,
    /// Where lookups build their tree key (`probe_key`).
    probe: Vec<u8>,
    /// This transaction's stamp among intents (0 until its first, `intents.rs`).
    stamp: u64,
    /// The intents it holds: hashes of keys it read for update (`Intents::hash`).
    intents: Vec<u64>,
}

/// A key a transaction read from a tree: what it held then, and the leaf that answered
/// (page, version) when the answer lay wholly in it (`Tree::get_witnessed`). While that leaf
/// is unchanged, so is the key: the commit checks the leaf's version instead of reading the
/// key again.
#[derive(Debug)]
struct Read {
    /// The tree's place in `Transaction::trees`.
    tree: usize,
    value: Option<Vec<u8>>,
    leaf: Option<(PageId, u64)>,
}

impl Read {
    /// Whether the key, of `tree` (this read's), certainly still holds what was read (false:
    /// read it again to tell).
    fn unchanged(&self, tree: &Tree, key: &[u8]) -> bool {
        self.leaf.is_some_and(|leaf| tree.unchanged_since(key, leaf))
    }
}

/// A part of a tree a transaction's scan depended on, and the tree's entries there when
/// read (ascending): at the commit, the same part must hold exactly these.
#[derive(Debug)]
struct RangeRead {
    /// The tree's place in `Transaction::trees`.
    tree: usize,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// The leaf that answered the whole scan, and its version then, if one did: while it is
    /// unchanged (and the change buffer empty), so is the range, and the commit need not
    /// scan it again ([`Tree::range_unchanged_since`]).
    leaf: Option<(PageId, u64)>,
}

impl RangeRead {
    /// Whether the range, of `tree` (this one's), certainly still holds what was read.
    fn unchanged(&self, tree: &Tree) -> bool {
        self.leaf.is_some_and(|leaf| tree.range_unchanged_since(leaf))
    }
}

/// What a transaction writes to a key.
#[derive(Debug, Clone)]
enum Write {
    /// A value, or `None` for a delete.
    Value(Option<Vec<u8>>),
    /// Changes in place of whatever the key holds at the commit, in order (`write_at` and
    /// `truncate` of a key the transaction did not put).
    Edits(Vec<Edit>),
}

/// A change of a value in place.
#[derive(Debug, Clone)]
enum Edit {
    WriteAt(u64, Vec<u8>),
    Truncate(u64),
    /// [`Transaction::add`]: a delta to the counter the key holds at the commit.
    Add(i64),
}

/// The bytes of a counter ([`Transaction::add`]).
pub(super) const COUNTER_LEN: usize = 8;

/// `value` (a counter, or absent: 0) plus `delta`, as the counter's bytes; the reason it
/// cannot be, for [`Error::BadCounter`].
pub(super) fn add_to_counter(
    value: Option<&[u8]>,
    delta: i64,
) -> std::result::Result<Vec<u8>, String> {
    let now = match value {
        None => 0,
        Some(bytes) => match <[u8; COUNTER_LEN]>::try_from(bytes) {
            Ok(bytes) => i64::from_le_bytes(bytes),
            Err(_) => {
                return Err(format!(
                    "its value is {} bytes long, not a counter ({COUNTER_LEN} bytes)",
                    bytes.len()
                ))
            }
        },
    };
    match now.checked_add(delta) {
        Some(sum) => Ok(sum.to_le_bytes().to_vec()),
        None => Err(format!("{now} + {delta} is out of a counter's range (64-bit signed)")),
    }
}

impl Edit {
    /// Applies the edit to the value in memory of `key` of `tree` (`None`: the key is
    /// absent), as the tree would.
    fn apply(&self, value: Option<Vec<u8>>, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let too_large = || Error::ValueTooLarge {
            len: usize::MAX,
            max: super::object::MAX_OBJECT_LEN as usize,
        };
        match self {
            // (Truncating an absent key leaves it absent, as `Tree::truncate`.)
            Edit::Truncate(_) if value.is_none() => Ok(None),
            Edit::Truncate(len) => {
                let mut value = value.unwrap_or_default();
                value.resize(usize::try_from(*len).map_err(|_| too_large())?, 0);
                Ok(Some(value))
            }
            Edit::WriteAt(offset, bytes) => {
                let mut value = value.unwrap_or_default();
                if !bytes.is_empty() {
                    let at = usize::try_from(*offset).map_err(|_| too_large())?;
                    let end = at.checked_add(bytes.len()).ok_or_else(too_large)?;
                    if value.len() < end {
                        value.resize(end, 0);
                    }
                    value[at..end].copy_from_slice(bytes);
                }
                Ok(Some(value))
            }
            Edit::Add(delta) => match add_to_counter(value.as_deref(), *delta) {
                Ok(sum) => Ok(Some(sum)),
                Err(reason) => Err(Error::BadCounter {
                    tree: tree.name.to_string(),
                    key: key.to_vec(),
                    reason,
                }),
            },
        }
    }
}

impl Transaction {
    pub(super) fn new(shared: Arc<Shared>) -> Transaction {
        Transaction {
            shared,
            trees: Vec::new(),
            reads: HashMap::default(),
            writes: BTreeMap::new(),
            ranges: Vec::new(),
            durability: None,
            probe: Vec::new(),
            stamp: 0,
            intents: Vec::new(),
        }
    }

    /// The value of `key` in `tree` as this transaction sees it: its own write if it made
    /// one, else the value it read before, else the tree's (remembered for the commit's check).
    pub fn get(&mut self, tree: &Tree, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        crate::sched::block_on(self.get_bytes_async(tree, key.as_ref()))
    }

    /// [`Transaction::get`] as a future (inside a task, a miss yields instead of blocking).
    pub async fn get_async(
        &mut self,
        tree: &Tree,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        crate::db::in_task("Transaction::get_async")?;
        self.get_bytes_async(tree, key.as_ref()).await
    }

    /// [`Transaction::get_async`] of many rows, `(tree, key)` each: their values, in the
    /// same order. The leaves not in memory are read with their reads in flight together,
    /// so the task waits about one read's time instead of one per row (a New-Order reading
    /// the stock of its items), and the device sees them as one deep queue. Each row is
    /// read, remembered and validated at the commit exactly as `get_async` would.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let options = ferrite::Options { workers: 1, pool_bytes: 16 << 20, ..Default::default() };
    /// # let db = ferrite::Db::open(dir.path(), options)?;
    /// let stock = db.tree("stock")?;
    /// stock.put(4242u32.to_be_bytes(), "12 left")?;
    /// let mut txn = db.transaction();
    /// let task = db.spawn(async move {
    ///     let items = [17u32, 4_242].map(u32::to_be_bytes);
    ///     let rows: Vec<_> = items.iter().map(|item| (&stock, item)).collect();
    ///     let found = txn.get_many_async(&rows).await?;
    ///     txn.commit_async().await?;
    ///     Ok::<_, ferrite::Error>(found)
    /// })?;
    /// assert_eq!(task.wait()?, [None, Some(b"12 left".to_vec())]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn get_many_async<K: AsRef<[u8]>>(
        &mut self,
        rows: &[(&Tree, K)],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        crate::db::in_task("Transaction::get_many_async")?;
        self.get_many(rows, false).await
    }

    /// [`Transaction::get_for_update_async`] of many rows: the intents taken in the rows'
    /// order (each wait as `get_for_update` says), then the rows read as
    /// [`Transaction::get_many_async`] reads them.
    pub async fn get_many_for_update_async<K: AsRef<[u8]>>(
        &mut self,
        rows: &[(&Tree, K)],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        crate::db::in_task("Transaction::get_many_for_update_async")?;
        self.get_many(rows, true).await
    }

    async fn get_many<K: AsRef<[u8]>>(
        &mut self,
        rows: &[(&Tree, K)],
        for_update: bool,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        for (tree, key) in rows {
            self.check_tree(tree)?;
            check_key(key.as_ref())?;
        }
        if for_update {
            for (tree, key) in rows {
                self.intend(Intents::hash(tree.btree.tree_id, key.as_ref())).await;
            }
        }
        // The rows this transaction has neither written nor read: their trees' reads go
        // out together, and are remembered as `read_checked` remembers its own.
        let mut unread: Vec<(&Tree, &[u8])> = Vec::with_capacity(rows.len());
        // For each of them, its place in `rows`, and whether the transaction edited it
        // (its answer is then the edits over the value read: `read_checked`'s).
        let mut places: Vec<(usize, bool)> = Vec::with_capacity(rows.len());
        for (i, (tree, key)) in rows.iter().enumerate() {
            let id = probe_key(&mut self.probe, tree.btree.tree_id, key.as_ref());
            let write = self.writes.get(id);
            if !matches!(write, Some((_, Write::Value(_)))) && !self.reads.contains_key(id) {
                unread.push((tree, key.as_ref()));
                places.push((i, write.is_some()));
            }
        }
        let mut answers: Vec<Option<Option<Vec<u8>>>> = vec![None; rows.len()];
        if unread.len() > 1 {
            self.reads.reserve(unread.len());
            let found = Tree::get_witnessed_many(&self.shared.pool, &unread).await;
            for ((&(tree, key), found), &(i, edited)) in unread.iter().zip(found).zip(&places) {
                // A row not answered is read alone below.
                let Some((value, leaf)) = found else { continue };
                let id = probe_key(&mut self.probe, tree.btree.tree_id, key);
                let slot = tree_slot(&mut self.trees, tree);
                match self.reads.entry(id.to_vec()) {
                    Entry::Vacant(entry) => {
                        // Answered here, without looking the row up again below.
                        if !edited {
                            answers[i] = Some(value.clone());
                        }
                        entry.insert(Read { tree: slot, value, leaf });
                    }
                    // The same row twice: every answer is the first read's.
                    Entry::Occupied(_) => {}
                }
            }
        }
        let mut values = Vec::with_capacity(rows.len());
        for ((tree, key), answer) in rows.iter().zip(answers) {
            values.push(match answer {
                Some(value) => value,
                None => self.read_checked(tree, key.as_ref()).await?,
            });
        }
        Ok(values)
    }

    /// Reads `key` of `tree` in order to change it: [`Transaction::get`], and while this
    /// transaction runs, another one that reads the key for update waits until this one
    /// ends (commits, fails, or is dropped) and then reads what it left. Without the wait,
    /// both would read the same value and one of them would fail at its commit with
    /// [`Error::Conflict`] after doing all its work; with it, the second runs on from the
    /// first's result.
    ///
    /// Isolation is the same as [`Transaction::get`]'s: the commit validates the read
    /// either way, and the wait is only a hint that saves work. So it is kept short: a
    /// transaction does not wait where the wait would close a cycle (two transactions
    /// waiting for each other, directly or through others), never waits longer than
    /// [`Options::update_wait`](crate::Options::update_wait), and does not wait at all in a
    /// blocking call inside a task.
    ///
    /// ```
    /// use ferrite::{Db, Options};
    ///
    /// # let dir = tempfile::tempdir()?;
    /// # let options = Options { workers: 0, pool_bytes: 16 << 20, ..Options::default() };
    /// let db = Db::open(dir.path(), options)?;
    /// let districts = db.tree("districts")?;
    /// districts.put(b"next-order", 3001u64.to_le_bytes())?;
    ///
    /// let mut txn = db.transaction();
    /// let next = txn.get_for_update(&districts, b"next-order")?.expect("loaded");
    /// let next = u64::from_le_bytes(next.try_into().expect("8 bytes"));
    /// txn.put(&districts, b"next-order", (next + 1).to_le_bytes())?;
    /// txn.commit()?;
    /// # assert_eq!(districts.get(b"next-order")?, Some(3002u64.to_le_bytes().to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_for_update(
        &mut self,
        tree: &Tree,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        crate::sched::block_on(self.get_for_update_bytes(tree, key.as_ref()))
    }

    /// [`Transaction::get_for_update`] as a future (inside a task, waits yield).
    pub async fn get_for_update_async(
        &mut self,
        tree: &Tree,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        crate::db::in_task("Transaction::get_for_update_async")?;
        self.get_for_update_bytes(tree, key.as_ref()).await
    }

    async fn get_for_update_bytes(&mut self, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_tree(tree)?;
        check_key(key)?;
        self.intend(Intents::hash(tree.btree.tree_id, key)).await;
        self.read_checked(tree, key).await
    }

    /// Takes the intent on `hash`, waiting for an earlier owner as `get_for_update` says.
    async fn intend(&mut self, hash: u64) {
        if self.intents.contains(&hash) {
            return;
        }
        let intents = &self.shared.intents;
        if self.stamp == 0 {
            self.stamp = intents.stamp();
        }
        let stamp = self.stamp;
        let claim = if crate::worker_context::on_worker() {
            wait_in_task(intents, hash, stamp).await
        } else if crate::worker_context::in_blocking_call_on_worker() {
            // (The owner may be a task of this worker, which cannot run meanwhile.)
            match intents.claim(hash, stamp, std::task::Waker::noop()) {
                Claim::Wait => {
                    intents.done_waiting(stamp);
                    Claim::Pass
                }
                claim => claim,
            }
        } else {
            wait_parked(intents, hash, stamp)
        };
        if claim == Claim::Taken {
            self.intents.push(hash);
        }
    }

    /// [`Transaction::get_async`] of a borrowed key: its own write, else its earlier read,
    /// else the tree's value (remembered), with its own edits laid over the last two. One
    /// lookup in each of its maps.
    async fn get_bytes_async(&mut self, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_tree(tree)?;
        check_key(key)?;
        self.read_checked(tree, key).await
    }

    /// `get_bytes_async` of a tree and key already checked.
    async fn read_checked(&mut self, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Transaction { trees, reads, writes, probe, .. } = self;
        let id = probe_key(probe, tree.btree.tree_id, key);
        let edits = match writes.get(id) {
            Some((_, Write::Value(value))) => return Ok(value.clone()),
            // (Edits need the key's value under them.)
            Some((_, Write::Edits(edits))) => Some(edits),
            None => None,
        };
        let value = match reads.get(id) {
            Some(read) => read.value.clone(),
            None => {
                let (value, leaf) = tree.get_witnessed(key).await?;
                let slot = tree_slot(trees, tree);
                reads.insert(id.to_vec(), Read { tree: slot, value: value.clone(), leaf });
                value
            }
        };
        match edits {
            Some(edits) => edits.iter().try_fold(value, |v, e| e.apply(v, tree, key)),
            None => Ok(value),
        }
    }

    /// Up to `limit` entries of `tree` with keys in `range`, ascending (descending from the
    /// range's end with `reverse`), as this transaction sees them: its own writes over the
    /// tree's entries. The part of the range the answer depends on (all of it; or, when
    /// `limit` entries came back, up to the last one) is read again at the commit: an entry
    /// inserted there, removed or changed since fails the commit with [`Error::Conflict`]
    /// (phantoms included), so that scans are serializable with the rest of the transaction.
    /// A scan that needs no such guarantee (a report) reads the tree itself instead
    /// ([`Tree::range`], one moment) and costs the commit nothing.
    ///
    /// ```
    /// use ferrite::{Db, Error, Options};
    ///
    /// # let dir = tempfile::tempdir()?;
    /// # let options = Options { workers: 0, pool_bytes: 16 << 20, ..Options::default() };
    /// let db = Db::open(dir.path(), options)?;
    /// let orders = db.tree("orders")?;
    /// orders.put(b"order-0001", b"new")?;
    /// orders.put(b"order-0002", b"new")?;
    ///
    /// // The oldest order, to deliver it.
    /// let mut txn = db.transaction();
    /// let oldest = txn.scan(&orders, &b"order-"[..].., 1, false)?;
    /// assert_eq!(oldest[0].0, b"order-0001");
    /// txn.delete(&orders, &oldest[0].0)?;
    ///
    /// // Meanwhile an older order arrives: the scan's answer is out of date.
    /// orders.put(b"order-0000", b"new")?;
    /// assert!(matches!(txn.commit(), Err(Error::Conflict { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan<K: AsRef<[u8]> + ?Sized>(
        &mut self,
        tree: &Tree,
        range: impl RangeBounds<K>,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let lower = super::iter::owned_bound(range.start_bound());
        let upper = super::iter::owned_bound(range.end_bound());
        crate::sched::block_on(self.scan_bounds(tree, lower, upper, limit, reverse))
    }

    /// [`Transaction::scan`] as a future (inside a task, a miss yields instead of blocking).
    pub async fn scan_async<K: AsRef<[u8]> + ?Sized>(
        &mut self,
        tree: &Tree,
        range: impl RangeBounds<K>,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        crate::db::in_task("Transaction::scan_async")?;
        let lower = super::iter::owned_bound(range.start_bound());
        let upper = super::iter::owned_bound(range.end_bound());
        self.scan_bounds(tree, lower, upper, limit, reverse).await
    }

    async fn scan_bounds(
        &mut self,
        tree: &Tree,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.check_tree(tree)?;
        let empty = crate::change_buffer::is_empty_range(
            super::cursor::as_slice(&lower),
            super::cursor::as_slice(&upper),
        );
        if limit == 0 || empty {
            return Ok(Vec::new());
        }
        let tree_id = tree.btree.tree_id;
        let inside = |key: &[u8]| contains(&lower, &upper, key);
        let own: Vec<(&[u8], &Write)> = self
            .writes
            .range::<[u8], _>((Bound::Included(&tree_id.to_be_bytes()[..]), Bound::Unbounded))
            .map(|(id, (_, write))| (split_key(id), write))
            .take_while(|((id, _), _)| *id == tree_id)
            .filter(|((_, key), _)| inside(key))
            .map(|((_, key), write)| (key, write))
            .collect();
        // Each of its own deletes hides at most one of the tree's entries: this many of them
        // give `limit` entries, unless the range has fewer.
        let deletes = own.iter().filter(|(_, w)| matches!(w, Write::Value(None))).count();
        let wanted = limit.saturating_add(deletes);
        let (found, leaf) =
            tree.collect_range_witnessed(&lower, &upper, reverse, wanted, false).await?;
        // How far the tree was read: to its last entry if the scan stopped at `wanted`.
        let reached = match found.len() == wanted {
            true => found.last().map(|(key, _)| key.clone()),
            false => None,
        };
        let within = |key: &[u8]| match &reached {
            None => true,
            Some(last) if reverse => key >= last.as_slice(),
            Some(last) => key <= last.as_slice(),
        };
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            found.iter().map(|(key, value)| (key.clone(), Some(value.clone()))).collect();
        for (key, write) in own.into_iter().filter(|(key, _)| within(key)) {
            let value = match write {
                Write::Value(value) => value.clone(),
                // Edits lay over the tree's value (absent if the tree has none: it was read
                // up to here).
                Write::Edits(edits) => {
                    let under = merged.get(key).cloned().flatten();
                    edits.iter().try_fold(under, |v, e| e.apply(v, tree, key))?
                }
            };
            merged.insert(key.to_vec(), value);
        }
        let present = merged.into_iter().filter_map(|(key, value)| Some((key, value?)));
        let answer: Vec<(Vec<u8>, Vec<u8>)> = match reverse {
            false => present.take(limit).collect(),
            true => present.rev().take(limit).collect(),
        };
        // The part of the range the answer depends on.
        let (mut depends_lower, mut depends_upper) = (lower, upper);
        if answer.len() == limit {
            let last = Bound::Included(answer[limit - 1].0.clone());
            match reverse {
                false => depends_upper = last,
                true => depends_lower = last,
            }
        }
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = found
            .into_iter()
            .filter(|(key, _)| contains(&depends_lower, &depends_upper, key))
            .collect();
        if reverse {
            entries.reverse();
        }
        let tree = tree_slot(&mut self.trees, tree);
        let range = RangeRead { tree, lower: depends_lower, upper: depends_upper, entries, leaf };
        self.ranges.push(range);
        Ok(answer)
    }

    /// Sets `key` of `tree` to `value` when the transaction commits.
    pub fn put(
        &mut self,
        tree: &Tree,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.check_tree(tree)?;
        check_key(key)?;
        check_value(value)?;
        let id = tree_key(tree.btree.tree_id, key);
        let tree = tree_slot(&mut self.trees, tree);
        self.writes.insert(id, (tree, Write::Value(Some(value.to_vec()))));
        Ok(())
    }

    /// Writes `bytes` at `offset` of `key`'s value in `tree` when the transaction commits,
    /// as [`Tree::write_at`] does; its reads of the key see the write.
    pub fn write_at(
        &mut self,
        tree: &Tree,
        key: impl AsRef<[u8]>,
        offset: u64,
        bytes: impl AsRef<[u8]>,
    ) -> Result<()> {
        let bytes = bytes.as_ref();
        super::object::check_object_end(offset, bytes.len() as u64)?;
        self.edit(tree, key.as_ref(), Edit::WriteAt(offset, bytes.to_vec()))
    }

    /// Sets the length of `key`'s value in `tree` when the transaction commits, as
    /// [`Tree::truncate`] does (nothing if the key is absent then).
    pub fn truncate(&mut self, tree: &Tree, key: impl AsRef<[u8]>, len: u64) -> Result<()> {
        super::object::check_object_end(len, 0)?;
        self.edit(tree, key.as_ref(), Edit::Truncate(len))
    }

    /// Adds `delta` to the counter `key` holds in `tree` when the transaction commits,
    /// without reading it: transactions that add to the same key do not conflict with each
    /// other (their adds apply one after another, each at its commit), as they would if each
    /// read the counter and wrote the sum. A counter is a signed 64-bit integer, its 8 bytes
    /// little-endian; an absent key counts as 0 and is created.
    ///
    /// A transaction that reads the key ([`Transaction::get`]) sees its adds over the value
    /// it read, and that read is checked at the commit as any other. At the commit, a value
    /// that is not 8 bytes long, or a sum out of range, fails it with [`Error::BadCounter`],
    /// and nothing is written. A key may take adds or `write_at`/`truncate` edits in one
    /// transaction, not both ([`Error::NotSupported`]).
    ///
    /// ```
    /// use ferrite::{Db, Options};
    ///
    /// # let dir = tempfile::tempdir()?;
    /// # let options = Options { workers: 0, pool_bytes: 16 << 20, ..Options::default() };
    /// let db = Db::open(dir.path(), options)?;
    /// let totals = db.tree("totals")?;
    /// let mut one = db.transaction();
    /// let mut other = db.transaction();
    /// one.add(&totals, "paid", 250)?;
    /// other.add(&totals, "paid", -50)?;
    /// one.commit()?;
    /// other.commit()?; // no conflict: neither read the counter
    /// assert_eq!(totals.get("paid")?, Some(200i64.to_le_bytes().to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn add(&mut self, tree: &Tree, key: impl AsRef<[u8]>, delta: i64) -> Result<()> {
        self.edit(tree, key.as_ref(), Edit::Add(delta))
    }

    fn edit(&mut self, tree: &Tree, key: &[u8], edit: Edit) -> Result<()> {
        self.check_tree(tree)?;
        check_key(key)?;
        let id = tree_key(tree.btree.tree_id, key);
        match self.writes.get_mut(&id) {
            // Over a value of its own: the value changes here.
            Some((_, Write::Value(value))) => *value = edit.apply(value.take(), tree, key)?,
            Some((_, Write::Edits(edits))) => {
                let adds = matches!(edit, Edit::Add(_));
                if edits.iter().any(|e| matches!(e, Edit::Add(_)) != adds) {
                    return Err(Error::NotSupported {
                        reason: format!(
                            "key \"{}\" of tree {:?} takes both adds and write_at or truncate \
                             edits in one transaction: put its whole value instead",
                            key.escape_ascii(),
                            tree.name
                        ),
                    });
                }
                // Adds in a row become one, unless their sum is out of range (the commit
                // then tells whether the counter's is).
                let merged = match (edits.last_mut(), &edit) {
                    (Some(Edit::Add(sum)), Edit::Add(delta)) => {
                        sum.checked_add(*delta).map(|total| *sum = total).is_some()
                    }
                    _ => false,
                };
                if !merged {
                    edits.push(edit);
                }
            }
            None => {
                let tree = tree_slot(&mut self.trees, tree);
                self.writes.insert(id, (tree, Write::Edits(vec![edit])));
            }
        }
        Ok(())
    }

    /// Removes `key` from `tree` when the transaction commits (nothing if it is absent).
    pub fn delete(&mut self, tree: &Tree, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        self.check_tree(tree)?;
        check_key(key)?;
        let id = tree_key(tree.btree.tree_id, key);
        let tree = tree_slot(&mut self.trees, tree);
        self.writes.insert(id, (tree, Write::Value(None)));
        Ok(())
    }

    /// This transaction's durability, instead of the database's (`Options::durability`).
    pub fn durability(&mut self, durability: Durability) -> &mut Self {
        self.durability = Some(durability);
        self
    }

    /// How many keys the transaction read from trees, and how many it writes (ranges
    /// scanned: [`Transaction::ranges`]).
    pub fn len(&self) -> (usize, usize) {
        (self.reads.len(), self.writes.len())
    }

    /// How many ranges the transaction scanned from trees, and the entries its commit will
    /// read again to validate them.
    pub fn ranges(&self) -> (usize, usize) {
        (self.ranges.len(), self.ranges.iter().map(|r| r.entries.len()).sum())
    }

    /// Commits: if every key the transaction read still holds what it read, its writes
    /// apply as one commit (durable as its durability asks when this returns). Otherwise
    /// it fails with [`Error::Conflict`], nothing is written, and the caller may run the
    /// transaction again.
    pub fn commit(self) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        shared.blocking_write(self.commit_async())
    }

    /// [`Transaction::commit`] as a future (for tasks).
    pub async fn commit_async(mut self) -> Result<()> {
        crate::db::in_task("Transaction::commit_async")?;
        let Some((batch, durability)) = self.prepare()? else { return Ok(()) };
        // (The transaction's trees, moved into the batch.)
        let trees = &batch.trees;
        // Loads before the commit lock what the commit will read or change, unless it is
        // certainly in memory: a key whose leaf is unchanged since the transaction read it.
        for (id, read) in &self.reads {
            let (_, key) = split_key(id);
            let tree = &trees[read.tree];
            if !read.unchanged(tree, key) {
                tree.prefetch(key).await;
            }
        }
        // The leaves the writes go to, loaded now and handed to the commit: the one a key
        // was read from, where unchanged; else the one the previous key of the tree went to,
        // if it holds the key (the writes are sorted); else the one a descent finds. A put
        // of a key the transaction did not read, whose leaf is not in memory, is not loaded:
        // it goes to the change buffer, as a `Tree::put`'s would (`buffered`).
        let shared = &self.shared;
        let may_buffer =
            shared.change_buffer.enabled() && !shared.objects_in_use.load(Ordering::Acquire);
        let mut near = Vec::with_capacity(batch.ops.len());
        let mut buffered = Vec::new();
        let mut buffered_cost = 0;
        let mut last: Option<(u64, PageId)> = None;
        for (i, (tree, op)) in batch.iter().enumerate() {
            let tree_id = tree.btree.tree_id;
            let read = self.reads.get(probe_key(&mut self.probe, tree_id, op.key()));
            let read_leaf = read.and_then(|r| r.leaf.filter(|_| r.unchanged(tree, op.key())));
            let after_last = last.filter(|&(id, _)| id == tree_id).map(|(_, l)| l);
            let leaf = match (read_leaf.map(|(leaf, _)| leaf), op) {
                (Some(leaf), _) => Some(leaf),
                (None, BatchOp::Put(key, value))
                    if may_buffer
                        && read.is_none()
                        && !super::object::needs_object(value.len() as u64, value) =>
                {
                    match tree.resident_leaf_for(key, after_last).await {
                        Ok(None)
                            if shared.change_buffer.room_for_transaction(
                                &shared.pool,
                                buffered_cost + entry_cost(key, value),
                            ) =>
                        {
                            buffered.resize(batch.ops.len(), false);
                            buffered[i] = true;
                            buffered_cost += entry_cost(key, value);
                            None
                        }
                        Ok(Some(leaf)) => Some(leaf),
                        Ok(None) => tree.prefetch_leaf(key, None).await,
                        // (Left for the commit to meet.)
                        Err(_) => None,
                    }
                }
                (None, _) => tree.prefetch_leaf(op.key(), after_last).await,
            };
            last = leaf.map(|leaf| (tree_id, leaf));
            near.push(leaf);
        }
        let objects = self.shared.prepare_objects(&batch)?;
        for range in &self.ranges {
            if let Some((key, _)) =
                range.entries.first().filter(|_| !range.unchanged(&trees[range.tree]))
            {
                trees[range.tree].prefetch(key).await;
            }
        }
        let (reads, ranges) = (&self.reads, &self.ranges);
        let validate_and_apply = async || {
            for (id, read) in reads {
                let (_, key) = split_key(id);
                let tree = &trees[read.tree];
                if !read.unchanged(tree, key) && tree.get_in_commit(key).await? != read.value {
                    return Err(conflict(tree, key));
                }
            }
            for range in ranges {
                let tree = &trees[range.tree];
                if range.unchanged(tree) {
                    continue;
                }
                let now = tree.collect_range(&range.lower, &range.upper, false, usize::MAX, true);
                if let Some(key) = first_difference(&range.entries, &now.await?) {
                    return Err(conflict(tree, key));
                }
            }
            apply_ops(&batch, &objects, &near, &buffered).await
        };
        let (intents, stamp) = (&self.intents, self.stamp);
        let released = std::sync::atomic::AtomicBool::new(false);
        let outcome = self
            .shared
            .commit(durability, async || {
                let outcome = validate_and_apply().await;
                // Ended, committed or not: whoever waits for its intents reads on (before
                // this commit's sync, which a later commit's record follows in the log).
                if !intents.is_empty() {
                    self.shared.intents.release(intents, stamp);
                    released.store(true, Ordering::Relaxed);
                }
                outcome
            })
            .await;
        if released.load(Ordering::Relaxed) {
            // (Else a commit that failed before its body leaves them to the drop.)
            self.intents.clear();
        }
        if outcome.is_err() {
            self.shared.abandon_objects(&objects);
        }
        outcome?;
        // Past its budget (or the transactions' share): the committer that pushed it over
        // drains a leaf, as a `Tree::put`'s does.
        if buffered_cost > 0 && shared.change_buffer.transaction_share_full(&shared.pool) {
            shared.drain_next().await?;
        }
        Ok(())
    }

    fn check_tree(&self, tree: &Tree) -> Result<()> {
        if !Arc::ptr_eq(&tree.shared, &self.shared) {
            return Err(Error::BadOptions {
                reason: format!("tree {:?} belongs to another database", tree.name),
            });
        }
        if tree.dropped.load(Ordering::Acquire) {
            return Err(Error::TreeNotFound { name: tree.name.to_string() });
        }
        Ok(())
    }

    /// The writes as a batch (moved out of the transaction), checked like one, and the
    /// durability to commit with; `None` when there is nothing to check or write.
    fn prepare(&mut self) -> Result<Option<(WriteBatch, Durability)>> {
        let read_nothing = self.reads.is_empty() && self.ranges.is_empty();
        if self.writes.is_empty() && (read_nothing || self.shared.read_only) {
            // Nothing to write, and (read-only) nothing can have changed what was read.
            self.shared.check_open()?;
            return Ok(None);
        }
        // Every tree it read or wrote goes with the batch, in the same places, and is checked
        // with the batch's (its database's, not dropped).
        let mut batch = WriteBatch { trees: std::mem::take(&mut self.trees), ..WriteBatch::new() };
        batch.ops.reserve(self.writes.len());
        for (mut key, (tree, write)) in std::mem::take(&mut self.writes) {
            // The key without its tree id, in place.
            key.drain(..8);
            match write {
                Write::Value(Some(value)) => batch.ops.push((tree, BatchOp::Put(key, value))),
                Write::Value(None) => batch.ops.push((tree, BatchOp::Delete(key))),
                Write::Edits(edits) => {
                    for edit in edits {
                        let op = match edit {
                            Edit::WriteAt(offset, bytes) => {
                                BatchOp::WriteAt(key.clone(), offset, bytes)
                            }
                            Edit::Truncate(len) => BatchOp::Truncate(key.clone(), len),
                            Edit::Add(delta) => BatchOp::Add(key.clone(), delta),
                        };
                        batch.ops.push((tree, op));
                    }
                }
            }
        }
        self.shared.check_batch(&batch)?;
        Ok(Some((batch, self.durability.unwrap_or(self.shared.durability))))
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if !self.intents.is_empty() {
            self.shared.intents.release(&self.intents, self.stamp);
        }
    }
}

/// Waits in a task until the intent on `hash` is `stamp`'s, or waiting would close a cycle,
/// or `Intents::wait` has passed (a timer on the worker's ring, armed only once it waits).
async fn wait_in_task(intents: &Intents, hash: u64, stamp: u64) -> Claim {
    // Done waiting however the wait ends (a task dropped while it waits included).
    struct Waiting<'a>(&'a Intents, u64, bool);
    impl Drop for Waiting<'_> {
        fn drop(&mut self) {
            if self.2 {
                self.0.done_waiting(self.1);
            }
        }
    }
    let mut waiting = Waiting(intents, stamp, false);
    let mut timer = None;
    std::future::poll_fn(|cx| {
        match intents.claim(hash, stamp, cx.waker()) {
            Claim::Wait => waiting.2 = true,
            claim => return Poll::Ready(claim),
        }
        if intents.wait.is_zero() {
            return Poll::Ready(Claim::Pass);
        }
        let timer = timer.get_or_insert_with(|| Box::pin(crate::sched::net::sleep(intents.wait)));
        match std::future::Future::poll(timer.as_mut(), cx) {
            Poll::Ready(()) => Poll::Ready(Claim::Pass),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// [`wait_in_task`] for a blocking call: the thread parks until woken or the wait is over.
fn wait_parked(intents: &Intents, hash: u64, stamp: u64) -> Claim {
    let deadline = Instant::now().checked_add(intents.wait);
    let waker = crate::sched::thread_waker();
    let mut waited = false;
    let claim = loop {
        match intents.claim(hash, stamp, &waker) {
            Claim::Wait => waited = true,
            claim => break claim,
        }
        match deadline.map(|d| d.saturating_duration_since(Instant::now())) {
            Some(left) if left.is_zero() => break Claim::Pass,
            Some(left) => std::thread::park_timeout(left),
            None => std::thread::park(),
        }
    };
    if waited {
        intents.done_waiting(stamp);
    }
    claim
}

/// Whether `key` lies between `lower` and `upper`.
fn contains(lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    let above = match lower {
        Bound::Included(low) => key >= low.as_slice(),
        Bound::Excluded(low) => key > low.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match upper {
        Bound::Included(high) => key <= high.as_slice(),
        Bound::Excluded(high) => key < high.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// The first key at which two ascending lists of entries differ (an entry in one only, or
/// with another value), if they do.
fn first_difference<'a>(
    seen: &'a [(Vec<u8>, Vec<u8>)],
    now: &'a [(Vec<u8>, Vec<u8>)],
) -> Option<&'a [u8]> {
    let differs = seen.iter().zip(now).find(|(a, b)| a != b);
    if let Some((a, b)) = differs {
        return Some(a.0.as_slice().min(b.0.as_slice()));
    }
    let longer = if seen.len() > now.len() { seen } else { now };
    longer.get(seen.len().min(now.len())).map(|(key, _)| key.as_slice())
}

fn conflict(tree: &Tree, key: &[u8]) -> Error {
    Error::Conflict { tree: tree.name.to_string(), key: key.to_vec() }
}
