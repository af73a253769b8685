//! The peers' transactions (`Peer::begin`, `PeerTxn`), the same checks on RocksDB (opened
//! with `PeerConfig::transactions`) and WiredTiger: a transaction reads its own writes, and
//! nobody else sees them before the commit; a dropped one leaves nothing; scans both ways
//! within their bounds see the transaction's writes; two transactions writing one key do not
//! both commit; counters incremented by threads, retrying on conflicts, lose no increment;
//! LMDB and a RocksDB opened without `transactions` refuse to begin. Needs the libraries:
//! `cargo test -p ferrite-peers --features link`.

#![cfg(feature = "link")]

use std::path::PathBuf;
use std::sync::Arc;

use ferrite_peers::{Lmdb, Peer, PeerConfig, PeerError, PeerTxn, RocksDb, WiredTiger};

/// A fresh directory under the temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("ferrite-peers-txn-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config() -> PeerConfig {
    PeerConfig { cache_bytes: 8 << 20, transactions: true, ..PeerConfig::default() }
}

fn get(txn: &mut dyn PeerTxn, key: &str) -> Option<String> {
    let mut out = Vec::new();
    txn.get(key.as_bytes(), &mut out, false).unwrap().then(|| String::from_utf8(out).unwrap())
}

fn read(peer: &Arc<dyn Peer>, key: &str) -> Option<String> {
    let mut out = Vec::new();
    peer.get(key.as_bytes(), &mut out).unwrap().then(|| String::from_utf8(out).unwrap())
}

fn scan(
    txn: &mut dyn PeerTxn,
    lower: &str,
    upper: Option<&str>,
    limit: usize,
    reverse: bool,
) -> Vec<String> {
    let mut keys = Vec::new();
    let n = txn
        .scan(lower.as_bytes(), upper.map(str::as_bytes), limit, reverse, &mut |k, _| {
            keys.push(String::from_utf8(k.to_vec()).unwrap())
        })
        .unwrap();
    assert_eq!(n, keys.len());
    keys
}

/// The checks of one transaction at a time.
fn one_at_a_time(peer: &Arc<dyn Peer>) {
    assert!(peer.isolation().is_some());
    for k in ["a1", "a2", "a3", "b1"] {
        peer.put(k.as_bytes(), format!("v-{k}").as_bytes()).unwrap();
    }
    // Own writes first; nobody else sees them before the commit.
    let mut txn = Arc::clone(peer).begin().unwrap();
    assert_eq!(get(&mut *txn, "a1").as_deref(), Some("v-a1"));
    txn.put(b"a1", b"mine").unwrap();
    txn.put(b"a25", b"new").unwrap();
    txn.delete(b"a3").unwrap();
    txn.delete(b"absent").unwrap();
    assert_eq!(get(&mut *txn, "a1").as_deref(), Some("mine"));
    assert_eq!(get(&mut *txn, "a3"), None);
    assert_eq!(read(peer, "a1").as_deref(), Some("v-a1"));
    assert_eq!(read(peer, "a25"), None);
    // Scans: bounds, limits, both ways, with the transaction's writes.
    assert_eq!(scan(&mut *txn, "a", Some("b"), 10, false), ["a1", "a2", "a25"]);
    assert_eq!(scan(&mut *txn, "a", Some("b"), 2, false), ["a1", "a2"]);
    assert_eq!(scan(&mut *txn, "a", Some("b"), 10, true), ["a25", "a2", "a1"]);
    assert_eq!(scan(&mut *txn, "a", Some("a2"), 10, true), ["a1"]);
    assert_eq!(scan(&mut *txn, "a2", Some("b1"), 1, true), ["a25"]);
    assert_eq!(scan(&mut *txn, "a2", None, 10, false), ["a2", "a25", "b1"]);
    assert_eq!(scan(&mut *txn, "a", None, 2, true), ["b1", "a25"]);
    assert!(scan(&mut *txn, "c", None, 10, false).is_empty());
    assert!(scan(&mut *txn, "a", Some("b"), 0, false).is_empty());
    txn.commit().unwrap();
    assert_eq!(read(peer, "a1").as_deref(), Some("mine"));
    assert_eq!(read(peer, "a25").as_deref(), Some("new"));
    assert_eq!(read(peer, "a3"), None);

    // Dropped uncommitted: nothing stays.
    let mut txn = Arc::clone(peer).begin().unwrap();
    txn.put(b"a1", b"dropped").unwrap();
    txn.delete(b"a2").unwrap();
    drop(txn);
    assert_eq!(read(peer, "a1").as_deref(), Some("mine"));
    assert_eq!(read(peer, "a2").as_deref(), Some("v-a2"));

    // Two transactions write one key: one of them fails with a conflict (at its write or
    // its commit) and leaves nothing; the other commits.
    let mut first = Arc::clone(peer).begin().unwrap();
    let mut second = Arc::clone(peer).begin().unwrap();
    let mut out = Vec::new();
    first.get(b"a2", &mut out, true).unwrap();
    second.get(b"a2", &mut out, true).unwrap();
    first.put(b"a2", b"first").unwrap();
    first.put(b"first-only", b"1").unwrap();
    let second_result = second.put(b"a2", b"second").and_then(|()| second.commit());
    let second_won = match second_result {
        Ok(()) => true,
        Err(e) if e.is_conflict() => false,
        Err(e) => panic!("{e}"),
    };
    let first_result = first.commit();
    match (second_won, first_result) {
        (true, Err(e)) if e.is_conflict() => {
            assert_eq!(read(peer, "a2").as_deref(), Some("second"));
            assert_eq!(read(peer, "first-only"), None, "the loser wrote nothing");
        }
        (false, Ok(())) => assert_eq!(read(peer, "a2").as_deref(), Some("first")),
        (won, result) => panic!("second won: {won}, first: {result:?}"),
    }

    let lmdb_dir = TempDir::new("lmdb");
    let lmdb: Arc<dyn Peer> = Arc::new(Lmdb::open(&lmdb_dir.0, &config()).unwrap());
    assert!(lmdb.isolation().is_none());
    assert!(matches!(lmdb.begin(), Err(PeerError::Invalid { .. })));
}

/// Threads increment counters in read-modify-write transactions, retrying on conflicts.
fn counters(peer: Arc<dyn Peer>) {
    const THREADS: u64 = 4;
    const EACH: u64 = 50;
    peer.put(b"counter", &0u64.to_le_bytes()).unwrap();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let peer = Arc::clone(&peer);
            std::thread::spawn(move || {
                let mut conflicts = 0u64;
                for _ in 0..EACH {
                    loop {
                        let mut txn = Arc::clone(&peer).begin().unwrap();
                        let mut out = Vec::new();
                        let step = txn.get(b"counter", &mut out, true).and_then(|found| {
                            assert!(found);
                            let n = u64::from_le_bytes(out[..8].try_into().unwrap());
                            std::thread::yield_now();
                            txn.put(b"counter", &(n + 1).to_le_bytes())?;
                            txn.commit()
                        });
                        match step {
                            Ok(()) => break,
                            Err(e) if e.is_conflict() => conflicts += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    let conflicts: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let mut out = Vec::new();
    assert!(peer.get(b"counter", &mut out).unwrap());
    assert_eq!(
        u64::from_le_bytes(out[..8].try_into().unwrap()),
        THREADS * EACH,
        "{conflicts} conflicts"
    );
}

#[test]
fn rocksdb_transactions() {
    let dir = TempDir::new("rocksdb");
    let peer: Arc<dyn Peer> = Arc::new(RocksDb::open(&dir.0, &config()).unwrap());
    assert!(peer.describe_config().contains("OptimisticTransactionDB"));
    one_at_a_time(&peer);
    counters(peer);
    let plain_dir = TempDir::new("rocksdb-plain");
    let plain = Arc::new(RocksDb::open(&plain_dir.0, &PeerConfig::default()).unwrap());
    assert!(matches!(plain.begin(), Err(PeerError::Invalid { .. })));
}

#[test]
fn wiredtiger_transactions() {
    let dir = TempDir::new("wiredtiger");
    let peer: Arc<dyn Peer> = Arc::new(WiredTiger::open(&dir.0, &config()).unwrap());
    one_at_a_time(&peer);
    counters(peer);
}
