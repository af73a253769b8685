//! Write batches: changes to any trees of one database, committed all together or not at
//! all (one log record), written once as a future (`Db::write_async`; `Db::write` runs it on
//! the calling thread).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{check_key, check_value, Db, Shared, Tree};
use crate::error::{Error, PageId, Result};
use crate::options::Durability;

/// Changes to one or more trees, committed all together or not at all ([`Db::write`]).
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let options = ferrite::Options { workers: 0, pool_bytes: 16 << 20, ..Default::default() };
/// # let db = ferrite::Db::open(dir.path(), options)?;
/// use ferrite::WriteBatch;
///
/// let stock = db.tree("stock")?;
/// let orders = db.tree("orders")?;
/// stock.put("apples", 10u32.to_le_bytes())?;
/// // Sell two apples: the order and the new stock land together, or neither does.
/// let mut batch = WriteBatch::new();
/// batch.put(&orders, "order-1", "two apples").put(&stock, "apples", 8u32.to_le_bytes());
/// db.write(&batch)?;
/// assert_eq!(stock.get("apples")?, Some(8u32.to_le_bytes().to_vec()));
/// assert!(orders.get("order-1")?.is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default, Clone)]
pub struct WriteBatch {
    /// The trees the ops change, each once: an op names its tree by its place here, so
    /// that a batch of many ops (a transaction's) holds one handle per tree, not per op
    /// (a handle's clone and drop move three shared reference counts).
    pub(super) trees: Vec<Tree>,
    pub(super) ops: Vec<(usize, BatchOp)>,
    pub(super) durability: Option<Durability>,
}

#[derive(Debug, Clone)]
pub(super) enum BatchOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// `Tree::write_at`: bytes at an offset of the value.
    WriteAt(Vec<u8>, u64, Vec<u8>),
    /// `Tree::truncate`: the value's new length.
    Truncate(Vec<u8>, u64),
    /// `Transaction::add`: a delta to the counter the key holds. A key with an add has no
    /// other kind of op in the batch (`Transaction::add` refuses the mix).
    Add(Vec<u8>, i64),
}

impl BatchOp {
    pub(super) fn key(&self) -> &[u8] {
        let (BatchOp::Put(key, _)
        | BatchOp::Delete(key)
        | BatchOp::WriteAt(key, _, _)
        | BatchOp::Truncate(key, _)
        | BatchOp::Add(key, _)) = self;
        key
    }
}

/// Applies the ops of `batch` in order, inside a commit. A put goes to `near[i]` (a leaf the
/// caller knows for op `i`'s key; an empty `near` knows none) or else to the leaf the
/// previous put of the same tree went to, if that leaf holds the key
/// ([`Tree::apply_put_near`]): a sorted batch puts runs of keys into one leaf without
/// descending from the root for each. A put with `buffered[i]` set goes to the change buffer
/// instead (the caller found its leaf out of memory, and the put replaces no object).
pub(super) async fn apply_ops(
    batch: &WriteBatch,
    objects: &PreparedObjects,
    near: &[Option<PageId>],
    buffered: &[bool],
) -> Result<()> {
    // A tree dropped since the batch was checked fails the batch before anything changes
    // (failing midway would fail the log: the ops before would have changed pages). Under
    // the commit lock, as the drop's own commit, so no drop comes in between.
    if let Some(tree) = batch.trees.iter().find(|tree| tree.dropped.load(Ordering::Acquire)) {
        return Err(Error::TreeNotFound { name: tree.name.to_string() });
    }
    // Likewise a database too full for the batch's splits (each write may split a leaf and
    // its parent, and take a Value page): refused now rather than midway. (Deletes take no
    // page: a full database must still take them.)
    let writes = batch.ops.iter().filter(|(_, op)| !matches!(op, BatchOp::Delete(_))).count();
    let writes = writes as u64;
    if let Some(tree) = batch.trees.first().filter(|_| writes > 0) {
        tree.shared.pool.ensure_room(8 + 3 * writes)?;
    }
    // The counters' sums, before anything changes: a value that is not a counter, or a sum
    // out of range, fails the commit now rather than midway.
    let mut sums = Vec::new();
    for (tree, op) in batch.iter() {
        if let BatchOp::Add(key, delta) = op {
            // Adds to one key follow each other: the next adds to this one's sum.
            let id = (tree.btree.tree_id, key);
            let before = match sums.last() {
                Some((last, sum)) if *last == id => Some(sum),
                _ => None,
            };
            let now = match before {
                Some(sum) => Some(Vec::clone(sum)),
                None => tree.get_in_commit(key).await?,
            };
            let sum = super::txn::add_to_counter(now.as_deref(), *delta).map_err(|reason| {
                Error::BadCounter { tree: tree.name.to_string(), key: key.clone(), reason }
            })?;
            sums.push((id, sum));
        }
    }
    let mut sums = sums.into_iter().map(|(_, sum)| sum);
    // The leaf of the last put: (tree id, page).
    let mut last: Option<(u64, PageId)> = None;
    for (i, (tree, op)) in batch.iter().enumerate() {
        match (op, &objects[i]) {
            (BatchOp::Put(key, _), PreparedOp::Object(prepared)) => {
                tree.shared.apply_prepared(tree, key, prepared).await?
            }
            (BatchOp::Put(key, value), _) if buffered.get(i) == Some(&true) => {
                tree.shared.change_buffer.stage_put(tree.btree, key, value);
            }
            (BatchOp::Put(key, _) | BatchOp::Add(key, _), _) => {
                // (An add puts its counter's sum.)
                let sum;
                let value = match op {
                    BatchOp::Put(_, value) => value,
                    _ => {
                        sum = sums.next().expect("a sum per add");
                        &sum
                    }
                };
                let tree_id = tree.btree.tree_id;
                let after_last = last.filter(|&(id, _)| id == tree_id).map(|(_, leaf)| leaf);
                let hint = near.get(i).copied().flatten().or(after_last);
                last = Some((tree_id, tree.apply_put_near(key, value, hint).await?));
            }
            (BatchOp::Delete(key), _) => {
                tree.apply_delete(key).await?;
            }
            (BatchOp::WriteAt(key, offset, bytes), PreparedOp::Blocks(blocks)) => {
                tree.apply_write_at(key, *offset, bytes, blocks).await?
            }
            (BatchOp::WriteAt(..), _) => unreachable!("a write_at's blocks are prepared"),
            (BatchOp::Truncate(key, len), _) => tree.apply_truncate(key, *len).await?,
        }
    }
    Ok(())
}

/// What an op of a batch wrote before the commit.
#[derive(Debug)]
pub(super) enum PreparedOp {
    None,
    /// The object a put's value became.
    Object(super::object::Prepared),
    /// The whole blocks of a `write_at`, in new pages.
    Blocks(super::object::PreparedBlocks),
}

/// Per op of a batch, what it wrote before the commit.
pub(super) type PreparedObjects = Vec<PreparedOp>;

impl Shared {
    /// Writes the values of `batch` that must be objects into new objects (blocking writes:
    /// refused in a task), before the commit that puts them.
    pub(super) fn prepare_objects(self: &Arc<Self>, batch: &WriteBatch) -> Result<PreparedObjects> {
        let mut prepared = Vec::new();
        let on_worker = || {
            Err(Error::NotSupported {
                reason: "a batch or transaction with a value that must be an object, or with \
                         a write_at or truncate, is written with the blocking API, not from a \
                         task (yet)"
                    .into(),
            })
        };
        for (_, op) in &batch.ops {
            let made = match op {
                BatchOp::Put(_, value)
                    if super::object::needs_object(value.len() as u64, value) =>
                {
                    match crate::sched::on_worker() {
                        true => on_worker(),
                        false => self.prepare_object(&mut &value[..]).map(|made| match made {
                            Ok(object) => PreparedOp::Object(object),
                            Err(_) => unreachable!("the value needs an object"),
                        }),
                    }
                }
                BatchOp::WriteAt(_, offset, bytes) => match crate::sched::on_worker() {
                    true => on_worker(),
                    // (The objects tree is made now: a commit cannot make a tree.)
                    false => self
                        .objects_tree(true)
                        .and_then(|_| self.prepare_blocks(*offset, bytes).map(PreparedOp::Blocks)),
                },
                BatchOp::Truncate(..) => match crate::sched::on_worker() {
                    true => on_worker(),
                    false => self.objects_tree(true).map(|_| PreparedOp::None),
                },
                _ => Ok(PreparedOp::None),
            };
            match made {
                Ok(op) => prepared.push(op),
                Err(e) => {
                    self.abandon_objects(&prepared);
                    return Err(e);
                }
            }
        }
        Ok(prepared)
    }

    /// Prepared objects and blocks whose commit failed: their pages are free again.
    pub(super) fn abandon_objects(&self, prepared: &PreparedObjects) {
        for op in prepared {
            match op {
                PreparedOp::Object(object) => self.abandon_prepared(object),
                PreparedOp::Blocks(blocks) => self.abandon_blocks(blocks),
                PreparedOp::None => {}
            }
        }
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds: set `key` of `tree` to `value`.
    pub fn put(
        &mut self,
        tree: &Tree,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> &mut Self {
        let op = BatchOp::Put(key.as_ref().to_vec(), value.as_ref().to_vec());
        self.push(tree, op)
    }

    /// Adds: remove `key` from `tree`.
    pub fn delete(&mut self, tree: &Tree, key: impl AsRef<[u8]>) -> &mut Self {
        self.push(tree, BatchOp::Delete(key.as_ref().to_vec()))
    }

    /// Adds: write `bytes` at `offset` of `key`'s value in `tree`, as [`Tree::write_at`]
    /// does (whole blocks are written to new pages before the commit, the rest logged with
    /// it; the value becomes an object).
    pub fn write_at(
        &mut self,
        tree: &Tree,
        key: impl AsRef<[u8]>,
        offset: u64,
        bytes: impl AsRef<[u8]>,
    ) -> &mut Self {
        let op = BatchOp::WriteAt(key.as_ref().to_vec(), offset, bytes.as_ref().to_vec());
        self.push(tree, op)
    }

    /// Adds: set the length of `key`'s value in `tree`, as [`Tree::truncate`] does (nothing
    /// if the key is absent).
    pub fn truncate(&mut self, tree: &Tree, key: impl AsRef<[u8]>, len: u64) -> &mut Self {
        self.push(tree, BatchOp::Truncate(key.as_ref().to_vec(), len))
    }

    /// This batch's durability, instead of the database's (`Options::durability`).
    pub fn durability(&mut self, durability: Durability) -> &mut Self {
        self.durability = Some(durability);
        self
    }

    /// How many changes the batch holds.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no change.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    fn push(&mut self, tree: &Tree, op: BatchOp) -> &mut Self {
        let tree = tree_slot(&mut self.trees, tree);
        self.ops.push((tree, op));
        self
    }

    /// The ops in order, each with its tree.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Tree, &BatchOp)> {
        self.ops.iter().map(|(tree, op)| (&self.trees[*tree], op))
    }
}

/// The place of `tree` in `trees` (a batch's or a transaction's), added if it is not there:
/// trees are told apart by their ids, as a transaction's keys are.
pub(super) fn tree_slot(trees: &mut Vec<Tree>, tree: &Tree) -> usize {
    match trees.iter().position(|t| t.btree.tree_id == tree.btree.tree_id) {
        Some(slot) => slot,
        None => {
            trees.push(tree.clone());
            trees.len() - 1
        }
    }
}

impl Shared {
    /// Fails unless `batch` can commit: the database writable, every tree its own and not
    /// dropped, every key and value in bounds, and few enough changes for the pool.
    pub(super) fn check_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.check_writable()?;
        self.log()?.check()?;
        // Every page a commit changes stays in the pool until its record is logged (a change
        // pins its leaf, perhaps a Value page and a split's pages): a quarter of the pool
        // per change leaves room for the reads the changes need meanwhile.
        let pool_pages = self.pool.pool_pages();
        let max_ops = (pool_pages / 4).max(1) as usize;
        if batch.ops.len() > max_ops {
            return Err(Error::BatchTooLarge { ops: batch.ops.len(), max_ops, pool_pages });
        }
        for tree in &batch.trees {
            if !std::ptr::eq(Arc::as_ptr(&tree.shared), self) {
                return Err(Error::BadOptions {
                    reason: format!(
                        "tree {:?} of the batch belongs to another database",
                        tree.name
                    ),
                });
            }
            if tree.dropped.load(Ordering::Acquire) {
                return Err(Error::TreeNotFound { name: tree.name.to_string() });
            }
        }
        for (_, op) in &batch.ops {
            match op {
                BatchOp::Put(key, value) => {
                    check_key(key)?;
                    check_value(value)?;
                }
                BatchOp::Delete(key) => check_key(key)?,
                BatchOp::WriteAt(key, offset, bytes) => {
                    check_key(key)?;
                    super::object::check_object_end(*offset, bytes.len() as u64)?;
                }
                BatchOp::Truncate(key, len) => {
                    check_key(key)?;
                    super::object::check_object_end(*len, 0)?;
                }
                BatchOp::Add(key, _) => check_key(key)?,
            }
        }
        Ok(())
    }
}

impl Db {
    /// Applies every change of `batch` (to any trees of this database) as one commit: after
    /// a crash, all of them or none. Returns once the batch is as durable as its durability
    /// (or the database's) asks.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.shared.blocking_write(self.write_async(batch))
    }

    /// [`Db::write`] as a future (for tasks: waiting for the commit lock or the log yields).
    pub async fn write_async(&self, batch: &WriteBatch) -> Result<()> {
        crate::db::in_task("Db::write_async")?;
        let shared = &self.shared;
        shared.check_batch(batch)?;
        let durability = batch.durability.unwrap_or(shared.durability);
        let objects = shared.prepare_objects(batch)?;
        // The leaves the batch changes, loaded before the commit lock: a sorted batch
        // descends once per leaf, not once per key.
        let mut last = None;
        for (tree, op) in batch.iter() {
            let leaf = last.filter(|&(id, _)| id == tree.btree.tree_id).map(|(_, leaf)| leaf);
            last = tree.prefetch_leaf(op.key(), leaf).await.map(|leaf| (tree.btree.tree_id, leaf));
        }
        let outcome =
            shared.commit(durability, async || apply_ops(batch, &objects, &[], &[]).await).await;
        if outcome.is_err() {
            shared.abandon_objects(&objects);
        }
        outcome
    }
}
