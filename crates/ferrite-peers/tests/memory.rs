//! RocksDB's memtables charged to its block cache (`PeerConfig::memtables_in_cache`): with
//! the flag, 40 MiB written (through a `TransactionDB` too, whose memtable history is charged
//! as well) into an 8 MiB block cache kept full by reads leave the block cache's usage, the
//! memtables' charge included, within its capacity, and the memtables within their budget;
//! without it, the memtables alone outgrow the cache. Needs the libraries:
//! `cargo test -p ferrite-peers --features link`.

#![cfg(feature = "link")]

mod common;

use common::TempDir;
use std::sync::Arc;

use ferrite::testing::Rng;
use ferrite_peers::{Peer, PeerConfig, RocksDb, TxnMode};

const CACHE_BYTES: u64 = 8 << 20;
/// A quarter of the cache (`MEMTABLE_BUDGET_DIVISOR` in `src/rocksdb.rs`).
const BUDGET_BYTES: u64 = CACHE_BYTES / 4;
/// What the block cache may hold beyond its capacity: it is 16 shards of 512 KiB, each
/// overfilled only by what is pinned there (the manager's 256 KiB dummy entries, pinned index
/// and filter blocks), which can pile up in one shard while another is full of blocks.
const CACHE_SLACK_BYTES: u64 = 1 << 20;
/// 10,240 puts of 4,000-byte values: 40 MiB, five times the cache.
const KEYS: u64 = 10_240;
const VALUE_BYTES: usize = 4000;
/// Usage sampled every this many puts.
const SAMPLE_EVERY: u64 = 32;

fn config(memtables_in_cache: bool, transactions: Option<TxnMode>) -> PeerConfig {
    PeerConfig {
        cache_bytes: CACHE_BYTES,
        log: false,
        transactions,
        memtables_in_cache,
        ..PeerConfig::default()
    }
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// The value of key `i`: its number, then a filler.
fn value(i: u64) -> Vec<u8> {
    let mut v = vec![0x5a; VALUE_BYTES];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// The most of each measure seen while writing.
#[derive(Debug, Default)]
struct Peaks {
    /// `block_cache_usage`: blocks and the memtables' charge.
    cache_usage: u64,
    /// `rocksdb.size-all-mem-tables`: active, immutable and (transactions) kept memtables.
    memtables: u64,
    /// `memtables_charge` at a moment the cache was near full: blocks evicted to make room.
    charge_in_full_cache: u64,
    /// `memory()`'s cache + write_buffers: everything, each byte counted once.
    total: u64,
}

/// Writes `KEYS` values (in transactions of one put with `transactions`), and after the first
/// half of them reads one old key per put, so blocks keep the cache full while the memtables
/// fill; samples the usage as it goes and checks every value at the end.
fn write_and_read(db: &Arc<RocksDb>, transactions: bool) -> Peaks {
    let peer: Arc<dyn Peer> = Arc::clone(db) as Arc<dyn Peer>;
    let mut rng = Rng::new(11);
    let mut out = Vec::new();
    let mut peaks = Peaks::default();
    for i in 0..KEYS {
        match transactions {
            false => db.put(&key(i), &value(i)).unwrap(),
            true => {
                let mut txn = Arc::clone(&peer).begin().unwrap();
                txn.put(&key(i), &value(i)).unwrap();
                txn.commit().unwrap();
            }
        }
        if i >= KEYS / 2 {
            let old = rng.index((KEYS / 2) as usize) as u64;
            assert!(db.get(&key(old), &mut out).unwrap() && out == value(old), "key {old}");
        }
        if i % SAMPLE_EVERY == 0 {
            let usage = db.block_cache_usage();
            peaks.cache_usage = peaks.cache_usage.max(usage);
            let memory = db.memory().unwrap();
            peaks.memtables = peaks.memtables.max(memory.write_buffers);
            peaks.total = peaks.total.max(memory.cache + memory.write_buffers);
            if usage >= CACHE_BYTES * 3 / 4 {
                let charge = db.memtables_charge().unwrap_or(0);
                peaks.charge_in_full_cache = peaks.charge_in_full_cache.max(charge);
            }
        }
    }
    for i in (0..KEYS).step_by(7) {
        assert!(db.get(&key(i), &mut out).unwrap() && out == value(i), "key {i}");
    }
    peaks
}

/// With the flag: the block cache, the memtables' charge included, stays within its
/// capacity (and the slack of its shards) while memtables of about the budget were charged
/// to a cache full of blocks; `memory()`, which counts each byte once, says so too.
fn within_the_cache(test: &str, transactions: Option<TxnMode>, memtables_most: u64) {
    let dir = TempDir::new("memory", test);
    let db = Arc::new(RocksDb::open(&dir.0, &config(true, transactions)).unwrap());
    let peaks = write_and_read(&db, transactions.is_some());
    println!("{test}: {peaks:?}");
    assert!(peaks.cache_usage <= CACHE_BYTES + CACHE_SLACK_BYTES, "{peaks:?}");
    assert!(peaks.memtables <= memtables_most, "{peaks:?}");
    assert!(peaks.charge_in_full_cache >= BUDGET_BYTES / 2, "{peaks:?}");
    assert!(peaks.total <= CACHE_BYTES + CACHE_SLACK_BYTES, "{peaks:?}");
    // Writes are over: the charge read first covers what the manager counts after.
    let charge = db.memtables_charge().unwrap();
    assert!(charge >= db.memtables_counted().unwrap(), "{charge}");
}

#[test]
fn rocksdb_memtables_charged_to_the_block_cache_stay_within_it() {
    // An active memtable of half the budget, one being flushed; a little over as the manager
    // counts arena blocks (an eighth of a memtable each) before they fill.
    within_the_cache("on", None, BUDGET_BYTES + BUDGET_BYTES / 4);
}

/// A `TransactionDB` keeps flushed memtables for its conflict checks
/// (`max_write_buffer_size_to_maintain`, here the budget): they are charged too, and
/// `rocksdb.size-all-mem-tables`, which counts them, stays within the history and the active
/// memtable.
#[test]
fn rocksdb_memtable_history_of_transactions_is_charged_too() {
    within_the_cache("txn", Some(TxnMode::Pessimistic), BUDGET_BYTES * 2);
}

/// Without the flag the memtables (64 MiB each) are beside the cache and outgrow it.
#[test]
fn rocksdb_memtables_outgrow_the_cache_without_the_flag() {
    let dir = TempDir::new("memory", "off");
    let db = Arc::new(RocksDb::open(&dir.0, &config(false, None)).unwrap());
    let peaks = write_and_read(&db, false);
    assert!(peaks.memtables > 2 * CACHE_BYTES, "{peaks:?}");
    assert!(peaks.total > 2 * CACHE_BYTES, "{peaks:?}");
    assert_eq!(db.memtables_charge(), None);
    assert!(!db.describe_config().contains("write_buffer_manager"));
}

/// The printed options say how the budget is split.
#[test]
fn rocksdb_describes_its_write_buffer_manager() {
    let dir = TempDir::new("memory", "describe");
    let db = RocksDb::open(&dir.0, &config(true, Some(TxnMode::Pessimistic))).unwrap();
    let described = db.describe_config();
    for option in [
        "write_buffer_size=1048576",
        "max_write_buffer_number=2",
        "write_buffer_manager=2097152 B charged to the block cache (cost_to_cache",
        "max_write_buffer_size_to_maintain=2097152",
    ] {
        assert!(described.contains(option), "{option}: {described}");
    }
}
