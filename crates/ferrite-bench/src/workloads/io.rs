//! `bench io`: the raw device ceiling, measured through Ferrite's own submission engines
//! (`ferrite::io`), and by fio with the same parameters in the same run when fio is there.
//!
//! A run: make sure the data file holds `size_mib` of real data (`io/datafile.rs`); then for
//! each engine: drop the file from the page cache, open the file as a one-device
//! `ferrite::io::Devices`, start `threads` threads that each open an engine of their own
//! (no hand-off between threads) and keep `depth` requests in flight: queue until the engine
//! is full, submit, reap with wait, queue again. A warm-up is not counted; then for
//! `seconds` every completion reaped is counted and its latency (from the submit that sent
//! it to the reap that returned it) recorded. CPU time is the whole process's while
//! measuring. Then fio runs the same job if it is on `PATH`. At the end the data file is
//! removed unless `--keep`.
//!
//! The synchronous engines (psync, mmap) perform requests inside `submit`, one after the
//! other, so they run at depth 1 per thread, as fio caps them.
//!
//! [`device_read_ceiling`] measures random 4 KiB reads with io_uring at depth 128 on a
//! given file, for `bench lookup` to print the device's ceiling next to its lookups.

#![allow(unsafe_code)] // `IoEngine::queue`

pub mod datafile;
pub mod fio;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ferrite::io::{
    open_engine, AlignedBlock, DeviceOptions, Devices, EngineKind, IoCompletion, IoKind, IoRequest,
    QueueError, IO_ALIGN,
};

use crate::error::BenchError;
use crate::gen::rng::Rng;
use crate::measure::cpu::CpuTime;
use crate::measure::phase::{wait, StopOnDrop, MEASURE, STOP, WARMUP};
use crate::report::{self, ResultLine};
use crate::runner::Histogram;
use datafile::{DataFile, FileFate, Origin};
use fio::{FioJob, FioResult};

/// Data file when none is given.
pub const DEFAULT_FILE: &str = "./ferrite-data/bench-io.dat";
/// Size of the data file when none is given, in MiB.
pub const DEFAULT_SIZE_MIB: u64 = 1024;
pub const DEFAULT_BS: usize = 4096;
/// Requests in flight per thread when none is given.
pub const DEFAULT_DEPTH: usize = 64;
/// Measured seconds per engine when none are given.
pub const DEFAULT_SECONDS: f64 = 10.0;
/// Longest warm-up; it is otherwise a fifth of the measured time.
pub const MAX_WARMUP_SECONDS: f64 = 1.0;
/// Largest block accepted.
pub const MAX_BS: usize = 16 << 20;
/// Most requests in flight per thread.
pub const MAX_DEPTH: usize = 4096;
/// Most threads.
pub const MAX_THREADS: usize = 256;
/// Largest data file, in MiB (1 TiB).
pub const MAX_SIZE_MIB: u64 = 1 << 20;
/// The device ceiling `bench lookup` shows: random reads of this size ...
pub const CEILING_BS: usize = 4096;
/// ... at this depth, with io_uring, from one thread.
pub const CEILING_DEPTH: usize = 128;
/// Seed of the random offsets (thread `t` draws stream `t`).
const SEED: u64 = 0x1f5e_ed10;

/// What the threads do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    RandRead,
    SeqRead,
    RandWrite,
    SeqWrite,
}

impl Pattern {
    pub const ALL: [Pattern; 4] =
        [Pattern::RandRead, Pattern::SeqRead, Pattern::RandWrite, Pattern::SeqWrite];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::RandRead => "randread",
            Pattern::SeqRead => "seqread",
            Pattern::RandWrite => "randwrite",
            Pattern::SeqWrite => "seqwrite",
        }
    }

    pub fn from_name(name: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn is_write(self) -> bool {
        matches!(self, Pattern::RandWrite | Pattern::SeqWrite)
    }

    pub fn is_random(self) -> bool {
        matches!(self, Pattern::RandRead | Pattern::RandWrite)
    }
}

/// Whether an engine performs requests inside `submit` (and so gains nothing from depth).
pub fn is_synchronous(kind: EngineKind) -> bool {
    matches!(kind, EngineKind::Psync | EngineKind::Mmap)
}

/// Everything a `bench io` run is told.
#[derive(Debug, Clone, PartialEq)]
pub struct IoBenchConfig {
    /// The data file (or a block device, read only).
    pub file: PathBuf,
    /// The engines to measure, in order.
    pub engines: Vec<EngineKind>,
    pub pattern: Pattern,
    /// Bytes per request, a multiple of 4096.
    pub bs: usize,
    /// Requests in flight per thread (asynchronous engines).
    pub depth: usize,
    pub threads: usize,
    /// Measured seconds per engine.
    pub seconds: f64,
    /// Bytes of the file the I/O covers, in MiB (the file is filled up to it).
    pub size_mib: u64,
    pub direct: bool,
    /// Keep the data file for the next run.
    pub keep: bool,
    /// Run fio too when it is on `PATH`.
    pub use_fio: bool,
}

impl Default for IoBenchConfig {
    fn default() -> Self {
        IoBenchConfig {
            file: PathBuf::from(DEFAULT_FILE),
            engines: vec![EngineKind::IoUring],
            pattern: Pattern::RandRead,
            bs: DEFAULT_BS,
            depth: DEFAULT_DEPTH,
            threads: 1,
            seconds: DEFAULT_SECONDS,
            size_mib: DEFAULT_SIZE_MIB,
            direct: true,
            keep: false,
            use_fio: true,
        }
    }
}

impl IoBenchConfig {
    /// The warm-up before measuring each engine: a fifth of the measured time, at most 1 s.
    pub fn warmup_seconds(&self) -> f64 {
        (self.seconds / 5.0).min(MAX_WARMUP_SECONDS)
    }

    /// Requests in flight per thread for `kind`: 1 for the synchronous engines.
    pub fn depth_for(&self, kind: EngineKind) -> usize {
        if is_synchronous(kind) {
            1
        } else {
            self.depth
        }
    }

    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |reason: String| Err(BenchError::Config(reason));
        if self.file.as_os_str().is_empty() {
            return bad("the data file path is empty".into());
        }
        if self.engines.is_empty() {
            return bad("no engine to measure".into());
        }
        for (i, kind) in self.engines.iter().enumerate() {
            if self.engines[..i].contains(kind) {
                return bad(format!("engine {} given twice", kind.name()));
            }
        }
        if self.bs == 0 || self.bs % IO_ALIGN != 0 || self.bs > MAX_BS {
            return bad(format!(
                "block size {} is not a multiple of {IO_ALIGN} from {IO_ALIGN} to {MAX_BS}",
                self.bs
            ));
        }
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return bad(format!("depth {} is out of range (1 to {MAX_DEPTH})", self.depth));
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return bad(format!("{} threads is out of range (1 to {MAX_THREADS})", self.threads));
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0 && self.seconds <= 1e6) {
            return bad(format!("{} seconds is out of range", self.seconds));
        }
        if self.size_mib == 0 || self.size_mib > MAX_SIZE_MIB {
            return bad(format!(
                "size of {} MiB is out of range (1 to {MAX_SIZE_MIB})",
                self.size_mib
            ));
        }
        if (self.size_mib << 20) < self.bs as u64 {
            return bad(format!("a {}-byte block does not fit in {} MiB", self.bs, self.size_mib));
        }
        Ok(())
    }
}

/// One engine's measurement.
#[derive(Debug, Clone)]
pub struct EngineRun {
    pub engine: EngineKind,
    /// Requests in flight per thread.
    pub depth: usize,
    pub threads: usize,
    pub bs: usize,
    /// Requests completed while measuring.
    pub ios: u64,
    /// Measured time.
    pub seconds: f64,
    pub warmup_seconds: f64,
    /// Latency of each counted request, submission to reap, in nanoseconds.
    pub latency_ns: Histogram,
    /// Processor time of the whole process while measuring.
    pub cpu: CpuTime,
    /// fio's figures for the same job: `None` when fio did not run.
    pub fio: Option<Result<FioResult, String>>,
}

impl EngineRun {
    pub fn iops(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ios as f64 / self.seconds
        } else {
            0.0
        }
    }

    pub fn mib_per_s(&self) -> f64 {
        self.iops() * self.bs as f64 / f64::from(1 << 20)
    }

    /// Processor time (user + system, all threads) per request, in microseconds.
    pub fn cpu_us_per_io(&self) -> f64 {
        if self.ios == 0 {
            0.0
        } else {
            self.cpu.total_s() * 1e6 / self.ios as f64
        }
    }

    /// fio's IOPS, when fio ran and succeeded.
    pub fn fio_iops(&self) -> Option<f64> {
        self.fio.as_ref()?.as_ref().ok().map(|f| f.iops)
    }

    /// Ours over fio's IOPS.
    pub fn ratio(&self) -> Option<f64> {
        self.fio_iops().filter(|&f| f > 0.0).map(|f| self.iops() / f)
    }
}

/// Everything a finished run found.
#[derive(Debug, Clone)]
pub struct IoBenchReport {
    pub config: IoBenchConfig,
    /// Bytes of the file the I/O covered.
    pub region_bytes: u64,
    pub origin: Origin,
    pub runs: Vec<EngineRun>,
    /// The fio that ran, if any.
    pub fio: Option<PathBuf>,
    pub fate: FileFate,
}

impl IoBenchReport {
    /// The run the result line reports: io_uring's when it ran, else the first.
    pub fn headline(&self) -> &EngineRun {
        self.runs
            .iter()
            .find(|r| r.engine == EngineKind::IoUring)
            .unwrap_or_else(|| self.runs.first().expect("a report has runs"))
    }

    /// The human-readable summary: a few lines, a table with a row per engine, notes.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let mut s = String::new();
        let mut line = |label: &str, text: String| s.push_str(&format!("  {label:<12}{text}\n"));
        line(
            "bench io",
            format!(
                "{} of {} blocks, {}, {} thread{}",
                c.pattern.name(),
                report::bytes(c.bs as u64),
                if c.direct { "O_DIRECT" } else { "buffered (--no-direct)" },
                c.threads,
                if c.threads == 1 { "" } else { "s" },
            ),
        );
        line(
            "time",
            format!(
                "{} measured per engine after a {} warm-up",
                report::duration(c.seconds),
                report::duration(c.warmup_seconds()),
            ),
        );
        let origin = match self.origin {
            Origin::Created { seconds } => {
                format!("created and filled in {}", report::duration(seconds))
            }
            Origin::Extended { bytes, seconds } => {
                format!("extended by {} in {}", report::bytes(bytes), report::duration(seconds))
            }
            Origin::Reused => "reused".to_owned(),
            Origin::BlockDevice => "a block device, read only".to_owned(),
        };
        let fate = match &self.fate {
            FileFate::Kept => "kept (--keep)".to_owned(),
            FileFate::Removed => "removed at the end (--keep keeps it)".to_owned(),
            FileFate::Left(reason) => format!("left in place: {reason}"),
        };
        line(
            "data file",
            format!("{}: {} used, {origin}", c.file.display(), report::bytes(self.region_bytes)),
        );
        line("", fate);
        line(
            "fio",
            match (&self.fio, c.use_fio) {
                (Some(path), _) => format!("{}, the same job after each engine", path.display()),
                (None, true) => "not found on PATH: no comparison".to_owned(),
                (None, false) => "not asked for".to_owned(),
            },
        );
        s.push('\n');
        s.push_str(&format!(
            "  {:<8}{:>6}{:>8}{:>11}{:>9}{:>9}{:>9}{:>9}{:>10}{:>10}{:>9}\n",
            "engine",
            "depth",
            "threads",
            "IOPS",
            "MiB/s",
            "p50",
            "p99",
            "p99.9",
            "CPU/IO",
            "fio IOPS",
            "ours/fio"
        ));
        for run in &self.runs {
            let h = &run.latency_ns;
            let fio =
                run.fio_iops().map_or("-".to_owned(), |f| report::thousands(f.round() as u64));
            let ratio = run.ratio().map_or("-".to_owned(), |r| format!("{r:.2}"));
            s.push_str(&format!(
                "  {:<8}{:>6}{:>8}{:>11}{:>9.1}{:>9}{:>9}{:>9}{:>10}{:>10}{:>9}\n",
                run.engine.name(),
                run.depth,
                run.threads,
                report::thousands(run.iops().round() as u64),
                run.mib_per_s(),
                report::latency(h.percentile(50.0)),
                report::latency(h.percentile(99.0)),
                report::latency(h.percentile(99.9)),
                format!("{:.2} us", run.cpu_us_per_io()),
                fio,
                ratio,
            ));
        }
        s.push('\n');
        let mut note = |text: &str| s.push_str(&format!("  {text}\n"));
        note("Latency runs from the submit that sent a request to the reap that returned it.");
        note("CPU/IO is the whole process's processor time (user + system) while measuring,");
        note("divided by the requests completed.");
        if self.runs.iter().any(|r| is_synchronous(r.engine)) {
            note("psync and mmap perform each request inside submit: they run at depth 1 per");
            note("thread (as fio caps them); more threads give them more requests in flight.");
        }
        if self.runs.iter().any(|r| r.engine == EngineKind::Mmap) {
            note("mmap reads go through the page cache whatever --direct says (mappings ignore");
            note("O_DIRECT); the cache is dropped before each engine, so first touches fault.");
        }
        for run in &self.runs {
            if let Some(Err(e)) = &run.fio {
                note(&format!("fio with {}: {e}", fio::ioengine(run.engine)));
            }
        }
        s
    }

    /// The `result ...` line that ends the output (io_uring's run with `--engine all`).
    pub fn result_line(&self) -> ResultLine {
        let c = &self.config;
        let run = self.headline();
        let us = |nanos: u64| nanos as f64 / 1e3;
        let mut line = ResultLine::new()
            .real("iops", run.iops(), 0)
            .word("engine", run.engine.name())
            .int("depth", run.depth as u64)
            .int("threads", run.threads as u64)
            .word("pattern", c.pattern.name())
            .int("bs", c.bs as u64)
            .real("mib_per_s", run.mib_per_s(), 1)
            .real("p50_us", us(run.latency_ns.percentile(50.0)), 2)
            .real("p99_us", us(run.latency_ns.percentile(99.0)), 2)
            .real("p999_us", us(run.latency_ns.percentile(99.9)), 2)
            .real("cpu_us_per_io", run.cpu_us_per_io(), 2)
            .real("seconds", run.seconds, 2)
            .flag("direct", c.direct);
        if let (Some(fio_iops), Some(ratio)) = (run.fio_iops(), run.ratio()) {
            line = line.real("fio_iops", fio_iops, 0).real("ratio", ratio, 3);
        }
        line
    }
}

/// One engine's measurement plan.
#[derive(Debug, Clone)]
struct Plan {
    kind: EngineKind,
    pattern: Pattern,
    bs: usize,
    depth: usize,
    threads: usize,
    /// Bytes from offset 0 the requests cover: a multiple of `bs`.
    region_bytes: u64,
    warmup: Duration,
    measure: Duration,
}

/// Runs `bench io`: prepares the data file, measures each engine (and fio), cleans up.
/// `log` receives a line as each engine starts; `show_progress` shows the fill on stderr.
pub fn run(
    config: &IoBenchConfig,
    log: &mut dyn FnMut(&str),
    show_progress: bool,
) -> Result<IoBenchReport, BenchError> {
    config.validate()?;
    let wanted = config.size_mib << 20;
    let file = DataFile::prepare(
        &config.file,
        wanted,
        config.pattern.is_write(),
        config.direct,
        show_progress,
    )?;
    let region_bytes = wanted.min(file.size_bytes) / config.bs as u64 * config.bs as u64;
    let fio_path = if config.use_fio { fio::find() } else { None };
    let outcome = if region_bytes == 0 {
        Err(BenchError::Config(format!(
            "{} holds {} bytes: less than one {}-byte block",
            config.file.display(),
            file.size_bytes,
            config.bs
        )))
    } else {
        measure_all(config, &file, region_bytes, fio_path.as_deref(), log)
    };
    let origin = file.origin;
    let fate = file.finish(config.keep);
    Ok(IoBenchReport {
        config: config.clone(),
        region_bytes,
        origin,
        runs: outcome?,
        fio: fio_path,
        fate,
    })
}

fn measure_all(
    config: &IoBenchConfig,
    file: &DataFile,
    region_bytes: u64,
    fio_path: Option<&Path>,
    log: &mut dyn FnMut(&str),
) -> Result<Vec<EngineRun>, BenchError> {
    let mut runs = Vec::new();
    for &kind in &config.engines {
        let plan = Plan {
            kind,
            pattern: config.pattern,
            bs: config.bs,
            depth: config.depth_for(kind),
            threads: config.threads,
            region_bytes,
            warmup: Duration::from_secs_f64(config.warmup_seconds()),
            measure: Duration::from_secs_f64(config.seconds),
        };
        log(&format!(
            "bench io: {} {} x depth {}, {}",
            kind.name(),
            plan.threads,
            plan.depth,
            config.pattern.name()
        ));
        datafile::drop_cache(&config.file);
        let options = DeviceOptions {
            direct: config.direct,
            writable: config.pattern.is_write(),
            create: false,
            ..DeviceOptions::default()
        };
        let devices = Devices::open(std::slice::from_ref(&config.file), &options)?;
        let mut run = measure(&devices, &plan)?;
        drop(devices);
        if let Some(fio_path) = fio_path {
            log(&format!("bench io: fio --ioengine={}", fio::ioengine(kind)));
            datafile::drop_cache(&config.file);
            let job = FioJob {
                file: config.file.clone(),
                engine: kind,
                pattern: config.pattern,
                bs: config.bs,
                depth: plan.depth,
                threads: plan.threads,
                size_bytes: region_bytes,
                direct: config.direct,
                ramp_ms: plan.warmup.as_millis() as u64,
                runtime_ms: (plan.measure.as_millis() as u64).max(1),
            };
            run.fio = Some(fio::run(fio_path, &job));
            if config.pattern.is_write() {
                file.restamp()?;
            }
        }
        runs.push(run);
    }
    Ok(runs)
}

/// Random 4 KiB reads with io_uring at depth 128 from one thread over the whole file at
/// `path` (read only) for `seconds` after a short warm-up: the device's read ceiling, in
/// I/Os per second, for `bench lookup` to show next to its lookups.
pub fn device_read_ceiling(path: &Path, direct: bool, seconds: f64) -> Result<f64, BenchError> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(BenchError::Config(format!("{seconds} seconds is out of range")));
    }
    let options =
        DeviceOptions { direct, writable: false, create: false, ..DeviceOptions::default() };
    let devices = Devices::open(&[path.to_owned()], &options)?;
    let region_bytes = devices.size_bytes(0) / CEILING_BS as u64 * CEILING_BS as u64;
    if region_bytes == 0 {
        return Err(BenchError::Config(format!(
            "{} is too small to measure reads on",
            path.display()
        )));
    }
    // io_uring, or AIO where it is refused (a container, say): both keep the depth in flight.
    let kind = [EngineKind::IoUring, EngineKind::Aio]
        .into_iter()
        .find(|&kind| ferrite::io::open_engine(kind, &devices, CEILING_DEPTH).is_ok())
        .unwrap_or(EngineKind::IoUring);
    let plan = Plan {
        kind,
        pattern: Pattern::RandRead,
        bs: CEILING_BS,
        depth: CEILING_DEPTH,
        threads: 1,
        region_bytes,
        warmup: Duration::from_secs_f64((seconds / 5.0).min(0.5)),
        measure: Duration::from_secs_f64(seconds),
    };
    Ok(measure(&devices, &plan)?.iops())
}

/// Runs `plan` on `devices` and returns the measurement (without fio's).
fn measure(devices: &Devices, plan: &Plan) -> Result<EngineRun, BenchError> {
    let phase = AtomicU8::new(WARMUP);
    thread::scope(|scope| {
        let workers: Vec<_> = (0..plan.threads)
            .map(|t| {
                let phase = &phase;
                scope.spawn(move || worker(devices, plan, t, phase))
            })
            .collect();
        let warmup_start = Instant::now();
        wait(&phase, plan.warmup);
        let warmup_seconds = warmup_start.elapsed().as_secs_f64();
        let cpu_before = CpuTime::now();
        let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::AcqRel, Ordering::Acquire);
        let start = Instant::now();
        wait(&phase, plan.measure);
        phase.store(STOP, Ordering::Release);
        let seconds = start.elapsed().as_secs_f64();
        let cpu = CpuTime::now().since(cpu_before);
        let mut latency_ns = Histogram::new();
        let mut ios = 0;
        let mut failure = None;
        for worker in workers {
            match worker.join() {
                Ok(Ok((count, histogram))) => {
                    ios += count;
                    latency_ns.merge(&histogram);
                }
                Ok(Err(error)) => {
                    failure.get_or_insert(error);
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        if let Some(error) = failure {
            return Err(error);
        }
        Ok(EngineRun {
            engine: plan.kind,
            depth: plan.depth,
            threads: plan.threads,
            bs: plan.bs,
            ios,
            seconds,
            warmup_seconds,
            latency_ns,
            cpu,
            fio: None,
        })
    })
}

/// One thread: its own engine, `depth` requests in flight until told to stop; returns the
/// requests completed while measuring and their latencies.
fn worker(
    devices: &Devices,
    plan: &Plan,
    thread_index: usize,
    phase: &AtomicU8,
) -> Result<(u64, Histogram), BenchError> {
    let _stop = StopOnDrop(phase);
    // Declared before the engine, so dropped after it: dropping an engine waits for the
    // requests it still holds, which point into these buffers.
    let mut buffers = AlignedBlock::zeroed(plan.depth * plan.bs);
    if plan.pattern.is_write() {
        datafile::fill_blocks(buffers.as_mut_slice(), datafile::template().as_slice(), 0);
    }
    let mut engine = open_engine(plan.kind, devices, plan.depth)?;
    let base = buffers.as_mut_ptr();
    let kind = if plan.pattern.is_write() { IoKind::Write } else { IoKind::Read };
    let blocks = plan.region_bytes / plan.bs as u64;
    let mut rng = Rng::stream(SEED, thread_index as u64);
    let mut next_block = 0u64;
    let mut free: Vec<usize> = (0..plan.depth).rev().collect();
    let mut issued = vec![Instant::now(); plan.depth];
    let mut offsets = vec![0u64; plan.depth];
    let mut just_queued = Vec::with_capacity(plan.depth);
    let mut out: Vec<IoCompletion> = Vec::with_capacity(plan.depth);
    let mut latency_ns = Histogram::new();
    let mut ios = 0u64;
    let name = plan.kind.name();
    let failed = |what: &str| {
        let context = format!("{name}: {what}");
        move |source: std::io::Error| BenchError::Io { context, source }
    };
    let outcome = loop {
        if phase.load(Ordering::Acquire) == STOP {
            break Ok(());
        }
        just_queued.clear();
        while let Some(slot) = free.pop() {
            let block = if plan.pattern.is_random() {
                rng.below(blocks)
            } else {
                let block = next_block;
                next_block = (next_block + 1) % blocks;
                block
            };
            let (device, offset) = devices.locate_range(block * plan.bs as u64, plan.bs as u64)?;
            let request = IoRequest {
                kind,
                device,
                offset,
                buf: base.wrapping_add(slot * plan.bs),
                len: plan.bs,
                tag: slot as u64,
            };
            // SAFETY: slot `slot`'s part of `buffers` belongs to this request alone until its
            // completion is reaped (only then is the slot free again), and `buffers` outlives
            // the engine.
            match unsafe { engine.queue(request) } {
                Ok(()) => {
                    just_queued.push(slot);
                    offsets[slot] = offset;
                }
                Err(QueueError::Full) => {
                    free.push(slot);
                    break;
                }
                Err(e) => {
                    return Err(BenchError::Config(format!("{name} refused a request: {e}")));
                }
            }
        }
        let now = Instant::now();
        for &slot in &just_queued {
            issued[slot] = now;
        }
        if let Err(e) = engine.submit() {
            break Err(failed("submitting")(e));
        }
        out.clear();
        if let Err(e) = engine.reap(&mut out, true) {
            break Err(failed("reaping")(e));
        }
        let reaped_at = Instant::now();
        let measuring = phase.load(Ordering::Acquire) == MEASURE;
        let mut error = None;
        for completion in out.drain(..) {
            let slot = completion.tag as usize;
            free.push(slot);
            let what = format!("{} bytes at offset {}", plan.bs, offsets[slot]);
            match completion.result {
                Ok(n) if n == plan.bs => {}
                Ok(n) => {
                    let short = std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("moved {n} bytes"),
                    );
                    error.get_or_insert(failed(&what)(short));
                }
                Err(e) => {
                    error.get_or_insert(failed(&what)(e));
                }
            }
            if measuring {
                let nanos = (reaped_at - issued[slot]).as_nanos();
                latency_ns.record(u64::try_from(nanos).unwrap_or(u64::MAX));
                ios += 1;
            }
        }
        if let Some(error) = error {
            break Err(error);
        }
    };
    // Whatever is still in flight finishes before the buffers go.
    while engine.in_flight() > 0 {
        out.clear();
        if engine.reap(&mut out, true).is_err() {
            break;
        }
    }
    outcome.map(|()| (ios, latency_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    fn small(dir: &TempDir, engines: Vec<EngineKind>, pattern: Pattern) -> IoBenchConfig {
        IoBenchConfig {
            file: dir.path().join("data/bench-io.dat"),
            engines,
            pattern,
            depth: 8,
            seconds: 0.2,
            size_mib: 4,
            use_fio: false,
            ..IoBenchConfig::default()
        }
    }

    #[test]
    fn every_engine_measures_every_pattern() {
        let dir = TempDir::new().unwrap();
        for pattern in Pattern::ALL {
            let mut config = small(&dir, EngineKind::ALL.to_vec(), pattern);
            config.keep = true;
            config.threads = 2;
            // Long enough that a write completes in the window while the crate's other
            // tests load the disk too (0.2 s once saw no io_uring seqwrite complete).
            config.seconds = 1.0;
            let report = run(&config, &mut |_| {}, false).unwrap();
            assert_eq!(report.runs.len(), 4);
            for r in &report.runs {
                assert!(r.ios > 0, "{} {}: no I/O", r.engine.name(), pattern.name());
                assert_eq!(r.latency_ns.count(), r.ios);
                assert_eq!(r.depth, if is_synchronous(r.engine) { 1 } else { 8 });
                assert!(r.fio.is_none());
            }
            assert_eq!(report.headline().engine, EngineKind::IoUring);
            assert_eq!(report.fate, FileFate::Kept);
            assert_eq!(report.region_bytes, 4 << 20);
        }
        // The writes kept the file the benchmark's: a last run removes it and its directory.
        assert!(datafile::carries_marker(&dir.path().join("data/bench-io.dat")));
        let report =
            run(&small(&dir, vec![EngineKind::Psync], Pattern::SeqRead), &mut |_| {}, false)
                .unwrap();
        assert_eq!(report.fate, FileFate::Removed);
        assert!(!dir.path().join("data/bench-io.dat").exists());
    }

    #[test]
    fn result_line_and_summary() {
        let dir = TempDir::new().unwrap();
        let config = small(&dir, vec![EngineKind::Aio, EngineKind::IoUring], Pattern::RandRead);
        let mut report = run(&config, &mut |_| {}, false).unwrap();
        assert_eq!(report.fate, FileFate::Removed);
        assert!(!dir.path().join("data").exists(), "the directory the run made is gone");
        let line = report.result_line().to_string();
        assert!(line.starts_with("result iops="), "{line}");
        for field in ["engine=io_uring", "depth=8", "threads=1", "pattern=randread", "bs=4096"] {
            assert!(line.split(' ').any(|f| f == field), "{field} missing from {line}");
        }
        for name in ["mib_per_s", "p50_us", "p99_us", "cpu_us_per_io"] {
            assert!(line.contains(&format!(" {name}=")), "{name} missing from {line}");
        }
        assert!(!line.contains("fio_iops"));
        let text = report.summary();
        for needle in ["io_uring", "aio", "IOPS", "p99.9", "CPU/IO", "fio", "not asked for"] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        // With fio's figures: the ratio appears in the table and the result line.
        let ours = report.runs[1].iops();
        report.runs[1].fio =
            Some(Ok(FioResult { iops: ours / 2.0, bytes_per_s: 0.0, p50_us: None, p99_us: None }));
        report.runs[0].fio = Some(Err("fio exited with 1".into()));
        let line = report.result_line();
        assert_eq!(line.get("ratio"), Some("2.000"));
        assert!(line.get("fio_iops").is_some());
        let text = report.summary();
        assert!(
            text.contains("2.00") && text.contains("fio with libaio: fio exited with 1"),
            "{text}"
        );
    }

    #[test]
    fn validation() {
        assert!(IoBenchConfig::default().validate().is_ok());
        for bad in [
            IoBenchConfig { bs: 1000, ..Default::default() },
            IoBenchConfig { bs: 0, ..Default::default() },
            IoBenchConfig { bs: MAX_BS + 4096, ..Default::default() },
            IoBenchConfig { depth: 0, ..Default::default() },
            IoBenchConfig { threads: 0, ..Default::default() },
            IoBenchConfig { seconds: 0.0, ..Default::default() },
            IoBenchConfig { size_mib: 0, ..Default::default() },
            IoBenchConfig { engines: vec![], ..Default::default() },
            IoBenchConfig { engines: vec![EngineKind::Aio, EngineKind::Aio], ..Default::default() },
            IoBenchConfig { size_mib: 1, bs: 2 << 20, ..Default::default() },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        let c = IoBenchConfig { seconds: 2.0, ..Default::default() };
        assert_eq!(c.warmup_seconds(), 0.4);
        assert_eq!(IoBenchConfig::default().warmup_seconds(), 1.0);
        assert_eq!(c.depth_for(EngineKind::Mmap), 1);
        assert_eq!(c.depth_for(EngineKind::Aio), 64);
        for p in Pattern::ALL {
            assert_eq!(Pattern::from_name(p.name()), Some(p));
        }
    }

    #[test]
    fn the_device_ceiling_reads_a_file() {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("pages");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let iops = device_read_ceiling(&path, true, 0.2).unwrap();
        assert!(iops > 0.0);
        std::fs::write(&path, b"tiny").unwrap();
        assert!(device_read_ceiling(&path, true, 0.2).is_err());
    }
}
