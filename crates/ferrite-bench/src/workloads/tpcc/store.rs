//! What the transactions need of a store (`TpccStore`, `TpccTxn`), and Ferrite behind it.
//! The same transaction code runs on Ferrite (as tasks on its workers), on the in-memory
//! reference model (`model.rs`) and, through the same two traits, on the peers
//! (`peer.rs`: RocksDB and WiredTiger, terminals on threads).
//!
//! A transaction reads (`get`, `scan` of a key range, either direction, at most `limit`
//! entries), buffers its writes, and commits; a commit may fail with `TxnError::Conflict`,
//! after which the caller runs the transaction again. `Isolation::ReadCommitted` asks for a
//! transaction whose reads each see committed data and whose commit checks nothing
//! (Stock-Level, as clause 3.4 allows); it must not write.

use std::future::Future;
use std::sync::Arc;

use ferrite::{Db, Durability, Transaction, Tree, WriteBatch};

use super::schema::Table;

/// Why a transaction did not commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnError {
    /// Something it read changed before its commit: run it again.
    Conflict,
    /// The store failed, or a row did not decode: the run stops.
    Failed(String),
}

impl std::fmt::Display for TxnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxnError::Conflict => f.write_str("conflict"),
            TxnError::Failed(reason) => f.write_str(reason),
        }
    }
}

impl From<ferrite::Error> for TxnError {
    fn from(e: ferrite::Error) -> Self {
        match e {
            ferrite::Error::Conflict { .. } => TxnError::Conflict,
            other => TxnError::Failed(other.to_string()),
        }
    }
}

impl From<super::schema::BadRow> for TxnError {
    fn from(e: super::schema::BadRow) -> Self {
        TxnError::Failed(e.to_string())
    }
}

/// The isolation a transaction asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    Serializable,
    /// Each read sees committed data; the commit checks nothing. Read-only.
    ReadCommitted,
}

/// What `TpccStore::for_each` calls for each entry; an error stops the walk.
pub type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), String> + 'a;

/// Entries of a scan, ascending or descending as asked.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// One transaction of a store.
pub trait TpccTxn: Send {
    /// The value of `key`, as the transaction sees it (its own writes first).
    fn get(
        &mut self,
        table: Table,
        key: &[u8],
    ) -> impl Future<Output = Result<Option<Vec<u8>>, TxnError>> + Send;

    /// `get` of a row the transaction will then write: a store that locks (pessimistic
    /// RocksDB) takes the row's lock now, and Ferrite its intent
    /// (`Transaction::get_for_update`), so that a concurrent writer waits instead of
    /// making one of the two fail later. By default a plain `get` (the model, WiredTiger:
    /// their commits check such rows anyway).
    fn get_for_update(
        &mut self,
        table: Table,
        key: &[u8],
    ) -> impl Future<Output = Result<Option<Vec<u8>>, TxnError>> + Send {
        self.get(table, key)
    }

    /// `get` (`get_for_update` with `for_update`) of many rows of `table`: their values,
    /// in the same order. Ferrite reads the leaves not in memory with their reads in flight
    /// together (`Transaction::get_many_async`), so a transaction waits about one read's
    /// time for all. By default one row after another: the model, and the peers (see
    /// `PeerTpcc`).
    fn get_many(
        &mut self,
        table: Table,
        keys: &[Vec<u8>],
        for_update: bool,
    ) -> impl Future<Output = Result<Vec<Option<Vec<u8>>>, TxnError>> + Send {
        async move {
            let mut values = Vec::with_capacity(keys.len());
            for key in keys {
                values.push(match for_update {
                    true => self.get_for_update(table, key).await?,
                    false => self.get(table, key).await?,
                });
            }
            Ok(values)
        }
    }

    /// Up to `limit` entries with keys in `lower..upper`, ascending (from the top with
    /// `reverse`), as the transaction sees them. In a serializable transaction, what the
    /// answer depended on must be unchanged at the commit (phantoms included).
    fn scan(
        &mut self,
        table: Table,
        lower: &[u8],
        upper: &[u8],
        limit: usize,
        reverse: bool,
    ) -> impl Future<Output = Result<Entries, TxnError>> + Send;

    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<(), TxnError>;

    fn delete(&mut self, table: Table, key: &[u8]) -> Result<(), TxnError>;

    /// Adds `cents` to the money `key` holds (`encode_money`), a sum the transaction does
    /// not read. By default a read for update and a write; a store with commutative adds
    /// (Ferrite's `Transaction::add`) applies it at the commit without depending on the
    /// value read, so that two Payments of one warehouse do not conflict over its
    /// year-to-date.
    fn add_money(
        &mut self,
        table: Table,
        key: &[u8],
        cents: i64,
    ) -> impl Future<Output = Result<(), TxnError>> + Send {
        async move {
            let found = self.get_for_update(table, key).await?;
            let now = super::txns::decoded(found, table, key, super::schema::decode_money)?;
            self.put(table, key, &super::schema::encode_money(now + cents))
        }
    }

    /// Applies the writes, all or nothing; `Err(TxnError::Conflict)`: nothing was written.
    fn commit(self) -> impl Future<Output = Result<(), TxnError>> + Send;
}

/// A store the benchmark runs on.
pub trait TpccStore: Send + Sync + 'static {
    type Txn: TpccTxn + 'static;

    /// The store's name in results.
    fn name(&self) -> &'static str;

    /// The isolation its transactions give, in words for the output.
    fn isolation(&self) -> String;

    /// The same in one word, for the result line: `serializable`, `snapshot`, ...
    fn isolation_name(&self) -> &'static str;

    /// How it reads the rows a transaction asks for together (`TpccTxn::get_many`), in
    /// words for the output.
    fn reads_together(&self) -> &'static str {
        "one after another (no multi-key read inside a transaction)"
    }

    fn begin(&self, isolation: Isolation) -> Self::Txn;

    /// Waits before a transaction that met its `conflicts`-th conflict runs again. Nothing
    /// by default: Ferrite's terminals are tasks, which give their worker's turn away at the
    /// commit already. A store whose terminals are threads backs off, as its own drivers do
    /// (`PeerTpcc`).
    fn back_off(&self, conflicts: u32) -> impl Future<Output = ()> + Send {
        let _ = conflicts;
        async {}
    }

    /// Waits a moment for another terminal (one whose turn this terminal waits for): 100 µs
    /// on a timer of the worker's ring (a task), or asleep (a thread). A task that only
    /// yielded would be polled again at once, again and again while a Delivery out of memory
    /// waits for its reads: measured, a third more CPU per transaction.
    fn wait_turn(&self) -> impl Future<Output = ()> + Send {
        ferrite::sched::net::sleep(std::time::Duration::from_micros(100))
    }

    /// Writes rows outside any transaction, all at once (the load; blocking).
    fn write_rows(&self, rows: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<(), TxnError>;

    /// Visits the entries of `table` with keys in `lower..upper` in order, outside any
    /// transaction (the checks; blocking). `visit` may stop the walk with an error.
    fn for_each(
        &self,
        table: Table,
        lower: &[u8],
        upper: &[u8],
        visit: &mut Visit<'_>,
    ) -> Result<(), TxnError>;
}

/// Ferrite: one tree per table, transactions through `Db::transaction`.
#[derive(Debug, Clone)]
pub struct FerriteTpcc {
    pub db: Arc<Db>,
    trees: Arc<[Tree]>,
    /// What each commit asks for (`None`: the database's, `Options::durability`).
    durability: Option<Durability>,
}

impl FerriteTpcc {
    /// Opens (making them if needed) the tables' trees of `db`; commits with `durability`.
    pub fn new(db: Arc<Db>, durability: Option<Durability>) -> Result<FerriteTpcc, TxnError> {
        let trees: Vec<Tree> =
            Table::ALL.iter().map(|t| db.tree(t.name())).collect::<Result<_, _>>()?;
        Ok(FerriteTpcc { db, trees: trees.into(), durability })
    }

    pub fn tree(&self, table: Table) -> &Tree {
        &self.trees[table.index()]
    }
}

/// A Ferrite transaction and the trees it works on.
#[derive(Debug)]
pub struct FerriteTxn {
    txn: Transaction,
    trees: Arc<[Tree]>,
    isolation: Isolation,
}

impl TpccTxn for FerriteTxn {
    async fn get(&mut self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        let tree = &self.trees[table.index()];
        match self.isolation {
            Isolation::Serializable => Ok(self.txn.get_async(tree, key).await?),
            Isolation::ReadCommitted => Ok(tree.get_async(key).await?),
        }
    }

    async fn get_for_update(
        &mut self,
        table: Table,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, TxnError> {
        let tree = &self.trees[table.index()];
        match self.isolation {
            Isolation::Serializable => Ok(self.txn.get_for_update_async(tree, key).await?),
            Isolation::ReadCommitted => Ok(tree.get_async(key).await?),
        }
    }

    async fn get_many(
        &mut self,
        table: Table,
        keys: &[Vec<u8>],
        for_update: bool,
    ) -> Result<Vec<Option<Vec<u8>>>, TxnError> {
        let tree = &self.trees[table.index()];
        if self.isolation == Isolation::ReadCommitted {
            return Ok(tree.get_many_async(keys).await?);
        }
        let rows: Vec<(&Tree, &[u8])> = keys.iter().map(|key| (tree, &key[..])).collect();
        Ok(match for_update {
            true => self.txn.get_many_for_update_async(&rows).await?,
            false => self.txn.get_many_async(&rows).await?,
        })
    }

    async fn scan(
        &mut self,
        table: Table,
        lower: &[u8],
        upper: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Entries, TxnError> {
        // Read-committed: the transaction's scan, never validated (its commit is dropped).
        let tree = &self.trees[table.index()];
        Ok(self.txn.scan_async(tree, lower..upper, limit, reverse).await?)
    }

    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        debug_assert_eq!(self.isolation, Isolation::Serializable, "read-committed reads only");
        Ok(self.txn.put(&self.trees[table.index()], key, value)?)
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> Result<(), TxnError> {
        debug_assert_eq!(self.isolation, Isolation::Serializable, "read-committed reads only");
        Ok(self.txn.delete(&self.trees[table.index()], key)?)
    }

    async fn add_money(&mut self, table: Table, key: &[u8], cents: i64) -> Result<(), TxnError> {
        debug_assert_eq!(self.isolation, Isolation::Serializable, "read-committed reads only");
        Ok(self.txn.add(&self.trees[table.index()], key, cents)?)
    }

    async fn commit(self) -> Result<(), TxnError> {
        match self.isolation {
            Isolation::Serializable => Ok(self.txn.commit_async().await?),
            // Nothing to write, nothing to check.
            Isolation::ReadCommitted => Ok(()),
        }
    }
}

impl TpccStore for FerriteTpcc {
    type Txn = FerriteTxn;

    fn name(&self) -> &'static str {
        "ferrite"
    }

    fn isolation(&self) -> String {
        "serializable (optimistic: keys and scanned ranges validated at the commit; reads \
         for update wait for each other's intents); Stock-Level read-committed"
            .into()
    }

    fn isolation_name(&self) -> &'static str {
        "serializable"
    }

    fn reads_together(&self) -> &'static str {
        "with their reads in flight at once (Transaction::get_many_async: a New-Order's items \
         and stock rows, a Delivery's orders, order lines and customers, a Stock-Level's stock \
         rows)"
    }

    fn begin(&self, isolation: Isolation) -> FerriteTxn {
        let mut txn = self.db.transaction();
        if let Some(durability) = self.durability {
            txn.durability(durability);
        }
        FerriteTxn { txn, trees: Arc::clone(&self.trees), isolation }
    }

    fn write_rows(&self, rows: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<(), TxnError> {
        let mut batch = WriteBatch::new();
        batch.durability(Durability::None);
        for (table, key, value) in rows {
            batch.put(self.tree(*table), key, value);
        }
        Ok(self.db.write(&batch)?)
    }

    fn for_each(
        &self,
        table: Table,
        lower: &[u8],
        upper: &[u8],
        visit: &mut Visit<'_>,
    ) -> Result<(), TxnError> {
        for entry in self.tree(table).range(lower..upper) {
            let (key, value) = entry?;
            visit(&key, &value).map_err(TxnError::Failed)?;
        }
        Ok(())
    }
}
