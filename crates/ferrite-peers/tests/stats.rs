//! The peers' own counters (`Peer::stats`): written through a cache far smaller than the
//! data, flushed, then read back, RocksDB's block cache and WiredTiger's cache both missed and
//! hit, their hit ratios within [0, 1], blocks brought into the cache with their bytes, and a
//! window of reads (`PeerStats::since`) counting only its own; LMDB keeps none. Needs the
//! libraries: `cargo test -p ferrite-peers --features link`.

#![cfg(feature = "link")]

mod common;

use common::{key, TempDir};

use ferrite::testing::Rng;
use ferrite_peers::{Lmdb, Peer, PeerConfig, PeerStats, RocksDb, WiredTiger};

/// 8,192 values of 1,000 bytes: 8 MiB, eight times the cache.
const KEYS: u64 = 8192;
const VALUE_BYTES: usize = 1000;
const CACHE_BYTES: u64 = 1 << 20;

fn value(i: u64) -> Vec<u8> {
    common::value(i, VALUE_BYTES)
}

fn config() -> PeerConfig {
    PeerConfig { cache_bytes: CACHE_BYTES, log: false, ..PeerConfig::default() }
}

/// Loads the keys in batches, settles (flushed; RocksDB compacted), and reads every key back
/// in a random order.
fn load_and_read(peer: &dyn Peer) {
    for start in (0..KEYS).step_by(256) {
        let rows: Vec<([u8; 8], Vec<u8>)> =
            (start..start + 256).map(|i| (key(i), value(i))).collect();
        let entries: Vec<(&[u8], &[u8])> =
            rows.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
        peer.put_batch(&entries).unwrap();
    }
    peer.settle().unwrap();
    read_back(peer, 1);
}

fn read_back(peer: &dyn Peer, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for _ in 0..KEYS {
        let i = rng.index(KEYS as usize) as u64;
        assert!(peer.get(&key(i), &mut out).unwrap(), "{}: key {i}", peer.name());
        assert_eq!(out, value(i), "{}: key {i}", peer.name());
    }
}

/// What every peer's counters must say after `load_and_read`.
fn check_counted(name: &str, stats: &PeerStats) {
    let cache = stats.cache.unwrap_or_else(|| panic!("{name}: no cache lookups counted"));
    assert!(cache.misses > 0, "{name}: {stats:?}");
    assert!(cache.lookups > cache.misses, "{name}: no hit: {stats:?}");
    let ratio = stats.cache_hit_ratio().unwrap();
    assert!((0.0..=1.0).contains(&ratio), "{name}: ratio {ratio}");
    assert!(ratio < 1.0 && ratio > 0.0, "{name}: ratio {ratio}, {stats:?}");
    let fills = stats.fills.unwrap_or_else(|| panic!("{name}: no fills counted"));
    assert!(fills.blocks > 0 && fills.bytes > 0, "{name}: {stats:?}");
    // Blocks and pages of about 4 KiB here; their size in memory is not far from it.
    let per_fill = stats.bytes_per_fill().unwrap();
    assert!((500.0..=64_000.0).contains(&per_fill), "{name}: {per_fill} B per fill");
    // The counters carry the engine's names, each once.
    let mut names: Vec<&str> = stats.counters.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), stats.counters.len(), "{name}: {stats:?}");
}

/// A window of reads: `since` counts its lookups only, and the counters only grow.
fn check_window(peer: &dyn Peer) {
    let before = peer.stats().unwrap().unwrap();
    read_back(peer, 2);
    let after = peer.stats().unwrap().unwrap();
    let window = after.since(&before);
    for (name, value) in &after.counters {
        let then = before.get(name).unwrap();
        assert!(*value >= then, "{}: {name} went back", peer.name());
        assert_eq!(window.get(name), Some(value - then));
    }
    let lookups = window.cache.unwrap().lookups;
    assert!(lookups > 0, "{}: {window:?}", peer.name());
    assert!(lookups < after.cache.unwrap().lookups, "{}: the load's lookups left out", peer.name());
    let ratio = window.cache_hit_ratio().unwrap();
    assert!((0.0..=1.0).contains(&ratio), "{}: ratio {ratio}", peer.name());
}

#[test]
fn rocksdb_counts_block_cache_hits_and_misses() {
    let dir = TempDir::new("stats", "rocksdb");
    let db = RocksDb::open(&dir.0, &config()).unwrap();
    let fresh = Peer::stats(&db).unwrap().unwrap();
    assert_eq!(fresh.get("rocksdb.block.cache.hit"), Some(0), "{fresh:?}");
    load_and_read(&db);
    let stats = Peer::stats(&db).unwrap().unwrap();
    check_counted("rocksdb", &stats);
    let get = |name: &str| stats.get(name).unwrap_or_else(|| panic!("no {name}: {stats:?}"));
    // RocksDB's own invariant (`statistics.h`): the total is data + index + filter.
    assert_eq!(
        get("rocksdb.block.cache.miss"),
        get("rocksdb.block.cache.data.miss")
            + get("rocksdb.block.cache.index.miss")
            + get("rocksdb.block.cache.filter.miss")
    );
    assert_eq!(
        get("rocksdb.block.cache.hit"),
        get("rocksdb.block.cache.data.hit")
            + get("rocksdb.block.cache.index.hit")
            + get("rocksdb.block.cache.filter.hit")
    );
    assert!(get("rocksdb.block.cache.data.miss") > 0);
    // The load was flushed (all of it, into one table file: its compaction is a move,
    // nothing read or written).
    assert!(get("rocksdb.flush.write.bytes") >= KEYS * VALUE_BYTES as u64, "{stats:?}");
    assert!(db.describe_config().contains("statistics=CreateDBStatistics()"));
    check_window(&db);
}

#[test]
fn wiredtiger_counts_pages_requested_and_read_into_its_cache() {
    let dir = TempDir::new("stats", "wiredtiger");
    let db = WiredTiger::open(&dir.0, &config()).unwrap();
    load_and_read(&db);
    let stats = Peer::stats(&db).unwrap().unwrap();
    check_counted("wiredtiger", &stats);
    for name in [
        "cache: pages requested from the cache",
        "cache: pages read into cache",
        "cache: bytes read into cache",
        "cache: pages written from cache",
        "cache: bytes written from cache",
        "cache: pages evicted by application threads",
    ] {
        assert!(stats.get(name).is_some(), "no {name}: {stats:?}");
    }
    // The checkpoint wrote every page out.
    assert!(stats.get("cache: bytes written from cache").unwrap() > KEYS * VALUE_BYTES as u64);
    assert!(db.describe_config().contains("statistics=(fast)"));
    check_window(&db);
}

#[test]
fn lmdb_keeps_no_counters() {
    let dir = TempDir::new("stats", "lmdb");
    let db = Lmdb::open(&dir.0, &config()).unwrap();
    assert_eq!(Peer::stats(&db).unwrap(), None);
}
