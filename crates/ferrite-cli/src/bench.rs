//! `ferrite bench WORKLOAD`: hands the parsed configuration to the workload in
//! `ferrite-bench` and prints what it reports. New workloads are one function here and one
//! arm in the argument parser.

use std::io::Write;

use ferrite_bench::io::{self as bench_io, IoBenchConfig};
use ferrite_bench::lookup::{self, LookupConfig};
use ferrite_bench::report::{bytes, duration, thousands};
use ferrite_bench::Progress;

use crate::common::{CliError, Outcome};

/// `ferrite bench lookup`: the summary and the result line on `out`, progress on stderr.
pub fn lookup(config: &LookupConfig, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let who = if config.direct_api {
        format!(
            "{} thread{} (blocking API)",
            config.threads,
            if config.threads == 1 { "" } else { "s" }
        )
    } else {
        format!("{} workers x {} tasks ({})", config.workers, config.tasks, config.engine.name())
    };
    eprintln!(
        "bench lookup: {} keys in {}, pool {} MiB, {who}, {} measured after {} of warm-up",
        thousands(config.keys),
        config.dir.display(),
        config.pool_mib,
        duration(config.seconds),
        duration(config.warmup_seconds())
    );
    let mut progress = Progress::stderr("loading", "keys", config.keys);
    let report = lookup::run(config, &mut progress)?;
    write!(out, "{}", report.summary())?;
    writeln!(out, "{}", report.result_line())?;
    out.flush()?;
    Ok(Outcome::Done)
}

/// `ferrite bench io`: the table and the result line on `out`; the fill's progress and a
/// line per engine on stderr.
pub fn io(config: &IoBenchConfig, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let engines: Vec<&str> = config.engines.iter().map(|k| k.name()).collect();
    eprintln!(
        "bench io: {} of {} blocks on {} ({} MiB), {}, {} thread{}, {} per engine after {} of \
         warm-up",
        config.pattern.name(),
        bytes(config.bs as u64),
        config.file.display(),
        config.size_mib,
        engines.join(", "),
        config.threads,
        if config.threads == 1 { "" } else { "s" },
        duration(config.seconds),
        duration(config.warmup_seconds())
    );
    let report = bench_io::run(config, &mut |line| eprintln!("{line}"), true)?;
    write!(out, "{}", report.summary())?;
    writeln!(out, "{}", report.result_line())?;
    out.flush()?;
    Ok(Outcome::Done)
}
