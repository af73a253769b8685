//! `ferrite bench compare SUITE`: runs a named suite of workloads on every store built in and
//! writes what `docs/benchmarks.md` shows: markdown tables with workloads as rows and stores
//! as columns (the best of each row in bold, Ferrite's losses kept as they are), the JSON
//! lines of every run, and charts, with the hardware and the commit named.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::report;
use crate::stores::{open_store, StoreKind};
use crate::workloads::run::{self, RunConfig, RunReport};
use crate::workloads::ycsb::{Distribution, Workload};

/// One run of a suite: a workload on a store at one concurrency.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub workload: Workload,
    pub distribution: Option<Distribution>,
    /// Peers' threads (also Ferrite's with `--direct-api`).
    pub threads: Option<usize>,
    /// Ferrite: workers x tasks.
    pub tasks: Option<(usize, usize)>,
    /// Open loop at this rate.
    pub rate: Option<f64>,
    /// `fill-sync`'s committers, on every store (threads; Ferrite's tasks).
    pub committers: Option<usize>,
}

impl Step {
    fn plain(workload: Workload) -> Step {
        Step {
            workload,
            distribution: None,
            threads: None,
            tasks: None,
            rate: None,
            committers: None,
        }
    }
}

/// The suites, by name.
pub const SUITES: [&str; 6] = ["quick", "ycsb", "lookup-sweep", "ycsb-sweep", "sync", "all"];

/// The committers of suite `sync`.
pub const SYNC_COMMITTERS: [usize; 3] = [1, 8, 64];

/// The steps of suite `name`, or `None` if there is no such suite.
pub fn suite(name: &str) -> Option<Vec<Step>> {
    let ycsb: Vec<Step> = ('a'..='f').map(|l| Step::plain(Workload::Ycsb(l))).collect();
    let sweep: Vec<Step> = [1usize, 2, 4, 8, 16, 32, 64, 128, 256]
        .into_iter()
        .map(|t| Step { threads: Some(t), ..Step::plain(Workload::Lookup) })
        .chain(
            [(1, 64), (2, 64), (2, 128)]
                .into_iter()
                .map(|wt| Step { tasks: Some(wt), ..Step::plain(Workload::Lookup) }),
        )
        .collect();
    // YCSB A (updates) and C (reads) over the peers' threads and Ferrite's workers x tasks.
    let ycsb_sweep: Vec<Step> = ['a', 'c']
        .into_iter()
        .flat_map(|letter| {
            let threads = [2usize, 16, 64, 256]
                .into_iter()
                .map(move |t| Step { threads: Some(t), ..Step::plain(Workload::Ycsb(letter)) });
            let tasks = [(1usize, 64usize), (2, 64)]
                .into_iter()
                .map(move |wt| Step { tasks: Some(wt), ..Step::plain(Workload::Ycsb(letter)) });
            threads.chain(tasks)
        })
        .collect();
    Some(match name {
        "quick" => vec![
            Step::plain(Workload::Lookup),
            Step::plain(Workload::Ycsb('a')),
            Step::plain(Workload::Ycsb('c')),
            Step::plain(Workload::Ycsb('e')),
            Step::plain(Workload::FillRandom),
        ],
        "ycsb" => ycsb,
        "lookup-sweep" => sweep,
        "ycsb-sweep" => ycsb_sweep,
        // Durable inserts (not part of `all`: its runs write with every log off).
        "sync" => SYNC_COMMITTERS
            .into_iter()
            .map(|n| Step { committers: Some(n), ..Step::plain(Workload::FillSync) })
            .collect(),
        "all" => {
            let mut all = vec![Step::plain(Workload::Lookup)];
            all.extend(ycsb);
            all.extend(('a'..='f').map(|l| Step {
                distribution: Some(Distribution::Uniform),
                ..Step::plain(Workload::Ycsb(l))
            }));
            all.push(Step::plain(Workload::FillSequential));
            all.push(Step::plain(Workload::FillRandom));
            all.extend(sweep);
            all.extend(ycsb_sweep);
            all
        }
        _ => return None,
    })
}

/// The configuration of `step` on `store`, from the suite's template. Steps that set a
/// concurrency apply only to the stores it means (threads: peers; tasks: Ferrite).
pub fn config_for(base: &RunConfig, step: &Step, store: StoreKind) -> Option<RunConfig> {
    let mut config = base.clone();
    config.workload = step.workload;
    config.store = store;
    config.distribution = step.distribution.unwrap_or(match step.workload {
        Workload::Ycsb(_) => Distribution::Zipfian,
        _ => Distribution::Uniform,
    });
    config.rate = step.rate.or(base.rate);
    config.dir = data_dir(base, store);
    if let Some(n) = step.committers {
        config.committers = n;
    }
    match (store, step.threads, step.tasks) {
        (StoreKind::Ferrite, Some(_), _) if !base.direct_api => return None,
        (StoreKind::Ferrite, _, Some((w, t))) => {
            config.workers = w;
            config.tasks = t;
        }
        (_, _, Some(_)) => return None,
        (_, Some(t), _) => config.threads = t,
        _ => {}
    }
    // A data set is loaded once and kept for the suite's later runs on it; a fill's
    // directory is not wanted afterwards.
    config.keep = step.workload.needs_data();
    config.json = None;
    Some(config)
}

/// The data directory of `store` in a suite rooted at `base.dir`.
fn data_dir(base: &RunConfig, store: StoreKind) -> PathBuf {
    base.dir.join(format!("bench-{}", store.name()))
}

/// The row label of a step.
fn row_label(step: &Step, config: &RunConfig) -> String {
    let mut label = step.workload.name();
    if let Some(d) = step.distribution {
        let _ = write!(label, " ({})", d.name());
    } else if matches!(step.workload, Workload::Ycsb(l) if l != 'd') {
        label.push_str(" (zipfian)");
    }
    if let Some(t) = step.threads {
        let _ = write!(label, ", {t} threads");
    }
    if let Some((w, t)) = step.tasks {
        let _ = write!(label, ", {w}x{t} tasks");
    }
    if let Some(n) = step.committers {
        let _ = write!(label, ", {n} committer{}", if n == 1 { "" } else { "s" });
        if !config.direct_api {
            let _ = write!(label, " [ferrite: tasks on {} workers]", config.workers);
        }
    } else if step.threads.is_none() && step.tasks.is_none() {
        let _ = write!(
            label,
            " [peers {} threads, ferrite {}x{}]",
            config.threads, config.workers, config.tasks
        );
    }
    label
}

/// What a suite produced.
#[derive(Debug)]
pub struct CompareOutput {
    pub markdown: PathBuf,
    pub json: PathBuf,
    pub charts: Vec<PathBuf>,
    pub failures: Vec<String>,
}

/// Runs `steps` on `stores` `rounds` times (at least once; every step on every store per
/// round, rounds one after the other) and writes the tables, JSON lines and charts into
/// `out`. With several rounds each table cell is the run with the median operations/s of its
/// step and store (every run is in the JSON lines), and the tables are followed by
/// Ferrite / RocksDB per round. `say` receives one line per finished run (for progress on
/// the terminal).
pub fn run(
    suite_name: &str,
    steps: &[Step],
    stores: &[StoreKind],
    base: &RunConfig,
    rounds: usize,
    out: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<CompareOutput, BenchError> {
    std::fs::create_dir_all(out).map_err(|e| BenchError::Io {
        context: format!("creating {}", out.display()),
        source: e,
    })?;
    let rounds = rounds.max(1);
    let json = out.join(format!("{suite_name}.jsonl"));
    // What the suite leaves behind unless --keep: each store's data set (kept from run to run
    // of the suite, `config_for`) and the ceiling's file if the suite wrote it.
    let ceiling_file = base.dir.join(run::CEILING_FILE);
    let ceiling_was_there = ceiling_file.exists();
    // The runs of each step on each store, with their round.
    let mut runs: Vec<Vec<Vec<(usize, RunReport)>>> =
        steps.iter().map(|_| stores.iter().map(|_| Vec::new()).collect()).collect();
    let mut labels: Vec<Option<String>> = vec![None; steps.len()];
    let mut failures = Vec::new();
    let total = steps.len() * stores.len() * rounds;
    let mut done = 0;
    for round in 0..rounds {
        let of_round =
            if rounds > 1 { format!(" (round {}/{rounds})", round + 1) } else { String::new() };
        for (at, step) in steps.iter().enumerate() {
            for (column, &store) in stores.iter().enumerate() {
                done += 1;
                let Some(config) = config_for(base, step, store) else { continue };
                labels[at].get_or_insert_with(|| row_label(step, &config));
                let config = RunConfig { json: Some(json.clone()), ..config };
                match run::run(&config, &open_store, true) {
                    Ok(report) => {
                        say(&format!(
                            "[{done}/{total}] {} {}{of_round}: {} ops/s, p99 {}, {:.2} us CPU/op",
                            step.workload,
                            store.name(),
                            report::thousands(report.ops_per_s().round() as u64),
                            report::latency(report.latency_ns.value_at_quantile(0.99)),
                            report.cpu.total_s() * 1e6 / report.counts.total().max(1) as f64
                        ));
                        runs[at][column].push((round, report));
                    }
                    Err(e) => {
                        let line = format!("{} on {}{of_round}: {e}", step.workload, store.name());
                        say(&format!("[{done}/{total}] FAILED {line}"));
                        failures.push(line);
                    }
                }
            }
        }
    }
    if !base.keep {
        let data_dirs = stores.iter().map(|store| data_dir(base, *store));
        for dir in data_dirs.filter(|d| d.exists()) {
            if let Err(e) = run::remove_bench_dir(&dir) {
                say(&format!("left {}: {e}", dir.display()));
            }
        }
        if !ceiling_was_there {
            let _ = std::fs::remove_file(&ceiling_file);
        }
        // The root too, if the suite left it empty.
        let _ = std::fs::remove_dir(&base.dir);
    }
    let labels: Vec<String> = labels
        .into_iter()
        .zip(steps)
        .map(|(label, step)| label.unwrap_or_else(|| step.workload.name()))
        .collect();
    let ratios = (rounds > 1).then(|| {
        let ops: Vec<Vec<Vec<(usize, f64)>>> = runs
            .iter()
            .map(|row| {
                row.iter()
                    .map(|c| c.iter().map(|(r, run)| (*r, run.ops_per_s())).collect())
                    .collect()
            })
            .collect();
        round_ratios(&labels, stores, &ops, rounds)
    });
    let rows: Vec<(String, Vec<Option<RunReport>>)> = labels
        .into_iter()
        .zip(runs)
        .map(|(label, cells)| (label, cells.into_iter().map(median).collect()))
        .collect();
    let markdown = out.join(format!("{suite_name}.md"));
    let charts = charts(suite_name, stores, &rows, out)?;
    let mut text = tables(suite_name, stores, &rows, &failures);
    if let Some(ratios) = ratios {
        text.push_str(&ratios);
    }
    for chart in charts.iter().filter(|c| c.extension().is_some_and(|e| e == "svg")) {
        let name = chart.file_name().unwrap_or_default().to_string_lossy();
        let _ = writeln!(text, "![{name}]({name})\n");
    }
    std::fs::write(&markdown, text).map_err(|e| BenchError::Io {
        context: format!("writing {}", markdown.display()),
        source: e,
    })?;
    Ok(CompareOutput { markdown, json, charts, failures })
}

/// The run with the median operations/s (the lower of the two middle ones for an even
/// count); `None` without runs.
fn median(mut runs: Vec<(usize, RunReport)>) -> Option<RunReport> {
    if runs.is_empty() {
        return None;
    }
    runs.sort_by(|a, b| a.1.ops_per_s().total_cmp(&b.1.ops_per_s()));
    Some(runs.swap_remove((runs.len() - 1) / 2).1)
}

/// The median of `values` (the mean of the two middle ones for an even count).
fn median_of(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The note after the tables of a suite run in several rounds: what a cell is, and Ferrite's
/// operations/s over RocksDB's per row and round (the two runs of a row and round are about
/// a minute apart, so the device drifts less between them than between rounds), with their
/// median.
fn round_ratios(
    labels: &[String],
    stores: &[StoreKind],
    ops: &[Vec<Vec<(usize, f64)>>],
    rounds: usize,
) -> String {
    let mut s = format!(
        "{rounds} rounds (every step on every store, then again): each cell above is the run \
         with the median operations/s of its rounds; every run is in the JSON lines.\n\n"
    );
    let column = |kind: StoreKind| stores.iter().position(|&k| k == kind);
    let (Some(ferrite), Some(rocksdb)) = (column(StoreKind::Ferrite), column(StoreKind::RocksDb))
    else {
        return s;
    };
    let _ = writeln!(s, "**Ferrite / RocksDB operations/s, per round**\n");
    for (at, label) in labels.iter().enumerate() {
        let of = |column: usize, round: usize| {
            ops[at][column].iter().find(|(r, _)| *r == round).map(|&(_, ops)| ops)
        };
        let ratios: Vec<Option<f64>> = (0..rounds)
            .map(|round| Some(of(ferrite, round)? / of(rocksdb, round)?.max(1e-9)))
            .collect();
        let shown: Vec<String> = ratios
            .iter()
            .map(|r| r.map_or_else(|| "–".to_owned(), |r| format!("{r:.2}x")))
            .collect();
        let middle = median_of(ratios.iter().flatten().copied().collect());
        let _ = writeln!(
            s,
            "- {label}: {} (median {})",
            shown.join(", "),
            middle.map_or_else(|| "–".to_owned(), |m| format!("{m:.2}x"))
        );
    }
    s.push('\n');
    s
}

/// A chart's file name part, axis label, title, log scale, and the value of a run.
type Figure = (&'static str, &'static str, &'static str, bool, fn(&RunReport) -> f64);

/// Charts of the suite: operations/s and CPU per operation, workloads as groups and stores
/// as bars, each as SVG.
fn charts(
    suite_name: &str,
    stores: &[StoreKind],
    rows: &[(String, Vec<Option<RunReport>>)],
    out: &Path,
) -> Result<Vec<PathBuf>, BenchError> {
    let series: Vec<String> = stores.iter().map(|s| s.name().to_owned()).collect();
    let labels: Vec<String> = rows.iter().map(|(label, _)| short_label(label)).collect();
    // One workload in every row (a sweep): the concurrency alone tells the groups apart.
    let common = labels.first().and_then(|l| l.split_once(", ")).map(|(w, _)| format!("{w}, "));
    let groups: Vec<String> = match common {
        Some(prefix) if labels.iter().all(|l| l.starts_with(&prefix)) => {
            labels.iter().map(|l| l[prefix.len()..].to_owned()).collect()
        }
        _ => labels,
    };
    let mut written = Vec::new();
    let figures: [Figure; 2] = [
        ("ops", "operations/s", "operations per second (higher is better)", false, |r| {
            r.ops_per_s()
        }),
        ("cpu", "CPU us per operation", "CPU per operation (lower is better)", true, |r| {
            r.cpu.total_s() * 1e6 / r.counts.total().max(1) as f64
        }),
    ];
    for (file, y_label, title, log_scale, value) in figures {
        let chart = crate::report::chart::BarChart {
            title: format!("ferrite bench compare {suite_name}: {title}"),
            y_label: y_label.to_owned(),
            groups: groups.clone(),
            series: series.clone(),
            values: rows
                .iter()
                .map(|(_, cells)| cells.iter().map(|c| c.as_ref().map(value)).collect())
                .collect(),
            log_scale,
        };
        let path = out.join(format!("{suite_name}-{file}"));
        let svg = chart.write(&path).map_err(|e| BenchError::Io {
            context: format!("writing {}", path.display()),
            source: e,
        })?;
        written.push(svg);
    }
    Ok(written)
}

/// A row label short enough for a chart's axis: the workload and the concurrency.
fn short_label(label: &str) -> String {
    let label = label.split(" [").next().unwrap_or(label);
    label
        .replace(" (zipfian)", "")
        .replace(" threads", "t")
        .replace(" tasks", "")
        .replace(" committers", "c")
        .replace(" committer", "c")
}

/// The machine and the commit the binary was built from, for the tables' heading.
pub fn provenance() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb >> 20);
    let commit = crate::BUILD_COMMIT;
    format!("{cpu}, {cores} cores, {mem_gib} GiB RAM; commit {commit}")
}

/// LMDB reads through the OS page cache: say whether the runs capped it.
fn store_note(store: StoreKind, rows: &[(String, Vec<Option<RunReport>>)]) -> &'static str {
    if store != StoreKind::Lmdb {
        return "";
    }
    let lmdb_runs = rows.iter().flat_map(|(_, cells)| cells.iter().flatten());
    let mut descriptions = lmdb_runs.filter(|r| r.config.store == StoreKind::Lmdb);
    if descriptions.all(|r| r.store_description.contains("page cache capped")) {
        " (page cache capped by a cgroup)"
    } else {
        " (page cache NOT capped)"
    }
}

/// A table's metric: title, whether higher is better, the value of a run, its display.
/// A table: its title, whether higher is better (`None`: no best to bold), the value of a run
/// (`None`: the run has none) and how to show it.
type Metric = (&'static str, Option<bool>, fn(&RunReport) -> Option<f64>, fn(f64) -> String);

/// Markdown tables: operations/s, CPU per operation, p99 latency, KiB per device read;
/// workloads as rows, stores as columns, the best of each row in bold (none for read sizes:
/// they are a check of the store's configuration, not a score).
fn tables(
    suite_name: &str,
    stores: &[StoreKind],
    rows: &[(String, Vec<Option<RunReport>>)],
    failures: &[String],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### `ferrite bench compare {suite_name}`\n");
    let _ = writeln!(s, "{}\n", provenance());
    if let Some(first) = rows.iter().flat_map(|(_, c)| c.iter().flatten()).next() {
        let c = &first.config;
        let _ = writeln!(
            s,
            "{} keys of 8 bytes with 120-byte values, cache {} MiB for every store, {} s measured \
             per run{}.\n",
            report::thousands(c.records),
            c.cache_mib,
            c.seconds,
            if c.direct_io { ", O_DIRECT where the store has it" } else { "" }
        );
    }
    let all_runs = || rows.iter().flat_map(|(_, c)| c.iter().flatten());
    if all_runs().any(|r| r.config.workload.durable()) {
        let _ = writeln!(
            s,
            "fill-sync: random inserts into an empty store, each acknowledged only once \
             durable, from N concurrent committers (threads; Ferrite: tasks on its workers): \
             Ferrite `Durability::Sync`; RocksDB WAL on, `WriteOptions.sync=true`; WiredTiger \
             `log=(enabled=true)`, `transaction_sync=(enabled=true,method=fsync)`; LMDB \
             without `MDB_NOSYNC`. Every acknowledged key is read back after reopening the \
             store.\n"
        );
        let flushes: Vec<String> = all_runs()
            .filter(|r| r.config.workload.durable())
            .filter_map(|r| {
                let (_, d) = r.disk.as_ref()?;
                let per_op = d.flushes? as f64 / r.counts.total().max(1) as f64;
                Some(format!("{} {}: {per_op:.3}", r.config.store.name(), r.config.concurrency()))
            })
            .collect();
        if !flushes.is_empty() {
            let _ = writeln!(s, "Device cache flushes per insert: {}.\n", flushes.join("; "));
        }
        let memory: Vec<String> = all_runs()
            .filter(|r| r.config.workload.durable())
            .filter_map(|r| {
                let m = r.memory?;
                let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
                Some(format!(
                    "{} {}: {:.0} MiB ({:.0} cache + {:.0} write buffers)",
                    r.config.store.name(),
                    r.config.concurrency(),
                    mib(m.total()),
                    mib(m.cache),
                    mib(m.write_buffers)
                ))
            })
            .collect();
        if !memory.is_empty() {
            let _ = writeln!(
                s,
                "Data held in memory, at most (sampled every 0.5 s; Ferrite: its frames, dirty \
                 pages included, + its change buffer; RocksDB: block cache usage + memtables; \
                 WiredTiger's `cache_size` bounds all it holds, and LMDB runs in a capped \
                 cgroup): {}.\n",
                memory.join("; ")
            );
        }
    }
    let metrics: [Metric; 4] = [
        (
            "operations/s (higher is better)",
            Some(true),
            |r| Some(r.ops_per_s()),
            |v| report::thousands(v.round() as u64),
        ),
        (
            "CPU µs per operation, user + system (lower is better)",
            Some(false),
            |r| Some(r.cpu.total_s() * 1e6 / r.counts.total().max(1) as f64),
            |v| format!("{v:.2}"),
        ),
        (
            "p99 latency (lower is better)",
            Some(false),
            |r| Some(r.latency_ns.value_at_quantile(0.99) as f64),
            |v| report::latency(v as u64),
        ),
        (
            "KiB read per device read (a check, not a score: about 4 for one 4 KiB block a \
             read; above 8 on a point workload, the store reads more than it needs)",
            None,
            |r| r.disk.as_ref().filter(|(_, d)| d.reads > 0).map(|(_, d)| d.read_kib_per_read()),
            |v| format!("{v:.1}"),
        ),
    ];
    for (title, higher_better, value, show) in metrics {
        let _ = writeln!(s, "**{title}**\n");
        let _ = write!(s, "| workload |");
        for store in stores {
            let _ = write!(s, " {}{} |", store.name(), store_note(*store, rows));
        }
        let _ = write!(s, "\n|---|");
        for _ in stores {
            let _ = write!(s, "---:|");
        }
        s.push('\n');
        for (label, cells) in rows {
            let values: Vec<Option<f64>> =
                cells.iter().map(|c| c.as_ref().and_then(value)).collect();
            let best = higher_better.and_then(|higher| {
                values.iter().flatten().copied().fold(None, |best: Option<f64>, v| {
                    Some(match best {
                        None => v,
                        Some(b) if (higher && v > b) || (!higher && v < b) => v,
                        Some(b) => b,
                    })
                })
            });
            let _ = write!(s, "| {label} |");
            for v in &values {
                match v {
                    Some(v) if Some(*v) == best && values.iter().flatten().count() > 1 => {
                        let _ = write!(s, " **{}** |", show(*v));
                    }
                    Some(v) => {
                        let _ = write!(s, " {} |", show(*v));
                    }
                    None => s.push_str(" – |"),
                }
            }
            s.push('\n');
        }
        s.push('\n');
    }
    if !failures.is_empty() {
        let _ = writeln!(s, "Failed runs:\n");
        for f in failures {
            let _ = writeln!(s, "- {f}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The heading names the commit the build recorded: a short hash (with a note when the
    /// code differed from it), or "unknown" outside a checkout; never the run's directory.
    #[test]
    fn the_heading_names_the_commit_built_from() {
        let commit = crate::BUILD_COMMIT;
        let hash = commit.strip_suffix(" with changes").unwrap_or(commit);
        assert!(
            commit == "unknown" || (hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit())),
            "{commit:?}"
        );
        assert!(provenance().ends_with(&format!("; commit {commit}")), "{}", provenance());
        // Built in a checkout (as from a clone of the repository), the build saw its HEAD:
        // the one there now (the build runs again whenever HEAD moves).
        let head = std::process::Command::new("git")
            .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "--short", "HEAD"])
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
        if let Some(head) = head {
            assert_eq!(hash, head, "built from the checkout's HEAD");
        }
    }
    use tempfile::TempDir;

    #[test]
    fn every_suite_is_known_and_concurrency_steps_go_to_their_stores() {
        for name in SUITES {
            assert!(!suite(name).unwrap().is_empty(), "{name}");
        }
        assert!(suite("nope").is_none());
        let base = RunConfig::new(Workload::Lookup, StoreKind::Ferrite);
        let threads = Step { threads: Some(8), ..Step::plain(Workload::Lookup) };
        assert!(config_for(&base, &threads, StoreKind::Ferrite).is_none());
        assert_eq!(config_for(&base, &threads, StoreKind::RocksDb).unwrap().threads, 8);
        let tasks = Step { tasks: Some((1, 32)), ..Step::plain(Workload::Lookup) };
        assert!(config_for(&base, &tasks, StoreKind::Lmdb).is_none());
        let c = config_for(&base, &tasks, StoreKind::Ferrite).unwrap();
        assert_eq!((c.workers, c.tasks), (1, 32));
        assert!(c.dir.ends_with("bench-ferrite"));
    }

    /// Suite `sync`: fill-sync at 1, 8 and 64 committers on every store, the committers
    /// in the row labels; it runs, and its table explains what each store synced.
    #[test]
    fn the_sync_suite_runs_the_committers_on_every_store() {
        let steps = suite("sync").unwrap();
        assert_eq!(
            steps.iter().map(|s| s.committers).collect::<Vec<_>>(),
            [Some(1), Some(8), Some(64)]
        );
        let dir = TempDir::new().unwrap();
        let base = RunConfig {
            dir: dir.path().join("data"),
            records: 300,
            cache_mib: 1,
            seconds: 30.0,
            workers: 2,
            ceiling: false,
            ..RunConfig::new(Workload::Lookup, StoreKind::Ferrite)
        };
        for store in StoreKind::ALL {
            let c = config_for(&base, &steps[1], store).unwrap();
            assert_eq!((c.workload, c.committers), (Workload::FillSync, 8), "{}", store.name());
            assert_eq!(
                row_label(&steps[1], &c),
                "fill-sync, 8 committers [ferrite: tasks on 2 workers]"
            );
        }
        assert_eq!(
            short_label("fill-sync, 1 committer [ferrite: tasks on 2 workers]"),
            "fill-sync, 1c"
        );
        let out = dir.path().join("out");
        let output =
            run("sync", &steps, &[StoreKind::Ferrite], &base, 1, &out, &mut |_| {}).unwrap();
        assert!(output.failures.is_empty(), "{:?}", output.failures);
        let md = std::fs::read_to_string(&output.markdown).unwrap();
        assert!(md.contains("| fill-sync, 64 committers [ferrite: tasks on 2 workers] |"), "{md}");
        assert!(md.contains("`Durability::Sync`"), "{md}");
        let runs = std::fs::read_to_string(&output.json).unwrap();
        assert_eq!(runs.lines().count(), 3);
        assert!(runs.lines().all(|l| l.contains("\"workload\":\"fill-sync\"")));
    }

    /// A suite's template small enough for a test: 2,000 keys, 1 MiB cache, 0.2 s runs.
    fn tiny_base(dir: &TempDir) -> RunConfig {
        RunConfig {
            dir: dir.path().join("data"),
            records: 2000,
            cache_mib: 1,
            seconds: 0.2,
            workers: 1,
            tasks: 4,
            ceiling: false,
            ..RunConfig::new(Workload::Lookup, StoreKind::Ferrite)
        }
    }

    #[test]
    fn medians_and_ferrite_over_rocksdb_per_round() {
        assert_eq!(median_of(vec![]), None);
        assert_eq!(median_of(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_of(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let stores = [StoreKind::Ferrite, StoreKind::RocksDb, StoreKind::Lmdb];
        let labels = ["fill-sync, 64 committers".to_owned(), "lookup".to_owned()];
        // Row 0: three rounds on both; row 1: RocksDB failed in round 1.
        let ops = vec![
            vec![
                vec![(0, 50_000.0), (1, 48_000.0), (2, 66_000.0)],
                vec![(0, 25_000.0), (1, 30_000.0), (2, 33_000.0)],
                vec![(0, 2_000.0)],
            ],
            vec![vec![(0, 10.0), (1, 10.0), (2, 10.0)], vec![(0, 5.0), (2, 20.0)], vec![]],
        ];
        let text = round_ratios(&labels, &stores, &ops, 3);
        assert!(text.starts_with("3 rounds"), "{text}");
        assert!(
            text.contains("- fill-sync, 64 committers: 2.00x, 1.60x, 2.00x (median 2.00x)"),
            "{text}"
        );
        assert!(text.contains("- lookup: 2.00x, –, 0.50x (median 1.25x)"), "{text}");
        // Without RocksDB there is nothing to divide by: only what a cell is.
        let alone = round_ratios(&labels, &stores[..1], &ops, 3);
        assert!(!alone.contains("Ferrite / RocksDB"), "{alone}");
    }

    #[test]
    fn rounds_run_every_step_again_and_the_tables_show_the_median_run() {
        let dir = TempDir::new().unwrap();
        let base = tiny_base(&dir);
        let steps: Vec<Step> = suite("quick").unwrap().into_iter().take(2).collect();
        let out = dir.path().join("out");
        let mut lines = Vec::new();
        let output = run("quick", &steps, &[StoreKind::Ferrite], &base, 2, &out, &mut |l| {
            lines.push(l.to_owned())
        })
        .unwrap();
        assert!(output.failures.is_empty(), "{:?}", output.failures);
        assert_eq!(lines.len(), 2 * steps.len());
        assert!(lines[0].contains("(round 1/2)") && lines[3].contains("(round 2/2)"), "{lines:?}");
        let runs = std::fs::read_to_string(&output.json).unwrap();
        assert_eq!(runs.lines().count(), 2 * steps.len());
        let md = std::fs::read_to_string(&output.markdown).unwrap();
        assert!(md.contains("2 rounds (every step on every store, then again)"), "{md}");
        // One table row per step, whatever the rounds, in each of the four tables.
        assert_eq!(md.matches("| lookup").count(), 4, "{md}");
    }

    /// A run of `store` at `ops` operations/s whose device read `kib` KiB per read (none: no
    /// counters).
    fn report_of(store: StoreKind, ops: u64, kib: Option<u64>) -> RunReport {
        use crate::measure::diskstats::DiskCounters;
        let disk = kib.map(|k| DiskCounters {
            reads: 1000,
            read_bytes: 1000 * k * 1024,
            ..Default::default()
        });
        RunReport::for_test(store, ops, disk)
    }

    /// Every suite's tables show the KiB each store read per device read, so a misconfigured
    /// store shows itself in them; it is a check, so no cell is bolded as the best, while the
    /// throughput table still bolds its best.
    #[test]
    fn the_tables_show_each_stores_read_size_without_a_best() {
        let stores = [StoreKind::Ferrite, StoreKind::RocksDb, StoreKind::Lmdb];
        let cells = vec![
            Some(report_of(StoreKind::Ferrite, 2000, Some(4))),
            Some(report_of(StoreKind::RocksDb, 1000, Some(70))),
            Some(report_of(StoreKind::Lmdb, 1500, None)),
        ];
        let md = tables("ycsb", &stores, &[("ycsb-c".to_owned(), cells)], &[]);
        let sizes = &md[md.find("**KiB read per device read").expect("the read-size table")..];
        assert!(sizes.contains("| ycsb-c | 4.0 | 70.0 | – |"), "{sizes}");
        assert!(md.contains("| ycsb-c | **2,000** | 1,000 | 1,500 |"), "{md}");
    }

    /// Regression: a suite kept every store's data set (and the ceiling's 1 GiB file) after
    /// its end, 4 GiB a suite at the default size, until the disk filled. Now they go at the
    /// end unless --keep; a ceiling file that was there before stays.
    #[test]
    fn a_suite_removes_its_data_sets_at_the_end_unless_kept() {
        let dir = TempDir::new().unwrap();
        let steps = vec![Step::plain(Workload::Lookup), Step::plain(Workload::Ycsb('c'))];
        let out = dir.path().join("out");
        let base = tiny_base(&dir);
        let data = base.dir.join("bench-ferrite");
        let output = run("quick", &steps, &[StoreKind::Ferrite], &base, 1, &out, &mut |_| {});
        assert!(output.unwrap().failures.is_empty());
        assert!(!data.exists() && !base.dir.exists(), "the suite's data and root are gone");

        let kept = RunConfig { keep: true, ..base.clone() };
        let output = run("quick", &steps, &[StoreKind::Ferrite], &kept, 1, &out, &mut |_| {});
        assert!(output.unwrap().failures.is_empty());
        assert!(data.exists(), "--keep keeps the data set for the next suite");

        // Someone's ceiling file from an earlier run is not the suite's to remove.
        let ceiling = base.dir.join(run::CEILING_FILE);
        std::fs::write(&ceiling, b"earlier").unwrap();
        let output = run("quick", &steps, &[StoreKind::Ferrite], &base, 1, &out, &mut |_| {});
        assert!(output.unwrap().failures.is_empty());
        assert!(!data.exists() && ceiling.exists());
    }

    #[test]
    fn a_suite_writes_tables_json_lines_and_charts() {
        let dir = TempDir::new().unwrap();
        let base = tiny_base(&dir);
        let steps = suite("quick").unwrap();
        let out = dir.path().join("out");
        let mut lines = Vec::new();
        let output = run("quick", &steps, &[StoreKind::Ferrite], &base, 1, &out, &mut |l| {
            lines.push(l.to_owned())
        })
        .unwrap();
        assert!(output.failures.is_empty(), "{:?}", output.failures);
        assert_eq!(lines.len(), steps.len());
        let md = std::fs::read_to_string(&output.markdown).unwrap();
        assert!(md.contains("| workload | ferrite |") && md.contains("ycsb-e"), "{md}");
        assert!(md.contains("**KiB read per device read"), "{md}");
        assert!(md.contains("commit "));
        let runs = std::fs::read_to_string(&output.json).unwrap();
        assert_eq!(runs.lines().count(), steps.len());
        assert_eq!(output.charts.len(), 2);
        for chart in &output.charts {
            assert_eq!(chart.extension().unwrap(), "svg");
            let text = std::fs::read_to_string(chart).unwrap();
            assert!(text.starts_with("<svg") || text.starts_with("<?xml"), "{text}");
            assert!(text.trim_end().ends_with("</svg>"));
        }
    }
}
