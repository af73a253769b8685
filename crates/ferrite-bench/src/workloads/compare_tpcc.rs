//! `ferrite bench compare tpcc`: `ferrite bench tpcc` on every store given (Ferrite, RocksDB,
//! WiredTiger; LMDB has no transactions adapter and is skipped, saying so), each from the
//! same template: a markdown table with the stores as columns (tx/s, tpmC, reads and writes
//! per transaction and where they come from, CPU per transaction, New-Order's p50 and p99,
//! conflicts, consistency, isolation, the store's cache hit ratio, bytes per device read),
//! the JSON lines of every run, and two charts
//! (transactions/s; p99 by transaction type, log scale).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::report::chart::BarChart;
use crate::stores::StoreKind;
use crate::workloads::compare::provenance;
use crate::workloads::tpcc::txns::Kind;
use crate::workloads::tpcc::{self, TpccConfig, TpccReport};

/// What the suite produced.
#[derive(Debug)]
pub struct TpccCompareOutput {
    pub markdown: PathBuf,
    pub json: PathBuf,
    pub charts: Vec<PathBuf>,
    /// Per store run: its report, or why it failed.
    pub runs: Vec<(StoreKind, Result<TpccReport, String>)>,
    /// Stores given but not run, and why.
    pub skipped: Vec<(StoreKind, &'static str)>,
}

impl TpccCompareOutput {
    pub fn failed(&self) -> usize {
        self.runs.iter().filter(|(_, r)| !matches!(r, Ok(report) if report.consistent())).count()
    }
}

/// Why `store` cannot run TPC-C here, if it cannot.
pub fn unsupported(store: StoreKind) -> Option<&'static str> {
    match store {
        StoreKind::Lmdb => Some("no transactions adapter (ferrite-peers offers none for LMDB)"),
        s if !s.built_in() => Some("not built in (build with --features peers)"),
        _ => None,
    }
}

/// Runs `base` (its store and directory replaced) on each of `stores` in turn, writing into
/// `out`; `say` gets a line per finished run.
pub fn run(
    base: &TpccConfig,
    stores: &[StoreKind],
    out: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<TpccCompareOutput, BenchError> {
    let io = |context: String| move |e: std::io::Error| BenchError::Io { context, source: e };
    std::fs::create_dir_all(out).map_err(io(format!("creating {}", out.display())))?;
    let json = out.join("tpcc.jsonl");
    let (mut runs, mut skipped) = (Vec::new(), Vec::new());
    for &store in stores {
        if let Some(why) = unsupported(store) {
            say(&format!("{}: skipped: {why}", store.name()));
            skipped.push((store, why));
            continue;
        }
        let config = TpccConfig {
            store,
            dir: base.dir.join(format!("bench-tpcc-{}", store.name())),
            json: Some(json.clone()),
            ..base.clone()
        };
        match tpcc::run(&config, false) {
            Ok(report) => {
                say(&report.result_line().to_string());
                runs.push((store, Ok(report)));
            }
            Err(e) => {
                say(&format!("{}: {e}", store.name()));
                runs.push((store, Err(e.to_string())));
            }
        }
    }
    let markdown = out.join("tpcc.md");
    std::fs::write(&markdown, table(base, &runs, &skipped))
        .map_err(io(format!("writing {}", markdown.display())))?;
    let mut charts = Vec::new();
    for (name, chart) in charts_of(&runs) {
        let path = chart.write(&out.join(name)).map_err(io(format!("writing chart {name}")))?;
        charts.push(path);
    }
    Ok(TpccCompareOutput { markdown, json, charts, runs, skipped })
}

/// A latency quantile of `kind`, µs (`None`: none measured).
fn latency_us(report: &TpccReport, kind: Kind, quantile: f64) -> Option<f64> {
    let t = &report.tally[kind.index()];
    (!t.latency_ns.is_empty()).then(|| t.latency_ns.value_at_quantile(quantile) as f64 / 1000.0)
}

/// The table's rows: a name and, per report, the cell.
type Row = (&'static str, fn(&TpccReport) -> String);

const ROWS: [Row; 13] = [
    ("tx/s", |r| format!("{:.0}", r.tx_per_s())),
    ("tpmC", |r| format!("{:.0}", r.tpmc())),
    ("reads/tx", |r| format!("{:.2}", r.io_per_tx().0)),
    ("writes/tx", |r| format!("{:.2}", r.io_per_tx().1)),
    ("reads and writes counted by", |r| r.io_per_tx().2.name().to_owned()),
    ("CPU µs/tx", |r| format!("{:.0}", r.cpu.total_s() * 1e6 / r.transactions().max(1) as f64)),
    ("New-Order p50 µs", |r| {
        latency_us(r, Kind::NewOrder, 0.5).map_or("-".into(), |us| format!("{us:.0}"))
    }),
    ("New-Order p99 µs", |r| {
        latency_us(r, Kind::NewOrder, 0.99).map_or("-".into(), |us| format!("{us:.0}"))
    }),
    ("conflicts (all types)", |r| r.tally.iter().map(|t| t.conflicts).sum::<u64>().to_string()),
    ("consistency", |r| if r.consistent() { "ok" } else { "FAILED" }.to_owned()),
    ("isolation", |r| r.isolation_name.to_owned()),
    ("cache hit ratio", |r| r.cache_hit_ratio().map_or("-".into(), |x| format!("{x:.4}"))),
    ("bytes/device read", |r| r.bytes_per_read().map_or("-".into(), |b| b.to_string())),
];

fn table(
    base: &TpccConfig,
    runs: &[(StoreKind, Result<TpccReport, String>)],
    skipped: &[(StoreKind, &'static str)],
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# bench compare tpcc\n");
    let _ = writeln!(md, "{}\n", provenance());
    let _ = writeln!(
        md,
        "TPC-C, {} warehouse{}{}, {} terminals per warehouse, cache {} MiB per store, {} s \
         measured after {} s of warm-up, no keying or think times, seed {}; {}. Each store \
         loaded once, checked after the load and after the run. Ferrite's terminals are \
         tasks on its workers ({} here) and its reads and writes per transaction the pool's \
         pages; a peer's terminals are threads and its reads and writes the device's \
         requests (all of the device's traffic). The cache hit ratio is the store's own count \
         over the measured window: RocksDB's block cache hits / (hits + misses), WiredTiger's \
         1 - pages read into its cache / pages requested from it; Ferrite's pool counts no \
         hits (-). Bytes per device read are the device's sectors read × 512 / reads \
         completed.\n",
        base.warehouses,
        if base.warehouses == 1 { "" } else { "s" },
        if base.reduced { " at a REDUCED scale (NOT TPC-C)" } else { "" },
        base.terminals_per_warehouse,
        base.cache_mib,
        base.seconds,
        base.warmup().as_secs_f64(),
        base.seed,
        match (base.sync, base.no_log) {
            (true, _) => "every commit synced",
            (false, true) => "the peers' logs off (Ferrite's cannot be: logged, not synced)",
            (false, false) => "commits logged, not synced",
        },
        base.workers
    );
    let mut header = String::from("| |");
    let mut rule = String::from("|---|");
    for (store, _) in runs {
        let _ = write!(header, " {} |", store.name());
        rule.push_str("---:|");
    }
    let _ = writeln!(md, "{header}\n{rule}");
    for (name, cell) in ROWS {
        let _ = write!(md, "| {name} |");
        for (_, result) in runs {
            let text = result.as_ref().map_or("-".into(), cell);
            let _ = write!(md, " {text} |");
        }
        md.push('\n');
    }
    md.push('\n');
    for (store, result) in runs {
        match result {
            Ok(report) => {
                let _ = writeln!(md, "- {}: {}", store.name(), report.isolation);
                let _ = writeln!(md, "  rows read together: {}", report.reads_together);
            }
            Err(e) => {
                let _ = writeln!(md, "- {}: failed: {e}", store.name());
            }
        }
    }
    for (store, why) in skipped {
        let _ = writeln!(md, "- {}: skipped: {why}", store.name());
    }
    // Every option each store ran with, so that a reader can check each was configured
    // the way its own guide says.
    md.push_str("\nOptions:\n\n");
    for (_, result) in runs {
        if let Ok(report) = result {
            let _ = writeln!(md, "- {}", report.store_description);
        }
    }
    md
}

fn charts_of(runs: &[(StoreKind, Result<TpccReport, String>)]) -> Vec<(&'static str, BarChart)> {
    let series: Vec<String> = runs.iter().map(|(s, _)| s.name().to_owned()).collect();
    let reports: Vec<Option<&TpccReport>> = runs.iter().map(|(_, r)| r.as_ref().ok()).collect();
    vec![
        (
            "tpcc-tx",
            BarChart {
                title: "TPC-C transactions/s (higher is better)".into(),
                y_label: "transactions/s".into(),
                groups: vec!["all five types".into()],
                series: series.clone(),
                values: vec![reports.iter().map(|r| r.map(TpccReport::tx_per_s)).collect()],
                log_scale: false,
            },
        ),
        (
            "tpcc-p99",
            BarChart {
                title: "p99 latency by transaction type (lower is better)".into(),
                y_label: "p99 µs".into(),
                groups: Kind::ALL.iter().map(|k| k.name().to_owned()).collect(),
                series,
                values: Kind::ALL
                    .iter()
                    .map(|&k| {
                        reports.iter().map(|r| r.and_then(|r| latency_us(r, k, 0.99))).collect()
                    })
                    .collect(),
                log_scale: true,
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short suite at the reduced scale on every store built in, and LMDB: one run per
    /// store that can, LMDB skipped and named, the table's columns, the JSON lines, two
    /// charts.
    #[test]
    fn the_suite_writes_its_table_runs_and_charts() {
        let tmp = tempfile::tempdir().unwrap();
        let base = TpccConfig::short_test_run(tmp.path().join("data"));
        let stores: Vec<StoreKind> = StoreKind::ALL.to_vec();
        let built: Vec<StoreKind> =
            stores.iter().copied().filter(|s| unsupported(*s).is_none()).collect();
        let out = tmp.path().join("out");
        let mut lines = Vec::new();
        let output = run(&base, &stores, &out, &mut |l| lines.push(l.to_owned())).unwrap();
        assert_eq!(output.runs.len(), built.len());
        assert_eq!(output.failed(), 0, "{lines:?}");
        assert!(output.skipped.iter().any(|(s, _)| *s == StoreKind::Lmdb));
        assert!(lines.iter().any(|l| l.starts_with("lmdb: skipped: no transactions")));
        let md = std::fs::read_to_string(&output.markdown).unwrap();
        let header = built.iter().map(|s| format!(" {} |", s.name())).collect::<String>();
        assert!(md.contains(&format!("| |{header}")), "{md}");
        assert!(md.contains("| consistency |") && md.contains("- lmdb: skipped"), "{md}");
        assert!(md.contains("| cache hit ratio |") && md.contains("| bytes/device read |"), "{md}");
        assert!(md.contains("Options:") && md.contains("- ferrite: pool_bytes="), "{md}");
        assert!(md.contains("REDUCED scale"), "{md}");
        for (store, result) in &output.runs {
            // The peers count their cache's hits; Ferrite's pool does not.
            let report = result.as_ref().unwrap();
            assert_eq!(report.cache_hit_ratio().is_some(), *store != StoreKind::Ferrite);
        }
        let json = std::fs::read_to_string(&output.json).unwrap();
        assert_eq!(json.lines().count(), built.len());
        assert_eq!(output.charts.len(), 2);
        for chart in &output.charts {
            assert!(std::fs::read_to_string(chart).unwrap().starts_with("<svg"));
        }
        assert!(!tmp.path().join("data").join("bench-tpcc-ferrite").exists());
    }
}
