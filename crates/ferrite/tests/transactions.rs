//! Transactions: reads see the transaction's own writes; a commit applies every write or
//! none, and fails with `Error::Conflict` (writing nothing) when a key it read changed
//! since. Checked one case at a time, then by invariants under concurrency (transfers
//! between accounts in two trees keep the total; counters incremented by many threads and
//! tasks lose no increment, by reads or by adds; read for update, none conflicts), and
//! across simulated crashes. Reads for update wait at most their limit and never in a cycle.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{assert_check, seeds, sim_options, tiny, Rng, TempDir};
use ferrite::testing::SimDisk;
use ferrite::{Db, Durability, Error, Options, Tree};

fn balance(value: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(value.expect("account exists").try_into().expect("8-byte balance"))
}

fn account(i: u64) -> Vec<u8> {
    format!("account-{i:04}").into_bytes()
}

#[test]
fn reads_see_the_transactions_own_writes_and_nothing_lands_before_commit() {
    let dir = TempDir::with_prefix("txn-basic").unwrap();
    let db = Db::open(dir.path(), Options { workers: 0, ..tiny(64) }).unwrap();
    let a = db.tree("a").unwrap();
    let b = db.tree("b").unwrap();
    a.put(b"k1", b"old").unwrap();

    let mut txn = db.transaction();
    assert_eq!(txn.get(&a, b"k1").unwrap().as_deref(), Some(&b"old"[..]));
    txn.put(&a, b"k1", b"new").unwrap();
    txn.put(&b, b"k2", b"two").unwrap();
    txn.delete(&a, b"absent").unwrap();
    assert_eq!(txn.get(&a, b"k1").unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(txn.get(&b, b"k2").unwrap().as_deref(), Some(&b"two"[..]));
    assert_eq!(txn.get(&a, b"absent").unwrap(), None);
    // The trees do not see it yet.
    assert_eq!(a.get(b"k1").unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(b.get(b"k2").unwrap(), None);
    assert_eq!(txn.len(), (1, 3));
    txn.commit().unwrap();
    assert_eq!(a.get(b"k1").unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(b.get(b"k2").unwrap().as_deref(), Some(&b"two"[..]));

    // Deleting inside a transaction hides the key from its reads, then from the tree.
    let mut txn = db.transaction();
    txn.delete(&a, b"k1").unwrap();
    assert_eq!(txn.get(&a, b"k1").unwrap(), None);
    txn.commit().unwrap();
    assert_eq!(a.get(b"k1").unwrap(), None);

    // Dropped without a commit: nothing is written.
    let mut txn = db.transaction();
    txn.put(&a, b"k3", b"never").unwrap();
    drop(txn);
    assert_eq!(a.get(b"k3").unwrap(), None);

    // Bad input is refused where it is given.
    let mut txn = db.transaction();
    assert!(matches!(txn.put(&a, b"", b"v"), Err(Error::KeyEmpty)));
    // A value past the Value-page limit is an object, written at the commit.
    let big = vec![9u8; ferrite::MAX_VALUE_LEN + 1];
    txn.put(&a, b"big", &big).unwrap();
    assert_eq!(txn.get(&a, b"big").unwrap().as_deref(), Some(&big[..]));
    let other_dir = TempDir::with_prefix("txn-other").unwrap();
    let other = Db::open(other_dir.path(), Options { workers: 0, ..tiny(64) }).unwrap();
    let foreign = other.tree("a").unwrap();
    assert!(matches!(txn.get(&foreign, b"k"), Err(Error::BadOptions { .. })));
    txn.commit().unwrap();
    assert_eq!(a.get(b"big").unwrap(), Some(big));
    assert_check(&db);
}

#[test]
fn a_commit_after_a_read_key_changed_is_a_conflict_and_writes_nothing() {
    let dir = TempDir::with_prefix("txn-conflict").unwrap();
    let db = Db::open(dir.path(), Options { workers: 0, ..tiny(64) }).unwrap();
    let a = db.tree("a").unwrap();
    let b = db.tree("b").unwrap();
    a.put(b"seat-1", b"free").unwrap();

    // Changed value.
    let mut txn = db.transaction();
    assert_eq!(txn.get(&a, b"seat-1").unwrap().as_deref(), Some(&b"free"[..]));
    txn.put(&a, b"seat-1", b"alice").unwrap();
    txn.put(&b, b"booking-alice", b"seat-1").unwrap();
    a.put(b"seat-1", b"bob").unwrap();
    let error = txn.commit().unwrap_err();
    assert!(
        matches!(&error, Error::Conflict { tree, key } if tree == "a" && key == b"seat-1"),
        "{error:?}"
    );
    assert!(error.to_string().contains("seat-1"), "{error}");
    assert_eq!(a.get(b"seat-1").unwrap().as_deref(), Some(&b"bob"[..]));
    assert_eq!(b.get(b"booking-alice").unwrap(), None);

    // A key read as absent and inserted since.
    let mut txn = db.transaction();
    assert_eq!(txn.get(&b, b"new").unwrap(), None);
    txn.put(&b, b"other", b"x").unwrap();
    b.put(b"new", b"meanwhile").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict { .. })));
    assert_eq!(b.get(b"other").unwrap(), None);

    // A key read and deleted since.
    let mut txn = db.transaction();
    assert!(txn.get(&b, b"new").unwrap().is_some());
    assert!(b.delete(b"new").unwrap());
    assert!(matches!(txn.commit(), Err(Error::Conflict { .. })));

    // Changed and changed back: what was read still holds, so the commit is fine.
    let mut txn = db.transaction();
    txn.get(&a, b"seat-1").unwrap();
    a.put(b"seat-1", b"carol").unwrap();
    a.put(b"seat-1", b"bob").unwrap();
    txn.put(&b, b"after", b"1").unwrap();
    txn.commit().unwrap();
    assert_eq!(b.get(b"after").unwrap().as_deref(), Some(&b"1"[..]));

    // A neighbour in the read key's leaf changed: the leaf's version moved on, but the key
    // holds what was read (the commit reads it again to tell), so the commit is fine.
    let mut txn = db.transaction();
    txn.get(&a, b"seat-1").unwrap();
    assert_eq!(txn.get(&a, b"seat-2").unwrap(), None);
    a.put(b"seat-0", b"frank").unwrap();
    a.put(b"seat-3", b"gina").unwrap();
    txn.put(&b, b"neighbours", b"1").unwrap();
    txn.commit().unwrap();
    assert_eq!(b.get(b"neighbours").unwrap().as_deref(), Some(&b"1"[..]));

    // Writes without reads never conflict; a read-only transaction commits nothing.
    let mut txn = db.transaction();
    txn.put(&a, b"seat-1", b"dave").unwrap();
    a.put(b"seat-1", b"erin").unwrap();
    txn.commit().unwrap();
    assert_eq!(a.get(b"seat-1").unwrap().as_deref(), Some(&b"dave"[..]));
    let mut txn = db.transaction();
    txn.get(&a, b"seat-1").unwrap();
    txn.commit().unwrap();

    // A tree dropped under a transaction that read it.
    let c = db.tree("c").unwrap();
    let mut txn = db.transaction();
    txn.get(&c, b"k").unwrap();
    db.drop_tree("c").unwrap();
    assert!(matches!(txn.commit(), Err(Error::TreeNotFound { .. })));
    assert_check(&db);
}

fn keys(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<&str> {
    entries.iter().map(|(k, _)| std::str::from_utf8(k).unwrap()).collect()
}

/// `Transaction::scan`: the transaction's own writes over the tree's entries, both ways,
/// with limits; at the commit, a key inserted into the part of the range the answer
/// depended on (a phantom), removed or changed there is a conflict, and a change outside it
/// is not.
#[test]
fn scans_see_own_writes_and_a_phantom_in_the_range_read_is_a_conflict() {
    let dir = TempDir::with_prefix("txn-scan").unwrap();
    let db = Db::open(dir.path(), Options { workers: 0, ..tiny(64) }).unwrap();
    let t = db.tree("t").unwrap();
    let other = db.tree("other").unwrap();
    for k in ["k1", "k2", "k3", "k4", "k5", "k6"] {
        t.put(k, format!("v-{k}")).unwrap();
    }
    other.put("k25", "another tree").unwrap();

    // Own writes: a put, a delete, an edit; the limit counts what the transaction sees.
    let mut txn = db.transaction();
    txn.put(&t, "k25", "mine").unwrap();
    txn.delete(&t, "k3").unwrap();
    txn.write_at(&t, "k4", 0, "V").unwrap();
    let seen = txn.scan(&t, "k2".."k6", 10, false).unwrap();
    assert_eq!(keys(&seen), ["k2", "k25", "k4", "k5"]);
    assert_eq!(seen[1].1, b"mine");
    assert_eq!(seen[2].1, b"V-k4");
    assert_eq!(keys(&txn.scan(&t, "k2".."k6", 2, false).unwrap()), ["k2", "k25"]);
    assert_eq!(keys(&txn.scan(&t, "k2".."k6", 2, true).unwrap()), ["k5", "k4"]);
    assert_eq!(keys(&txn.scan(&t, "k1"..="k1", 5, false).unwrap()), ["k1"]);
    assert!(txn.scan(&t, "k4".."k4", 5, false).unwrap().is_empty());
    assert!(txn.scan(&t, "k1"..="k6", 0, false).unwrap().is_empty());
    assert_eq!(txn.ranges().0, 4, "the empty scans remember nothing");
    txn.commit().unwrap();
    assert_eq!(
        keys(&t.iter().collect::<Result<Vec<_>, _>>().unwrap()),
        ["k1", "k2", "k25", "k4", "k5", "k6"]
    );

    // A phantom: a key inserted into the range scanned.
    let mut txn = db.transaction();
    assert_eq!(keys(&txn.scan(&t, "k2"..="k4", 10, false).unwrap()), ["k2", "k25", "k4"]);
    txn.put(&other, "done", "1").unwrap();
    t.put("k3", "meanwhile").unwrap();
    let error = txn.commit().unwrap_err();
    assert!(
        matches!(&error, Error::Conflict { tree, key } if tree == "t" && key == b"k3"),
        "{error:?}"
    );
    assert_eq!(other.get("done").unwrap(), None, "nothing written");

    // A key removed from it, a value changed in it.
    for change in [0, 1] {
        let mut txn = db.transaction();
        assert_eq!(txn.scan(&t, "k2"..="k4", 10, false).unwrap().len(), 4 - change);
        match change {
            0 => assert!(t.delete("k25").unwrap()),
            _ => t.put("k4", "changed").unwrap(),
        }
        txn.put(&other, "done", "1").unwrap();
        assert!(matches!(txn.commit(), Err(Error::Conflict { .. })), "change {change}");
    }
    assert_eq!(other.get("done").unwrap(), None);

    // With a limit, only the part up to the last entry returned counts: forward...
    let mut txn = db.transaction();
    assert_eq!(keys(&txn.scan(&t, "k1".., 2, false).unwrap()), ["k1", "k2"]);
    t.put("k21", "after the answer").unwrap();
    t.put("k9", "far after").unwrap();
    txn.put(&other, "forward", "1").unwrap();
    txn.commit().unwrap();
    let mut txn = db.transaction();
    assert_eq!(keys(&txn.scan(&t, "k1".., 2, false).unwrap()), ["k1", "k2"]);
    t.put("k15", "inside the answer").unwrap();
    txn.put(&other, "forward", "2").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict { key, .. }) if key == b"k15"));
    // ... and backward.
    let mut txn = db.transaction();
    assert_eq!(keys(&txn.scan(&t, "k1".."k9", 1, true).unwrap()), ["k6"]);
    t.put("k55", "before the answer").unwrap();
    txn.put(&other, "backward", "1").unwrap();
    txn.commit().unwrap();
    let mut txn = db.transaction();
    assert_eq!(keys(&txn.scan(&t, "k1".."k9", 1, true).unwrap()), ["k6"]);
    t.put("k7", "inside the answer").unwrap();
    txn.put(&other, "backward", "2").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict { key, .. }) if key == b"k7"));
    assert_eq!(other.get("forward").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(other.get("backward").unwrap().as_deref(), Some(&b"1"[..]));

    // An empty range read stays empty: an insert there is a conflict too.
    let mut txn = db.transaction();
    assert!(txn.scan(&t, "m".."n", 10, false).unwrap().is_empty());
    t.put("m1", "phantom").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict { key, .. }) if key == b"m1"));
    // A read-only transaction's scan is validated too (it commits no record).
    let mut txn = db.transaction();
    assert_eq!(txn.scan(&t, "m".."n", 10, false).unwrap().len(), 1);
    t.put("m2", "phantom").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict { .. })));
    assert_check(&db);
}

/// `Transaction::scan` against a model: random trees, random writes of the transaction
/// (puts, deletes, edits in place), random ranges (each bound included, excluded or open),
/// limits and directions; every answer is the model's, and the commit (nothing changed
/// meanwhile) succeeds and leaves the model's contents.
#[test]
fn scans_answer_as_a_model_of_the_tree_under_the_transactions_writes() {
    use std::collections::BTreeMap;
    use std::ops::Bound;
    let key = |rng: &mut Rng| {
        format!("{}{}", (b'a' + rng.below(6) as u8) as char, rng.below(4)).into_bytes()
    };
    let bound = |rng: &mut Rng, key: Vec<u8>| match rng.below(3) {
        0 => Bound::Included(key),
        1 => Bound::Excluded(key),
        _ => Bound::Unbounded,
    };
    for seed in seeds(40) {
        let dir = TempDir::with_prefix("txn-scan-model").unwrap();
        let db = Db::open(dir.path(), Options { workers: 0, ..tiny(64) }).unwrap();
        let t = db.tree("t").unwrap();
        let mut rng = Rng::new(seed);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for _ in 0..rng.below(20) {
            let (k, v) = (key(&mut rng), format!("tree-{}", rng.below(100)).into_bytes());
            t.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        let mut txn = db.transaction();
        for _ in 0..rng.below(12) {
            let k = key(&mut rng);
            match rng.below(3) {
                0 => {
                    let v = format!("mine-{}", rng.below(100)).into_bytes();
                    txn.put(&t, &k, &v).unwrap();
                    model.insert(k, v);
                }
                1 => {
                    txn.delete(&t, &k).unwrap();
                    model.remove(&k);
                }
                _ => {
                    let offset = rng.below(8);
                    txn.write_at(&t, &k, offset, b"XY").unwrap();
                    let v = model.entry(k).or_default();
                    let end = offset as usize + 2;
                    if v.len() < end {
                        v.resize(end, 0);
                    }
                    v[offset as usize..end].copy_from_slice(b"XY");
                }
            }
        }
        for _ in 0..20 {
            let (low, high) = (key(&mut rng), key(&mut rng));
            let (lower, upper) = (bound(&mut rng, low), bound(&mut rng, high));
            let (limit, reverse) = (rng.below(6) as usize, rng.below(2) == 1);
            let empty = match (&lower, &upper) {
                (Bound::Included(l), Bound::Included(u)) => l > u,
                (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(u))
                | (Bound::Excluded(l), Bound::Included(u)) => l >= u,
                _ => false,
            };
            let expected: Vec<(Vec<u8>, Vec<u8>)> = match empty {
                true => Vec::new(),
                false => {
                    let inside = model.range::<Vec<u8>, _>((lower.clone(), upper.clone()));
                    let all: Vec<_> = inside.map(|(k, v)| (k.clone(), v.clone())).collect();
                    match reverse {
                        false => all.into_iter().take(limit).collect(),
                        true => all.into_iter().rev().take(limit).collect(),
                    }
                }
            };
            let got = txn.scan(&t, (lower.clone(), upper.clone()), limit, reverse).unwrap();
            assert_eq!(
                got, expected,
                "seed {seed}: {lower:?}..{upper:?} limit {limit} reverse {reverse}"
            );
        }
        txn.commit().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let now: Vec<_> = t.iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(now, model.into_iter().collect::<Vec<_>>(), "seed {seed}");
    }
}

/// Doctors on call: each transaction scans who is on call and goes off call only if at
/// least two are (its own key deleted), or on call only if at most two are (its key
/// inserted). Both constraints hold only if scans are serializable: without the range
/// validated, two transactions both see two on call and both leave (write skew), or both
/// see two and both join (a phantom each). Threads and tasks (yielding between the scan
/// and the commit, so that others commit meanwhile) never break `1 <= on call <= 3`.
#[test]
fn scans_keep_a_constraint_over_a_range_under_concurrency() {
    let dir = TempDir::with_prefix("txn-oncall").unwrap();
    let options = Options { workers: 2, durability: Durability::None, ..tiny(64) };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let tree = db.tree("oncall").unwrap();
    let doctor = |i: u64| format!("doctor-{i:02}").into_bytes();
    tree.put(doctor(0), b"on").unwrap();
    tree.put(doctor(1), b"on").unwrap();
    const DOCTORS: u64 = 12;
    const ROUNDS: u64 = 40;
    // One step of doctor `i`: returns whether it met a conflict.
    async fn step(db: &Db, tree: &Tree, me: Vec<u8>, join: bool) -> bool {
        let mut txn = db.transaction();
        let on = txn.scan_async(tree, &b"doctor-"[..].., 100, false).await.unwrap();
        let here = on.iter().any(|(k, _)| *k == me);
        ferrite::sched::yield_now().await;
        match (join, here) {
            (true, false) if on.len() <= 2 => txn.put(tree, &me, b"on").unwrap(),
            (false, true) if on.len() >= 2 => txn.delete(tree, &me).unwrap(),
            _ => {}
        }
        match txn.commit_async().await {
            Ok(()) => false,
            Err(Error::Conflict { .. }) => true,
            Err(e) => panic!("{e}"),
        }
    }
    let audits = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..DOCTORS)
        .map(|i| {
            let (task_db, tree, me) = (Arc::clone(&db), tree.clone(), doctor(i));
            db.spawn(async move {
                let mut rng = Rng::new(i + 1);
                let mut conflicts = 0;
                for _ in 0..ROUNDS {
                    conflicts +=
                        u64::from(step(&task_db, &tree, me.clone(), rng.below(2) == 0).await);
                }
                conflicts
            })
            .unwrap()
        })
        .collect();
    let threads: Vec<_> = (DOCTORS..DOCTORS + 3)
        .map(|i| {
            let (db, tree, me, audits) =
                (Arc::clone(&db), tree.clone(), doctor(i), Arc::clone(&audits));
            std::thread::spawn(move || {
                let mut rng = Rng::new(i + 1);
                for _ in 0..ROUNDS {
                    ferrite::sched::block_on(step(&db, &tree, me.clone(), rng.below(2) == 0));
                    // What the tree holds at one moment keeps the constraint too.
                    let on = db.snapshot().unwrap().range(&tree, &b"doctor-"[..]..).count();
                    assert!((1..=3).contains(&on), "{on} on call");
                    audits.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let conflicts: u64 = tasks.into_iter().map(|t| t.wait()).sum();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let on = tree.range(&b"doctor-"[..]..).count();
    assert!((1..=3).contains(&on), "{on} on call at the end");
    assert_eq!(audits.load(Ordering::Relaxed), 3 * ROUNDS);
    assert!(conflicts > 0, "no task met a conflict: the test checked nothing");
    assert_check(&db);
}

/// Moves a random amount between two random accounts (spread over `trees`), retrying on
/// conflicts; returns how many conflicts it met.
fn transfer(db: &Db, trees: &[Tree], accounts: u64, rng: &mut Rng) -> u64 {
    let mut conflicts = 0;
    loop {
        let (from, to) = (rng.below(accounts), rng.below(accounts));
        let (from_tree, to_tree) = (&trees[(from % 2) as usize], &trees[(to % 2) as usize]);
        let mut txn = db.transaction();
        let from_balance = balance(txn.get(from_tree, account(from)).unwrap());
        let to_balance = balance(txn.get(to_tree, account(to)).unwrap());
        let amount = rng.below(from_balance + 1);
        if from == to {
            return conflicts;
        }
        txn.put(from_tree, account(from), (from_balance - amount).to_le_bytes()).unwrap();
        txn.put(to_tree, account(to), (to_balance + amount).to_le_bytes()).unwrap();
        match txn.commit() {
            Ok(()) => return conflicts,
            Err(Error::Conflict { .. }) => conflicts += 1,
            Err(e) => panic!("transfer failed: {e}"),
        }
    }
}

/// The sum of every account, read in one transaction; `None` if its commit conflicted.
fn audit(db: &Db, trees: &[Tree], accounts: u64) -> Option<u64> {
    let mut txn = db.transaction();
    let total = (0..accounts)
        .map(|i| balance(txn.get(&trees[(i % 2) as usize], account(i)).unwrap()))
        .sum();
    match txn.commit() {
        Ok(()) => Some(total),
        Err(Error::Conflict { .. }) => None,
        Err(e) => panic!("audit failed: {e}"),
    }
}

#[test]
fn concurrent_transfers_keep_the_total_and_every_committed_audit_sees_it() {
    const ACCOUNTS: u64 = 12;
    const START: u64 = 1_000;
    let dir = TempDir::with_prefix("txn-bank").unwrap();
    let options = Options { workers: 0, durability: Durability::None, ..tiny(64) };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let trees = [db.tree("even").unwrap(), db.tree("odd").unwrap()];
    for i in 0..ACCOUNTS {
        trees[(i % 2) as usize].put(account(i), START.to_le_bytes()).unwrap();
    }
    let audits = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (db, trees, audits) = (Arc::clone(&db), trees.clone(), Arc::clone(&audits));
            std::thread::spawn(move || {
                let mut rng = Rng::new(t + 1);
                for _ in 0..300 {
                    transfer(&db, &trees, ACCOUNTS, &mut rng);
                    if t == 0 {
                        if let Some(total) = audit(&db, &trees, ACCOUNTS) {
                            assert_eq!(
                                total,
                                ACCOUNTS * START,
                                "an audit saw money appear or vanish"
                            );
                            audits.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert!(audits.load(Ordering::Relaxed) > 0, "no audit committed");
    assert_eq!(audit(&db, &trees, ACCOUNTS), Some(ACCOUNTS * START));
    assert_check(&db);
}

/// Threads and tasks increment one counter, each reading it (for update with `for_update`)
/// and writing it back in a transaction, run again on a conflict; checks that no increment
/// was lost and returns the conflicts the threads and the tasks met.
fn increment_from_threads_and_tasks(name: &str, for_update: bool) -> (u64, u64) {
    let dir = TempDir::with_prefix(name).unwrap();
    let update_wait = std::time::Duration::from_secs(60);
    let options = Options { workers: 2, durability: Durability::Sync, update_wait, ..tiny(64) };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let tree = db.tree("counters").unwrap();
    tree.put(b"hits", 0u64.to_le_bytes()).unwrap();
    const THREADS: u64 = 3;
    const TASKS: u64 = 40;
    const EACH: u64 = 25;
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (db, tree) = (Arc::clone(&db), tree.clone());
            std::thread::spawn(move || {
                let mut conflicts = 0u64;
                for _ in 0..EACH {
                    loop {
                        let mut txn = db.transaction();
                        let hits = match for_update {
                            true => txn.get_for_update(&tree, b"hits"),
                            false => txn.get(&tree, b"hits"),
                        };
                        let hits = balance(hits.unwrap());
                        std::thread::yield_now();
                        txn.put(&tree, b"hits", (hits + 1).to_le_bytes()).unwrap();
                        match txn.commit() {
                            Ok(()) => break,
                            Err(Error::Conflict { .. }) => conflicts += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (task_db, tree) = (Arc::clone(&db), tree.clone());
            db.spawn(async move {
                let mut conflicts = 0u64;
                for _ in 0..EACH {
                    loop {
                        let mut txn = task_db.transaction();
                        let hits = match for_update {
                            true => txn.get_for_update_async(&tree, b"hits").await,
                            false => txn.get_async(&tree, b"hits").await,
                        };
                        let hits = balance(hits.unwrap());
                        // Other tasks of this worker run here: they commit the same count,
                        // or wait for this one.
                        ferrite::sched::yield_now().await;
                        txn.put(&tree, b"hits", (hits + 1).to_le_bytes()).unwrap();
                        match txn.commit_async().await {
                            Ok(()) => break,
                            Err(Error::Conflict { .. }) => conflicts += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                conflicts
            })
            .unwrap()
        })
        .collect();
    let task_conflicts: u64 = tasks.into_iter().map(|t| t.wait()).sum();
    let thread_conflicts: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(balance(tree.get(b"hits").unwrap()), (THREADS + TASKS) * EACH);
    assert_check(&db);
    (thread_conflicts, task_conflicts)
}

#[test]
fn counters_incremented_by_threads_and_tasks_lose_no_increment() {
    let (_, task_conflicts) = increment_from_threads_and_tasks("txn-counters", false);
    // Every task yields between its read and its commit: others commit meanwhile.
    assert!(task_conflicts > 0, "no task met a conflict: the test checked nothing");
}

#[test]
fn reads_for_update_wait_for_each_other_instead_of_conflicting() {
    // Each reader for update waits for the one before to commit: none conflicts.
    let conflicts = increment_from_threads_and_tasks("txn-for-update", true);
    assert_eq!(conflicts, (0, 0), "conflicts of threads and tasks");
}

#[test]
fn a_read_for_update_waits_at_most_the_limit_and_not_in_a_task_nor_for_a_dropped_one() {
    let dir = TempDir::with_prefix("txn-for-update-cycle").unwrap();
    let limit = std::time::Duration::from_millis(300);
    let options = Options { workers: 1, update_wait: limit, ..tiny(64) };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let tree = db.tree("t").unwrap();
    tree.put(b"a", b"a0").unwrap();
    tree.put(b"b", b"b0").unwrap();

    // A transaction kept open holds its intent: another waits the limit, then reads on;
    // in a blocking call inside a task it does not wait at all.
    let mut holder = db.transaction();
    assert_eq!(holder.get_for_update(&tree, b"a").unwrap().as_deref(), Some(&b"a0"[..]));
    let started = std::time::Instant::now();
    let mut other = db.transaction();
    assert_eq!(other.get_for_update(&tree, b"a").unwrap().as_deref(), Some(&b"a0"[..]));
    assert!(started.elapsed() >= limit, "read on after {:?}", started.elapsed());
    let (task_db, task_tree) = (Arc::clone(&db), tree.clone());
    let waited = db
        .spawn(async move {
            let started = std::time::Instant::now();
            let mut txn = task_db.transaction();
            txn.get_for_update(&task_tree, b"a").unwrap();
            started.elapsed()
        })
        .unwrap()
        .wait();
    assert!(waited < limit, "a blocking read for update in a task waited {waited:?}");
    drop((holder, other));
    // Dropped, the holder's intent is gone: no wait now (the limit is 300 ms; the intent
    // of `other`, also dropped, is gone too).
    let started = std::time::Instant::now();
    let mut txn = db.transaction();
    txn.get_for_update(&tree, b"a").unwrap();
    assert!(started.elapsed() < limit, "waited {:?} for a dropped one", started.elapsed());
    drop(txn);
    assert_check(&db);
}

#[test]
fn reads_for_update_that_would_wait_in_a_cycle_read_on() {
    // Two transactions each read one key for update, then the other's: one of the second
    // reads would close a cycle, so it reads on at once, its transaction commits, and the
    // other (woken then) conflicts on the key it read before that commit. No wait lasts
    // until the limit, whichever of the second reads comes first.
    let dir = TempDir::with_prefix("txn-for-update-cycle").unwrap();
    let limit = std::time::Duration::from_secs(60);
    let options = Options { workers: 0, update_wait: limit, ..tiny(64) };
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.tree("t").unwrap();
    tree.put(b"a", b"a0").unwrap();
    tree.put(b"b", b"b0").unwrap();
    let both_hold_one = std::sync::Barrier::new(2);
    let run = |first: &[u8], second: &[u8]| {
        let mut txn = db.transaction();
        txn.get_for_update(&tree, first).unwrap();
        both_hold_one.wait();
        let started = std::time::Instant::now();
        txn.get_for_update(&tree, second).unwrap();
        txn.put(&tree, first, b"x").unwrap();
        txn.put(&tree, second, b"x").unwrap();
        (txn.commit(), started.elapsed())
    };
    let (one, two) = std::thread::scope(|s| {
        let one = s.spawn(|| run(b"a", b"b"));
        let two = s.spawn(|| run(b"b", b"a"));
        (one.join().unwrap(), two.join().unwrap())
    });
    for (_, waited) in [&one, &two] {
        assert!(*waited < limit / 2, "waited {waited:?}");
    }
    match (one.0, two.0) {
        (Ok(()), Err(Error::Conflict { .. })) | (Err(Error::Conflict { .. }), Ok(())) => {}
        outcomes => panic!("one commit and one conflict expected: {outcomes:?}"),
    }
    assert_eq!(tree.get(b"a").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(tree.get(b"b").unwrap().as_deref(), Some(&b"x"[..]));
    assert_check(&db);
}

fn counter(value: Option<Vec<u8>>) -> i64 {
    i64::from_le_bytes(value.expect("counter exists").try_into().expect("8-byte counter"))
}

#[test]
fn adds_apply_at_the_commit_without_a_conflict_and_refuse_what_is_not_a_counter() {
    let dir = TempDir::with_prefix("txn-add").unwrap();
    let db = Db::open(dir.path(), Options { workers: 0, ..tiny(64) }).unwrap();
    let (a, b) = (db.tree("a").unwrap(), db.tree("b").unwrap());
    a.put(b"total", 100i64.to_le_bytes()).unwrap();

    // Two transactions add to the same counter; neither read it: both commit.
    let (mut one, mut two) = (db.transaction(), db.transaction());
    one.add(&a, b"total", 5).unwrap();
    one.add(&a, b"total", 6).unwrap();
    two.add(&a, b"total", -20).unwrap();
    // An absent key counts as 0 and is created (in a tree whose id follows `a`'s, with the
    // same key: adds of two trees are not mixed up).
    two.add(&b, b"total", 7).unwrap();
    assert_eq!(two.len(), (0, 2), "adds read nothing");
    one.commit().unwrap();
    two.commit().unwrap();
    assert_eq!(counter(a.get(b"total").unwrap()), 91);
    assert_eq!(counter(b.get(b"total").unwrap()), 7);

    // A transaction's read sees its adds over the value read, and is checked as any read.
    let mut reader = db.transaction();
    reader.add(&a, b"total", 1).unwrap();
    assert_eq!(counter(reader.get(&a, b"total").unwrap()), 92);
    let mut other = db.transaction();
    other.add(&a, b"total", 1000).unwrap();
    other.commit().unwrap();
    assert!(matches!(reader.commit(), Err(Error::Conflict { .. })));
    assert_eq!(counter(a.get(b"total").unwrap()), 1091);
    // Over a value the transaction put, an add changes that value.
    let mut txn = db.transaction();
    txn.put(&a, b"fresh", 40i64.to_le_bytes()).unwrap();
    txn.add(&a, b"fresh", 2).unwrap();
    txn.commit().unwrap();
    assert_eq!(counter(a.get(b"fresh").unwrap()), 42);

    // Not a counter, or out of range, at the commit: it fails and writes nothing.
    a.put(b"name", b"not a number").unwrap();
    let mut txn = db.transaction();
    txn.put(&b, b"other", b"written with it").unwrap();
    txn.add(&a, b"name", 1).unwrap();
    match txn.commit() {
        Err(Error::BadCounter { tree, key, reason }) => {
            assert_eq!((tree.as_str(), key.as_slice()), ("a", &b"name"[..]));
            assert!(reason.contains("12 bytes"), "{reason}");
        }
        other => panic!("a commit adding to a 12-byte value: {other:?}"),
    }
    assert_eq!(b.get(b"other").unwrap(), None, "the failed commit wrote nothing");
    a.put(b"big", (i64::MAX - 1).to_le_bytes()).unwrap();
    let mut txn = db.transaction();
    // Two adds whose sum is out of range stay two (the counter's sum is in range).
    txn.add(&a, b"big", i64::MAX).unwrap();
    txn.add(&a, b"big", -i64::MAX).unwrap();
    txn.commit().unwrap();
    assert_eq!(counter(a.get(b"big").unwrap()), i64::MAX - 1);
    let mut txn = db.transaction();
    txn.add(&a, b"big", 2).unwrap();
    let Err(Error::BadCounter { reason, .. }) = txn.commit() else { panic!("an overflow") };
    assert!(reason.contains("out of a counter's range"), "{reason}");
    assert_eq!(counter(a.get(b"big").unwrap()), i64::MAX - 1);
    // Adds and in-place edits of one key in one transaction are refused where given.
    let mut txn = db.transaction();
    txn.add(&a, b"total", 1).unwrap();
    assert!(matches!(txn.write_at(&a, b"total", 0, b"x"), Err(Error::NotSupported { .. })));
    assert!(matches!(txn.truncate(&a, b"total", 0), Err(Error::NotSupported { .. })));
    assert!(matches!(txn.add(&a, b"", 1), Err(Error::KeyEmpty)));
    txn.commit().unwrap();
    assert_eq!(counter(a.get(b"total").unwrap()), 1092);
    assert_check(&db);

    // The sums are logged like any write: they survive a reopen.
    drop(db);
    let db = Db::open(dir.path(), Options { workers: 0, ..tiny(64) }).unwrap();
    assert_eq!(counter(db.tree("a").unwrap().get(b"total").unwrap()), 1092);
    assert_eq!(counter(db.tree("b").unwrap().get(b"total").unwrap()), 7);
}

#[test]
fn tasks_adding_to_one_counter_never_conflict_and_lose_no_add() {
    let dir = TempDir::with_prefix("txn-add-tasks").unwrap();
    let options = Options { workers: 2, durability: Durability::Sync, ..tiny(64) };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let tree = db.tree("counters").unwrap();
    const TASKS: i64 = 40;
    const EACH: i64 = 25;
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (task_db, tree) = (Arc::clone(&db), tree.clone());
            db.spawn(async move {
                for i in 0..EACH {
                    let mut txn = task_db.transaction();
                    txn.add(&tree, b"sum", t * EACH + i).unwrap();
                    txn.put(&tree, format!("task-{t}"), i.to_le_bytes()).unwrap();
                    // Other tasks of this worker commit their adds here.
                    ferrite::sched::yield_now().await;
                    txn.commit_async().await.expect("adds do not conflict");
                }
            })
            .unwrap()
        })
        .collect();
    tasks.into_iter().for_each(|t| t.wait());
    let n = TASKS * EACH;
    assert_eq!(counter(tree.get(b"sum").unwrap()), n * (n - 1) / 2);
    assert_check(&db);
}

#[test]
fn transfers_survive_crashes_whole_or_not_at_all() {
    const ACCOUNTS: u64 = 40;
    const START: u64 = 500;
    let (mut replayed, mut lost) = (0, 0);
    for seed in seeds(20) {
        let disk = SimDisk::new(seed);
        let dir = TempDir::with_prefix("txn-crash").unwrap();
        let mut rng = Rng::new(seed);
        // The balances after every commit since the last acknowledged one; the first is
        // acknowledged (durable), the rest may or may not have reached the log.
        let mut states: Vec<Vec<u64>> = vec![vec![START; ACCOUNTS as usize]];
        for cycle in 0..4 {
            let db = Db::open(dir.path(), sim_options(&disk)).unwrap();
            replayed += db.recovery_report().records;
            let tree = db.tree("accounts").unwrap();
            if cycle == 0 {
                for i in 0..ACCOUNTS {
                    tree.put(account(i), START.to_le_bytes()).unwrap();
                }
            }
            let found: Vec<u64> =
                (0..ACCOUNTS).map(|i| balance(tree.get(account(i)).unwrap())).collect();
            assert!(
                states.contains(&found),
                "seed {seed} cycle {cycle}: recovered balances are no committed state"
            );
            assert_eq!(found.iter().sum::<u64>(), ACCOUNTS * START);
            lost += usize::from(Some(&found) != states.last());
            assert_check(&db);
            states = vec![found];
            for _ in 0..rng.below(60) {
                let (from, to) = (rng.below(ACCOUNTS), rng.below(ACCOUNTS));
                let mut current = states.last().unwrap().clone();
                let mut txn = db.transaction();
                let from_balance = balance(txn.get(&tree, account(from)).unwrap());
                let amount = rng.below(from_balance + 1);
                let to_balance = balance(txn.get(&tree, account(to)).unwrap());
                if from == to {
                    continue;
                }
                txn.put(&tree, account(from), (from_balance - amount).to_le_bytes()).unwrap();
                txn.put(&tree, account(to), (to_balance + amount).to_le_bytes()).unwrap();
                let sync = rng.below(3) == 0;
                txn.durability(if sync { Durability::Sync } else { Durability::None });
                txn.commit().unwrap();
                current[from as usize] -= amount;
                current[to as usize] += amount;
                if sync {
                    states.clear();
                }
                states.push(current);
            }
            disk.crash();
            db.abandon();
        }
    }
    assert!(replayed > 0, "no recovery replayed anything: the crashes tested nothing");
    assert!(lost > 0, "no crash lost an unacknowledged commit: the crashes tested nothing");
}
