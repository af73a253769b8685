//! Online backups (`Db::backup`): taken while writers commit batches, Value pages and
//! objects, the copy opens whole (`check` finds no fault), holds every commit made before
//! the backup began, a prefix of the commits made during it and nothing torn: batches whole,
//! objects whole. Refusals and a full target leave no copy behind.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{tiny, Rng, TempDir};
use ferrite::testing::Tmpfs;
use ferrite::{Db, Durability, Error, Options, WriteBatch};

const ACCOUNTS: u64 = 200;

fn pattern(n: u64) -> Vec<u8> {
    format!("{n:07} ").repeat(900).into_bytes()
}

#[test]
fn an_online_backup_holds_every_commit_before_it_and_opens_whole() {
    for round in 0..3u64 {
        let dir = TempDir::with_prefix("backup-src").unwrap();
        let copies = TempDir::with_prefix("backup-copies").unwrap();
        let target = copies.path().join("copy");
        // A pool smaller than the data, so that pages are written back during the copy.
        let options = Options {
            workers: 2,
            durability: Durability::None,
            checkpoint_log_bytes: Some(4 << 20),
            ..tiny(96)
        };
        let db = Arc::new(Db::open(dir.path(), options).unwrap());
        let (accounts, log, objects) =
            (db.tree("accounts").unwrap(), db.tree("log").unwrap(), db.tree("objects").unwrap());
        for i in 0..ACCOUNTS {
            accounts.put(format!("a{i:04}"), 1_000u64.to_be_bytes()).unwrap();
        }
        objects.put("obj", pattern(0)).unwrap();
        let committed = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        // One writer: each batch moves money between two accounts and appends log entry
        // `n` (with a value on a Value page every fourth time); every tenth rewrites the
        // object whole.
        let writer = {
            let (db, committed, done) = (db.clone(), committed.clone(), done.clone());
            let (accounts, log, objects) = (accounts.clone(), log.clone(), objects.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(round);
                let mut balances = vec![1_000u64; ACCOUNTS as usize];
                let mut n = 0;
                while !done.load(Ordering::Acquire) || n < 200 {
                    n += 1;
                    let (from, to) = (rng.below(ACCOUNTS) as usize, rng.below(ACCOUNTS) as usize);
                    let amount = rng.below(balances[from] + 1);
                    balances[from] -= amount;
                    balances[to] += amount;
                    let mut batch = WriteBatch::new();
                    batch.put(&accounts, format!("a{from:04}"), balances[from].to_be_bytes());
                    batch.put(&accounts, format!("a{to:04}"), balances[to].to_be_bytes());
                    let len = if n % 4 == 0 { 2_500 } else { 40 };
                    batch.put(&log, format!("n{n:08}"), vec![b'x'; len]);
                    db.write(&batch).unwrap();
                    if n % 10 == 0 {
                        objects.put("obj", pattern(n)).unwrap();
                    }
                    committed.store(n, Ordering::Release);
                }
            })
        };
        while committed.load(Ordering::Acquire) < 300 {
            std::thread::yield_now();
        }
        let before = committed.load(Ordering::Acquire);
        let report = db.backup(&target).unwrap();
        done.store(true, Ordering::Release);
        writer.join().unwrap();
        assert!(report.page_file_bytes > 0 && report.log_bytes > 0, "{report:?}");
        let last = committed.load(Ordering::Acquire);
        drop((accounts, log, objects));
        let Ok(db) = Arc::try_unwrap(db) else { panic!("the only handle") };
        db.close().unwrap();

        // The copy: recovered by its open, checked, and one moment of the source.
        let copy = Db::open(&target, Options { workers: 0, ..tiny(256) }).unwrap();
        assert!(copy.recovery_report().records > 0, "the copy replays its log");
        let check = copy.check().unwrap();
        assert!(check.is_ok(), "round {round}: {:?}", check.all_faults());
        let total: u64 = copy
            .tree("accounts")
            .unwrap()
            .iter()
            .map(|e| u64::from_be_bytes(e.unwrap().1.try_into().unwrap()))
            .sum();
        assert_eq!(total, ACCOUNTS * 1_000, "round {round}: a batch seen in part");
        let entries: Vec<u64> = copy
            .tree("log")
            .unwrap()
            .iter()
            .map(|e| std::str::from_utf8(&e.unwrap().0[1..]).unwrap().parse().unwrap())
            .collect();
        let held = entries.len() as u64;
        assert!(entries.iter().copied().eq(1..=held), "round {round}: not a prefix of commits");
        assert!(held >= before, "round {round}: {held} commits copied, {before} made before");
        assert!(held <= last);
        let obj = copy.tree("objects").unwrap().get("obj").unwrap().unwrap();
        let n: u64 = std::str::from_utf8(&obj[..7]).unwrap().parse().unwrap();
        assert_eq!(obj, pattern(n), "round {round}: the object is whole");
        assert!(n <= held && held <= n + 10, "round {round}: object {n} with {held} commits");
        copy.close().unwrap();
    }
}

#[test]
fn backups_refuse_targets_in_use_and_clean_up_after_a_full_disk() {
    let dir = TempDir::with_prefix("backup-refuse").unwrap();
    let db = Db::open(dir.path(), Options { workers: 0, ..tiny(64) }).unwrap();
    let tree = db.tree("t").unwrap();
    for i in 0..500u32 {
        tree.put(format!("k{i:04}"), [7u8; 300]).unwrap();
    }
    // A directory that holds something is not overwritten.
    let busy = TempDir::with_prefix("backup-busy").unwrap();
    std::fs::write(busy.path().join("keep"), b"mine").unwrap();
    assert!(matches!(db.backup(busy.path()), Err(Error::NotSupported { .. })));
    assert_eq!(std::fs::read(busy.path().join("keep")).unwrap(), b"mine");
    // An empty one is used.
    let empty = TempDir::with_prefix("backup-empty").unwrap();
    db.backup(empty.path()).unwrap();
    let copy = Db::open(empty.path(), Options { workers: 0, read_only: true, ..tiny(64) }).unwrap();
    assert_eq!(copy.tree("t").unwrap().iter().count(), 500);
    drop(copy);
    // A target on a file system too small: the error names the copy, nothing is left.
    let mounts = TempDir::with_prefix("backup-mnt").unwrap();
    if let Some(small) = Tmpfs::mount(&mounts.path().join("small"), "1m") {
        let target = small.path().join("copy");
        let err = db.backup(&target).unwrap_err();
        assert!(
            err.to_string().contains("No space left") || err.to_string().contains("copying"),
            "{err}"
        );
        assert!(!target.exists(), "the partial copy is removed");
        // The source goes on.
        tree.put("after", "full").unwrap();
        assert!(db.check().unwrap().is_ok());
    }
}
