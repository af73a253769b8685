//! The operations of the comparison workloads: `lookup`, `fill` (sequential or random key
//! order; `fill-sync`: random order, each insert acknowledged only once durable) and YCSB A–F
//! (Cooper et al., SoCC 2010), with YCSB's proportions:
//!
//! | workload | reads | updates | inserts | scans | read-modify-writes | keys          |
//! |----------|-------|---------|---------|-------|--------------------|---------------|
//! | A        | 50 %  | 50 %    |         |       |                    | zipfian/unif. |
//! | B        | 95 %  | 5 %     |         |       |                    | zipfian/unif. |
//! | C        | 100 % |         |         |       |                    | zipfian/unif. |
//! | D        | 95 %  |         | 5 %     |       |                    | latest        |
//! | E        |       |         | 5 %     | 95 %  |                    | zipfian/unif. |
//! | F        | 50 %  |         |         |       | 50 %               | zipfian/unif. |
//!
//! Scans (E) start at a chosen key and read 1 to `MAX_SCAN` entries (uniform). Inserts take
//! the next key after every key loaded or inserted so far.
//!
//! Values are `VALUE_LEN` bytes that name their key and a version, and are otherwise derived
//! from both, so every value read is checked whatever updates ran concurrently:
//!
//! | offset | size | meaning                                           |
//! |--------|------|---------------------------------------------------|
//! | 0      | 8    | key number `i`, big-endian                        |
//! | 8      | 8    | version, little-endian (0 as loaded)              |
//! | 16     | 104  | SplitMix64 stream seeded from `i` and the version |

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::keys::{KEY_LEN, VALUE_LEN};
use crate::rng::{mix64, Rng};
use crate::zipf::{KeyChooser, Zipf, YCSB_THETA};

/// Longest scan of workload E.
pub const MAX_SCAN: u32 = 100;

/// A workload the comparison runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Point lookups of loaded keys, read only.
    Lookup,
    /// Inserts of new keys in key order.
    FillSequential,
    /// Inserts of new keys in random order.
    FillRandom,
    /// Inserts of new keys in random order, each acknowledged only once it is durable (the
    /// store's log synced), from `RunConfig::committers` concurrent committers.
    FillSync,
    /// YCSB workload A..=F (the letter).
    Ycsb(char),
}

impl Workload {
    pub const ALL: [Workload; 10] = [
        Workload::Lookup,
        Workload::FillSequential,
        Workload::FillRandom,
        Workload::FillSync,
        Workload::Ycsb('a'),
        Workload::Ycsb('b'),
        Workload::Ycsb('c'),
        Workload::Ycsb('d'),
        Workload::Ycsb('e'),
        Workload::Ycsb('f'),
    ];

    /// The name in results and on the command line: `lookup`, `fill-seq`, `fill-random`,
    /// `fill-sync`, `ycsb-a` .. `ycsb-f`.
    pub fn name(self) -> String {
        match self {
            Workload::Lookup => "lookup".into(),
            Workload::FillSequential => "fill-seq".into(),
            Workload::FillRandom => "fill-random".into(),
            Workload::FillSync => "fill-sync".into(),
            Workload::Ycsb(letter) => format!("ycsb-{letter}"),
        }
    }

    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// Whether the workload writes (loads then run with the store's write path).
    pub fn writes(self) -> bool {
        !matches!(self, Workload::Lookup | Workload::Ycsb('c'))
    }

    /// Whether the workload runs over a loaded data set (fills start empty).
    pub fn needs_data(self) -> bool {
        !matches!(self, Workload::FillSequential | Workload::FillRandom | Workload::FillSync)
    }

    /// Whether each write is acknowledged only once durable: the store opens with its log on
    /// and synced per commit (Ferrite `Durability::Sync`). Every other workload runs with
    /// the logs off (Ferrite `Durability::None`), on every store alike.
    pub fn durable(self) -> bool {
        self == Workload::FillSync
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// How keys are chosen for reads, updates, scans and read-modify-writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    Uniform,
    Zipfian,
}

impl Distribution {
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipfian => "zipfian",
        }
    }
    pub fn from_name(name: &str) -> Option<Distribution> {
        [Distribution::Uniform, Distribution::Zipfian].into_iter().find(|d| d.name() == name)
    }
}

/// One operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read(u64),
    /// Overwrite key `i` with a new version.
    Update(u64),
    /// Insert key `i` (never present before).
    Insert(u64),
    /// Read `len` entries from key `i` on.
    Scan(u64, u32),
    /// Read key `i`, then write it back with the next version.
    ReadModifyWrite(u64),
}

/// Percentages of each kind of operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    pub read: u32,
    pub update: u32,
    pub insert: u32,
    pub scan: u32,
    pub rmw: u32,
}

impl Mix {
    pub fn of(workload: Workload) -> Mix {
        let m = |read, update, insert, scan, rmw| Mix { read, update, insert, scan, rmw };
        match workload {
            Workload::Lookup => m(100, 0, 0, 0, 0),
            Workload::FillSequential | Workload::FillRandom | Workload::FillSync => {
                m(0, 0, 100, 0, 0)
            }
            Workload::Ycsb('a') => m(50, 50, 0, 0, 0),
            Workload::Ycsb('b') => m(95, 5, 0, 0, 0),
            Workload::Ycsb('c') => m(100, 0, 0, 0, 0),
            Workload::Ycsb('d') => m(95, 0, 5, 0, 0),
            Workload::Ycsb('e') => m(0, 0, 5, 95, 0),
            Workload::Ycsb('f') => m(50, 0, 0, 0, 50),
            Workload::Ycsb(other) => panic!("no YCSB workload {other}"),
        }
    }
}

/// The key space shared by every thread or task of a run: how many keys were loaded, the
/// next key to insert, and how many inserts have completed.
#[derive(Debug)]
pub struct KeySpace {
    loaded: u64,
    next_insert: AtomicU64,
    inserted: AtomicU64,
}

impl KeySpace {
    /// Keys `0..loaded` exist; inserts take `loaded`, `loaded + 1`, ...
    pub fn new(loaded: u64) -> Self {
        KeySpace { loaded, next_insert: AtomicU64::new(loaded), inserted: AtomicU64::new(0) }
    }
    pub fn loaded(&self) -> u64 {
        self.loaded
    }
    /// Keys that may be read: every loaded key and about as many inserted ones as completed
    /// (an insert still in flight may make a read of a key near the end miss: such misses are
    /// counted, not errors).
    pub fn readable(&self) -> u64 {
        self.loaded + self.inserted.load(Ordering::Relaxed)
    }
    /// Inserts that completed.
    pub fn inserted(&self) -> u64 {
        self.inserted.load(Ordering::Relaxed)
    }
    fn take_insert(&self) -> u64 {
        self.next_insert.fetch_add(1, Ordering::Relaxed)
    }
    /// Records a completed insert.
    pub fn insert_done(&self) {
        self.inserted.fetch_add(1, Ordering::Relaxed);
    }
}

/// The operation stream of one thread or task.
#[derive(Debug, Clone)]
pub struct OpStream {
    workload: Workload,
    mix: Mix,
    chooser: KeyChooser,
    rng: Rng,
    /// Fill-random: the keys of a fill are a permutation of `0..fill_count`.
    fill_count: u64,
}

impl OpStream {
    /// Stream `index` of a run with this seed; `records` is the loaded key count (or, for
    /// fills, how many keys the fill may insert), `distribution` how keys are chosen.
    pub fn new(
        workload: Workload,
        distribution: Distribution,
        records: u64,
        seed: u64,
        index: u64,
    ) -> Self {
        let n = records.max(1);
        let chooser = match (workload, distribution) {
            (Workload::Ycsb('d'), _) => KeyChooser::Latest(Zipf::new(n, YCSB_THETA)),
            (_, Distribution::Uniform) => KeyChooser::Uniform,
            (_, Distribution::Zipfian) => KeyChooser::Zipfian(Zipf::scrambled(n, YCSB_THETA)),
        };
        OpStream {
            workload,
            mix: Mix::of(workload),
            chooser,
            rng: Rng::stream(seed, index),
            fill_count: n,
        }
    }

    /// A stream sharing `other`'s precomputed distribution (zeta sums take a while for big
    /// key counts), with its own generator.
    pub fn fork(&self, seed: u64, index: u64) -> Self {
        OpStream { rng: Rng::stream(seed, index), ..self.clone() }
    }

    pub fn next(&mut self, keys: &KeySpace) -> Op {
        match self.workload {
            Workload::FillSequential => return Op::Insert(keys.take_insert()),
            Workload::FillRandom | Workload::FillSync => {
                let n = keys.take_insert() - keys.loaded();
                return Op::Insert(keys.loaded() + random_fill_key(n, self.fill_count));
            }
            _ => {}
        }
        let pick = self.rng.below(100) as u32;
        let Mix { read, update, insert, scan, .. } = self.mix;
        if pick < read {
            Op::Read(self.key(keys))
        } else if pick < read + update {
            Op::Update(self.key(keys))
        } else if pick < read + update + insert {
            Op::Insert(keys.take_insert())
        } else if pick < read + update + insert + scan {
            let len = 1 + self.rng.below(u64::from(MAX_SCAN)) as u32;
            Op::Scan(self.key(keys), len)
        } else {
            Op::ReadModifyWrite(self.key(keys))
        }
    }

    fn key(&mut self, keys: &KeySpace) -> u64 {
        self.chooser.choose(&mut self.rng, keys.readable())
    }

    /// A fresh version number for an update (unique enough: any version verifies).
    pub fn version(&mut self) -> u64 {
        self.rng.next_u64() | 1
    }
}

/// The key the `n`th insert of a random-order fill of `count` keys takes (past the loaded
/// ones): a permutation of `0..count`, then of the next `count` keys, and so on.
pub fn random_fill_key(n: u64, count: u64) -> u64 {
    let count = count.max(1);
    crate::zipf::permute(n % count, count) + n / count * count
}

/// The value of key `i` at `version`.
pub fn versioned_value(i: u64, version: u64) -> [u8; VALUE_LEN] {
    let mut out = [0u8; VALUE_LEN];
    out[..KEY_LEN].copy_from_slice(&i.to_be_bytes());
    out[KEY_LEN..16].copy_from_slice(&version.to_le_bytes());
    let mut rng = Rng::new(mix64(i ^ VERSION_SALT) ^ version);
    for word in out[16..].chunks_exact_mut(8) {
        word.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    out
}

const VERSION_SALT: u64 = 0x5EED_0F7C_5BA1_1AD5;

/// Checks that `got` is a value of key `i` at some version; returns the version.
pub fn check_versioned(i: u64, got: &[u8]) -> Result<u64, String> {
    if got.len() != VALUE_LEN {
        return Err(format!("key {i}: the value has {} bytes, not {VALUE_LEN}", got.len()));
    }
    let owner = u64::from_be_bytes(got[..KEY_LEN].try_into().unwrap());
    if owner != i {
        return Err(format!("key {i}: the value names key {owner}"));
    }
    let version = u64::from_le_bytes(got[KEY_LEN..16].try_into().unwrap());
    if got != versioned_value(i, version) {
        return Err(format!("key {i}: the value of version {version} is corrupt"));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(Workload::from_name(&w.name()), Some(w));
        }
        assert_eq!(Workload::from_name("ycsb-g"), None);
        assert_eq!(Distribution::from_name("zipfian"), Some(Distribution::Zipfian));
    }

    #[test]
    fn each_mix_is_what_ycsb_says() {
        for w in Workload::ALL {
            let mix = Mix::of(w);
            assert_eq!(mix.read + mix.update + mix.insert + mix.scan + mix.rmw, 100, "{w}");
        }
        let keys = KeySpace::new(10_000);
        let count = |w: Workload| {
            let mut stream = OpStream::new(w, Distribution::Uniform, 10_000, 1, 0);
            let mut c = [0u32; 5];
            for _ in 0..100_000 {
                let slot = match stream.next(&keys) {
                    Op::Read(_) => 0,
                    Op::Update(_) => 1,
                    Op::Insert(_) => 2,
                    Op::Scan(_, len) => {
                        assert!((1..=MAX_SCAN).contains(&len));
                        3
                    }
                    Op::ReadModifyWrite(_) => 4,
                };
                c[slot] += 1;
            }
            c.map(|n| (f64::from(n) / 1000.0).round() as u32)
        };
        assert_eq!(count(Workload::Ycsb('a')), [50, 50, 0, 0, 0]);
        assert_eq!(count(Workload::Ycsb('b')), [95, 5, 0, 0, 0]);
        assert_eq!(count(Workload::Ycsb('c')), [100, 0, 0, 0, 0]);
        assert_eq!(count(Workload::Ycsb('d')), [95, 0, 5, 0, 0]);
        assert_eq!(count(Workload::Ycsb('e')), [0, 0, 5, 95, 0]);
        assert_eq!(count(Workload::Ycsb('f')), [50, 0, 0, 0, 50]);
    }

    #[test]
    fn inserts_take_new_keys_and_fills_cover_their_range_once() {
        let keys = KeySpace::new(100);
        let mut stream = OpStream::new(Workload::Ycsb('d'), Distribution::Zipfian, 100, 3, 0);
        let mut inserted = Vec::new();
        for _ in 0..2000 {
            match stream.next(&keys) {
                Op::Insert(i) => {
                    inserted.push(i);
                    keys.insert_done();
                }
                Op::Read(i) => assert!(i < keys.readable()),
                other => panic!("{other:?}"),
            }
        }
        assert!(inserted.windows(2).all(|w| w[1] == w[0] + 1) && inserted[0] == 100);
        for w in [Workload::FillSequential, Workload::FillRandom, Workload::FillSync] {
            let keys = KeySpace::new(0);
            let mut stream = OpStream::new(w, Distribution::Uniform, 5000, 9, 0);
            let mut seen: Vec<u64> = (0..5000)
                .map(|_| match stream.next(&keys) {
                    Op::Insert(i) => i,
                    other => panic!("{other:?}"),
                })
                .collect();
            if w != Workload::FillSequential {
                assert_ne!(seen[..10], (0..10).collect::<Vec<_>>()[..], "random order");
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..5000).collect::<Vec<_>>(), "{w}: every key once");
        }
    }

    #[test]
    fn streams_replay_from_their_seed() {
        let keys = KeySpace::new(1000);
        let ops = |seed, index| {
            let mut s =
                OpStream::new(Workload::Ycsb('a'), Distribution::Zipfian, 1000, seed, index);
            (0..200).map(|_| s.next(&keys)).collect::<Vec<_>>()
        };
        assert_eq!(ops(4, 1), ops(4, 1));
        assert_ne!(ops(4, 1), ops(4, 2));
        assert_ne!(ops(4, 1), ops(5, 1));
    }

    #[test]
    fn versioned_values_check() {
        let v = versioned_value(42, 7);
        assert_eq!(check_versioned(42, &v), Ok(7));
        assert!(check_versioned(43, &v).unwrap_err().contains("names key 42"));
        let mut bad = v;
        bad[50] ^= 1;
        assert!(check_versioned(42, &bad).unwrap_err().contains("corrupt"));
        assert!(check_versioned(42, &v[..10]).is_err());
    }
}
