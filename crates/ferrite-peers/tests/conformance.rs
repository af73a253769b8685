//! The three peers against a `BTreeMap` model: a seeded random mix of put / put_batch / delete /
//! get / scan with every answer compared, then close, reopen and compare everything; plus the
//! error cases and many threads on one handle. Needs the libraries:
//! `cargo test -p ferrite-peers --features link`.

#![cfg(feature = "link")]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;

use ferrite::testing::Rng;
use ferrite_peers::{Lmdb, Peer, PeerConfig, RocksDb, WiredTiger};

/// Uniform in `low..=high`.
fn range(rng: &mut Rng, low: usize, high: usize) -> usize {
    low + rng.index(high - low + 1)
}

/// Bytes from a small alphabet with the edge bytes (0x00, 0x7f, 0x80, 0xff): many shared
/// prefixes, and signed/unsigned comparison bugs show.
fn edge_bytes(rng: &mut Rng, low: usize, high: usize) -> Vec<u8> {
    const ALPHABET: [u8; 7] = [0x00, 0x01, b'a', b'b', 0x7f, 0x80, 0xff];
    let len = range(rng, low, high);
    (0..len).map(|_| ALPHABET[rng.index(ALPHABET.len())]).collect()
}

/// A fresh directory under the temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(engine: &str, test: &str) -> Self {
        let path = std::env::temp_dir()
            .join(format!("ferrite-peers-{engine}-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn config(log: bool, sync: bool, direct_io: bool) -> PeerConfig {
    PeerConfig {
        cache_bytes: 8 << 20,
        direct_io,
        log,
        sync,
        map_bytes: 256 << 20,
        blob_min_bytes: None,
        tier: None,
        transactions: None,
        memtables_in_cache: false,
    }
}

/// The whole content, through one unbounded scan.
fn contents<P: Peer>(peer: &P) -> Model {
    let mut all = Model::new();
    let count = peer
        .scan(&[], usize::MAX, &mut |key, value| {
            assert!(all.insert(key.to_vec(), value.to_vec()).is_none(), "key visited twice");
        })
        .unwrap();
    assert_eq!(count, all.len(), "{}: scan's count", peer.name());
    all
}

fn assert_same(peer: &impl Peer, model: &Model, when: &str) {
    let actual = contents(peer);
    assert_eq!(actual.len(), model.len(), "{}: entry count {when}", peer.name());
    assert!(actual == *model, "{}: content differs from the model {when}", peer.name());
}

/// The random mix, every answer checked; then close, reopen, compare all.
fn conformance<P: Peer>(engine: &str, seed: u64) {
    let dir = TempDir::new(engine, "conformance");
    let config = config(true, false, false);
    let mut rng = Rng::new(seed);
    let keys: Vec<Vec<u8>> = (0..2000).map(|_| edge_bytes(&mut rng, 1, 40)).collect();
    let mut model = Model::new();
    let mut out = Vec::new();
    {
        let peer = P::open(&dir.0, &config).unwrap();
        assert!(peer.describe_config().starts_with(engine), "{}", peer.describe_config());
        for step in 0..6000 {
            let key = &keys[range(&mut rng, 0, keys.len() - 1)];
            match range(&mut rng, 0, 99) {
                0..=34 => {
                    let value = edge_bytes(&mut rng, 0, 300);
                    peer.put(key, &value).unwrap();
                    model.insert(key.clone(), value);
                }
                35..=44 => {
                    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..range(&mut rng, 1, 20))
                        .map(|_| {
                            (
                                keys[range(&mut rng, 0, keys.len() - 1)].clone(),
                                edge_bytes(&mut rng, 0, 300),
                            )
                        })
                        .collect();
                    let borrowed: Vec<(&[u8], &[u8])> =
                        entries.iter().map(|(k, v)| (&k[..], &v[..])).collect();
                    peer.put_batch(&borrowed).unwrap();
                    model.extend(entries);
                }
                45..=59 => {
                    let existed = peer.delete(key).unwrap();
                    assert_eq!(
                        existed,
                        model.remove(key).is_some(),
                        "{engine} step {step}: delete"
                    );
                }
                60..=84 => {
                    let found = peer.get(key, &mut out).unwrap();
                    let expected = model.get(key);
                    assert_eq!(found, expected.is_some(), "{engine} step {step}: get found");
                    if let Some(value) = expected {
                        assert_eq!(&out, value, "{engine} step {step}: get value");
                    }
                }
                85..=98 => {
                    let start = match range(&mut rng, 0, 3) {
                        0 => Vec::new(),
                        1 => edge_bytes(&mut rng, 1, 40),
                        _ => key.clone(),
                    };
                    let limit = range(&mut rng, 0, 50);
                    let mut seen = Vec::new();
                    let count = peer
                        .scan(&start, limit, &mut |k, v| seen.push((k.to_vec(), v.to_vec())))
                        .unwrap();
                    let expected: Vec<(Vec<u8>, Vec<u8>)> = model
                        .range::<[u8], _>((Bound::Included(&start[..]), Bound::Unbounded))
                        .take(limit)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_eq!(count, seen.len(), "{engine} step {step}: scan count");
                    assert!(
                        seen == expected,
                        "{engine} step {step}: scan from {start:?} limit {limit}"
                    );
                }
                _ => peer.flush().unwrap(),
            }
        }
        assert!(model.len() > 100, "the mix should leave a real table behind");
        assert_same(&peer, &model, "before close");
    }
    let peer = P::open(&dir.0, &config).unwrap();
    assert_same(&peer, &model, "after reopening");
}

/// Writes survive close and reopen without the log (the close or `flush` makes them durable),
/// and with direct I/O and per-write sync.
fn durable_without_log_and_with_sync<P: Peer>(engine: &str) {
    for (name, config) in
        [("nolog", config(false, false, false)), ("sync", config(true, true, true))]
    {
        let dir = TempDir::new(engine, name);
        let mut rng = Rng::new(7);
        let mut model = Model::new();
        {
            let peer = P::open(&dir.0, &config).unwrap();
            for i in 0..200u32 {
                let (key, value) =
                    (format!("key-{i:05}").into_bytes(), edge_bytes(&mut rng, 0, 300));
                peer.put(&key, &value).unwrap();
                model.insert(key, value);
            }
            peer.flush().unwrap();
            let batch: Vec<(Vec<u8>, Vec<u8>)> = (0..100u32)
                .map(|i| (format!("batch-{i:05}").into_bytes(), vec![i as u8; 10]))
                .collect();
            let borrowed: Vec<(&[u8], &[u8])> =
                batch.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            peer.put_batch(&borrowed).unwrap();
            model.extend(batch);
            assert!(peer.delete(b"key-00003").unwrap());
            model.remove(&b"key-00003"[..]);
        }
        let peer = P::open(&dir.0, &config).unwrap();
        assert_same(
            &peer,
            &model,
            &format!("after reopening ({name}: {})", peer.describe_config()),
        );
    }
}

fn missing_keys<P: Peer>(engine: &str) {
    let dir = TempDir::new(engine, "missing");
    let peer = P::open(&dir.0, &config(true, false, false)).unwrap();
    let mut out = b"left alone".to_vec();
    assert!(!peer.get(b"nothing here", &mut out).unwrap());
    assert!(!peer.delete(b"nothing here").unwrap());
    peer.put(b"k", b"").unwrap();
    assert!(peer.get(b"k", &mut out).unwrap(), "an empty value is still a value");
    assert!(out.is_empty());
    assert!(peer.delete(b"k").unwrap());
    assert!(!peer.get(b"k", &mut out).unwrap());
    assert_eq!(peer.scan(b"", 10, &mut |_, _| panic!("the table is empty")).unwrap(), 0);
}

/// Opening a directory that is a regular file fails with an error naming the engine.
fn open_on_a_file_fails<P: Peer>(engine: &str) {
    let dir = TempDir::new(engine, "file");
    std::fs::write(&dir.0, b"not a directory").unwrap();
    let err = P::open(&dir.0, &config(true, false, false)).err().expect("open on a file");
    assert_eq!(err.engine(), engine);
    assert!(err.to_string().starts_with(engine), "{err}");
    let _ = std::fs::remove_file(&dir.0);
}

/// Four threads put, get and scan on one handle at once; each checks its own keys.
fn concurrent<P: Peer>(engine: &str) {
    const THREADS: usize = 4;
    const KEYS_PER_THREAD: usize = 500;
    let dir = TempDir::new(engine, "threads");
    let peer = P::open(&dir.0, &config(true, false, false)).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let peer = &peer;
            scope.spawn(move || {
                let mut rng = Rng::new(thread as u64 + 100);
                let mut out = Vec::new();
                for i in 0..KEYS_PER_THREAD {
                    let key = format!("t{thread}-{i:05}").into_bytes();
                    let value = edge_bytes(&mut rng, 0, 100);
                    peer.put(&key, &value).unwrap();
                    assert!(peer.get(&key, &mut out).unwrap());
                    assert_eq!(out, value);
                    // Others' keys: may or may not be there yet, but never torn.
                    let other =
                        format!("t{}-{:05}", range(&mut rng, 0, THREADS - 1), i).into_bytes();
                    if peer.get(&other, &mut out).unwrap() {
                        assert!(out.len() <= 100);
                    }
                    if i % 50 == 0 {
                        let mut last: Option<Vec<u8>> = None;
                        peer.scan(b"t", 20, &mut |k, _| {
                            if let Some(last) = &last {
                                assert!(last.as_slice() < k, "scan out of order");
                            }
                            last = Some(k.to_vec());
                        })
                        .unwrap();
                        let batch = [(&b"shared"[..], &value[..]), (&key[..], &value[..])];
                        peer.put_batch(&batch).unwrap();
                    }
                }
            });
        }
    });
    let all = contents(&peer);
    assert_eq!(
        all.len(),
        THREADS * KEYS_PER_THREAD + 1,
        "{engine}: every thread's keys and 'shared'"
    );
}

macro_rules! engine_tests {
    ($module:ident, $engine:ty, $name:literal, $seed:literal) => {
        mod $module {
            use super::*;

            #[test]
            fn conformance_against_a_model() {
                conformance::<$engine>($name, $seed);
            }

            #[test]
            fn durable_without_log_and_with_sync() {
                super::durable_without_log_and_with_sync::<$engine>($name);
            }

            #[test]
            fn missing_keys() {
                super::missing_keys::<$engine>($name);
            }

            #[test]
            fn open_on_a_file_fails() {
                super::open_on_a_file_fails::<$engine>($name);
            }

            #[test]
            fn concurrent_threads_on_one_handle() {
                concurrent::<$engine>($name);
            }
        }
    };
}

engine_tests!(rocksdb, RocksDb, "rocksdb", 1);
engine_tests!(wiredtiger, WiredTiger, "wiredtiger", 2);
engine_tests!(lmdb, Lmdb, "lmdb", 3);

/// RocksDB and WiredTiger cannot sync a log they do not write: refused at open, naming why.
#[test]
fn sync_without_log_is_refused() {
    let dir = TempDir::new("all", "sync-nolog");
    let bad = config(false, true, false);
    for err in [RocksDb::open(&dir.0, &bad).err(), WiredTiger::open(&dir.0, &bad).err()] {
        let err = err.expect("sync without log");
        assert!(err.to_string().contains("sync needs the write-ahead log"), "{err}");
    }
}

/// RocksDB says what it holds: writes sit in its memtables until a flush moves them into
/// table files, after which reads fill the block cache. The others do not say.
#[test]
fn rocksdb_reports_its_memtables_and_block_cache() {
    let dir = TempDir::new("rocksdb", "memory");
    let db = RocksDb::open(&dir.0, &config(true, false, false)).unwrap();
    let empty = db.memory().expect("RocksDB answers");
    let value = [7u8; 100];
    for i in 0u32..20_000 {
        db.put(&i.to_be_bytes(), &value).unwrap();
    }
    let written = db.memory().unwrap();
    // 20,000 entries of 104 bytes: at least 2 MB in the memtable.
    assert!(written.write_buffers >= empty.write_buffers + 2_000_000, "{empty:?} {written:?}");
    db.flush().unwrap();
    let mut out = Vec::new();
    for i in (0u32..20_000).step_by(97) {
        assert!(db.get(&i.to_be_bytes(), &mut out).unwrap());
    }
    let read = db.memory().unwrap();
    assert!(read.write_buffers < written.write_buffers, "flushed: {written:?} {read:?}");
    assert!(read.cache > 0, "blocks read are cached: {read:?}");

    let wt_dir = TempDir::new("wiredtiger", "memory");
    let wt = WiredTiger::open(&wt_dir.0, &config(true, false, false)).unwrap();
    assert_eq!(Peer::memory(&wt), None);
}

/// RocksDB is configured as its tuning guide says for data much larger than the cache, and
/// the OPTIONS file it writes at open (RocksDB's own record of what it applied) agrees:
/// partitioned index and filters, top levels pinned, index and filter blocks in the cache's
/// high-priority pool, every table file kept open.
#[test]
fn rocksdb_applies_the_partitioned_index_options() {
    let dir = TempDir::new("rocksdb", "options");
    let db = RocksDb::open(&dir.0, &config(false, false, false)).unwrap();
    let description = db.describe_config();
    let options = std::fs::read_dir(&dir.0)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("OPTIONS-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .last()
        .expect("RocksDB writes an OPTIONS file at open");
    for (option, value) in [
        ("index_type", "kTwoLevelIndexSearch"),
        ("partition_filters", "true"),
        ("metadata_block_size", "4096"),
        ("block_size", "4096"),
        ("cache_index_and_filter_blocks", "true"),
        ("cache_index_and_filter_blocks_with_high_priority", "true"),
        ("pin_top_level_index_and_filter", "true"),
        ("pin_l0_filter_and_index_blocks_in_cache", "true"),
        ("max_open_files", "-1"),
    ] {
        let line = format!("{option}={value}");
        assert!(options.lines().any(|l| l.trim() == line), "OPTIONS file lacks {line}:\n{options}");
        assert!(description.contains(&line), "description lacks {line}: {description}");
    }
    assert!(options.lines().any(|l| l.trim() == "compression=kNoCompression"), "{options}");
    assert!(description.contains("high_pri_pool_ratio=0.5"), "{description}");
}

/// WiredTiger's eviction is passed explicitly (its "Cache and eviction tuning" settings), and
/// the open accepts it: `wiredtiger_open` refuses an unknown key or a value out of range, so a
/// typo in the settings fails here instead of quietly running on the defaults. Every setting
/// appears in the description each run prints.
#[test]
fn wiredtiger_opens_with_its_eviction_settings_printed() {
    let dir = TempDir::new("wiredtiger", "eviction");
    let wt = WiredTiger::open(&dir.0, &config(false, false, false)).unwrap();
    let description = Peer::describe_config(&wt);
    for setting in [
        "cache_size=",
        "eviction=(threads_min=1,threads_max=8)",
        "eviction_target=80",
        "eviction_trigger=95",
        "eviction_dirty_target=5",
        "eviction_dirty_trigger=20",
    ] {
        assert!(description.contains(setting), "description lacks {setting}: {description}");
    }
}
