//! `ferrite bench compare serve`: `ferrite serve` against memcached with extstore over a
//! sweep of offered rates (open loop), each store loaded once: a markdown table of what each
//! rate gave (operations/s, p50, p99, hit ratio), the highest rate each store served with a
//! p99 of at most 1 ms (the measure), the JSON lines of every run, and two charts
//! (p99 by offered rate, log scale; operations/s by offered rate).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::report::chart::BarChart;
use crate::workloads::compare::provenance;
use crate::workloads::serve::{self, ServeConfig, ServeReport, ServeStore};

/// The offered rates of the sweep, operations/s in all.
pub const RATES: [f64; 6] = [2_500.0, 5_000.0, 10_000.0, 20_000.0, 40_000.0, 80_000.0];

/// The p99 a rate must keep to count as served, microseconds.
pub const P99_BOUND_US: f64 = 1_000.0;

/// One store of the sweep, with Ferrite's durability (memcached has none).
#[derive(Debug, Clone, PartialEq)]
pub struct Contender {
    pub store: ServeStore,
    pub durability: ferrite::Durability,
}

impl Contender {
    /// The sweep's usual three: Ferrite durable (every SET synced before its reply), Ferrite
    /// with durability none (as memcached: a crash may lose the last SETs), memcached.
    pub fn all() -> Vec<Contender> {
        let ferrite = |durability| Contender { store: ServeStore::Ferrite, durability };
        vec![
            ferrite(ferrite::Durability::Sync),
            ferrite(ferrite::Durability::None),
            Contender { store: ServeStore::Memcached, durability: ferrite::Durability::None },
        ]
    }

    /// `ferrite (sync)`, `ferrite (none)`, `memcached`.
    pub fn label(&self) -> String {
        match self.store {
            ServeStore::Ferrite => {
                format!("ferrite ({})", serve::durability_name(self.durability))
            }
            ServeStore::Memcached => "memcached".to_owned(),
        }
    }
}

/// What the sweep produced.
#[derive(Debug)]
pub struct ServeCompareOutput {
    pub markdown: PathBuf,
    pub json: PathBuf,
    pub charts: Vec<PathBuf>,
    /// Per contender: its reports, one per rate (empty when it failed), and its failure.
    pub stores: Vec<(Contender, Vec<ServeReport>, Option<String>)>,
}

/// The highest of `reports`' offered rates whose p99 was at most `P99_BOUND_US`, with every
/// lower rate's too (a rate after one that failed the bound does not count).
pub fn highest_within_bound(reports: &[ServeReport]) -> Option<f64> {
    let mut best = None;
    for report in reports {
        let p99_us = report.latency_ns.value_at_quantile(0.99) as f64 / 1000.0;
        if p99_us > P99_BOUND_US {
            break;
        }
        best = report.config.rate;
    }
    best
}

/// Runs the sweep on `stores` from the template `base` (its rate is replaced), writing into
/// `out`; `say` gets a line per finished run.
pub fn run(
    base: &ServeConfig,
    stores: &[Contender],
    rates: &[f64],
    out: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<ServeCompareOutput, BenchError> {
    let io = |context: String| move |e: std::io::Error| BenchError::Io { context, source: e };
    std::fs::create_dir_all(out).map_err(io(format!("creating {}", out.display())))?;
    let json = out.join("serve.jsonl");
    let rates: Vec<Option<f64>> = rates.iter().map(|&r| Some(r)).collect();
    let mut results = Vec::new();
    for contender in stores {
        let config = ServeConfig {
            store: contender.store,
            durability: contender.durability,
            dir: base.dir.join(format!("bench-serve-{}", contender.store.name())),
            json: Some(json.clone()),
            ..base.clone()
        };
        let outcome = serve::run_rates(&config, &rates, false, &mut |report| {
            say(&report.result_line().to_string());
        });
        match outcome {
            Ok(reports) => results.push((contender.clone(), reports, None)),
            Err(e) => {
                say(&format!("{}: {e}", contender.label()));
                results.push((contender.clone(), Vec::new(), Some(e.to_string())));
            }
        }
    }
    let markdown = out.join("serve.md");
    std::fs::write(&markdown, tables(base, &rates, &results))
        .map_err(io(format!("writing {}", markdown.display())))?;
    let mut charts = Vec::new();
    for (name, chart) in charts_of(&rates, &results) {
        let path = chart.write(&out.join(name)).map_err(io(format!("writing chart {name}")))?;
        charts.push(path);
    }
    Ok(ServeCompareOutput { markdown, json, charts, stores: results })
}

fn p99_us(report: &ServeReport) -> f64 {
    report.latency_ns.value_at_quantile(0.99) as f64 / 1000.0
}

fn tables(
    base: &ServeConfig,
    rates: &[Option<f64>],
    results: &[(Contender, Vec<ServeReport>, Option<String>)],
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# bench compare serve\n");
    let _ = writeln!(md, "{}\n", provenance());
    let _ = writeln!(
        md,
        "{} keys of {} B, {} MiB of memory, {} GET:SET, {} keys, {} connections, open loop \
         (Poisson arrivals, latency from the intended send), {} s per rate; each store loaded \
         once, then every rate in turn. Ferrite with durability sync replies to a SET once it \
         is durable; with none, and memcached, a crash may lose the last SETs (memcached \
         loses every item on a restart).\n",
        base.keys,
        base.value_size,
        base.memory_mib,
        base.mix(),
        if base.zipfian { "zipfian" } else { "uniform" },
        base.connections,
        base.seconds
    );
    let mut header = String::from("| offered ops/s |");
    let mut rule = String::from("|---:|");
    for (store, _, _) in results {
        let name = store.label();
        let _ = write!(header, " {name} ops/s | {name} p50 µs | {name} p99 µs | {name} hits |");
        rule.push_str("---:|---:|---:|---:|");
    }
    let _ = writeln!(md, "{header}\n{rule}");
    for (i, rate) in rates.iter().enumerate() {
        let _ = write!(md, "| {} |", rate.map_or("closed".into(), |r| format!("{r:.0}")));
        for (_, reports, _) in results {
            match reports.get(i) {
                Some(r) => {
                    let p50 = r.latency_ns.value_at_quantile(0.5) as f64 / 1000.0;
                    let _ = write!(
                        md,
                        " {:.0} | {:.0} | {:.0} | {:.4} |",
                        r.ops_per_s(),
                        p50,
                        p99_us(r),
                        r.hit_ratio()
                    );
                }
                None => md.push_str(" - | - | - | - |"),
            }
        }
        md.push('\n');
    }
    md.push('\n');
    let mut best = Vec::new();
    for (contender, reports, failure) in results {
        if let Some(failure) = failure {
            let _ = writeln!(md, "- {}: failed: {failure}", contender.label());
            continue;
        }
        if let Some(first) = reports.first() {
            let facts = first.server_facts();
            if !facts.is_empty() {
                let _ = writeln!(
                    md,
                    "- {}, by its own stats: {} (at the first rate)",
                    contender.label(),
                    facts.join(", ")
                );
            }
        }
        let highest = highest_within_bound(reports);
        let _ = writeln!(
            md,
            "- {}: highest offered rate with p99 ≤ {P99_BOUND_US:.0} µs: {}",
            contender.label(),
            highest.map_or("none of the sweep".into(), |r| format!("{r:.0} ops/s"))
        );
        best.push((contender, highest));
    }
    let memcached = best.iter().find(|(c, _)| c.store == ServeStore::Memcached);
    if let Some((_, Some(m))) = memcached {
        for (contender, highest) in &best {
            if let (ServeStore::Ferrite, Some(f)) = (contender.store, highest) {
                let _ = writeln!(
                    md,
                    "- {} / memcached at that bound: {:.2}x",
                    contender.label(),
                    f / m
                );
            }
        }
    }
    md
}

fn charts_of(
    rates: &[Option<f64>],
    results: &[(Contender, Vec<ServeReport>, Option<String>)],
) -> Vec<(&'static str, BarChart)> {
    let groups: Vec<String> =
        rates.iter().map(|r| r.map_or("closed".into(), |r| format!("{r:.0}/s"))).collect();
    let series: Vec<String> = results.iter().map(|(c, _, _)| c.label()).collect();
    let values = |f: &dyn Fn(&ServeReport) -> f64| -> Vec<Vec<Option<f64>>> {
        (0..rates.len())
            .map(|i| results.iter().map(|(_, reports, _)| reports.get(i).map(f)).collect())
            .collect()
    };
    vec![
        (
            "serve-p99",
            BarChart {
                title: "p99 latency by offered rate (lower is better)".into(),
                y_label: "p99 µs".into(),
                groups: groups.clone(),
                series: series.clone(),
                values: values(&p99_us),
                log_scale: true,
            },
        ),
        (
            "serve-ops",
            BarChart {
                title: "operations/s served by offered rate".into(),
                y_label: "operations/s".into(),
                groups,
                series,
                values: values(&|r: &ServeReport| r.ops_per_s()),
                log_scale: false,
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short sweep on Ferrite alone: a table row per rate, the bound line, two charts.
    #[test]
    fn a_sweep_writes_its_table_runs_and_charts() {
        let tmp = tempfile::tempdir().unwrap();
        let base = ServeConfig {
            dir: tmp.path().join("data"),
            memory_mib: 16,
            keys: 2000,
            value_size: 600,
            connections: 4,
            seconds: 0.3,
            ..ServeConfig::new(ServeStore::Ferrite)
        };
        let out = tmp.path().join("out");
        let mut lines = Vec::new();
        let output = run(&base, &Contender::all()[1..2], &[500.0, 1000.0], &out, &mut |l| {
            lines.push(l.to_owned())
        })
        .unwrap();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.starts_with("result store=ferrite workload=serve")));
        let md = std::fs::read_to_string(&output.markdown).unwrap();
        assert!(md.contains("| 500 |") && md.contains("| 1000 |"), "{md}");
        assert!(md.contains("ferrite (none): highest offered rate with p99"), "{md}");
        assert!(md.contains("| ferrite (none) ops/s |"), "{md}");
        assert_eq!(std::fs::read_to_string(&output.json).unwrap().lines().count(), 2);
        assert_eq!(output.charts.len(), 2);
        for chart in &output.charts {
            assert!(std::fs::read_to_string(chart).unwrap().starts_with("<svg"));
        }
        let (_, reports, failure) = &output.stores[0];
        assert!(failure.is_none());
        assert_eq!(
            reports.iter().map(|r| r.config.rate).collect::<Vec<_>>(),
            [Some(500.0), Some(1000.0)]
        );
    }
}
