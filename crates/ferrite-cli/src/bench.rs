//! `ferrite bench WORKLOAD`: hands the parsed configuration to the workload in
//! `ferrite-bench` and prints what it reports. New workloads are one function here and one
//! declaration in `cli`. Where the results go (`--json FILE`, `--out DIR`) is opened
//! before anything runs: a path that cannot take them fails the command at once, not after
//! the whole run.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use ferrite_bench::report::{bytes, duration, thousands};
use ferrite_bench::stores::{open_store, StoreKind};
use ferrite_bench::workloads::compare;
use ferrite_bench::workloads::io::{self as bench_io, IoBenchConfig};
use ferrite_bench::workloads::lookup::{self, LookupConfig};
use ferrite_bench::workloads::objects::{self, ObjectsConfig};
use ferrite_bench::workloads::recovery::{self, seconds_text, RecoveryConfig};
use ferrite_bench::workloads::run::{self as workload, RunConfig};
use ferrite_bench::{BenchError, Progress};

use crate::cli::CompareArgs;

use crate::common::{CliError, Outcome};

/// `ferrite bench lookup`: the summary and the result line on `out`, progress on stderr.
pub fn lookup(config: &LookupConfig, out: &mut dyn Write) -> Result<Outcome, CliError> {
    open_json(config.json.as_deref())?;
    let who = if config.direct_api {
        format!(
            "{} thread{} (blocking API)",
            config.threads,
            if config.threads == 1 { "" } else { "s" }
        )
    } else {
        let engine = config.engine.map_or("io_uring, or the best the kernel allows", |e| e.name());
        format!("{} workers x {} tasks ({engine})", config.workers, config.tasks)
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

/// `ferrite bench objects`: the summary and the result line on `out`; the setup's progress
/// and the measured time on stderr.
pub fn objects(config: &ObjectsConfig, out: &mut dyn Write) -> Result<Outcome, CliError> {
    open_json(config.json.as_deref())?;
    eprintln!(
        "bench objects: {} of {} blocks on {}, {} objects of {} MiB in {}, {} threads, {}{} \
         measured after {} of warm-up",
        config.pattern.name(),
        objects::block_name(config.block_bytes),
        config.store.name(),
        config.objects,
        config.object_mib,
        config.dir.display(),
        config.depth,
        if config.sync { "every write synced, " } else { "" },
        duration(config.seconds),
        duration(config.warmup_seconds())
    );
    let report = objects::run(config, true)?;
    write!(out, "{}", report.summary())?;
    writeln!(out, "{}", report.result_line())?;
    out.flush()?;
    Ok(Outcome::Done)
}

/// `ferrite bench WORKLOAD --store S`: the comparison workloads.
pub fn workload(config: &RunConfig, out: &mut dyn Write) -> Result<Outcome, CliError> {
    open_json(config.json.as_deref())?;
    let keys = if config.workload.needs_data() {
        format!("{} keys", thousands(config.records))
    } else {
        format!("at most {} keys inserted", thousands(config.records))
    };
    eprintln!(
        "bench {}: {} on {keys} in {}, cache {} MiB, {}, {} measured{}; {}",
        config.workload,
        config.store.name(),
        config.data_dir().display(),
        config.cache_mib,
        config.concurrency(),
        duration(config.seconds),
        match config.rate {
            Some(rate) => format!(", open loop at {} ops/s", thousands(rate as u64)),
            None => String::new(),
        },
        config.durability()
    );
    let report = workload::run(config, &open_store, true)?;
    write!(out, "{}", report.summary())?;
    writeln!(out, "{}", report.result_line())?;
    out.flush()?;
    Ok(Outcome::Done)
}

/// A comparison's tables on `out`, then where its files are.
fn write_outputs(
    out: &mut dyn Write,
    markdown: &Path,
    json: &Path,
    charts: &[std::path::PathBuf],
) -> std::io::Result<()> {
    let table = std::fs::read_to_string(markdown).unwrap_or_default();
    write!(out, "{table}")?;
    writeln!(out, "tables: {}", markdown.display())?;
    writeln!(out, "runs: {}", json.display())?;
    for chart in charts {
        writeln!(out, "chart: {}", chart.display())?;
    }
    Ok(())
}

/// `ferrite bench compare serve`: the rate sweep of `ferrite serve` and memcached with
/// extstore (`compare_serve.rs`), from the compare options: `--records` keys, `--cache-mib`
/// of memory, `--seconds` per rate, `--distribution`, `--db`.
fn compare_serve(args: &CompareArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    use ferrite_bench::workloads::compare_serve;
    use ferrite_bench::workloads::serve::{memcached_installed, ServeConfig, ServeStore};
    use ferrite_bench::workloads::ycsb::Distribution;
    let b = &args.base;
    let base = ServeConfig {
        dir: b.dir.clone(),
        keys: b.records,
        memory_mib: b.cache_mib.max(16),
        seconds: b.seconds,
        seed: b.seed,
        zipfian: matches!(b.distribution, Distribution::Zipfian),
        value_size: args.serve.value_size,
        get_percent: args.serve.get_percent,
        ..ServeConfig::new(ServeStore::Ferrite)
    };
    let rates = args.serve.rates.clone().unwrap_or_else(|| compare_serve::RATES.to_vec());
    let mut stores = compare_serve::Contender::all();
    if !memcached_installed() {
        stores.retain(|c| c.store != ServeStore::Memcached);
        eprintln!("bench compare serve: memcached is not installed: Ferrite alone");
    }
    let labels: Vec<String> = stores.iter().map(|c| c.label()).collect();
    let names: Vec<&str> = stores.iter().map(|c| c.store.name()).collect();
    eprintln!(
        "bench compare serve: {} at offered rates {:?} ops/s ({} keys of {} B, {} GET:SET, {} \
         MiB of memory, {} per rate), results in {}",
        labels.join(", "),
        rates,
        thousands(base.keys),
        base.value_size,
        base.mix(),
        base.memory_mib,
        duration(base.seconds),
        args.out.display()
    );
    let output = compare_serve::run(&base, &stores, &rates, &args.out, &mut |l| eprintln!("{l}"))?;
    write_outputs(out, &output.markdown, &output.json, &output.charts)?;
    let failed = output.stores.iter().filter(|(_, _, f)| f.is_some()).count();
    let runs: usize = output.stores.iter().map(|(_, r, _)| r.len()).sum();
    writeln!(out, "result suite=serve stores={} runs={runs} failed={failed}", names.join(","))?;
    out.flush()?;
    Ok(if failed == 0 { Outcome::Done } else { Outcome::Faults })
}

/// `ferrite bench compare tpcc`: `bench tpcc` on every store of `--stores` that can run it
/// (`compare_tpcc.rs`), from the compare options: `--warehouses`, `--cache-mib`, `--seconds`,
/// `--seed`, `--db`, `--no-direct`, `--reduced-scale`.
fn compare_tpcc(args: &CompareArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    use ferrite_bench::workloads::compare_tpcc;
    use ferrite_bench::workloads::tpcc::TpccConfig;
    let b = &args.base;
    let base = TpccConfig {
        dir: b.dir.clone(),
        warehouses: args.warehouses,
        cache_mib: b.cache_mib,
        seconds: b.seconds,
        seed: b.seed,
        direct_io: b.direct_io,
        reduced: args.reduced_scale,
        ..TpccConfig::default()
    };
    base.validate().map_err(BenchError::Config)?;
    let names: Vec<&str> = args.stores.iter().map(|s| s.name()).collect();
    eprintln!(
        "bench compare tpcc: {} warehouse{}{} on {}, cache {} MiB, {} measured per store, \
         results in {}",
        base.warehouses,
        if base.warehouses == 1 { "" } else { "s" },
        if base.reduced { " at a REDUCED scale (NOT TPC-C)" } else { "" },
        names.join(", "),
        base.cache_mib,
        duration(base.seconds),
        args.out.display()
    );
    let output = compare_tpcc::run(&base, &args.stores, &args.out, &mut |l| eprintln!("{l}"))?;
    write_outputs(out, &output.markdown, &output.json, &output.charts)?;
    let ran: Vec<&str> = output.runs.iter().map(|(s, _)| s.name()).collect();
    writeln!(
        out,
        "result suite=tpcc stores={} runs={} failed={} skipped={}",
        ran.join(","),
        output.runs.len(),
        output.failed(),
        output.skipped.len()
    )?;
    out.flush()?;
    Ok(if output.failed() == 0 { Outcome::Done } else { Outcome::Faults })
}

/// `ferrite bench compare SUITE`: every step of the suite on every store, then the tables.
pub fn compare(args: &CompareArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    if args.suite == "serve" {
        return compare_serve(args, out);
    }
    if args.suite == "tpcc" {
        return compare_tpcc(args, out);
    }
    let steps = compare::suite(&args.suite).expect("suite checked by the parser");
    // The directory, and the JSON lines the runs append to as they end.
    std::fs::create_dir_all(&args.out).map_err(|e| BenchError::Io {
        context: format!("creating --out {} (checked before the runs)", args.out.display()),
        source: e,
    })?;
    open_for_appending(&args.out.join(format!("{}.jsonl", args.suite)), "the runs' JSON lines")?;
    let names: Vec<&str> = args.stores.iter().map(|s| s.name()).collect();
    eprintln!(
        "bench compare {}: {} steps on {}{} ({} keys, cache {} MiB, {} per run), results in {}",
        args.suite,
        steps.len(),
        names.join(", "),
        if args.rounds > 1 { format!(", {} rounds", args.rounds) } else { String::new() },
        thousands(args.base.records),
        args.base.cache_mib,
        duration(args.base.seconds),
        args.out.display()
    );
    let output = compare::run(
        &args.suite,
        &steps,
        &args.stores,
        &args.base,
        args.rounds,
        &args.out,
        &mut |line| eprintln!("{line}"),
    )?;
    write_outputs(out, &output.markdown, &output.json, &output.charts)?;
    writeln!(
        out,
        "result suite={} stores={} runs={} failed={}",
        args.suite,
        names.join(","),
        steps.len() * args.stores.len() * args.rounds,
        output.failures.len()
    )?;
    out.flush()?;
    Ok(if output.failures.is_empty() { Outcome::Done } else { Outcome::Faults })
}

/// `ferrite bench recovery`: the table, what it shows and a result line per passing run on
/// `out`; progress and a line per step on stderr. A run that lost acknowledged keys makes the
/// command fail (exit status 2) after the table.
pub fn recovery(config: &RecoveryConfig, out: &mut dyn Write) -> Result<Outcome, CliError> {
    open_json(config.json.as_deref())?;
    let lengths: Vec<String> = config.seconds.iter().map(|&s| seconds_text(s)).collect();
    eprintln!(
        "bench recovery: runs of {} s in {}, {}, cache {} MiB, a checkpoint every {} of log; \
         each run ends in a crash (Db::abandon), a timed reopen and a read-back of every \
         acknowledged key",
        lengths.join(", "),
        config.dir.display(),
        config.concurrency(),
        config.cache_mib,
        bytes(config.checkpoint_bytes)
    );
    let bench = recovery::run(config, true, &mut |line| eprintln!("{line}"))?;
    write!(out, "{}", bench.summary())?;
    // A failed run prints no result line; the command then fails naming it.
    for run in bench.runs.iter().filter(|r| r.failure().is_none()) {
        writeln!(out, "{}", run.result_line(config))?;
    }
    out.flush()?;
    bench.verdict()?;
    Ok(Outcome::Done)
}

pub fn serve(
    config: &ferrite_bench::workloads::serve::ServeConfig,
    out: &mut dyn Write,
) -> Result<Outcome, CliError> {
    open_json(config.json.as_deref())?;
    eprintln!(
        "bench serve: {} GET:SET on {}, {} keys of {} B, {} connections, {} measured",
        config.mix(),
        config.server.map_or(config.store.name().to_owned(), |a| a.to_string()),
        config.keys,
        config.value_size,
        config.connections,
        duration(config.seconds),
    );
    let report = ferrite_bench::workloads::serve::run(config, true)?;
    write!(out, "{}", report.summary())?;
    writeln!(out, "{}", report.result_line())?;
    out.flush()?;
    Ok(Outcome::Done)
}

/// `ferrite bench tpcc`: the summary and the result line on `out`, the load's and the run's
/// progress on stderr. A consistency violation makes the command fail (exit status 1)
/// after the result line.
pub fn tpcc(
    config: &ferrite_bench::workloads::tpcc::TpccConfig,
    out: &mut dyn Write,
) -> Result<Outcome, CliError> {
    open_json(config.json.as_deref())?;
    if config.check_only {
        return tpcc_check(config, out);
    }
    let placement = match config.store {
        StoreKind::Ferrite => format!("on {} workers", config.workers),
        _ => "each on a thread".to_owned(),
    };
    eprintln!(
        "bench tpcc: {} on {} warehouse{}{} in {}, cache {} MiB, {} terminals {placement}, {} \
         measured after {} of warm-up",
        config.store.name(),
        config.warehouses,
        if config.warehouses == 1 { "" } else { "s" },
        if config.reduced { " at a reduced scale (NOT TPC-C)" } else { "" },
        config.dir.display(),
        config.cache_mib,
        config.terminals(),
        duration(config.seconds),
        duration(config.warmup().as_secs_f64())
    );
    let report = ferrite_bench::workloads::tpcc::run(config, true)?;
    write!(out, "{}", report.summary())?;
    writeln!(out, "{}", report.result_line())?;
    out.flush()?;
    Ok(if report.consistent() { Outcome::Done } else { Outcome::Faults })
}

/// `ferrite bench tpcc --check`: the kept data set's consistency, nothing run.
fn tpcc_check(
    config: &ferrite_bench::workloads::tpcc::TpccConfig,
    out: &mut dyn Write,
) -> Result<Outcome, CliError> {
    eprintln!("bench tpcc --check: opening {} in {}", config.store.name(), config.dir.display());
    let report = ferrite_bench::workloads::tpcc::check_kept(config, true)?;
    if let Some(path) = &config.json {
        ferrite_bench::workloads::run::append_json(path, &report.result_line().to_json())?;
    }
    write!(out, "{}", report.summary())?;
    writeln!(out, "{}", report.result_line())?;
    out.flush()?;
    Ok(if report.consistent() { Outcome::Done } else { Outcome::Faults })
}

/// Opens `--json FILE` (creating it) before the run: a file that cannot be appended to fails
/// the command now.
fn open_json(path: Option<&Path>) -> Result<(), CliError> {
    match path {
        Some(path) => open_for_appending(path, "--json"),
        None => Ok(()),
    }
}

fn open_for_appending(path: &Path, what: &str) -> Result<(), CliError> {
    OpenOptions::new().create(true).append(true).open(path).map_err(|e| BenchError::Io {
        context: format!(
            "opening {what} {} for appending (checked before the run)",
            path.display()
        ),
        source: e,
    })?;
    Ok(())
}
