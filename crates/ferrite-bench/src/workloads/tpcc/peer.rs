//! TPC-C on the peers (feature `peers`): RocksDB and WiredTiger behind `TpccStore`
//! (`PeerTpcc`), and opened for a run (`PeerEngine`).
//!
//! **Keys.** The tables share the peer's one key space: each key is the table's byte
//! (`Table::index`) followed by the table's own key, so a table's rows are one contiguous
//! range and every scan stays inside its table's prefix.
//!
//! **Transactions.** Serializable ones are `Peer::begin` transactions: RocksDB's pessimistic
//! `TransactionDB` (rows read for update are locked), WiredTiger's snapshot isolation. A
//! read-committed one (Stock-Level) is a peer transaction only read from (plain reads, no
//! locks) and dropped at the end: it sees one snapshot, more than read-committed asks.
//! `write_rows` (the load) is one `put_batch` (RocksDB: one atomic `WriteBatch`; WiredTiger:
//! one transaction); `for_each` (the checks) walks the peer's plain `scan`, outside any
//! transaction.
//!
//! **Rows read together.** `get_many` (New-Order's items and stock rows, Delivery's orders,
//! order lines and customers, Stock-Level's stock rows) reads one row after another here,
//! the trait's default: neither peer's interface offers a read of many rows that overlaps
//! their reads inside a transaction. RocksDB's C API has no multi-get for update in a
//! transaction, and its `MultiGet` overlaps reads only when the library is built with
//! io_uring, which Debian's is not; WiredTiger 3.2 has no multi-get at all. Each terminal
//! is a thread, so the device still sees one read per terminal in flight.
//!
//! **Terminals.** The peers' calls block, so each terminal runs on an OS thread of its own,
//! driving the same terminal loop as Ferrite's tasks with `ferrite::sched::block_on` (its
//! futures never wait for anything here: each call has finished when it returns).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ferrite_peers::{Peer, PeerConfig, PeerError, PeerTxn, RocksDb, TxnMode, WiredTiger};

use super::engine::{Counters, Engine, Running, TerminalFuture};
use super::run::TpccConfig;
use super::schema::Table;
use super::store::{Entries, Isolation, TpccStore, TpccTxn, TxnError, Visit};
use crate::error::BenchError;
use crate::stores::StoreKind;

/// The most entries `for_each` asks the peer for at once (it starts with a few: most of the
/// checks' walks are of one key).
const WALK_CHUNK_MAX: usize = 4096;

fn txn_error(e: PeerError) -> TxnError {
    match e.is_conflict() {
        true => TxnError::Conflict,
        false => TxnError::Failed(e.to_string()),
    }
}

/// `key` of `table` in the peer's key space: the table's byte first.
fn peer_key(table: Table, key: &[u8]) -> Vec<u8> {
    let mut prefixed = Vec::with_capacity(1 + key.len());
    prefixed.push(table.index() as u8);
    prefixed.extend_from_slice(key);
    prefixed
}

/// A peer as a TPC-C store.
#[derive(Clone)]
pub struct PeerTpcc {
    peer: Arc<dyn Peer>,
}

impl std::fmt::Debug for PeerTpcc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTpcc").field("peer", &self.peer.name()).finish()
    }
}

impl PeerTpcc {
    /// `peer`, which must offer transactions (`Peer::isolation` is `Some`).
    pub fn new(peer: Arc<dyn Peer>) -> PeerTpcc {
        PeerTpcc { peer }
    }

    pub fn peer(&self) -> &Arc<dyn Peer> {
        &self.peer
    }
}

/// A transaction of a peer, for one TPC-C transaction.
pub struct PeerTpccTxn {
    /// The peer's transaction, or why `begin` failed, reported at the first call
    /// (`TpccStore::begin` cannot fail).
    txn: Result<Box<dyn PeerTxn>, TxnError>,
    isolation: Isolation,
}

impl std::fmt::Debug for PeerTpccTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTpccTxn").field("isolation", &self.isolation).finish_non_exhaustive()
    }
}

impl PeerTpccTxn {
    fn txn(&mut self) -> Result<&mut dyn PeerTxn, TxnError> {
        match &mut self.txn {
            Ok(txn) => Ok(&mut **txn),
            Err(e) => Err(e.clone()),
        }
    }

    fn read(
        &mut self,
        table: Table,
        key: &[u8],
        for_update: bool,
    ) -> Result<Option<Vec<u8>>, TxnError> {
        // Read-committed reads never lock.
        let lock = for_update && self.isolation == Isolation::Serializable;
        let mut out = Vec::new();
        let found = self.txn()?.get(&peer_key(table, key), &mut out, lock).map_err(txn_error)?;
        Ok(found.then_some(out))
    }
}

impl TpccTxn for PeerTpccTxn {
    async fn get(&mut self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        self.read(table, key, false)
    }

    async fn get_for_update(
        &mut self,
        table: Table,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, TxnError> {
        self.read(table, key, true)
    }

    async fn scan(
        &mut self,
        table: Table,
        lower: &[u8],
        upper: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Entries, TxnError> {
        let (lower, upper) = (peer_key(table, lower), peer_key(table, upper));
        let mut entries = Vec::new();
        self.txn()?
            .scan(&lower, Some(&upper), limit, reverse, &mut |k, v| {
                entries.push((k[1..].to_vec(), v.to_vec()))
            })
            .map_err(txn_error)?;
        Ok(entries)
    }

    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        debug_assert_eq!(self.isolation, Isolation::Serializable, "read-committed reads only");
        self.txn()?.put(&peer_key(table, key), value).map_err(txn_error)
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> Result<(), TxnError> {
        debug_assert_eq!(self.isolation, Isolation::Serializable, "read-committed reads only");
        self.txn()?.delete(&peer_key(table, key)).map_err(txn_error)
    }

    async fn commit(self) -> Result<(), TxnError> {
        let txn = self.txn?;
        match self.isolation {
            Isolation::Serializable => txn.commit().map_err(txn_error),
            // Read only: dropped (rolled back), nothing to write.
            Isolation::ReadCommitted => Ok(()),
        }
    }
}

impl TpccStore for PeerTpcc {
    type Txn = PeerTpccTxn;

    fn name(&self) -> &'static str {
        self.peer.name()
    }

    fn isolation(&self) -> String {
        format!(
            "{}; Stock-Level in a transaction only read from (its snapshot, no locks)",
            self.peer.isolation().unwrap_or("no transactions")
        )
    }

    fn isolation_name(&self) -> &'static str {
        match self.peer.name() {
            // Snapshot isolation whose writes and reads for update lock their keys.
            "rocksdb" => "snapshot-locking",
            _ => "snapshot",
        }
    }

    fn begin(&self, isolation: Isolation) -> PeerTpccTxn {
        PeerTpccTxn { txn: Arc::clone(&self.peer).begin().map_err(txn_error), isolation }
    }

    /// The first retry at once (after a yield of the thread), then a sleep doubling from
    /// 20 µs up to 2.56 ms. Without it, a terminal whose district row is held by the
    /// uncommitted update of a thread the kernel took off the CPU retries in a loop that
    /// fails each time (WiredTiger answers such an update with `WT_ROLLBACK` at once): over
    /// a hundred conflicts per commit were measured so. MongoDB backs off the same way when
    /// WiredTiger reports a write conflict.
    async fn back_off(&self, conflicts: u32) {
        match conflicts {
            0 | 1 => std::thread::yield_now(),
            n => std::thread::sleep(Duration::from_micros(20 << (n - 2).min(7))),
        }
    }

    fn write_rows(&self, rows: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<(), TxnError> {
        let keys: Vec<Vec<u8>> = rows.iter().map(|(t, k, _)| peer_key(*t, k)).collect();
        let entries: Vec<(&[u8], &[u8])> =
            keys.iter().zip(rows).map(|(k, (_, _, v))| (k.as_slice(), v.as_slice())).collect();
        self.peer.put_batch(&entries).map_err(|e| TxnError::Failed(e.to_string()))
    }

    fn for_each(
        &self,
        table: Table,
        lower: &[u8],
        upper: &[u8],
        visit: &mut Visit<'_>,
    ) -> Result<(), TxnError> {
        let upper = peer_key(table, upper);
        let mut start = peer_key(table, lower);
        let mut chunk = 16;
        loop {
            let mut entries: Entries = Vec::new();
            let got = self
                .peer
                .scan(&start, chunk, &mut |k, v| entries.push((k.to_vec(), v.to_vec())))
                .map_err(|e| TxnError::Failed(e.to_string()))?;
            for (key, value) in &entries {
                if *key >= upper {
                    return Ok(());
                }
                visit(&key[1..], value).map_err(TxnError::Failed)?;
            }
            let Some((last, _)) = entries.pop() else { return Ok(()) };
            if got < chunk {
                return Ok(());
            }
            // The next key after `last`.
            start = last;
            start.push(0);
            chunk = (chunk * 2).min(WALK_CHUNK_MAX);
        }
    }
}

/// A peer opened for a run.
pub struct PeerEngine {
    store: PeerTpcc,
}

impl std::fmt::Debug for PeerEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.store.fmt(f)
    }
}

/// Where a peer's files go in the run's directory (beside the run's own records).
pub fn peer_dir(config: &TpccConfig) -> PathBuf {
    config.dir.join(config.store.name())
}

/// The peer options of a run: the cache of `--cache-mib` (RocksDB's block cache,
/// WiredTiger's `cache_size`), O_DIRECT as asked, the log on (`--no-log`: off) and synced
/// per commit with `--sync`, transactions on (RocksDB pessimistic), RocksDB's memtables
/// charged to its block cache. Each engine's own tuning is its `open`'s (the comparison
/// workloads' too: `stores/peers.rs`).
pub fn peer_config(config: &TpccConfig) -> PeerConfig {
    PeerConfig {
        cache_bytes: config.cache_mib << 20,
        direct_io: config.direct_io,
        log: !config.no_log,
        sync: config.sync,
        transactions: Some(TxnMode::Pessimistic),
        // Write-heavy: RocksDB's memtables within `--cache-mib`, like the others' dirty pages.
        memtables_in_cache: true,
        ..PeerConfig::default()
    }
}

impl PeerEngine {
    /// Opens (making it if missing) the peer of `config.store` in `peer_dir(config)`.
    pub fn open(config: &TpccConfig) -> Result<PeerEngine, BenchError> {
        let options = peer_config(config);
        let dir = peer_dir(config);
        let err = |e: PeerError| BenchError::Store(Box::new(e));
        let peer: Arc<dyn Peer> = match config.store {
            StoreKind::RocksDb => Arc::new(RocksDb::open(&dir, &options).map_err(err)?),
            StoreKind::WiredTiger => Arc::new(WiredTiger::open(&dir, &options).map_err(err)?),
            other => {
                return Err(BenchError::Config(format!(
                    "tpcc: {} offers no transactions to run it on",
                    other.name()
                )))
            }
        };
        Ok(PeerEngine { store: PeerTpcc::new(peer) })
    }
}

impl Engine for PeerEngine {
    type Store = PeerTpcc;

    fn store(&self) -> &PeerTpcc {
        &self.store
    }

    fn describe(&self) -> String {
        self.store.peer.describe_config()
    }

    /// RocksDB: flushed and compacted; WiredTiger: a checkpoint.
    fn settle(&self) -> Result<(), BenchError> {
        self.store.peer.settle().map_err(|e| BenchError::Store(Box::new(e)))
    }

    fn workers(&self) -> Option<usize> {
        None
    }

    fn start(&self, _worker: usize, terminal: TerminalFuture) -> Result<Running, BenchError> {
        let thread = std::thread::Builder::new()
            .name("tpcc-terminal".into())
            .spawn(move || ferrite::sched::block_on(terminal))
            .map_err(|source| BenchError::Io {
                context: "starting a terminal's thread".into(),
                source,
            })?;
        Ok(Box::new(move || {
            thread.join().unwrap_or_else(|_| {
                Err(BenchError::Content("tpcc: a terminal's thread panicked".into()))
            })
        }))
    }

    /// The peer's own counters (`Peer::stats`); none if it could not say, which stderr
    /// tells (a run in progress is not stopped for it).
    fn counters(&self) -> Counters {
        let peer = &self.store.peer;
        let store = peer.stats().unwrap_or_else(|e| {
            eprintln!("tpcc: {}'s counters could not be read: {e}", peer.name());
            None
        });
        Counters { store, ..Counters::default() }
    }
}
