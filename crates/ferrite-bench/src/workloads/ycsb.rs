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
//!
//! The run side: `StreamOps` runs a stream on the runner (`crate::runner`), through a
//! blocking store from threads or through Ferrite's task API (`start_tasks`), checking every
//! value it reads and counting each kind of operation (`OpCounts`).

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use ferrite::{Db, Tree};
use serde::Serialize;

use crate::error::BenchError;
use crate::gen::keys::{key, KEY_LEN, VALUE_LEN};
use crate::gen::rng::{mix64, Rng};
use crate::gen::zipf::{KeyChooser, Zipf, YCSB_THETA};
use crate::runner::{self, AsyncOps, BlockingOps, Ops, Pacing, Running};
use crate::stores::KvStore;
use crate::workloads::fill::random_fill_key;
use crate::workloads::run::RunConfig;

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
        Self::with_theta(workload, distribution, YCSB_THETA, records, seed, index)
    }

    /// [`OpStream::new`] with zipfian constant `theta` for zipfian key choices.
    pub fn with_theta(
        workload: Workload,
        distribution: Distribution,
        theta: f64,
        records: u64,
        seed: u64,
        index: u64,
    ) -> Self {
        let n = records.max(1);
        let chooser = match (workload, distribution) {
            (Workload::Ycsb('d'), _) => KeyChooser::Latest(Zipf::new(n, theta)),
            (_, Distribution::Uniform) => KeyChooser::Uniform,
            (_, Distribution::Zipfian) => KeyChooser::Zipfian(Zipf::scrambled(n, theta)),
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

/// Counts of each kind of operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OpCounts {
    pub reads: u64,
    pub updates: u64,
    pub inserts: u64,
    pub scans: u64,
    pub rmws: u64,
    /// Reads of keys whose insert had not completed yet (not errors).
    pub not_found: u64,
    /// Entries visited by scans.
    pub scanned: u64,
}

impl OpCounts {
    pub fn total(&self) -> u64 {
        self.reads + self.updates + self.inserts + self.scans + self.rmws
    }
}

impl std::ops::AddAssign for OpCounts {
    fn add_assign(&mut self, o: OpCounts) {
        self.reads += o.reads;
        self.updates += o.updates;
        self.inserts += o.inserts;
        self.scans += o.scans;
        self.rmws += o.rmws;
        self.not_found += o.not_found;
        self.scanned += o.scanned;
    }
}

/// The error of a value that fails its check.
pub fn verify(reason: String) -> BenchError {
    BenchError::Store(format!("verification failed: {reason}").into())
}

/// Checks what a read of key `i` found (in `buf`, if `found`): the version of a whole value;
/// 0 for a key not inserted yet (counted in `not_found`). A loaded key that is missing, or a
/// value that is not the key's, is an error.
pub fn check_read(
    i: u64,
    found: bool,
    buf: &[u8],
    keys: &KeySpace,
    counts: &mut OpCounts,
) -> Result<u64, BenchError> {
    if found {
        return check_versioned(i, buf).map_err(verify);
    }
    if i < keys.loaded() {
        return Err(verify(format!("key {i} is missing")));
    }
    counts.not_found += 1;
    Ok(0)
}

/// Checks an entry a scan visited.
pub fn check_scanned(k: &[u8], v: &[u8]) -> Result<(), String> {
    let i =
        u64::from_be_bytes(k.try_into().map_err(|_| format!("a scan met a foreign key {k:?}"))?);
    check_versioned(i, v).map(|_| ())
}

/// One thread's or task's operation stream on a store `S`: a blocking store (`&dyn KvStore`)
/// on threads, or a Ferrite `Tree` as a task. Operations are checked and counted as they
/// run (`execute`), so `verify` only passes their verdict on.
#[derive(Debug)]
pub struct StreamOps<S> {
    store: S,
    stream: OpStream,
    keys: Arc<KeySpace>,
    /// Inserts past `keys.loaded() + fill_limit` end the stream (a fill done).
    fill_limit: u64,
    buf: Vec<u8>,
    counts: OpCounts,
}

impl<S> StreamOps<S> {
    /// Stream `index` (from 1) of `config`'s workload, forked from `template`.
    pub fn new(
        store: S,
        config: &RunConfig,
        template: &OpStream,
        index: u64,
        keys: Arc<KeySpace>,
    ) -> Self {
        let fill_limit = if config.workload.needs_data() { u64::MAX } else { config.records };
        StreamOps {
            store,
            stream: template.fork(config.seed, index),
            keys,
            fill_limit,
            buf: Vec::with_capacity(256),
            counts: OpCounts::default(),
        }
    }
}

impl<S> Ops for StreamOps<S> {
    type Op = Op;
    type Outcome = Result<(), BenchError>;
    type Counts = OpCounts;

    fn next_op(&mut self) -> Option<Op> {
        let op = self.stream.next(&self.keys);
        match op {
            Op::Insert(i) if i >= self.keys.loaded().saturating_add(self.fill_limit) => None,
            op => Some(op),
        }
    }

    fn verify(&mut self, _op: Op, outcome: Result<(), BenchError>) -> Result<(), BenchError> {
        outcome
    }

    fn start_measuring(&mut self) {
        self.counts = OpCounts::default();
    }

    fn counts(&self) -> OpCounts {
        self.counts
    }
}

impl BlockingOps for StreamOps<&dyn KvStore> {
    fn execute(&mut self, op: Op) -> Result<(), BenchError> {
        let StreamOps { store, stream, keys, buf, counts, .. } = self;
        run_op(*store, op, stream, keys, buf, counts)
    }
}

impl AsyncOps for StreamOps<Tree> {
    fn execute(
        &mut self,
        op: Op,
    ) -> impl std::future::Future<Output = Result<(), BenchError>> + Send + '_ {
        let StreamOps { store, stream, keys, buf, counts, .. } = self;
        run_op_async(store, op, stream, keys, buf, counts)
    }
}

/// Runs one operation on a blocking store, checking what it reads.
pub fn run_op(
    store: &dyn KvStore,
    op: Op,
    stream: &mut OpStream,
    keys: &KeySpace,
    buf: &mut Vec<u8>,
    counts: &mut OpCounts,
) -> Result<(), BenchError> {
    let store_err = BenchError::Store;
    match op {
        Op::Read(i) => {
            counts.reads += 1;
            let found = store.get_into(&key(i), buf).map_err(store_err)?;
            check_read(i, found, buf, keys, counts)?;
        }
        Op::Update(i) => {
            counts.updates += 1;
            let version = stream.version();
            store.put(&key(i), &versioned_value(i, version)).map_err(store_err)?;
        }
        Op::Insert(i) => {
            counts.inserts += 1;
            store.put(&key(i), &versioned_value(i, 0)).map_err(store_err)?;
            keys.insert_done();
        }
        Op::Scan(i, len) => {
            counts.scans += 1;
            let mut bad = None;
            let visited = store
                .scan(&key(i), len as usize, &mut |k, v| {
                    if bad.is_none() {
                        bad = check_scanned(k, v).err();
                    }
                })
                .map_err(store_err)?;
            counts.scanned += visited as u64;
            if let Some(reason) = bad {
                return Err(verify(reason));
            }
        }
        Op::ReadModifyWrite(i) => {
            counts.rmws += 1;
            let found = store.get_into(&key(i), buf).map_err(store_err)?;
            let version = check_read(i, found, buf, keys, counts)?;
            store.put(&key(i), &versioned_value(i, version.wrapping_add(1))).map_err(store_err)?;
        }
    }
    Ok(())
}

/// `run_op` through the task API.
pub async fn run_op_async(
    tree: &Tree,
    op: Op,
    stream: &mut OpStream,
    keys: &KeySpace,
    buf: &mut Vec<u8>,
    counts: &mut OpCounts,
) -> Result<(), BenchError> {
    let engine = BenchError::Engine;
    match op {
        Op::Read(i) => {
            counts.reads += 1;
            let found = tree
                .get_with_async(&key(i), |v| {
                    buf.clear();
                    buf.extend_from_slice(v);
                })
                .await
                .map_err(engine)?;
            check_read(i, found.is_some(), buf, keys, counts)?;
        }
        Op::Update(i) => {
            counts.updates += 1;
            let value = versioned_value(i, stream.version());
            tree.put_async(&key(i), &value).await.map_err(engine)?;
        }
        Op::Insert(i) => {
            counts.inserts += 1;
            tree.put_async(&key(i), &versioned_value(i, 0)).await.map_err(engine)?;
            keys.insert_done();
        }
        Op::Scan(i, len) => {
            counts.scans += 1;
            let mut bad = None;
            let visited = tree
                .scan_async(&key(i), len as usize, |k, v| {
                    if bad.is_none() {
                        bad = check_scanned(k, v).err();
                    }
                })
                .await
                .map_err(engine)?;
            counts.scanned += visited as u64;
            if let Some(reason) = bad {
                return Err(verify(reason));
            }
        }
        Op::ReadModifyWrite(i) => {
            counts.rmws += 1;
            let found = tree
                .get_with_async(&key(i), |v| {
                    buf.clear();
                    buf.extend_from_slice(v);
                })
                .await
                .map_err(engine)?;
            let version = check_read(i, found.is_some(), buf, keys, counts)?;
            let value = versioned_value(i, version.wrapping_add(1));
            tree.put_async(&key(i), &value).await.map_err(engine)?;
        }
    }
    Ok(())
}

/// The stream every thread or task of a run forks from (zeta sums are computed once).
pub fn template(config: &RunConfig) -> OpStream {
    OpStream::with_theta(
        config.workload,
        config.distribution,
        config.theta,
        config.records,
        config.seed,
        0,
    )
}

/// How a run paces its operations: closed loop, or open loop at `--rate`.
pub fn pacing(config: &RunConfig, tasks: bool) -> Pacing {
    // Salted, so that the arrivals do not draw the numbers of the operation streams
    // (`Rng::stream(seed, index)`).
    let salt = if tasks { 0xD15B } else { 0xA771 };
    Pacing::new(config.rate, config.seed ^ salt)
}

/// Spawns the run's tasks on `db`'s workers (`config.task_count()` of them), each running its
/// operation stream on `tree` until `phase` says stop (or a fill inserted every key it may);
/// operations count once `phase` is `MEASURE`. Used by the comparison runs and by
/// `recovery` (which owns its `Db`).
pub fn start_tasks(
    db: &Db,
    tree: &Tree,
    config: &RunConfig,
    keys: Arc<KeySpace>,
    phase: Arc<AtomicU8>,
) -> Result<Running<OpCounts>, BenchError> {
    let template = template(config);
    let streams = (0..config.task_count() as u64)
        .map(|index| StreamOps::new(tree.clone(), config, &template, index + 1, Arc::clone(&keys)));
    runner::spawn_tasks(db, streams, pacing(config, true), &phase)
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
