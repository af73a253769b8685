//! One conformance test for every store behind `KvStore`: a seeded mix of puts, batches,
//! gets and scans over keys of varied length, every answer compared with a `BTreeMap`
//! model. Ferrite and the in-memory test store run it in the unit tests; the peers run it
//! in the `peers` feature's tests.

use std::collections::BTreeMap;

use super::KvStore;
use crate::gen::rng::Rng;

/// Runs `ops` operations from `seed` on `store` (which must start empty) and panics, naming
/// the operation, at the first answer that differs from the model's.
pub fn check_store(store: &dyn KvStore, seed: u64, ops: usize) {
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = Rng::new(seed);
    let mut buf = Vec::new();
    let random_key = |rng: &mut Rng| {
        // A small key space, so that gets and overwrites hit existing keys often.
        let len = 1 + rng.below(24) as usize;
        let id = rng.below(3000);
        let mut key = format!("k{id:05}").into_bytes();
        key.resize(len.max(key.len()), b'.');
        key
    };
    for step in 0..ops {
        match rng.below(10) {
            0..=3 => {
                let key = random_key(&mut rng);
                let value = vec![rng.below(256) as u8; rng.below(300) as usize];
                store.put(&key, &value).unwrap_or_else(|e| panic!("step {step}: put: {e}"));
                model.insert(key, value);
            }
            4 => {
                let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..1 + rng.below(20))
                    .map(|_| {
                        (random_key(&mut rng), vec![rng.below(256) as u8; rng.below(64) as usize])
                    })
                    .collect();
                let refs: Vec<(&[u8], &[u8])> =
                    entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
                store.put_batch(&refs).unwrap_or_else(|e| panic!("step {step}: batch: {e}"));
                model.extend(entries);
            }
            5..=7 => {
                let key = random_key(&mut rng);
                let found = store
                    .get_into(&key, &mut buf)
                    .unwrap_or_else(|e| panic!("step {step}: get: {e}"));
                match model.get(&key) {
                    Some(value) => {
                        assert!(found, "step {step}: {key:?} not found");
                        assert_eq!(&buf, value, "step {step}: value of {key:?}");
                    }
                    None => assert!(!found, "step {step}: {key:?} found but never written"),
                }
            }
            _ => {
                let start = random_key(&mut rng);
                let limit = rng.below(50) as usize;
                let mut got = Vec::new();
                let n = store
                    .scan(&start, limit, &mut |k, v| got.push((k.to_vec(), v.to_vec())))
                    .unwrap_or_else(|e| panic!("step {step}: scan: {e}"));
                let expected: Vec<_> = model
                    .range(start.clone()..)
                    .take(limit)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(n, got.len(), "step {step}: scan count");
                assert_eq!(got, expected, "step {step}: scan from {start:?}, {limit} entries");
            }
        }
    }
    let mut all = Vec::new();
    store.scan(b"", usize::MAX, &mut |k, v| all.push((k.to_vec(), v.to_vec()))).unwrap();
    let expected: Vec<_> = model.into_iter().collect();
    assert_eq!(all, expected, "the whole content at the end");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::mem::MemStore;

    #[test]
    fn the_model_store_conforms() {
        check_store(&MemStore::default(), 1, 5000);
    }
}
