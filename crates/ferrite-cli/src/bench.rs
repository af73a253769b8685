//! `ferrite bench WORKLOAD`: hands the parsed configuration to the workload in
//! `ferrite-bench` and prints what it reports. New workloads are one function here and one
//! arm in the argument parser.

use std::io::Write;

use ferrite_bench::lookup::{self, LookupConfig};
use ferrite_bench::report::{duration, thousands};
use ferrite_bench::Progress;

use crate::common::{CliError, Outcome};

/// `ferrite bench lookup`: the summary and the result line on `out`, progress on stderr.
pub fn lookup(config: &LookupConfig, out: &mut dyn Write) -> Result<Outcome, CliError> {
    eprintln!(
        "bench lookup: {} keys in {}, pool {} MiB, {} thread{}, {} measured after {} of warm-up",
        thousands(config.keys),
        config.dir.display(),
        config.pool_mib,
        config.threads,
        if config.threads == 1 { "" } else { "s" },
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
