//! The commands about a data directory as a whole: `trees`, `stats` and `check`.

use std::io::Write;

use ferrite::btree::check::TreeReport;
use ferrite::CheckReport;
use ferrite_bench::report::{bytes, thousands};

use crate::args::{DbArgs, StatsArgs, TreesAction, TreesArgs};
use crate::common::{open, options, Access, CliError, Outcome};
use crate::encoding::field;

const PAGE_BYTES: u64 = 4096;

pub fn trees(args: &TreesArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    match &args.action {
        TreesAction::List => {
            let db = open(&args.db, Access::ReadOnly)?;
            let names = db.tree_names()?;
            db.close()?;
            for name in names {
                writeln!(out, "{}", field(name.as_bytes(), false))?;
            }
            out.flush()?;
        }
        TreesAction::Create(name) => {
            let db = open(&args.db, Access::Create)?;
            db.create_tree(name)?;
            db.close()?;
        }
        TreesAction::Drop(name) => {
            let db = open(&args.db, Access::Existing)?;
            db.drop_tree(name)?;
            db.close()?;
        }
    }
    Ok(Outcome::Done)
}

pub fn stats(args: &StatsArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::ReadOnly)?;
    let stats = db.stats()?;
    let report = if args.quick { None } else { Some(db.check()?) };
    db.close()?;
    let pool = &stats.pool;
    let mut lines = vec![
        ("directory", args.db.dir.display().to_string()),
        (
            "page file",
            format!(
                "{} on disk ({} pages of 4 KiB)",
                bytes(stats.file_bytes),
                thousands(stats.file_bytes / PAGE_BYTES)
            ),
        ),
        (
            "pages",
            format!(
                "{} allocated ({}, superblocks included), {} of them free",
                thousands(pool.page_count),
                bytes(pool.page_count * PAGE_BYTES),
                thousands(pool.free_pages)
            ),
        ),
        (
            "pool",
            format!(
                "{} ({} pages), {} resident, {}",
                bytes(pool.pool_pages * PAGE_BYTES),
                thousands(pool.pool_pages),
                thousands(pool.resident_pages),
                if args.db.direct_io { "O_DIRECT" } else { "buffered I/O" }
            ),
        ),
        ("trees", thousands(stats.trees as u64)),
    ];
    if report.is_none() {
        lines.push(("per tree", "skipped (--quick)".to_owned()));
    }
    for (label, text) in lines {
        writeln!(out, "{label:<12}{text}")?;
    }
    if let Some(report) = report {
        writeln!(out, "\nper tree (counted by walking every page of every tree, as check does):")?;
        write_tree_table(out, &report, false)?;
        let faults = report.all_faults().len();
        if faults > 0 {
            writeln!(
                out,
                "\n{faults} fault{} found while counting: run `ferrite check --db {}`",
                plural(faults),
                args.db.dir.display()
            )?;
        }
    }
    out.flush()?;
    Ok(Outcome::Done)
}

pub fn check(db_args: &DbArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let db = match open(db_args, Access::ReadOnly) {
        Ok(db) => db,
        Err(ferrite::Error::NotCleanlyClosed { path }) => {
            eprintln!(
                "ferrite: note: {} was not closed cleanly; checking it anyway, read-only. \
                 Free pages are those no tree reaches; a tree torn by the crash shows up as \
                 faults. It stays marked as not cleanly closed.",
                path.display()
            );
            ferrite::Db::open(&db_args.dir, options(db_args, Access::ReadOnly, true))?
        }
        Err(e) => return Err(e.into()),
    };
    let checked = db.check();
    db.close()?;
    let report = checked?;
    writeln!(out, "checked {}", db_args.dir.display())?;
    write_tree_table(out, &report, true)?;
    writeln!(
        out,
        "pages: {} allocated (superblocks included), {} of them free",
        thousands(report.page_count),
        thousands(report.free_pages)
    )?;
    let faults = report.all_faults();
    for fault in &faults {
        writeln!(out, "fault: {fault}")?;
    }
    let outcome = if faults.is_empty() {
        writeln!(out, "ok: no faults found")?;
        Outcome::Done
    } else {
        writeln!(out, "FAILED: {} fault{} found", faults.len(), plural(faults.len()))?;
        Outcome::Faults
    };
    out.flush()?;
    Ok(outcome)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// One row per tree (the catalog first when `with_catalog`): keys, depth, pages by kind.
fn write_tree_table(
    out: &mut dyn Write,
    report: &CheckReport,
    with_catalog: bool,
) -> std::io::Result<()> {
    let mut rows: Vec<(String, &TreeReport)> = Vec::new();
    if with_catalog {
        rows.push(("(catalog)".to_owned(), &report.catalog));
    }
    rows.extend(report.trees.iter().map(|(name, tree)| (field(name.as_bytes(), false), tree)));
    let header = ["tree", "keys", "depth", "inner", "leaf", "value", "faults"];
    let mut table: Vec<[String; 7]> = vec![header.map(str::to_owned)];
    for (name, tree) in rows {
        table.push([
            name,
            thousands(tree.keys),
            tree.depth.to_string(),
            thousands(tree.inner_pages),
            thousands(tree.leaf_pages),
            thousands(tree.value_pages),
            tree.faults.len().to_string(),
        ]);
    }
    for line in render_table(&table) {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// Rows as aligned columns: the first left-aligned, the others right-aligned.
fn render_table<const N: usize>(rows: &[[String; N]]) -> Vec<String> {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .enumerate()
                .map(
                    |(i, (cell, w))| {
                        if i == 0 {
                            format!("{cell:<w$}")
                        } else {
                            format!("{cell:>w$}")
                        }
                    },
                )
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_columns_align() {
        let rows = [
            ["tree", "keys"].map(str::to_owned),
            ["bench", "3,200,000"].map(str::to_owned),
            ["a", "7"].map(str::to_owned),
        ];
        assert_eq!(
            render_table(&rows),
            ["tree        keys", "bench  3,200,000", "a              7"]
        );
    }

    #[test]
    fn tree_table_lists_the_catalog_and_every_tree() {
        let tree = TreeReport {
            inner_pages: 12,
            leaf_pages: 3_400,
            value_pages: 0,
            keys: 320_000,
            depth: 3,
            faults: vec![],
        };
        let report = CheckReport {
            page_count: 3_500,
            free_pages: 10,
            catalog: TreeReport { leaf_pages: 1, keys: 1, depth: 1, ..TreeReport::default() },
            trees: vec![("bench\tx".to_owned(), tree)],
            faults: vec![],
        };
        let mut out = Vec::new();
        write_tree_table(&mut out, &report, true).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("  tree ") && lines[0].ends_with("faults"), "{text}");
        assert!(lines[1].starts_with("  (catalog)"), "{text}");
        assert!(lines[2].starts_with("  bench\\tx") && lines[2].contains("320,000"), "{text}");
        assert!(lines[2].contains("3,400"), "{text}");
    }
}
