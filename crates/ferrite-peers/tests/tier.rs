//! RocksDB's second cache tiers (`PeerConfig::tier`): with each kind, data read back through a
//! block cache far smaller than it comes right and partly from the tier, and the tier's
//! counters say so; WiredTiger and LMDB refuse a tier. Needs the libraries:
//! `cargo test -p ferrite-peers --features link`.

#![cfg(feature = "link")]

mod common;

use common::{key, TempDir};

use ferrite::testing::Rng;
use ferrite_peers::{Lmdb, PeerConfig, PeerError, PeerTier, PeerTierKind, RocksDb, WiredTiger};

const KEYS: u64 = 20_000;
const VALUE_BYTES: usize = 200;

fn value(i: u64) -> Vec<u8> {
    common::value(i, VALUE_BYTES)
}

/// A 256 KiB block cache over a tier of `kind` (the persistent cache's least, 100 MiB, one of
/// its files), its files (if any) in `dir/tier`.
fn config(kind: PeerTierKind, dir: &TempDir) -> PeerConfig {
    PeerConfig {
        cache_bytes: 256 << 10,
        log: false,
        tier: Some(PeerTier { kind, path: dir.0.join("tier"), bytes: 100 << 20 }),
        ..PeerConfig::default()
    }
}

/// About 4 MiB of data loaded and flushed to table files, then read three times over in a
/// random order (each block evicted from the tiny block cache, and evicted again: the
/// secondary cache keeps a block from its second eviction on): every value right, and the
/// tier looked in and hit.
fn reads_hit_the_tier(kind: PeerTierKind) {
    let dir = TempDir::new("tier", kind.name());
    let db = RocksDb::open(&dir.0.join("db"), &config(kind, &dir)).unwrap();
    for start in (0..KEYS).step_by(1000) {
        let entries: Vec<_> = (start..start + 1000).map(|i| (key(i), value(i))).collect();
        let batch: Vec<(&[u8], &[u8])> =
            entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
        db.put_batch(&batch).unwrap();
    }
    db.settle().unwrap();
    let before = db.tier().expect("a tier's counters");
    let mut rng = Rng::new(7);
    let mut out = Vec::new();
    for _ in 0..3 * KEYS {
        let i = rng.index(KEYS as usize) as u64;
        assert!(db.get(&key(i), &mut out).unwrap(), "{}: key {i}", kind.name());
        assert!(out == value(i), "{}: the value of key {i}", kind.name());
    }
    let after = db.tier().unwrap();
    let (lookups, hits) = (after.lookups - before.lookups, after.hits - before.hits);
    assert!(hits > 0 && hits <= lookups, "{}: {after:?}", kind.name());
    assert!(after.inserts > 0 && after.bytes_written > 0, "{}: {after:?}", kind.name());
    let described = db.describe_config();
    let option = match kind {
        PeerTierKind::Secondary => {
            "secondary_cache=CompressedSecondaryCache 104857600 B (compression_type=kNoCompression"
        }
        PeerTierKind::Persistent => "optimized_for_nvm=true",
    };
    assert!(described.contains(option), "{described}");
}

#[test]
fn rocksdb_reads_hit_its_secondary_cache() {
    reads_hit_the_tier(PeerTierKind::Secondary);
}

#[test]
fn rocksdb_reads_hit_its_persistent_cache() {
    reads_hit_the_tier(PeerTierKind::Persistent);
}

/// Without a tier there are no tier counters.
#[test]
fn rocksdb_without_a_tier_counts_none() {
    let dir = TempDir::new("tier", "none");
    let db = RocksDb::open(&dir.0, &PeerConfig::default()).unwrap();
    assert_eq!(db.tier(), None);
}

/// A persistent cache smaller than one of its 100 MiB files is refused, not left to RocksDB's
/// assertion (which aborts the process).
#[test]
fn rocksdb_refuses_a_persistent_cache_below_one_file() {
    let dir = TempDir::new("tier", "small");
    let mut config = config(PeerTierKind::Persistent, &dir);
    config.tier.as_mut().unwrap().bytes = 16 << 20;
    let e = RocksDb::open(&dir.0.join("db"), &config).unwrap_err();
    assert!(matches!(e, PeerError::Invalid { .. }) && e.to_string().contains("100 MiB"), "{e}");
}

#[test]
fn wiredtiger_and_lmdb_refuse_a_tier() {
    let dir = TempDir::new("tier", "refused");
    let config = config(PeerTierKind::Secondary, &dir);
    let refused = |result: Result<(), PeerError>, engine: &str| match result {
        Err(e @ PeerError::Invalid { .. }) => {
            assert_eq!(e.engine(), engine);
            assert!(e.to_string().contains("tier"), "{e}");
        }
        other => panic!("{engine} with a tier: {other:?}"),
    };
    refused(WiredTiger::open(&dir.0.join("wt"), &config).map(drop), "wiredtiger");
    refused(Lmdb::open(&dir.0.join("lmdb"), &config).map(drop), "lmdb");
}
