//! What a TPC-C run reports: per transaction type the counts, conflicts, rollbacks and
//! latencies (`KindTally`), and the run's figures as a summary and a result line
//! (`TpccReport`).

use ferrite_peers::PeerStats;

use super::check::{Violation, CHECKED};
use super::run::TpccConfig;
use super::schema::DataSet;
use super::txns::{Kind, Outcome};
use crate::measure::cpu::CpuTime;
use crate::measure::diskstats::DiskCounters;
use crate::report::{duration, latency, thousands, ResultLine};
use crate::runner::{new_histogram, record, Hdr};
use crate::stores::LogCounters;
use crate::stores::WorkerTimes;

/// Per transaction type: what the terminals counted while measuring.
#[derive(Debug, Clone)]
pub struct KindTally {
    pub committed: u64,
    pub conflicts: u64,
    /// New-Orders rolled back (their unused item).
    pub rolled_back: u64,
    /// Deliveries: districts skipped (no new order).
    pub skipped: u64,
    pub latency_ns: Hdr,
    /// Nanoseconds the transactions' polls took on their workers, and how many transactions
    /// that counts (Ferrite's terminals, which are tasks; `ferrite::sched::task_run_ns`).
    pub run_ns: u64,
    pub run_counted: u64,
}

impl Default for KindTally {
    fn default() -> Self {
        KindTally {
            committed: 0,
            conflicts: 0,
            rolled_back: 0,
            skipped: 0,
            latency_ns: new_histogram(),
            run_ns: 0,
            run_counted: 0,
        }
    }
}

impl KindTally {
    pub fn add(&mut self, o: &KindTally) {
        self.committed += o.committed;
        self.conflicts += o.conflicts;
        self.rolled_back += o.rolled_back;
        self.skipped += o.skipped;
        self.latency_ns.add(&o.latency_ns).expect("same histogram bounds");
        self.run_ns += o.run_ns;
        self.run_counted += o.run_counted;
    }

    /// The mean time a transaction ran on its worker, in µs (`None`: not counted).
    pub fn run_us(&self) -> Option<f64> {
        (self.run_counted > 0).then(|| self.run_ns as f64 / self.run_counted as f64 / 1e3)
    }

    /// Transactions done: committed or rolled back.
    pub fn done(&self) -> u64 {
        self.committed + self.rolled_back
    }
}

/// The tallies of the five types, in `Kind::ALL` order.
pub type Tally = [KindTally; 5];

/// Counts one transaction: its outcome, its latency and, for a task, the time it ran on its
/// worker (`run_ns`).
pub fn record_outcome(
    tally: &mut Tally,
    kind: Kind,
    outcome: Outcome,
    nanos: u64,
    run_ns: Option<u64>,
) {
    let t = &mut tally[kind.index()];
    if let Some(run) = run_ns {
        t.run_ns += run;
        t.run_counted += 1;
    }
    match outcome.rolled_back {
        true => t.rolled_back += 1,
        false => t.committed += 1,
    }
    t.conflicts += u64::from(outcome.conflicts);
    t.skipped += u64::from(outcome.skipped);
    record(&mut t.latency_ns, nanos);
}

/// What a run measured and found.
#[derive(Debug, Clone)]
pub struct TpccReport {
    pub config: TpccConfig,
    pub data_set: DataSet,
    pub isolation: String,
    /// How the store reads rows asked for together (`TpccStore::reads_together`).
    pub reads_together: &'static str,
    /// The isolation in one word, for the result line (`TpccStore::isolation_name`).
    pub isolation_name: &'static str,
    pub store_name: &'static str,
    /// Every option the store was opened with, on one line.
    pub store_description: String,
    /// Seconds the load took (`None`: a kept data set reused).
    pub load_seconds: Option<f64>,
    /// Violations after the load (fresh loads only) and after the run.
    pub load_violations: Option<Vec<Violation>>,
    pub run_violations: Vec<Violation>,
    pub tally: Tally,
    pub seconds: f64,
    pub cpu: CpuTime,
    /// Pages the pool read and wrote in the window (Ferrite's; `None`: the store has no
    /// such count, the peers).
    pub pool_reads: Option<u64>,
    pub pool_writes: Option<u64>,
    /// Of `pool_reads`, the pages of each table (and index) read in the window, most first
    /// (Ferrite's; empty for the peers).
    pub reads_by_table: Vec<(String, u64)>,
    /// The pool's pages of each table (and index) at the end of the window, and how many of
    /// them were dirty, most first (Ferrite's; empty for the peers).
    pub resident_by_table: Vec<(String, u64, u64)>,
    /// What Ferrite's log wrote in the window (`None`: the peers, who count theirs in
    /// `store_stats` if at all).
    pub log: Option<LogCounters>,
    pub disk: Option<(String, DiskCounters)>,
    /// The store's own counters over the window (the peers': RocksDB's tickers, WiredTiger's
    /// cache statistics); `None`: it keeps none we read (Ferrite's pool counts no hits).
    pub store_stats: Option<PeerStats>,
    pub workers: Option<WorkerTimes>,
    /// Per worker, the share of the window it spent running tasks (affinity shows here).
    pub worker_task_shares: Vec<f64>,
    /// The workers the terminals ran on (Ferrite's); `None`: each terminal on a thread of
    /// its own (the peers).
    pub worker_count: Option<usize>,
    /// The cap the disk held the window to (`DiskCap::describe`); `None`: uncapped.
    pub disk_cap: Option<String>,
}

/// Where a report's `reads_per_tx` and `writes_per_tx` come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoSource {
    /// The buffer pool's page reads and writes (Ferrite).
    Pool,
    /// The device's reads and writes, all its traffic (the peers, which count no pages).
    Device,
    /// Neither is known (a peer on a device /proc/diskstats does not list): zeros.
    Unknown,
}

impl IoSource {
    pub fn name(self) -> &'static str {
        match self {
            IoSource::Pool => "pool",
            IoSource::Device => "device",
            IoSource::Unknown => "unknown",
        }
    }
}

/// `reads` (pages per table, most first) as `table x.xx (n %)`, the tables under 1 % of
/// the reads together as `others`; `per_tx` turns pages into pages per transaction.
pub(super) fn by_table(reads: &[(String, u64)], per_tx: impl Fn(u64) -> f64) -> String {
    let total: u64 = reads.iter().map(|&(_, pages)| pages).sum();
    let share = |pages: u64| 100.0 * pages as f64 / total.max(1) as f64;
    let (shown, others): (Vec<_>, Vec<_>) =
        reads.iter().partition(|&&(_, pages)| share(pages) >= 1.0);
    let mut parts: Vec<String> = shown
        .iter()
        .map(|(table, pages)| format!("{table} {:.2} ({:.0} %)", per_tx(*pages), share(*pages)))
        .collect();
    let rest: u64 = others.iter().map(|&&(_, pages)| pages).sum();
    if rest > 0 {
        parts.push(format!("others {:.2} ({:.1} %)", per_tx(rest), share(rest)));
    }
    parts.join(", ")
}

/// The summary's census of the pool, `(table, pages, dirty)` most first: each table's pages
/// with its share of the pool's and how many are dirty; tables under 1 % together.
pub(super) fn in_pool(census: &[(String, u64, u64)]) -> String {
    let total: u64 = census.iter().map(|&(_, pages, _)| pages).sum();
    let share = |pages: u64| 100.0 * pages as f64 / total.max(1) as f64;
    let dirty = |pages: u64, dirty: u64| 100.0 * dirty as f64 / pages.max(1) as f64;
    let (shown, others): (Vec<_>, Vec<_>) =
        census.iter().partition(|&&(_, pages, _)| share(pages) >= 1.0);
    let mut parts: Vec<String> = shown
        .iter()
        .map(|(table, pages, d)| {
            format!("{table} {pages} ({:.0} %, {:.0} % dirty)", share(*pages), dirty(*pages, *d))
        })
        .collect();
    let (rest, rest_dirty) =
        others.iter().fold((0, 0), |(p, d), &&(_, pages, dirty)| (p + pages, d + dirty));
    if rest > 0 {
        parts.push(format!(
            "others {rest} ({:.1} %, {:.0} % dirty)",
            share(rest),
            dirty(rest, rest_dirty)
        ));
    }
    parts.join(", ")
}

impl TpccReport {
    pub fn transactions(&self) -> u64 {
        self.tally.iter().map(KindTally::done).sum()
    }

    pub fn tx_per_s(&self) -> f64 {
        self.transactions() as f64 / self.seconds.max(1e-9)
    }

    /// New-Orders per minute (committed, as tpmC counts them).
    pub fn tpmc(&self) -> f64 {
        self.tally[Kind::NewOrder.index()].committed as f64 * 60.0 / self.seconds.max(1e-9)
    }

    pub fn consistent(&self) -> bool {
        self.run_violations.is_empty() && self.load_violations.as_ref().is_none_or(Vec::is_empty)
    }

    fn per_tx(&self, n: u64) -> f64 {
        n as f64 / self.transactions().max(1) as f64
    }

    /// Reads and writes per transaction as the result line gives them, and their source:
    /// the pool's pages where the store counts them, else the device's requests.
    pub fn io_per_tx(&self) -> (f64, f64, IoSource) {
        match (self.pool_reads.zip(self.pool_writes), &self.disk) {
            (Some((r, w)), _) => (self.per_tx(r), self.per_tx(w), IoSource::Pool),
            (None, Some((_, d))) => (self.per_tx(d.reads), self.per_tx(d.writes), IoSource::Device),
            (None, None) => (0.0, 0.0, IoSource::Unknown),
        }
    }

    /// The share of the store's cache lookups in the window that hit (`PeerStats::
    /// cache_hit_ratio`: RocksDB's block cache, WiredTiger's cache); `None` where the store
    /// does not count them (Ferrite) or looked nothing up.
    pub fn cache_hit_ratio(&self) -> Option<f64> {
        self.store_stats.as_ref().and_then(PeerStats::cache_hit_ratio)
    }

    /// Bytes per read the device completed in the window (sectors read × 512 / reads
    /// completed; 0 without reads); `None` where /proc/diskstats has no device for the data.
    pub fn bytes_per_read(&self) -> Option<u64> {
        self.disk.as_ref().map(|(_, d)| d.bytes_per_read())
    }

    /// The store's counters, for the summary: its cache's hit ratio and fills, then every
    /// counter by its own name.
    fn store_stats_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let Some(stats) = &self.store_stats else {
            let why = match self.pool_reads {
                Some(_) => "the pool counts the pages it reads (above), not its hits",
                None => "the store's counters could not be read",
            };
            let _ = writeln!(s, "cache hit ratio: not counted ({why})");
            return s;
        };
        match (stats.cache, self.cache_hit_ratio()) {
            (Some(cache), Some(ratio)) => {
                let _ = writeln!(
                    s,
                    "cache hit ratio: {ratio:.4} ({} lookups, {} misses; {})",
                    thousands(cache.lookups),
                    thousands(cache.misses),
                    cache.counted
                );
            }
            (Some(cache), None) => {
                let _ =
                    writeln!(s, "cache hit ratio: no lookups in the window ({})", cache.counted);
            }
            (None, _) => {
                let _ = writeln!(s, "cache hit ratio: not counted by {}", self.store_name);
            }
        }
        if let Some(fills) = stats.fills {
            let each =
                stats.bytes_per_fill().map_or(String::new(), |b| format!(", {b:.0} bytes each"));
            let _ = writeln!(
                s,
                "cache fills: {:.2} per transaction{each} ({})",
                self.per_tx(fills.blocks),
                fills.counted
            );
        }
        let counters: Vec<String> =
            stats.counters.iter().map(|(name, value)| format!("{name}={value}")).collect();
        let _ = writeln!(s, "{} counters in the window: {}", self.store_name, counters.join(", "));
        s
    }

    /// Where the terminals ran, for the summary.
    fn placement(&self) -> String {
        let c = &self.config;
        match self.worker_count {
            Some(workers) => format!(
                "{} terminals on {workers} workers (affinity {})",
                c.terminals(),
                if c.affinity { "on" } else { "off" }
            ),
            None => format!("{} terminals, each on a thread of its own", c.terminals()),
        }
    }

    pub fn summary(&self) -> String {
        use std::fmt::Write;
        let c = &self.config;
        let mut s = String::new();
        let scale = self.data_set.scale;
        let _ = writeln!(
            s,
            "tpcc on {}: {} warehouse{}{}, cache {} MiB, {}, think and keying time {}",
            self.store_name,
            c.warehouses,
            if c.warehouses == 1 { "" } else { "s" },
            if scale.is_spec() {
                String::new()
            } else {
                format!(
                    " at a REDUCED scale, NOT TPC-C ({} items, {} customers and orders per \
                     district)",
                    scale.items, scale.customers
                )
            },
            c.cache_mib,
            self.placement(),
            if c.spec_times { "per the specification" } else { "zero" },
        );
        let _ = writeln!(s, "store: {}", self.store_description);
        let _ = writeln!(s, "isolation: {}", self.isolation);
        let _ = writeln!(s, "rows read together: {}", self.reads_together);
        let _ = writeln!(s, "durability: {}", c.durability_text());
        match self.load_seconds {
            Some(secs) => {
                let _ = writeln!(s, "load: {}", duration(secs));
            }
            None => {
                let _ = writeln!(s, "load: the kept data set in {}", c.dir.display());
            }
        }
        let _ = writeln!(
            s,
            "{} transactions in {}: {:.0} tx/s, {:.0} tpmC (New-Orders per minute)",
            thousands(self.transactions()),
            duration(self.seconds),
            self.tx_per_s(),
            self.tpmc()
        );
        let _ = writeln!(
            s,
            "{:<13} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "type", "done", "share", "p50", "p99", "conflicts", "rollbacks", "run"
        );
        for kind in Kind::ALL {
            let t = &self.tally[kind.index()];
            let p = |q: f64| match t.latency_ns.is_empty() {
                true => "-".to_owned(),
                false => latency(t.latency_ns.value_at_quantile(q)),
            };
            let _ = writeln!(
                s,
                "{:<13} {:>10} {:>6.1}% {:>10} {:>10} {:>10} {:>10} {:>10}",
                kind.name(),
                thousands(t.done()),
                100.0 * self.per_tx(t.done()),
                p(0.5),
                p(0.99),
                thousands(t.conflicts),
                thousands(t.rolled_back),
                t.run_us().map_or("-".to_owned(), |us| format!("{us:.1} us"))
            );
        }
        let (run_ns, counted) =
            self.tally.iter().fold((0, 0), |(n, c), t| (n + t.run_ns, c + t.run_counted));
        if counted > 0 {
            let _ = writeln!(
                s,
                "run: the mean time a transaction's task ran on its worker (its polls; not its \
                 waits, nor the workers' eviction and I/O phases, nor other threads): {:.1} us \
                 over all types",
                run_ns as f64 / counted as f64 / 1e3
            );
        }
        let delivery = &self.tally[Kind::Delivery.index()];
        if delivery.skipped > 0 {
            let _ =
                writeln!(s, "deliveries skipped {} empty districts", thousands(delivery.skipped));
        }
        let cpu_us = self.cpu.total_s() * 1e6 / self.transactions().max(1) as f64;
        match self.pool_reads.zip(self.pool_writes) {
            Some((reads, writes)) => {
                let _ = writeln!(
                    s,
                    "per transaction: {:.2} page reads and {:.2} page writes by the pool, {:.0} \
                     µs CPU (process, user + system)",
                    self.per_tx(reads),
                    self.per_tx(writes),
                    cpu_us
                );
                if !self.reads_by_table.is_empty() {
                    let line = by_table(&self.reads_by_table, |pages| self.per_tx(pages));
                    let _ = writeln!(s, "page reads per transaction by table: {line}");
                }
                if !self.resident_by_table.is_empty() {
                    let line = in_pool(&self.resident_by_table);
                    let _ = writeln!(s, "the pool at the end, pages by table: {line}");
                }
            }
            None => {
                let _ = writeln!(
                    s,
                    "per transaction: {cpu_us:.0} µs CPU (process, user + system); the store \
                     counts no page reads or writes: reads_per_tx and writes_per_tx are the \
                     device's"
                );
            }
        }
        if let Some(log) = &self.log {
            let _ = writeln!(
                s,
                "log: {:.1} KiB written per transaction ({:.1} KiB of records, {:.2} flushes); \
                 {:.2} page images per transaction, {:.0} % of the bytes logged (a page's \
                 first write-back after a checkpoint logs it whole); {} checkpoint{} in the \
                 window",
                self.per_tx(log.bytes) / 1024.0,
                self.per_tx(log.appended) / 1024.0,
                self.per_tx(log.writes),
                self.per_tx(log.images),
                100.0 * log.image_bytes as f64 / log.bytes.max(1) as f64,
                log.checkpoints,
                if log.checkpoints == 1 { "" } else { "s" }
            );
        }
        if let Some((name, disk)) = &self.disk {
            let _ = writeln!(
                s,
                "device {name} (all its traffic, the log's included): {:.2} reads and {:.2} \
                 writes per transaction, {} bytes per read",
                self.per_tx(disk.reads),
                self.per_tx(disk.writes),
                disk.bytes_per_read()
            );
        }
        if let Some(cap) = &self.disk_cap {
            let _ = writeln!(s, "disk: {cap}, from the warm-up to the end of the window");
        }
        s.push_str(&self.store_stats_text());
        if let Some(w) = self.workers.filter(|w| w.total() > 0) {
            // Of the workers' whole time in the window (workers x window); idle is what the
            // rest leaves.
            let whole_ns = self.worker_count.unwrap_or(1) as f64 * self.seconds * 1e9;
            let share = |ns: u64| 100.0 * ns as f64 / whole_ns;
            let busy = w.task + w.evict + w.submit + w.complete;
            let _ = writeln!(
                s,
                "worker time: tasks {:.0} %, eviction {:.0} %, submitting {:.0} %, completions \
                 {:.0} %, idle {:.0} %",
                share(w.task),
                share(w.evict),
                share(w.submit),
                share(w.complete),
                (100.0 - share(busy)).max(0.0)
            );
        }
        if !self.worker_task_shares.is_empty() {
            let shares: Vec<String> =
                self.worker_task_shares.iter().map(|s| format!("{:.0} %", 100.0 * s)).collect();
            let _ = writeln!(s, "running tasks, per worker: {}", shares.join(", "));
        }
        let conditions: Vec<String> = CHECKED.iter().map(u8::to_string).collect();
        let checked =
            format!("conditions {} of clause 3.3.2 and the indexes", conditions.join(", "));
        for (when, violations) in [
            ("after the load", self.load_violations.as_ref()),
            ("after the run", Some(&self.run_violations)),
        ] {
            match violations {
                None => {}
                Some(v) if v.is_empty() => {
                    let _ = writeln!(s, "consistency {when}: ok ({checked})");
                }
                Some(v) => {
                    let _ = writeln!(
                        s,
                        "consistency {when}: FAILED, {} violations ({checked})",
                        v.len()
                    );
                    for violation in v.iter().take(20) {
                        let _ = writeln!(s, "  {violation}");
                    }
                }
            }
        }
        s
    }

    pub fn result_line(&self) -> ResultLine {
        let c = &self.config;
        let (reads_per_tx, writes_per_tx, io_source) = self.io_per_tx();
        let mut line = ResultLine::new()
            .word("store", self.store_name)
            .word("workload", "tpcc")
            .int("warehouses", u64::from(c.warehouses))
            .real("tx_per_s", self.tx_per_s(), 0)
            .real("tpmc", self.tpmc(), 0)
            .real("reads_per_tx", reads_per_tx, 2)
            .real("writes_per_tx", writes_per_tx, 2)
            .word("consistency", if self.consistent() { "ok" } else { "failed" })
            .word("scale", if self.data_set.scale.is_spec() { "spec" } else { "reduced" })
            // (The name every other workload's line gives its rate: a transaction is the
            // operation here.)
            .real("ops_per_s", self.tx_per_s(), 0)
            .int("tx", self.transactions())
            .real("seconds", self.seconds, 1)
            .real("cpu_us_per_tx", self.cpu.total_s() * 1e6 / self.transactions().max(1) as f64, 1);
        if let Some((_, disk)) = &self.disk {
            line = line.real("disk_reads_per_tx", self.per_tx(disk.reads), 2).real(
                "disk_writes_per_tx",
                self.per_tx(disk.writes),
                2,
            );
        }
        for kind in Kind::ALL {
            let t = &self.tally[kind.index()];
            let us = |q: f64| match t.latency_ns.is_empty() {
                true => 0.0,
                false => t.latency_ns.value_at_quantile(q) as f64 / 1000.0,
            };
            line = line
                .int(kind.name(), t.done())
                .real(&format!("{}_p50_us", kind.name()), us(0.5), 1)
                .real(&format!("{}_p99_us", kind.name()), us(0.99), 1)
                .int(&format!("{}_conflicts", kind.name()), t.conflicts);
        }
        line = line
            .int("rollbacks", self.tally[Kind::NewOrder.index()].rolled_back)
            .word("isolation", self.isolation_name)
            .word("durability", if c.sync { "sync" } else { "none" })
            .flag("no_log", c.no_log)
            // (Placement on workers: the peers have none.)
            .flag("affinity", c.affinity && self.worker_count.is_some())
            .flag("spec_times", c.spec_times)
            .int("terminals", u64::from(c.terminals()))
            // (Without workers, the peers: the threads, one per terminal.)
            .int("workers", self.worker_count.unwrap_or(c.terminals() as usize) as u64)
            .int("cache_mib", c.cache_mib)
            .int("seed", c.seed)
            .word("io_source", io_source.name());
        // (New fields go after the last one: scripts read the line by position too.)
        if let Some(ratio) = self.cache_hit_ratio() {
            line = line.real("cache_hit_ratio", ratio, 4);
        }
        if let Some(bytes) = self.bytes_per_read() {
            line = line.int("bytes_per_read", bytes);
        }
        if let Some(log) = &self.log {
            line = line
                .real("log_kib_per_tx", self.per_tx(log.bytes) / 1024.0, 2)
                .real("images_per_tx", self.per_tx(log.images), 2)
                .int("checkpoints", log.checkpoints);
        }
        if self.tally.iter().any(|t| t.run_counted > 0) {
            for kind in Kind::ALL {
                let us = self.tally[kind.index()].run_us().unwrap_or(0.0);
                line = line.real(&format!("{}_run_us", kind.name()), us, 1);
            }
        }
        // Only when capped (as `bench ycsb-*` and `bench fill` write them), last.
        if let Some(n) = c.disk_cap.read.filter(|_| self.disk_cap.is_some()) {
            line = line.int("disk_read_iops_cap", n);
        }
        if let Some(n) = c.disk_cap.write.filter(|_| self.disk_cap.is_some()) {
            line = line.int("disk_write_iops_cap", n);
        }
        line
    }
}
