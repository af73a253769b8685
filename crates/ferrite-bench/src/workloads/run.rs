//! One comparison workload on one store (`ferrite bench lookup|fill-seq|fill-random|fill-sync|
//! ycsb-a..f --store S`), the same for every store. It loads the data set (or reuses one kept
//! by an earlier run), measures the device's random-read ceiling, runs the operation streams
//! of `ycsb.rs` on the runner (`crate::runner`) closed loop (as fast as they go) or open loop
//! (a target rate of Poisson arrivals, latency counted from each operation's scheduled
//! arrival, so that queueing counts), and reports operations per second, HdrHistogram
//! latency percentiles, CPU per operation, device reads, writes and cache flushes per
//! operation and KiB per device read (from `/proc/diskstats`; the summary warns when a store
//! reads more than two 4 KiB blocks per device read on a point workload), bytes on disk and
//! load time.
//!
//! Peers run on `threads` OS threads through their blocking APIs. Ferrite runs as
//! `workers × tasks` tasks on its own workers (its task API); `--direct-api` runs it on
//! threads through the blocking API instead, like a peer.
//!
//! `fill-sync` is the durable write: `committers` concurrent committers (threads, or
//! Ferrite's tasks spread round robin over its workers) each insert a new key and wait until
//! it is durable before the next, into a store opened with its log on and synced per commit.
//! It ends when `records` keys are in or `seconds` are up; then the store is closed, opened
//! again, and every acknowledged key is read back (outside the measurement). Every other
//! workload runs with the logs off (Ferrite `Durability::None`) on every store.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::BenchError;
use crate::gen::rng::Rng;
use crate::measure::cpu::CpuTime;
use crate::measure::diskcap::{DiskCap, IopsCap};
use crate::measure::diskstats::{Disk, DiskCounters};
use crate::measure::phase::{wait, MEASURE, STOP, WARMUP};
use crate::measure::progress::Progress;
use crate::report::{self, ResultLine};
use crate::runner::{self, Hdr};
use crate::stores::{
    DrainCounters, KvStore, LogCounters, OpenStore, StoreKind, StoreMemory, TierCounters,
    WorkerTimes,
};
use crate::workloads::fill::verify_fill;
use crate::workloads::ycsb::{
    self, versioned_value, Distribution, KeySpace, OpCounts, StreamOps, Workload,
};

/// Everything a run is told.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    pub workload: Workload,
    pub store: StoreKind,
    /// The store's data directory; fills use `<dir>-fill`, emptied before each fill.
    pub dir: PathBuf,
    /// Keys loaded before the run (for fills: keys the fill inserts at most).
    pub records: u64,
    /// Cache (Ferrite's pool, RocksDB's block cache, WiredTiger's cache), MiB.
    pub cache_mib: u64,
    /// Ferrite's change buffer, MiB out of `cache_mib` (`Options::change_buffer_bytes`);
    /// `None`: the engine's default (a quarter of the pool, at most 128 MiB).
    pub change_buffer_mib: Option<u64>,
    pub seconds: f64,
    /// Threads of the peers (and of Ferrite with `direct_api`).
    pub threads: usize,
    pub workers: usize,
    pub tasks: usize,
    /// `fill-sync` only: concurrent committers (threads, or Ferrite's tasks spread over its
    /// `workers`), replacing `threads` and `workers × tasks`.
    pub committers: usize,
    pub direct_api: bool,
    pub distribution: Distribution,
    /// Open loop: total operations per second to offer; `None`: closed loop.
    pub rate: Option<f64>,
    pub seed: u64,
    pub keep: bool,
    pub direct_io: bool,
    /// Measure the device's random-read ceiling before the run.
    pub ceiling: bool,
    /// Append one JSON object per run to this file.
    pub json: Option<PathBuf>,
    /// The zipfian constant of zipfian key choices (0.99, YCSB's, by default).
    pub theta: f64,
    /// Ferrite and RocksDB: a second cache tier between the cache and the disk.
    pub tier: Option<TierConfig>,
    /// Requests per second the data's disk takes from the run (a cloud volume's cap; the
    /// block cgroup's throttle, `measure::diskcap`); unset sides are uncapped.
    pub disk_cap: IopsCap,
}

/// A second cache tier: Ferrite's (`Options::tier`), or RocksDB's (`PeerConfig::tier`, of
/// the kind `rocksdb` says; `latency_ns` and `admission` are Ferrite's only).
#[derive(Debug, Clone, PartialEq)]
pub struct TierConfig {
    /// The file it lives in (a file in `/dev/shm` for a medium faster than the disk);
    /// RocksDB's persistent cache: the directory its files go in, made for the run and
    /// removed after it if it was not there; RocksDB's secondary cache: unused.
    pub path: PathBuf,
    pub mib: u64,
    /// Added to every access of the medium (0: the medium as it is): spinning on a mapped
    /// medium, a held completion on a block one.
    pub latency_ns: u64,
    pub admission: ferrite::TierAdmission,
    /// Whether a page must have been looked up more often than the copy it pushes out.
    pub filter: ferrite::TierFilter,
    /// Mapped (copied with loads and stores) or block (read and written through the
    /// workers' rings).
    pub medium: ferrite::TierMedium,
    /// Which of RocksDB's tiers a RocksDB run uses (ignored by Ferrite).
    pub rocksdb: RocksDbTier,
}

/// RocksDB's second cache tiers (`--rocksdb-tier`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RocksDbTier {
    /// Its secondary cache, a `CompressedSecondaryCache` in the process's memory: the default,
    /// as the tier RocksDB's documentation gives for DRAM (its wiki marks the persistent read
    /// cache "to be deprecated"), and the one on the same medium as Ferrite's tier in
    /// `/dev/shm`.
    #[default]
    Secondary,
    /// Its persistent read cache (`NewPersistentCache`), in files of the directory
    /// `TierConfig::path`.
    Persistent,
}

impl RocksDbTier {
    pub const ALL: [RocksDbTier; 2] = [RocksDbTier::Secondary, RocksDbTier::Persistent];

    /// `secondary` or `persistent`.
    pub fn name(self) -> &'static str {
        match self {
            RocksDbTier::Secondary => "secondary",
            RocksDbTier::Persistent => "persistent",
        }
    }

    pub fn from_name(name: &str) -> Option<RocksDbTier> {
        RocksDbTier::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl TierConfig {
    /// The engine's options for this tier.
    pub fn options(&self) -> ferrite::TierOptions {
        ferrite::TierOptions {
            path: self.path.clone(),
            bytes: self.mib << 20,
            latency: Duration::from_nanos(self.latency_ns),
            admission: self.admission,
            medium: self.medium,
            filter: self.filter,
        }
    }

    /// The admission policy's name: `all`, `obp` or `never`.
    pub fn admission_name(&self) -> &'static str {
        match self.admission {
            ferrite::TierAdmission::All => "all",
            ferrite::TierAdmission::Obp { .. } => "obp",
            ferrite::TierAdmission::Never => "never",
        }
    }

    /// In words, for the run's heading on `store`.
    pub fn describe(&self, store: StoreKind) -> String {
        if store == StoreKind::RocksDb {
            let (what, place) = match self.rocksdb {
                RocksDbTier::Secondary => {
                    ("secondary cache (CompressedSecondaryCache)", "in memory".to_owned())
                }
                RocksDbTier::Persistent => {
                    ("persistent cache", format!("in files of {}", self.path.display()))
                }
            };
            // Its counters: lookups, hits, blocks stored (`copied in`), placeholders kept
            // at a block's first eviction (`refused`); blocks dropped or pushed out are not
            // counted.
            return format!(
                "{} MiB, RocksDB's {what} {place}; its blocks dropped or pushed out are not \
                 counted",
                self.mib
            );
        }
        let latency = match self.latency_ns {
            0 => "no added latency".to_owned(),
            ns => format!("{ns} ns added per access"),
        };
        let filter = match self.filter {
            ferrite::TierFilter::Frequency => {
                ", frequency filter (a page replaces a copy read less often)"
            }
            ferrite::TierFilter::Off => ", no frequency filter",
        };
        format!(
            "{} MiB in {}, {} medium ({latency}), admission {}{filter}",
            self.mib,
            self.path.display(),
            self.medium.name(),
            self.admission_name()
        )
    }
}

/// The default number of keys: about 10x the default cache of 64 MiB for 8-byte keys and
/// 120-byte values.
pub const DEFAULT_RECORDS: u64 = 4_600_000;
pub const DEFAULT_CACHE_MIB: u64 = 64;

impl RunConfig {
    pub fn new(workload: Workload, store: StoreKind) -> Self {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        RunConfig {
            workload,
            store,
            dir: PathBuf::from(format!("ferrite-data/bench-{}", store.name())),
            records: DEFAULT_RECORDS,
            cache_mib: DEFAULT_CACHE_MIB,
            change_buffer_mib: None,
            seconds: 20.0,
            threads: cores,
            workers: cores,
            tasks: 64,
            committers: 1,
            direct_api: false,
            distribution: if matches!(workload, Workload::Ycsb(_)) {
                Distribution::Zipfian
            } else {
                Distribution::Uniform
            },
            rate: None,
            seed: 1,
            keep: false,
            direct_io: true,
            ceiling: true,
            json: None,
            theta: crate::gen::zipf::YCSB_THETA,
            tier: None,
            disk_cap: IopsCap::default(),
        }
    }

    pub fn warmup(&self) -> Duration {
        if self.workload.needs_data() {
            Duration::from_secs_f64((self.seconds / 4.0).min(5.0))
        } else {
            Duration::ZERO
        }
    }

    /// Whether Ferrite runs as tasks on its workers.
    pub fn tasks_mode(&self) -> bool {
        self.store == StoreKind::Ferrite && !self.direct_api
    }

    /// How the operations are issued, in words and for the result line.
    pub fn concurrency(&self) -> String {
        match (self.workload.durable(), self.tasks_mode()) {
            (true, true) => {
                format!("{} committers as tasks on {} workers", self.committers, self.workers)
            }
            (true, false) => format!("{} committers on threads", self.committers),
            (false, true) => format!("{} workers x {} tasks", self.workers, self.tasks),
            (false, false) => format!("{} threads", self.threads),
        }
    }

    /// OS threads issuing operations when the run uses threads.
    pub fn thread_count(&self) -> usize {
        if self.workload.durable() {
            self.committers
        } else {
            self.threads
        }
    }

    /// Tasks issuing operations, over all workers, when the run uses tasks.
    pub fn task_count(&self) -> usize {
        if self.workload.durable() {
            self.committers
        } else {
            self.workers * self.tasks
        }
    }

    /// Whether writes are synced, in words (for the run's heading).
    pub fn durability(&self) -> &'static str {
        match (self.workload.durable(), self.workload.writes()) {
            (true, _) => {
                "each insert acknowledged once durable (Ferrite Durability::Sync; peers: log \
                 on, synced per commit)"
            }
            (false, true) => "writes not synced (Ferrite Durability::None; peers: log off)",
            (false, false) => "read only",
        }
    }

    /// The directory the run's data lives in.
    pub fn data_dir(&self) -> PathBuf {
        if self.workload.needs_data() {
            self.dir.clone()
        } else {
            let mut name = self.dir.as_os_str().to_owned();
            name.push("-fill");
            PathBuf::from(name)
        }
    }

    /// Everything that decides what a run measures, as one canonical string.
    pub fn canonical(&self) -> String {
        // Only when given: the hashes of runs with the default stay what they were.
        let mut change_buffer =
            self.change_buffer_mib.map_or(String::new(), |m| format!(" change_buffer_mib={m}"));
        if self.theta != crate::gen::zipf::YCSB_THETA {
            change_buffer += &format!(" theta={}", self.theta);
        }
        match &self.tier {
            Some(tier) if self.store == StoreKind::RocksDb => {
                change_buffer +=
                    &format!(" tier_mib={} rocksdb_tier={}", tier.mib, tier.rocksdb.name());
            }
            Some(tier) => {
                change_buffer += &format!(
                    " tier_mib={} tier_latency_ns={} tier_admission={}",
                    tier.mib,
                    tier.latency_ns,
                    tier.admission_name()
                );
                // (Mapped, the first medium, adds nothing: its runs keep their hash.)
                if tier.medium != ferrite::TierMedium::Mapped {
                    change_buffer += &format!(" tier_medium={}", tier.medium.name());
                }
                // Always named: runs from before the filter had none (`off`'s behaviour)
                // and named nothing, so a default run then and now must not hash alike.
                change_buffer += &format!(" tier_filter={}", tier.filter.name());
            }
            None => {}
        }
        // (Only when given, as above.)
        if let Some(n) = self.disk_cap.read {
            change_buffer += &format!(" disk_read_iops_cap={n}");
        }
        if let Some(n) = self.disk_cap.write {
            change_buffer += &format!(" disk_write_iops_cap={n}");
        }
        format!(
            "workload={} store={} records={} cache_mib={} seconds={} concurrency={} \
             distribution={} rate={} seed={} direct_io={} direct_api={}{change_buffer}",
            self.workload,
            self.store.name(),
            self.records,
            self.cache_mib,
            self.seconds,
            self.concurrency().replace(' ', ""),
            self.distribution.name(),
            self.rate.map_or("closed".to_owned(), |r| format!("{r}")),
            self.seed,
            self.direct_io,
            self.direct_api,
        )
    }

    /// A short hash of `canonical()`: runs with the same hash ran the same workload the same
    /// way (the store's own options are hashed apart, in `store_hash`).
    pub fn hash(&self) -> String {
        short_hash(&self.canonical())
    }
}

/// FNV-1a, 64 bits, as 16 hex digits: a short name for a configuration text.
pub fn short_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        h = (h ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// What one run measured.
#[derive(Debug)]
pub struct RunReport {
    pub config: RunConfig,
    pub store_description: String,
    pub counts: OpCounts,
    pub seconds: f64,
    pub latency_ns: Hdr,
    pub cpu: CpuTime,
    pub disk: Option<(String, DiskCounters)>,
    /// The store's log while measuring (Ferrite with a log that wrote; peers: `None`).
    pub log: Option<LogCounters>,
    /// The store's change buffer drains while measuring (Ferrite, when some were done).
    pub drains: Option<DrainCounters>,
    /// The store's second cache tier while measuring (Ferrite or RocksDB with `--tier`).
    pub tier: Option<TierCounters>,
    /// The store's workers while measuring (Ferrite with tasks on workers; else `None`).
    pub workers: Option<WorkerTimes>,
    /// The most the store held in memory while measuring, sampled every half second (stores
    /// that say: Ferrite, RocksDB).
    pub memory: Option<StoreMemory>,
    pub bytes_on_disk: u64,
    /// Seconds the load took, or `None` when the data was reused.
    pub load_seconds: Option<f64>,
    pub device_iops: Option<f64>,
    /// The cap on the disk while measuring, described (`DiskCap::describe`); `None`: the
    /// disk as it is.
    pub disk_cap: Option<String>,
    /// `fill-sync`: the acknowledged inserts read back after the store was reopened, and
    /// the seconds that took.
    pub verified: Option<(u64, f64)>,
}

impl RunReport {
    pub fn ops_per_s(&self) -> f64 {
        self.counts.total() as f64 / self.seconds.max(1e-9)
    }

    fn per_op(&self, x: f64) -> f64 {
        x / self.counts.total().max(1) as f64
    }

    fn percentile_us(&self, q: f64) -> f64 {
        self.latency_ns.value_at_quantile(q) as f64 / 1000.0
    }

    /// The `result ...` line: `store=`, `workload=` and `ops_per_s=` first.
    pub fn result_line(&self) -> ResultLine {
        let c = &self.config;
        let mut line = ResultLine::new()
            .word("store", c.store.name())
            .word("workload", &c.workload.name())
            .real("ops_per_s", self.ops_per_s(), 0)
            .real("seconds", self.seconds, 2)
            .int("ops", self.counts.total())
            .real("p50_us", self.percentile_us(0.50), 1)
            .real("p99_us", self.percentile_us(0.99), 1)
            .real("p999_us", self.percentile_us(0.999), 1)
            .real("max_us", self.latency_ns.max() as f64 / 1000.0, 1)
            .real("cpu_us_per_op", self.per_op(self.cpu.total_s() * 1e6), 2)
            .real("user_us_per_op", self.per_op(self.cpu.user_s * 1e6), 2)
            .real("sys_us_per_op", self.per_op(self.cpu.system_s * 1e6), 2);
        if let Some((_, d)) = &self.disk {
            line = line
                .real("dev_reads_per_op", self.per_op(d.reads as f64), 3)
                .real("dev_writes_per_op", self.per_op(d.writes as f64), 3)
                .real("dev_read_kib_per_read", d.read_kib_per_read(), 2)
                .real("dev_read_kib_per_op", self.per_op(d.read_bytes as f64 / 1024.0), 3);
            if let Some(flushes) = d.flushes {
                line = line.real("dev_flushes_per_op", self.per_op(flushes as f64), 3);
            }
        }
        if let Some(log) = &self.log {
            line = line
                .int("log_writes", log.writes)
                .real("log_records_per_write", log.records as f64 / log.writes as f64, 1)
                .real("log_kib_per_write", log.bytes as f64 / log.writes as f64 / 1024.0, 1)
                .real("log_write_us", log.flight_ns as f64 / log.writes as f64 / 1000.0, 1);
        }
        if let Some(d) = &self.drains {
            line = line.int("buffer_drains", d.drains).real(
                "buffer_entries_per_drain",
                d.entries as f64 / d.drains as f64,
                1,
            );
        }
        if let Some(w) = &self.workers {
            let us = |ns: u64| self.per_op(ns as f64 / 1000.0);
            line = line
                .real("worker_task_us_per_op", us(w.task), 2)
                .real("worker_submit_us_per_op", us(w.submit), 2)
                .real("worker_complete_us_per_op", us(w.complete), 2)
                .real("worker_evict_us_per_op", us(w.evict), 2)
                .real("worker_idle_pct", 100.0 * w.idle as f64 / w.total().max(1) as f64, 1);
        }
        if let Some(m) = &self.memory {
            line = line
                .real("mem_mib", mib(m.total()), 1)
                .real("mem_cache_mib", mib(m.cache), 1)
                .real("mem_write_buffers_mib", mib(m.write_buffers), 1);
        }
        // The tier's fields are always there (zeros without one): scripts read them.
        let tier = self.tier.unwrap_or_default();
        line = tier.use_fields(line).real("theta", c.theta, 2).real(
            "obp_peak",
            tier.peak_window_obp,
            3,
        );
        line = tier.window_fields(line);
        line = line.int("bytes_on_disk", self.bytes_on_disk).int("records", c.records);
        if let Some(load) = self.load_seconds {
            line = line.real("load_s", load, 2);
        }
        if c.workload.needs_data() {
            line = line.flag("reused", self.load_seconds.is_none());
        }
        if let Some(iops) = self.device_iops {
            line = line.real("device_iops", iops, 0);
        }
        if let Some(n) = c.disk_cap.read.filter(|_| self.disk_cap.is_some()) {
            line = line.int("disk_read_iops_cap", n);
        }
        if let Some(n) = c.disk_cap.write.filter(|_| self.disk_cap.is_some()) {
            line = line.int("disk_write_iops_cap", n);
        }
        // fill-sync: `tasks` counts the committer tasks over all workers.
        let tasks = if c.workload.durable() { c.task_count() } else { c.tasks };
        line = line
            .word("mode", if c.tasks_mode() { "tasks" } else { "threads" })
            .int("threads", if c.tasks_mode() { 0 } else { c.thread_count() as u64 })
            .int("workers", if c.tasks_mode() { c.workers as u64 } else { 0 })
            .int("tasks", if c.tasks_mode() { tasks as u64 } else { 0 });
        if c.workload.durable() {
            line = line.int("committers", c.committers as u64).flag("sync", true);
        }
        if let Some((keys, _)) = self.verified {
            line = line.int("verified", keys);
        }
        line = line
            .word("distribution", c.distribution.name())
            .word("loop", if c.rate.is_some() { "open" } else { "closed" });
        if let Some(rate) = c.rate {
            line = line.real("target_ops_per_s", rate, 0);
        }
        if let Some(mib) = c.change_buffer_mib {
            line = line.int("change_buffer_mib", mib);
        }
        line.int("cache_mib", c.cache_mib)
            .int("seed", c.seed)
            .word("config", &c.hash())
            // The store's options as it printed them: runs of one `config` with different
            // store options (a peer tuned differently, say) differ here.
            .word("store_hash", &short_hash(&self.store_description))
    }

    /// One JSON object (one line): the result line's fields plus the configuration.
    pub fn json(&self) -> String {
        let line = self.result_line();
        let record = RunRecord {
            result: &line,
            canonical: self.config.canonical(),
            store_config: &self.store_description,
            counts: &self.counts,
            device: self.disk.as_ref().map(|(name, _)| name.as_str()),
        };
        serde_json::to_string(&record).expect("a run record serialises")
    }

    /// The summary a person reads.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let mut s = String::new();
        let mut line = |name: &str, text: String| {
            let _ = writeln!(s, "  {name:<13} {text}");
        };
        line("bench", format!("{} on {} ({})", c.workload, c.store.name(), c.concurrency()));
        line("store", self.store_description.clone());
        line("durability", c.durability().to_owned());
        line(
            "data",
            match self.load_seconds {
                Some(load) => format!(
                    "{} keys loaded in {}",
                    report::thousands(c.records),
                    report::duration(load)
                ),
                None if !c.workload.needs_data() => format!(
                    "empty at the start, at most {} keys inserted",
                    report::thousands(c.records)
                ),
                None => {
                    format!("{} keys, reused from an earlier run", report::thousands(c.records))
                }
            },
        );
        line("on disk", report::bytes(self.bytes_on_disk));
        if c.keep {
            let next = if c.workload.needs_data() {
                "a later run with the same --records reuses the data"
            } else {
                "the next fill empties it first"
            };
            line("kept", format!("{} (--keep): {next}", c.data_dir().display()));
        }
        line(
            "throughput",
            format!(
                "{} ops/s ({} ops in {:.1} s, {}{})",
                report::thousands(self.ops_per_s().round() as u64),
                report::thousands(self.counts.total()),
                self.seconds,
                c.distribution.name(),
                c.rate.map_or(", closed loop".to_owned(), |r| format!(
                    ", open loop at {} ops/s offered",
                    report::thousands(r as u64)
                ))
            ),
        );
        let k = &self.counts;
        line(
            "operations",
            format!(
                "reads {}, updates {}, inserts {}, scans {} ({} entries), read-modify-writes {}, not found {}",
                k.reads, k.updates, k.inserts, k.scans, k.scanned, k.rmws, k.not_found
            ),
        );
        line(
            "latency",
            format!(
                "p50 {}, p99 {}, p99.9 {}, max {}",
                report::latency(self.latency_ns.value_at_quantile(0.5)),
                report::latency(self.latency_ns.value_at_quantile(0.99)),
                report::latency(self.latency_ns.value_at_quantile(0.999)),
                report::latency(self.latency_ns.max())
            ),
        );
        line(
            "cpu",
            format!(
                "{:.2} us per op (user {:.2} + system {:.2})",
                self.per_op(self.cpu.total_s() * 1e6),
                self.per_op(self.cpu.user_s * 1e6),
                self.per_op(self.cpu.system_s * 1e6)
            ),
        );
        match &self.disk {
            Some((name, d)) => line(
                "device",
                format!(
                    "{}: {:.3} reads and {:.3} writes per op ({} read, {} written)",
                    name,
                    self.per_op(d.reads as f64),
                    self.per_op(d.writes as f64),
                    report::bytes(d.read_bytes),
                    report::bytes(d.written_bytes)
                ),
            ),
            None => line("device", "no /proc/diskstats entry for the data's file system".into()),
        }
        line(
            "disk",
            self.disk_cap.clone().unwrap_or_else(|| "as it is (no cap on its requests)".into()),
        );
        if let (Some(t), Some(tier)) = (&self.tier, &c.tier) {
            line("tier", tier.describe(c.store));
            line("tier use", t.describe());
        }
        if let Some((_, d)) = &self.disk {
            line(
                "read size",
                format!(
                    "{:.1} KiB per device read, {:.2} KiB read per op",
                    d.read_kib_per_read(),
                    self.per_op(d.read_bytes as f64 / 1024.0)
                ),
            );
        }
        if let Some((_, d)) = &self.disk {
            if let Some(flushes) = d.flushes {
                line(
                    "flushes",
                    format!(
                        "{:.3} device cache flushes per op ({} in all)",
                        self.per_op(flushes as f64),
                        report::thousands(flushes)
                    ),
                );
                if c.workload.durable() && flushes == 0 && self.counts.total() > 0 {
                    line(
                        "WARNING",
                        "no device flush was counted: the inserts were not synced to the \
                         device (or it has no volatile write cache)"
                            .into(),
                    );
                }
            }
        }
        if let Some(log) = &self.log {
            let writes = log.writes as f64;
            line(
                "log",
                format!(
                    "{} writes (group commits): {:.1} records and {:.1} KiB each, {:.0} us from \
                     taking one to its being durable",
                    report::thousands(log.writes),
                    log.records as f64 / writes,
                    log.bytes as f64 / writes / 1024.0,
                    log.flight_ns as f64 / writes / 1000.0
                ),
            );
        }
        if let Some(d) = &self.drains {
            line(
                "buffer",
                format!(
                    "{} change buffer drains, {:.1} entries each (buffered puts moved into \
                     their leaves; one leaf read per drain)",
                    report::thousands(d.drains),
                    d.entries as f64 / d.drains as f64
                ),
            );
        }
        if let Some(w) = &self.workers {
            let us = |ns: u64| self.per_op(ns as f64 / 1000.0);
            line(
                "workers",
                format!(
                    "per op {:.2} us polling tasks, {:.2} submitting I/O, {:.2} reaping \
                     completions, {:.2} evicting; idle {:.0} % of the time",
                    us(w.task),
                    us(w.submit),
                    us(w.complete),
                    us(w.evict),
                    100.0 * w.idle as f64 / w.total().max(1) as f64
                ),
            );
        }
        if let Some(m) = &self.memory {
            line(
                "memory",
                format!(
                    "at most {:.1} MiB of data held in memory: {:.1} MiB cache + {:.1} MiB \
                     write buffers (sampled every {} ms)",
                    mib(m.total()),
                    mib(m.cache),
                    mib(m.write_buffers),
                    SAMPLE_EVERY.as_millis()
                ),
            );
        }
        if let Some((keys, seconds)) = self.verified {
            line(
                "verified",
                format!(
                    "{} acknowledged inserts read back after reopening the store ({})",
                    report::thousands(keys),
                    report::duration(seconds)
                ),
            );
        }
        if let Some(iops) = self.device_iops {
            line(
                "ceiling",
                format!(
                    "{} random 4 KiB reads/s (io_uring, QD 128, this run): ops at {:.2}x",
                    report::thousands(iops.round() as u64),
                    self.ops_per_s() / iops.max(1.0)
                ),
            );
        }
        // Last, where it is seen: a point workload read in larger pieces than its blocks.
        let warning = self.disk.as_ref().and_then(|(_, d)| {
            read_size_warning(c.store.name(), c.workload, d, self.counts.total())
        });
        if let Some(warning) = warning {
            let _ = writeln!(s, "  {warning}");
        }
        s
    }
}

/// The JSON object of a run: the result line's fields, then these.
#[derive(Serialize)]
struct RunRecord<'a> {
    #[serde(flatten)]
    result: &'a ResultLine,
    /// `RunConfig::canonical`: everything that decides what the run measured.
    canonical: String,
    /// Every option the store was opened with.
    store_config: &'a str,
    counts: &'a OpCounts,
    /// The device the data lives on, when `/proc/diskstats` has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<&'a str>,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Loads keys `0..records` in key order, `BATCH` per batch, with a progress bar.
pub fn load(store: &dyn KvStore, records: u64, progress: &mut Progress) -> Result<(), BenchError> {
    const BATCH: u64 = 1000;
    let mut keys = Vec::with_capacity(BATCH as usize);
    let mut values = Vec::with_capacity(BATCH as usize);
    let mut done = 0;
    while done < records {
        let end = (done + BATCH).min(records);
        keys.clear();
        values.clear();
        for i in done..end {
            keys.push(crate::gen::keys::key(i));
            values.push(versioned_value(i, 0));
        }
        let entries: Vec<(&[u8], &[u8])> =
            keys.iter().zip(&values).map(|(k, v)| (&k[..], &v[..])).collect();
        store.put_batch(&entries).map_err(BenchError::Store)?;
        done = end;
        progress.set(done);
    }
    progress.finish();
    store.flush().map_err(BenchError::Store)
}

/// Runs the measured part on threads or as Ferrite's tasks: warm-up, then `seconds` measured
/// (fills: until every key is in or the time is up).
fn measure(
    store: &OpenStore,
    config: &RunConfig,
    keys: &Arc<KeySpace>,
    disk: Option<&Disk>,
    show: bool,
) -> Result<Measured, BenchError> {
    let kv = store.kv();
    let phase = Arc::new(AtomicU8::new(WARMUP));
    // Runs without warm-up (fills) open the window before the operations start, so that
    // none goes uncounted.
    let early = config.warmup().is_zero().then(|| open_window(config, &phase, disk, kv));
    let control = || {
        let window = early.unwrap_or_else(|| open_window(config, &phase, disk, kv));
        close_window(config, &phase, disk, kv, window, show)
    };
    let (measured, tally) = match store.tasks() {
        Some(tasks) if config.tasks_mode() => {
            let running = ycsb::start_tasks(
                &tasks.db,
                &tasks.tree,
                config,
                Arc::clone(keys),
                Arc::clone(&phase),
            )?;
            let measured = control();
            (measured, running.finish()?)
        }
        _ => {
            let template = ycsb::template(config);
            let make = |t: u64| StreamOps::new(kv, config, &template, t + 1, Arc::clone(keys));
            let pacing = ycsb::pacing(config, false);
            runner::on_threads(config.thread_count(), &make, pacing, &phase, control)?
        }
    };
    Ok(Measured { counts: tally.counts, latency_ns: tally.latency_ns, ..measured })
}

/// The most KiB a device read may average on a point workload before the summary warns: two
/// 4 KiB blocks (every store here reads 4 KiB blocks or pages; a point read needs its data
/// block, and at most an index or filter partition beside it). More means whole index or
/// filter blocks, read-ahead or large blocks: a configuration to check, not a result.
pub const POINT_READ_KIB_MAX: f64 = 8.0;

/// Whether `workload` is a point workload for the read-size warning: single-key operations,
/// nearly all reads, so that the device reads are the reads' own. `lookup` and `ycsb-c`
/// (reads only), `ycsb-b` (95 % reads, 5 % updates) and `ycsb-d` (95 % reads of recent keys,
/// 5 % inserts). Not `ycsb-a` or `ycsb-f` (half the operations write: flushes, compactions
/// and evictions read in large blocks in the background), `ycsb-e` (scans) or the fills.
pub fn point_workload(workload: Workload) -> bool {
    matches!(workload, Workload::Lookup | Workload::Ycsb('b' | 'c' | 'd'))
}

/// The summary's warning when `store` read more than [`POINT_READ_KIB_MAX`] per device read
/// on a point workload. Only when the device read at least once per 100 operations: a run
/// served from memory has too few reads of its own for their size to say anything (the
/// counters are the whole device's).
pub fn read_size_warning(
    store: &str,
    workload: Workload,
    disk: &DiskCounters,
    ops: u64,
) -> Option<String> {
    let kib = disk.read_kib_per_read();
    let enough_reads = disk.reads > 0 && disk.reads.saturating_mul(100) >= ops;
    (point_workload(workload) && enough_reads && kib > POINT_READ_KIB_MAX).then(|| {
        format!(
            "warning: {store} read {kib:.1} KiB per device read (more than two 4 KiB blocks) \
             on a point workload: check its configuration"
        )
    })
}

#[cfg(test)]
impl RunReport {
    /// A one-second YCSB-C run of `store` with `reads` reads and, if given, what the device
    /// `vda` did meanwhile; everything else empty. For tests of reports and tables.
    pub(crate) fn for_test(store: StoreKind, reads: u64, disk: Option<DiskCounters>) -> Self {
        RunReport {
            config: RunConfig::new(Workload::Ycsb('c'), store),
            store_description: "test".into(),
            counts: OpCounts { reads, ..OpCounts::default() },
            seconds: 1.0,
            latency_ns: runner::new_histogram(),
            cpu: CpuTime::default(),
            disk: disk.map(|d| ("vda".to_owned(), d)),
            log: None,
            drains: None,
            tier: None,
            workers: None,
            memory: None,
            bytes_on_disk: 0,
            load_seconds: None,
            device_iops: None,
            disk_cap: None,
            verified: None,
        }
    }
}

/// The timed part of a run, without the operations' own figures.
struct Measured {
    counts: OpCounts,
    latency_ns: Hdr,
    seconds: f64,
    cpu: CpuTime,
    disk: Option<DiskCounters>,
    log: Option<LogCounters>,
    drains: Option<DrainCounters>,
    tier: Option<TierCounters>,
    workers: Option<WorkerTimes>,
    memory: Option<StoreMemory>,
}

/// How often a run samples what the store holds in memory (and shows its progress).
const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// The start of the measured window: when, and the counters then.
struct Window {
    start: Instant,
    cpu: CpuTime,
    disk: Option<DiskCounters>,
    log: Option<LogCounters>,
    drains: Option<DrainCounters>,
    tier: Option<TierCounters>,
    workers: Option<WorkerTimes>,
}

/// Waits out the warm-up (unless the run stops first), then opens the measured window. Runs
/// without warm-up (fills) open it before the operations start, so that none goes uncounted.
fn open_window(
    config: &RunConfig,
    phase: &AtomicU8,
    disk: Option<&Disk>,
    store: &dyn KvStore,
) -> Window {
    wait(phase, config.warmup());
    let disk = disk.and_then(Disk::counters);
    let log = store.log_counters();
    let drains = store.drain_counters();
    let tier = store.tier_counters();
    let workers = store.worker_times();
    let cpu = CpuTime::now();
    let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::AcqRel, Ordering::Acquire);
    Window { start: Instant::now(), cpu, disk, log, drains, tier, workers }
}

/// Waits for the end of the measured window (or for the operations to stop: a fill done),
/// showing the time measured so far, and takes the counters.
fn close_window(
    config: &RunConfig,
    phase: &AtomicU8,
    disk: Option<&Disk>,
    store: &dyn KvStore,
    w: Window,
    show: bool,
) -> Measured {
    let measure = Duration::from_secs_f64(config.seconds);
    let total_ms = measure.as_millis() as u64;
    let mut progress = if show {
        let label = format!("running {} on {}", config.workload, config.store.name());
        Progress::stderr(&label, "ms", total_ms)
    } else {
        Progress::hidden(total_ms)
    };
    let mut memory = store.memory();
    // The highest OBP of a full window seen while measuring (the tier's own count of
    // windows over its limit covers every window; this says by how much).
    let mut peak_window_obp = 0.0f64;
    loop {
        let left = measure.saturating_sub(w.start.elapsed());
        if left.is_zero() || phase.load(Ordering::Acquire) == STOP {
            break;
        }
        wait(phase, left.min(SAMPLE_EVERY));
        progress.set((w.start.elapsed().as_millis() as u64).min(total_ms));
        memory = StoreMemory::peak(memory, store.memory());
        if let Some(t) = store.tier_counters() {
            peak_window_obp = peak_window_obp.max(t.window_obp);
        }
    }
    progress.finish();
    phase.store(STOP, Ordering::Release);
    let seconds = w.start.elapsed().as_secs_f64();
    let cpu = CpuTime::now().since(w.cpu);
    let disk = w.disk.zip(disk.and_then(Disk::counters)).map(|(b, a)| a.since(b));
    let log = w.log.zip(store.log_counters()).map(|(b, a)| a.since(b));
    let drains = w.drains.zip(store.drain_counters()).map(|(b, a)| a.since(b));
    let tier = w
        .tier
        .zip(store.tier_counters())
        .map(|(b, a)| TierCounters { peak_window_obp, ..a.since(b) });
    let workers = w.workers.zip(store.worker_times()).map(|(b, a)| a.since(b));
    Measured {
        counts: OpCounts::default(),
        latency_ns: runner::new_histogram(),
        seconds,
        cpu,
        disk,
        log,
        drains,
        tier,
        workers,
        memory,
    }
}

/// Bytes the files under `dir` take on disk (allocated blocks).
pub fn bytes_on_disk(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(m) if m.is_dir() => bytes_on_disk(&entry.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// The record a finished load leaves beside the data, so a later run with `--keep` can
/// reuse it. Written only after the load is complete and flushed.
const META_FILE: &str = "ferrite-bench-meta";
/// The mark of a directory the benchmark made (see `remove_bench_dir`).
pub(crate) const MARKER_FILE: &str = "ferrite-bench-dir";

fn meta_text(config: &RunConfig) -> String {
    format!("format=versioned-1 store={} records={}\n", config.store.name(), config.records)
}

fn reusable(dir: &Path, config: &RunConfig) -> bool {
    std::fs::read_to_string(dir.join(META_FILE)).is_ok_and(|text| text == meta_text(config))
}

/// Runs one workload on one store and returns its report (also appended to `--json`).
pub fn run(
    config: &RunConfig,
    open_store: &dyn Fn(&RunConfig, &Path) -> Result<OpenStore, BenchError>,
    progress_label: bool,
) -> Result<RunReport, BenchError> {
    if !config.store.built_in() {
        return Err(BenchError::Config(format!(
            "--store {} needs a build with the peers: cargo build --release -p ferrite-cli \
             --features peers (and the Debian packages librocksdb-dev libwiredtiger-dev \
             liblmdb-dev)",
            config.store.name()
        )));
    }
    if config.records == 0 {
        return Err(BenchError::Config("--records must be at least 1".into()));
    }
    let dir = config.data_dir();
    let needs_data = config.workload.needs_data();
    let fresh = !needs_data || !reusable(&dir, config);
    if fresh && dir.exists() {
        remove_bench_dir(&dir)?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::Io {
        context: format!("creating {}", dir.display()),
        source: e,
    })?;
    let mut store = open_store(config, &dir)?;
    // Marks the directory as the benchmark's as soon as the store made it (Ferrite refuses to
    // create a database in a directory holding other files), so that a later run may remove
    // it even if this one fails half way; nothing unmarked is ever removed.
    std::fs::write(dir.join(MARKER_FILE), "made by `ferrite bench`, which removes it\n")
        .map_err(|e| BenchError::Io { context: format!("marking {}", dir.display()), source: e })?;
    let mut load_seconds = None;
    if needs_data && fresh {
        let _ = std::fs::remove_file(dir.join(META_FILE));
        let mut progress = if progress_label {
            Progress::stderr(&format!("loading {}", config.store.name()), "keys", config.records)
        } else {
            Progress::hidden(config.records)
        };
        let start = Instant::now();
        load(store.kv(), config.records, &mut progress)?;
        load_seconds = Some(start.elapsed().as_secs_f64());
        std::fs::write(dir.join(META_FILE), meta_text(config)).map_err(|e| BenchError::Io {
            context: "writing the data set's record".into(),
            source: e,
        })?;
    }
    store.kv().settle().map_err(BenchError::Store)?;
    let device_iops = if config.ceiling { Some(ceiling(&dir, config.direct_io)?) } else { None };
    let disk = Disk::of(&dir);
    // LMDB reads through the page cache: cap it, as the others' caches are capped. Not in
    // unit tests: the cap holds the whole process, and the other tests running beside in
    // the same process would be killed by it.
    let (cap, cap_note) = if config.store == StoreKind::Lmdb && !cfg!(test) {
        let headroom = (8 << 20) + config.thread_count() as u64 * (96 << 10);
        // Closed first: the pages its map touched (during the load, say) are then unmapped,
        // so they can leave the page cache, and every page the run reads is read, and
        // charged, inside the cap.
        drop(store);
        let entered = crate::measure::memcap::MemoryCap::enter((config.cache_mib << 20) + headroom);
        crate::measure::memcap::evict_from_page_cache(&dir);
        store = open_store(config, &dir)?;
        match entered {
            Ok(cap) => {
                let note = format!(
                    " [page cache capped: a memory cgroup of {} MiB, the cache plus {} MiB \
                     for the process's own memory]",
                    cap.limit_bytes >> 20,
                    headroom >> 20
                );
                (Some(cap), note)
            }
            Err(reason) => (None, format!(" [page cache NOT capped ({reason})]")),
        }
    } else {
        (None, String::new())
    };
    let keys = Arc::new(KeySpace::new(if needs_data { config.records } else { 0 }));
    // The disk's cap holds from the warm-up to the end of the window: the load and the
    // device's ceiling ran at the disk's own pace.
    let disk_cap = match config.disk_cap.is_set() {
        true => Some(DiskCap::enter(&dir, config.disk_cap).map_err(BenchError::Config)?),
        false => None,
    };
    let measured = measure(&store, config, &keys, disk.as_ref(), progress_label);
    let disk_cap_description = disk_cap.as_ref().map(DiskCap::describe);
    drop(disk_cap);
    drop(cap);
    let measured = measured?;
    let store_description = store.kv().describe() + &cap_note;
    drop(store);
    let verified = if config.workload.durable() {
        let start = Instant::now();
        let reopened = open_store(config, &dir)?;
        let keys_read = verify_fill(reopened.kv(), &keys, config.records)?;
        drop(reopened);
        Some((keys_read, start.elapsed().as_secs_f64()))
    } else {
        None
    };
    let report = RunReport {
        config: config.clone(),
        store_description,
        counts: measured.counts,
        seconds: measured.seconds,
        latency_ns: measured.latency_ns,
        cpu: measured.cpu,
        disk: disk.map(|d| d.name.clone()).zip(measured.disk),
        log: measured.log.filter(|l| l.writes > 0),
        drains: measured.drains.filter(|d| d.drains > 0),
        tier: measured.tier,
        workers: measured.workers.filter(|w| w.total() > 0),
        memory: measured.memory,
        disk_cap: disk_cap_description,
        bytes_on_disk: bytes_on_disk(&dir),
        load_seconds,
        device_iops,
        verified,
    };
    if let Some(path) = &config.json {
        append_json(path, &report.json())?;
    }
    // Kept, a data set is reused by the next run with the same records; a fill's directory
    // is there to look at (the next fill empties it first).
    if !config.keep {
        remove_bench_dir(&dir)?;
    }
    Ok(report)
}

/// Appends one line to a JSON-lines file.
pub fn append_json(path: &Path, line: &str) -> Result<(), BenchError> {
    use std::io::Write;
    let io = |e| BenchError::Io { context: format!("appending to {}", path.display()), source: e };
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(io)?;
    writeln!(file, "{line}").map_err(io)
}

/// Removes a benchmark directory, refusing one that does not look like the benchmark's (it
/// must hold the meta record, be empty, or hold only a store's files after a failed load).
pub(crate) fn remove_bench_dir(dir: &Path) -> Result<(), BenchError> {
    let io = |e| BenchError::Io { context: format!("removing {}", dir.display()), source: e };
    // Ours: marked when the benchmark made it, or holding a data set it loaded, or empty.
    let looks_ours = dir.join(MARKER_FILE).exists()
        || dir.join(META_FILE).exists()
        || std::fs::read_dir(dir).map(|mut d| d.next().is_none()).unwrap_or(true);
    if !looks_ours {
        return Err(BenchError::Config(format!(
            "{} exists and was not made by ferrite bench; point --db at a directory of its own",
            dir.display()
        )));
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(e)),
    }
}

/// The file the ceiling is measured on, beside the data directories.
pub const CEILING_FILE: &str = "ferrite-ceiling.dat";

/// The device's random-read ceiling, measured on a 1 GiB file written once beside the data
/// (`<dir>/../ferrite-ceiling.dat`, kept for later runs): random 4 KiB reads, io_uring, QD 128.
fn ceiling(dir: &Path, direct: bool) -> Result<f64, BenchError> {
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let path = parent.join(CEILING_FILE);
    const SIZE: u64 = 1 << 30;
    let complete = std::fs::metadata(&path).is_ok_and(|m| m.len() == SIZE);
    if !complete {
        write_ceiling_file(&path, SIZE)?;
    }
    crate::workloads::io::device_read_ceiling(&path, direct, 3.0)
}

/// Writes `size` bytes of non-zero data (reads of never-written blocks would not reach the
/// device).
fn write_ceiling_file(path: &Path, size: u64) -> Result<(), BenchError> {
    use std::io::Write;
    let io = |e| BenchError::Io { context: format!("writing {}", path.display()), source: e };
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    let mut rng = Rng::new(0xCE11);
    let mut chunk = vec![0u8; 1 << 20];
    for _ in 0..size / chunk.len() as u64 {
        for word in chunk.chunks_exact_mut(8) {
            word.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        file.write_all(&chunk).map_err(io)?;
    }
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_fills_count_their_committers_and_others_their_threads_and_tasks() {
        let base = RunConfig {
            threads: 3,
            workers: 2,
            tasks: 5,
            committers: 7,
            ..RunConfig::new(Workload::FillSync, StoreKind::Ferrite)
        };
        assert_eq!((base.thread_count(), base.task_count()), (7, 7));
        assert_eq!(base.concurrency(), "7 committers as tasks on 2 workers");
        let threads = RunConfig { direct_api: true, ..base.clone() };
        assert_eq!(threads.concurrency(), "7 committers on threads");
        let fill = RunConfig { workload: Workload::FillRandom, ..base.clone() };
        assert_eq!((fill.thread_count(), fill.task_count()), (3, 10));
        assert_eq!(fill.concurrency(), "2 workers x 5 tasks");
        assert_ne!(fill.hash(), base.hash());
        let more = RunConfig { committers: 8, ..base.clone() };
        assert_ne!(more.hash(), base.hash(), "the committers are part of what a run measured");
        assert!(base.durability().contains("durable"));
        assert!(fill.durability().contains("not synced"));
    }

    #[test]
    fn point_workloads_are_the_read_mostly_single_key_ones() {
        let points: Vec<String> =
            Workload::ALL.into_iter().filter(|w| point_workload(*w)).map(|w| w.name()).collect();
        assert_eq!(points, ["lookup", "ycsb-b", "ycsb-c", "ycsb-d"]);
    }

    /// The warning fires above two 4 KiB blocks per device read, on point workloads only, and
    /// only when the device read often enough for the size to be the store's.
    #[test]
    fn the_read_size_warning_fires_above_two_blocks_per_read_on_point_workloads() {
        let kib = |reads: u64, kib_each: u64| DiskCounters {
            reads,
            read_bytes: reads * kib_each * 1024,
            ..DiskCounters::default()
        };
        let ycsb_c = Workload::Ycsb('c');
        let ops = 100_000;
        let warning = read_size_warning("rocksdb", ycsb_c, &kib(50_000, 70), ops).unwrap();
        assert_eq!(
            warning,
            "warning: rocksdb read 70.0 KiB per device read (more than two 4 KiB blocks) on a \
             point workload: check its configuration"
        );
        assert!(read_size_warning("lmdb", ycsb_c, &kib(50_000, 4), ops).is_none(), "one block");
        assert!(read_size_warning("x", ycsb_c, &kib(50_000, 8), ops).is_none(), "8 KiB is two");
        let just_over = DiskCounters { read_bytes: 50_000 * 8 * 1024 + 50_000, ..kib(50_000, 8) };
        assert!(read_size_warning("x", ycsb_c, &just_over, ops).is_some(), "above two blocks");
        for not_point in [Workload::Ycsb('a'), Workload::Ycsb('e'), Workload::FillRandom] {
            assert!(read_size_warning("x", not_point, &kib(50_000, 70), ops).is_none());
        }
        for point in [Workload::Lookup, Workload::Ycsb('b'), Workload::Ycsb('d')] {
            assert!(read_size_warning("x", point, &kib(50_000, 70), ops).is_some(), "{point}");
        }
        // Served from memory: 999 reads in 100,000 operations are too few to judge, 1,000 not.
        assert!(read_size_warning("x", ycsb_c, &kib(999, 70), ops).is_none());
        assert!(read_size_warning("x", ycsb_c, &kib(1000, 70), ops).is_some());
        assert!(read_size_warning("x", ycsb_c, &kib(0, 0), 0).is_none(), "no reads at all");
    }

    /// The result line and the summary carry the read size of every run with device counters.
    #[test]
    fn the_result_line_and_summary_give_kib_per_device_read_and_per_op() {
        let twelve = DiskCounters { reads: 500, read_bytes: 500 * 12 * 1024, ..Default::default() };
        let report = RunReport::for_test(StoreKind::Ferrite, 1000, Some(twelve));
        let line = report.result_line();
        assert_eq!(line.get("dev_read_kib_per_read"), Some("12.00"));
        assert_eq!(line.get("dev_read_kib_per_op"), Some("6.000"));
        assert_eq!(line.get("dev_reads_per_op"), Some("0.500"), "existing fields kept");
        let summary = report.summary();
        assert!(summary.contains("12.0 KiB per device read, 6.00 KiB read per op"), "{summary}");
        assert!(
            summary.contains("\n  warning: ferrite read 12.0 KiB per device read"),
            "{summary}"
        );
        let quiet = RunReport {
            disk: Some((
                "vda".into(),
                DiskCounters { reads: 500, read_bytes: 500 * 4096, ..DiskCounters::default() },
            )),
            ..report
        };
        assert!(!quiet.summary().contains("warning"), "{}", quiet.summary());
        // The same run with the store opened otherwise: one `config`, two `store_hash`es.
        let retuned = RunReport { store_description: "test, retuned".into(), ..quiet };
        let (a, b) = (line, retuned.result_line());
        assert_eq!(a.get("config"), b.get("config"));
        assert_ne!(a.get("store_hash"), b.get("store_hash"));
        assert_eq!(a.get("store_hash").map(str::len), Some(16));
        let json: serde_json::Value = serde_json::from_str(&retuned.json()).unwrap();
        assert_eq!(json["store_config"], "test, retuned", "the description itself, unhashed");
        assert_eq!(json["store_hash"].as_str(), b.get("store_hash"));
    }

    /// A run on a capped disk says so in its summary and result line, and hashes as another
    /// configuration; a run without one keeps its fields and hash as before.
    #[test]
    fn a_capped_disk_is_reported_and_hashed_apart() {
        let plain = RunReport::for_test(StoreKind::Ferrite, 1000, None);
        let line = plain.result_line();
        assert_eq!(line.get("disk_read_iops_cap"), None);
        assert!(plain.summary().contains("disk          as it is (no cap"), "{}", plain.summary());
        let mut config = plain.config.clone();
        config.disk_cap = IopsCap { read: Some(3000), write: None };
        let capped = RunReport {
            config,
            disk_cap: Some("vda (254:0) capped at reads 3,000/s, writes uncapped".into()),
            ..RunReport::for_test(StoreKind::Ferrite, 1000, None)
        };
        let capped_line = capped.result_line();
        assert_eq!(capped_line.get("disk_read_iops_cap"), Some("3000"));
        assert_eq!(capped_line.get("disk_write_iops_cap"), None);
        assert_ne!(line.get("config"), capped_line.get("config"));
        assert!(capped.summary().contains("capped at reads 3,000/s"), "{}", capped.summary());
    }

    /// Regression: a directory named like the benchmark's (`bench-…`) but holding someone
    /// else's files was removable. Only marked, recorded or empty directories are.
    #[test]
    fn only_the_benchmarks_own_directories_are_removed() {
        let root = tempfile::TempDir::new().unwrap();
        let foreign = root.path().join("bench-precious");
        std::fs::create_dir_all(&foreign).unwrap();
        std::fs::write(foreign.join("data"), b"keep me").unwrap();
        assert!(remove_bench_dir(&foreign).is_err());
        assert!(foreign.join("data").exists());
        let ours = root.path().join("elsewhere");
        std::fs::create_dir_all(&ours).unwrap();
        std::fs::write(ours.join(MARKER_FILE), b"").unwrap();
        std::fs::write(ours.join("000012.sst"), b"half a load").unwrap();
        remove_bench_dir(&ours).unwrap();
        assert!(!ours.exists());
        let empty = root.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        remove_bench_dir(&empty).unwrap();
        remove_bench_dir(&root.path().join("absent")).unwrap();
    }
}
