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
pub(super) async fn apply_ops(ops: &[(Tree, BatchOp)]) -> Result<()> {
    for (tree, op) in ops {
        match op {
            BatchOp::Put(key, value) => tree.apply_put(key, value).await?,
            BatchOp::Delete(key) => {
                tree.apply_delete(key).await?;
            }
        }
    }
    Ok(())
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
        for (tree, op) in &batch.ops {
            tree.prefetch(op.key()).await;
        }
        shared.commit(durability, async || apply_ops(&batch.ops).await).await
    }
}
