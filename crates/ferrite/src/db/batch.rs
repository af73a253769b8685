//! Write batches: changes to any trees of one database, committed all together or not at
//! all (one log record), written once as a future (`Db::write_async`; `Db::write` runs it on
//! the calling thread).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{check_key, check_value, Db, Shared, Tree};
use crate::error::{Error, Result};
use crate::options::Durability;

/// Changes to one or more trees, committed all together or not at all ([`Db::write`]).
#[derive(Debug, Default, Clone)]
pub struct WriteBatch {
    pub(super) ops: Vec<(Tree, BatchOp)>,
    pub(super) durability: Option<Durability>,
}

#[derive(Debug, Clone)]
pub(super) enum BatchOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl BatchOp {
    pub(super) fn key(&self) -> &[u8] {
        let (BatchOp::Put(key, _) | BatchOp::Delete(key)) = self;
        key
    }
}

/// Applies `ops` in order, inside a commit.
pub(super) async fn apply_ops(ops: &[(Tree, BatchOp)], objects: &PreparedObjects) -> Result<()> {
    for (i, (tree, op)) in ops.iter().enumerate() {
        match op {
            BatchOp::Put(key, _) if objects.get(i).is_some_and(Option::is_some) => {
                let prepared = objects[i].as_ref().expect("prepared");
                tree.shared.apply_prepared(tree, key, prepared).await?
            }
            BatchOp::Put(key, value) => tree.apply_put(key, value).await?,
            BatchOp::Delete(key) => {
                tree.apply_delete(key).await?;
            }
        }
    }
    Ok(())
}

/// Per op of a batch, the object its put's value became (written before the commit).
pub(super) type PreparedObjects = Vec<Option<super::object::Prepared>>;

impl Shared {
    /// Writes the values of `ops` that must be objects into new objects (blocking writes:
    /// refused in a task), before the commit that puts them.
    pub(super) fn prepare_objects(
        self: &Arc<Self>,
        ops: &[(Tree, BatchOp)],
    ) -> Result<PreparedObjects> {
        let mut prepared = Vec::new();
        for (_, op) in ops {
            let BatchOp::Put(_, value) = op else {
                prepared.push(None);
                continue;
            };
            if !super::object::needs_object(value.len() as u64, value) {
                prepared.push(None);
                continue;
            }
            let made = match crate::sched::on_worker() {
                true => Err(Error::NotSupported {
                    reason: "a batch or transaction with a value that must be an object is \
                             written with the blocking API, not from a task (yet)"
                        .into(),
                }),
                false => self.prepare_object(&mut &value[..]),
            };
            match made {
                Ok(Ok(object)) => prepared.push(Some(object)),
                Ok(Err(_)) => unreachable!("the value needs an object"),
                Err(e) => {
                    self.abandon_objects(&prepared);
                    return Err(e);
                }
            }
        }
        Ok(prepared)
    }

    /// Prepared objects whose commit failed: their pages are free again.
    pub(super) fn abandon_objects(&self, prepared: &PreparedObjects) {
        for object in prepared.iter().flatten() {
            self.abandon_prepared(object);
        }
    }
}

impl WriteBatch {
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds: set `key` of `tree` to `value`.
    pub fn put(&mut self, tree: &Tree, key: &[u8], value: &[u8]) -> &mut Self {
        self.ops.push((tree.clone(), BatchOp::Put(key.to_vec(), value.to_vec())));
        self
    }

    /// Adds: remove `key` from `tree`.
    pub fn delete(&mut self, tree: &Tree, key: &[u8]) -> &mut Self {
        self.ops.push((tree.clone(), BatchOp::Delete(key.to_vec())));
        self
    }

    /// This batch's durability, instead of the database's (`Options::durability`).
    pub fn durability(&mut self, durability: Durability) -> &mut Self {
        self.durability = Some(durability);
        self
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
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
        for (tree, op) in &batch.ops {
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
            match op {
                BatchOp::Put(key, value) => {
                    check_key(key)?;
                    check_value(value)?;
                }
                BatchOp::Delete(key) => check_key(key)?,
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
        let shared = &self.shared;
        shared.check_batch(batch)?;
        let durability = batch.durability.unwrap_or(shared.durability);
        let objects = shared.prepare_objects(&batch.ops)?;
        for (tree, op) in &batch.ops {
            tree.prefetch(op.key()).await;
        }
        let outcome =
            shared.commit(durability, async || apply_ops(&batch.ops, &objects).await).await;
        if outcome.is_err() {
            shared.abandon_objects(&objects);
        }
        outcome
    }
}
