//! The peers' transactions (`Peer::begin`, `PeerTxn`), the same checks on RocksDB (opened
//! with `PeerConfig::transactions`, optimistic and pessimistic) and WiredTiger: a transaction reads its own writes, and
//! nobody else sees them before the commit; a dropped one leaves nothing; scans both ways
//! within their bounds see the transaction's writes; two transactions writing one key do not
//! both commit; counters incremented by threads, retrying on conflicts, lose no increment;
//! LMDB and a RocksDB opened without `transactions` refuse to begin. Pessimistic RocksDB's
//! locks: a second locker waits out the lock timeout and gets a conflict, a deadlock is
//! found at once, plain reads take no lock. Needs the libraries:
//! `cargo test -p ferrite-peers --features link`.

#![cfg(feature = "link")]

mod common;

use common::TempDir;
use std::sync::Arc;

use std::time::{Duration, Instant};

use ferrite_peers::{Lmdb, Peer, PeerConfig, PeerError, PeerTxn, RocksDb, TxnMode, WiredTiger};

fn config(mode: TxnMode) -> PeerConfig {
    PeerConfig { cache_bytes: 8 << 20, transactions: Some(mode), ..PeerConfig::default() }
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

    // Two transactions write one key: one of them fails with a conflict (at its read for
    // update, after a pessimistic lock's timeout, at its write or at its commit) and leaves
    // nothing; the other commits.
    let mut first = Arc::clone(peer).begin().unwrap();
    let mut second = Arc::clone(peer).begin().unwrap();
    let mut out = Vec::new();
    first.get(b"a2", &mut out, true).unwrap();
    let second_read = second.get(b"a2", &mut out, true);
    first.put(b"a2", b"first").unwrap();
    first.put(b"first-only", b"1").unwrap();
    let second_result =
        second_read.and_then(|_| second.put(b"a2", b"second")).and_then(|()| second.commit());
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

    let lmdb_dir = TempDir::new("txn", "lmdb");
    let lmdb: Arc<dyn Peer> =
        Arc::new(Lmdb::open(&lmdb_dir.0, &config(TxnMode::Optimistic)).unwrap());
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
fn rocksdb_optimistic_transactions() {
    let dir = TempDir::new("txn", "rocksdb");
    let peer: Arc<dyn Peer> =
        Arc::new(RocksDb::open(&dir.0, &config(TxnMode::Optimistic)).unwrap());
    assert!(peer.describe_config().contains("OptimisticTransactionDB"));
    assert!(peer.isolation().unwrap().starts_with("optimistic"));
    one_at_a_time(&peer);
    counters(peer);
    let plain_dir = TempDir::new("txn", "rocksdb-plain");
    let plain = Arc::new(RocksDb::open(&plain_dir.0, &PeerConfig::default()).unwrap());
    assert!(matches!(plain.begin(), Err(PeerError::Invalid { .. })));
}

#[test]
fn rocksdb_pessimistic_transactions() {
    let dir = TempDir::new("txn", "rocksdb-pessimistic");
    let peer: Arc<dyn Peer> =
        Arc::new(RocksDb::open(&dir.0, &config(TxnMode::Pessimistic)).unwrap());
    assert!(peer.describe_config().contains("TransactionDB (pessimistic"));
    assert!(peer.isolation().unwrap().starts_with("pessimistic"));
    one_at_a_time(&peer);
    counters(Arc::clone(&peer));
    // The ordinary calls go through the TransactionDB: flush, compaction and properties too.
    peer.settle().unwrap();
    assert!(peer.memory().is_some());
    assert_eq!(read(&peer, "a25").as_deref(), Some("new"));
}

/// Pessimistic RocksDB: a key read for update is locked until the transaction ends. A
/// second locker waits the lock timeout (1 s) and gets a conflict; a plain read takes no
/// lock and sees the committed value; two transactions each waiting for the other's lock
/// are a deadlock, found without waiting out the timeout.
#[test]
fn rocksdb_pessimistic_locks_time_out_and_deadlocks_are_found() {
    let dir = TempDir::new("txn", "rocksdb-locks");
    let peer: Arc<dyn Peer> =
        Arc::new(RocksDb::open(&dir.0, &config(TxnMode::Pessimistic)).unwrap());
    peer.put(b"x", b"0").unwrap();
    peer.put(b"y", b"0").unwrap();
    let mut out = Vec::new();

    let mut holder = Arc::clone(&peer).begin().unwrap();
    assert!(holder.get(b"x", &mut out, true).unwrap());
    holder.put(b"x", b"held").unwrap();
    let mut waiter = Arc::clone(&peer).begin().unwrap();
    assert_eq!(get(&mut *waiter, "x").as_deref(), Some("0"), "a plain read takes no lock");
    let start = Instant::now();
    let e = waiter.get(b"x", &mut out, true).unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(start.elapsed() >= Duration::from_millis(900), "{:?}", start.elapsed());
    drop(waiter);
    holder.commit().unwrap();
    assert_eq!(read(&peer, "x").as_deref(), Some("held"));

    // A deadlock: `first` holds x and waits for y (on a thread); `second` holds y and asks
    // for x.
    let mut first = Arc::clone(&peer).begin().unwrap();
    let mut second = Arc::clone(&peer).begin().unwrap();
    assert!(first.get(b"x", &mut out, true).unwrap());
    assert!(second.get(b"y", &mut out, true).unwrap());
    let waiting = std::thread::spawn(move || {
        let mut out = Vec::new();
        let got = first.get(b"y", &mut out, true);
        (first, got)
    });
    std::thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    let e = second.get(b"x", &mut out, true).unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert!(e.to_string().contains("Deadlock"), "{e}");
    assert!(start.elapsed() < Duration::from_millis(900), "found without the timeout");
    drop(second);
    let (first, got) = waiting.join().unwrap();
    assert!(got.unwrap(), "the lock passes to the waiter once the loser is dropped");
    first.commit().unwrap();
}

#[test]
fn wiredtiger_transactions() {
    let dir = TempDir::new("txn", "wiredtiger");
    let peer: Arc<dyn Peer> =
        Arc::new(WiredTiger::open(&dir.0, &config(TxnMode::Pessimistic)).unwrap());
    one_at_a_time(&peer);
    counters(peer);
}
