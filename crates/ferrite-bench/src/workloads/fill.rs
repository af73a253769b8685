//! The fills' own parts: the key order of a random fill (a permutation of the key range, so
//! that every key is inserted once), and the read-back that checks a store holds exactly the
//! keys a fill acknowledged, each with its value (`fill-sync`, and the recovery benchmark).
//! The fills themselves run as YCSB-style operation streams (`ycsb.rs`, `Workload::Fill*`).

use crate::error::BenchError;
use crate::gen::keys::KEY_LEN;
use crate::stores::KvStore;
use crate::workloads::ycsb::{check_versioned, verify, KeySpace};

/// The key the `n`th insert of a random-order fill of `count` keys takes (past the loaded
/// ones): a permutation of `0..count`, then of the next `count` keys, and so on.
pub fn random_fill_key(n: u64, count: u64) -> u64 {
    let count = count.max(1);
    crate::gen::zipf::permute(n % count, count) + n / count * count
}

/// Checks that the store holds exactly the keys a random-order fill of `records` keys
/// acknowledged (`keys.inserted()` of them, into an empty store), each with its value: one
/// scan in key order. Returns how many keys it read; the first difference is the error.
pub fn verify_fill(store: &dyn KvStore, keys: &KeySpace, records: u64) -> Result<u64, BenchError> {
    let check = compare_fill(store, keys, records)?;
    match check.first {
        Some(reason) => Err(verify(reason)),
        None => Ok(check.visited),
    }
}

/// What `compare_fill` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FillCheck {
    /// Entries the scan visited.
    pub visited: u64,
    /// Keys acknowledged and found with their value.
    pub matched: u64,
    /// Acknowledged keys that are missing.
    pub missing: u64,
    /// Keys found with a value that is not theirs.
    pub wrong: u64,
    /// Keys found that no insert took (foreign keys included).
    pub unexpected: u64,
    /// The first difference, in words.
    pub first: Option<String>,
}

impl FillCheck {
    /// Every difference: missing, wrong and unexpected keys.
    pub fn mismatches(&self) -> u64 {
        self.missing + self.wrong + self.unexpected
    }
}

/// Compares the store with the keys a random-order fill of `records` keys acknowledged (as
/// `verify_fill`), counting every difference instead of stopping at the first: one scan in
/// key order, merged with the sorted acknowledged keys.
pub fn compare_fill(
    store: &dyn KvStore,
    keys: &KeySpace,
    records: u64,
) -> Result<FillCheck, BenchError> {
    let acknowledged = keys.inserted();
    let mut expected: Vec<u64> =
        (0..acknowledged).map(|n| keys.loaded() + random_fill_key(n, records)).collect();
    expected.sort_unstable();
    let mut next = expected.iter().copied().peekable();
    let mut check = FillCheck::default();
    let note = |first: &mut Option<String>, reason: String| {
        first.get_or_insert(reason);
    };
    let visited = store
        .scan(&[], usize::MAX, &mut |k, v| {
            let Ok(key) = <[u8; KEY_LEN]>::try_from(k) else {
                check.unexpected += 1;
                note(&mut check.first, format!("the store holds a foreign key {k:?}"));
                return;
            };
            let i = u64::from_be_bytes(key);
            while let Some(want) = next.next_if(|&want| want < i) {
                check.missing += 1;
                note(&mut check.first, format!("key {want} was acknowledged but is missing"));
            }
            if next.next_if_eq(&i).is_some() {
                match check_versioned(i, v) {
                    Ok(_) => check.matched += 1,
                    Err(reason) => {
                        check.wrong += 1;
                        note(&mut check.first, reason);
                    }
                }
            } else {
                check.unexpected += 1;
                note(&mut check.first, format!("key {i} is there but was never inserted"));
            }
        })
        .map_err(BenchError::Store)?;
    for want in next {
        check.missing += 1;
        note(&mut check.first, format!("key {want} was acknowledged but is missing"));
    }
    check.visited = visited as u64;
    Ok(check)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::keys::key;
    use crate::stores::mem::MemStore;
    use crate::workloads::ycsb::versioned_value;

    /// The read-back of a sync fill finds a missing key, a key never inserted, a wrong value
    /// and a foreign key; and accepts exactly the keys acknowledged.
    #[test]
    fn a_fill_read_back_finds_every_difference() {
        const RECORDS: u64 = 1000;
        let keys = KeySpace::new(0);
        let store = MemStore::default();
        for n in 0..600 {
            let i = random_fill_key(n, RECORDS);
            store.put(&key(i), &versioned_value(i, 0)).unwrap();
            keys.insert_done();
        }
        assert_eq!(verify_fill(&store, &keys, RECORDS).unwrap(), 600);
        let missing = random_fill_key(17, RECORDS);
        store.remove(&key(missing));
        let e = verify_fill(&store, &keys, RECORDS).unwrap_err().to_string();
        assert!(e.contains(&format!("key {missing} was acknowledged but is missing")), "{e}");
        store.put(&key(missing), &versioned_value(missing, 0)).unwrap();
        let extra = random_fill_key(600, RECORDS);
        store.put(&key(extra), &versioned_value(extra, 0)).unwrap();
        let e = verify_fill(&store, &keys, RECORDS).unwrap_err().to_string();
        assert!(e.contains(&format!("key {extra} is there but was never inserted")), "{e}");
        keys.insert_done();
        assert_eq!(verify_fill(&store, &keys, RECORDS).unwrap(), 601);
        store.put(&key(extra), &versioned_value(extra + 1, 0)).unwrap();
        let e = verify_fill(&store, &keys, RECORDS).unwrap_err().to_string();
        assert!(e.contains("verification failed"), "{e}");
        store.put(&key(extra), &versioned_value(extra, 0)).unwrap();
        store.put(b"k", b"v").unwrap();
        let e = verify_fill(&store, &keys, RECORDS).unwrap_err().to_string();
        assert!(e.contains("foreign key"), "{e}");
    }

    /// The counting comparison behind the recovery benchmark finds every difference, not
    /// only the first.
    #[test]
    fn a_fill_comparison_counts_every_difference() {
        const RECORDS: u64 = 1000;
        let keys = KeySpace::new(0);
        let store = MemStore::default();
        for n in 0..100 {
            let i = random_fill_key(n, RECORDS);
            store.put(&key(i), &versioned_value(i, 0)).unwrap();
            keys.insert_done();
        }
        let clean = compare_fill(&store, &keys, RECORDS).unwrap();
        assert_eq!((clean.visited, clean.matched, clean.mismatches()), (100, 100, 0));
        assert_eq!(clean.first, None);
        for n in [3, 50, 99] {
            store.remove(&key(random_fill_key(n, RECORDS)));
        }
        let wrong = random_fill_key(7, RECORDS);
        store.put(&key(wrong), &versioned_value(wrong + 1, 0)).unwrap();
        for n in [100, 101] {
            let i = random_fill_key(n, RECORDS);
            store.put(&key(i), &versioned_value(i, 0)).unwrap();
        }
        store.put(b"k", b"v").unwrap();
        let check = compare_fill(&store, &keys, RECORDS).unwrap();
        assert_eq!((check.missing, check.wrong, check.unexpected), (3, 1, 3), "{check:?}");
        assert_eq!((check.matched, check.visited, check.mismatches()), (96, 100, 7));
        assert!(check.first.is_some());
        assert!(verify_fill(&store, &keys, RECORDS).is_err());
    }
}
