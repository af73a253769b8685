//! What a `bench objects` run reports: the summary people read, the `result` line scripts
//! read (its first fields fixed: `store workload pattern block ops_per_s mib_per_s p99_us
//! write_amp space_amp`), and its JSON.

use std::fmt::Write as _;

use serde::Serialize;

use super::{block_name, ObjectsConfig};
use crate::measure::cpu::CpuTime;
use crate::measure::diskstats::DiskCounters;
use crate::report::{self, ResultLine};
use crate::runner::Hdr;
use crate::workloads::run::short_hash;

/// Everything a finished run found.
#[derive(Debug, Clone)]
pub struct ObjectsReport {
    pub config: ObjectsConfig,
    /// Every option the store was opened with (and the page cache cap, for SQLite).
    pub store_description: String,
    /// Whether the store bypassed the page cache (`O_DIRECT`).
    pub direct_io: bool,
    /// How the objects lie inside the store after the run, where it says.
    pub layout_note: Option<String>,
    /// Seconds the setup took, or `None` when an earlier `--keep` run's data was reused.
    pub setup_seconds: Option<f64>,
    /// Operations done while measuring.
    pub ops: u64,
    /// Bytes they read or wrote.
    pub bytes: u64,
    /// Measured time.
    pub seconds: f64,
    pub warmup_seconds: f64,
    /// Latency of each measured operation, in nanoseconds.
    pub latency_ns: Hdr,
    /// Processor time of the whole process while measuring.
    pub cpu: CpuTime,
    /// The counters of the device holding the data over the measured window (the whole
    /// device's), when `/proc/diskstats` lists it.
    pub disk: Option<(String, DiskCounters)>,
    /// Bytes the device wrote while the store settled after a write run (Ferrite merged its
    /// fragments and took a checkpoint; RocksDB flushed and compacted; files synced).
    pub settle_written: Option<u64>,
    /// Bytes the store's files allocate after the run.
    pub bytes_on_disk: u64,
    /// Write runs: the blocks read back and checked byte for byte after the run.
    pub verified: Option<u64>,
}

fn mib(bytes: f64) -> f64 {
    bytes / f64::from(1 << 20)
}

impl ObjectsReport {
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.seconds.max(1e-9)
    }

    pub fn mib_per_s(&self) -> f64 {
        mib(self.bytes as f64) / self.seconds.max(1e-9)
    }

    fn per_op(&self, x: f64) -> f64 {
        x / self.ops.max(1) as f64
    }

    fn percentile_us(&self, q: f64) -> f64 {
        self.latency_ns.value_at_quantile(q) as f64 / 1000.0
    }

    /// Device bytes written over user bytes written, while measuring and while the store
    /// settled after (its deferred work: merges, checkpoints, compactions): 0 for read
    /// patterns, `None` without the device's counters.
    pub fn write_amp(&self) -> Option<f64> {
        let (_, d) = self.disk.as_ref()?;
        Some(if self.config.pattern.is_write() && self.bytes > 0 {
            (d.written_bytes + self.settle_written?) as f64 / self.bytes as f64
        } else {
            0.0
        })
    }

    /// As [`ObjectsReport::write_amp`], the measured window alone.
    pub fn write_amp_window(&self) -> Option<f64> {
        let (_, d) = self.disk.as_ref()?;
        Some(if self.config.pattern.is_write() && self.bytes > 0 {
            d.written_bytes as f64 / self.bytes as f64
        } else {
            0.0
        })
    }

    /// Bytes allocated by the store's files over the objects' logical bytes.
    pub fn space_amp(&self) -> f64 {
        self.bytes_on_disk as f64 / self.config.logical_bytes().max(1) as f64
    }

    /// The `result ...` line: the contracted fields first, then the rest.
    pub fn result_line(&self) -> ResultLine {
        let c = &self.config;
        let mut line = ResultLine::new()
            .word("store", c.store.name())
            .word("workload", "objects")
            .word("pattern", c.pattern.name())
            .word("block", block_name(c.block_bytes))
            .real("ops_per_s", self.ops_per_s(), 0)
            .real("mib_per_s", self.mib_per_s(), 1)
            .real("p99_us", self.percentile_us(0.99), 1);
        line = match self.write_amp() {
            Some(amp) => line.real("write_amp", amp, 2),
            None => line.word("write_amp", "-"),
        };
        line = line.real("space_amp", self.space_amp(), 3);
        if let Some(amp) = self.write_amp_window() {
            line = line.real("write_amp_window", amp, 2);
        }
        line = line
            .real("p50_us", self.percentile_us(0.50), 1)
            .real("p999_us", self.percentile_us(0.999), 1)
            .real("max_us", self.latency_ns.max() as f64 / 1000.0, 1)
            .int("objects", u64::from(c.objects))
            .int("object_mib", c.object_mib)
            .int("block_bytes", c.block_bytes as u64)
            .int("depth", c.depth as u64)
            .word("api", if c.tasks() { "tasks" } else { "threads" })
            .flag("sync", c.sync)
            .real("seconds", self.seconds, 2)
            .int("ops", self.ops)
            .real("cpu_us_per_op", self.per_op(self.cpu.total_s() * 1e6), 2)
            .real("user_us_per_op", self.per_op(self.cpu.user_s * 1e6), 2)
            .real("sys_us_per_op", self.per_op(self.cpu.system_s * 1e6), 2);
        if let Some((_, d)) = &self.disk {
            line = line
                .real("dev_reads_per_op", self.per_op(d.reads as f64), 3)
                .real("dev_writes_per_op", self.per_op(d.writes as f64), 3)
                .real("dev_read_kib_per_read", d.read_kib_per_read(), 2)
                .real("dev_read_kib_per_op", self.per_op(d.read_bytes as f64 / 1024.0), 3)
                .real("dev_write_kib_per_op", self.per_op(d.written_bytes as f64 / 1024.0), 3);
            if let Some(flushes) = d.flushes {
                line = line.real("dev_flushes_per_op", self.per_op(flushes as f64), 3);
            }
        }
        line = line
            .int("bytes_on_disk", self.bytes_on_disk)
            .int("logical_bytes", c.logical_bytes())
            .real("setup_s", self.setup_seconds.unwrap_or(0.0), 2)
            .flag("reused", self.setup_seconds.is_none())
            .flag("direct_io", self.direct_io);
        if let Some(blocks) = self.verified {
            line = line.int("verified", blocks);
        }
        line.int("cache_mib", c.cache_mib)
            .int("seed", c.seed)
            .word("config", &c.hash())
            .word("store_hash", &short_hash(&self.store_description))
    }

    /// One JSON object (one line): the result line's fields plus the configuration and the
    /// store's options.
    pub fn json(&self) -> String {
        let line = self.result_line();
        let record = ObjectsRecord {
            result: &line,
            canonical: self.config.canonical(),
            store_config: &self.store_description,
            device: self.disk.as_ref().map(|(name, _)| name.as_str()),
        };
        serde_json::to_string(&record).expect("a run record serialises")
    }

    /// The summary a person reads, a line per item.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let mut s = String::new();
        let mut line = |name: &str, text: String| {
            let _ = writeln!(s, "  {name:<13} {text}");
        };
        line(
            "bench objects",
            format!(
                "{} of {} blocks on {}, {} {} (queue depth {}), {}",
                c.pattern.name(),
                block_name(c.block_bytes),
                c.store.name(),
                c.depth,
                if c.tasks() { "tasks on its workers" } else { "threads" },
                c.depth,
                if c.sync {
                    "every write durable when it returns (--sync)"
                } else {
                    "writes not synced"
                }
            ),
        );
        line("store", self.store_description.clone());
        line(
            "data",
            format!(
                "{} objects of {} MiB ({}), {}",
                c.objects,
                c.object_mib,
                report::bytes(c.logical_bytes()),
                match self.setup_seconds {
                    Some(seconds) => format!(
                        "written whole in {} ({:.0} MiB/s, not measured)",
                        report::duration(seconds),
                        mib(c.logical_bytes() as f64) / seconds.max(1e-9)
                    ),
                    None => "reused from an earlier --keep run".to_owned(),
                }
            ),
        );
        line(
            "directory",
            format!(
                "{}, {}",
                c.dir.display(),
                if c.keep { "kept (--keep)" } else { "removed at the end (--keep keeps it)" }
            ),
        );
        line(
            "throughput",
            format!(
                "{} ops/s, {:.1} MiB/s ({} ops in {:.1} s after a {} warm-up)",
                report::thousands(self.ops_per_s().round() as u64),
                self.mib_per_s(),
                report::thousands(self.ops),
                self.seconds,
                report::duration(self.warmup_seconds)
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
        let user = if c.pattern.is_write() { "written" } else { "read" };
        line(
            "write amp",
            match (self.write_amp(), &self.disk) {
                (Some(amp), Some((_, d))) if c.pattern.is_write() => format!(
                    "{amp:.2} (the device wrote {} while measuring and {} while the store \
                     settled after, for {} {user} by the threads; {:.2} in the window alone)",
                    report::bytes(d.written_bytes),
                    report::bytes(self.settle_written.unwrap_or(0)),
                    report::bytes(self.bytes),
                    self.write_amp_window().unwrap_or(0.0)
                ),
                (Some(_), Some((_, d))) => format!(
                    "0 (a read pattern; the device wrote {} meanwhile)",
                    report::bytes(d.written_bytes)
                ),
                _ => "- (no device counters)".to_owned(),
            },
        );
        line(
            "space amp",
            format!(
                "{:.3} ({} allocated by the store's files for {} of objects)",
                self.space_amp(),
                report::bytes(self.bytes_on_disk),
                report::bytes(c.logical_bytes())
            ),
        );
        match &self.disk {
            Some((name, d)) => {
                line(
                    "device",
                    format!(
                        "{name}: {:.3} reads and {:.3} writes per op ({} read, {} written)",
                        self.per_op(d.reads as f64),
                        self.per_op(d.writes as f64),
                        report::bytes(d.read_bytes),
                        report::bytes(d.written_bytes)
                    ),
                );
                line(
                    "read size",
                    format!(
                        "{:.1} KiB per device read, {:.2} KiB read per op",
                        d.read_kib_per_read(),
                        self.per_op(d.read_bytes as f64 / 1024.0)
                    ),
                );
                if let Some(flushes) = d.flushes {
                    line(
                        "flushes",
                        format!(
                            "{:.3} device cache flushes per op ({} in all)",
                            self.per_op(flushes as f64),
                            report::thousands(flushes)
                        ),
                    );
                }
            }
            None => line("device", "no /proc/diskstats entry for the data's file system".into()),
        }
        line(
            "cpu",
            format!(
                "{:.2} us per op (user {:.2} + system {:.2})",
                self.per_op(self.cpu.total_s() * 1e6),
                self.per_op(self.cpu.user_s * 1e6),
                self.per_op(self.cpu.system_s * 1e6)
            ),
        );
        if let Some(note) = &self.layout_note {
            line("layout", note.clone());
        }
        line(
            "verified",
            match self.verified {
                Some(blocks) => format!(
                    "{} blocks, each thread's last writes, read back byte for byte after the run",
                    report::thousands(blocks)
                ),
                None => "every read: the header and tag of each 2 KiB piece".to_owned(),
            },
        );
        s
    }
}

/// The JSON object of a run: the result line's fields, then these.
#[derive(Serialize)]
struct ObjectsRecord<'a> {
    #[serde(flatten)]
    result: &'a ResultLine,
    /// `ObjectsConfig::canonical`: everything that decides what the run measured.
    canonical: String,
    /// Every option the store was opened with.
    store_config: &'a str,
    /// The device the data lives on, when `/proc/diskstats` has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<&'a str>,
}
