//! The commands about a data directory as a whole: `trees`, `stats` and `check`.

use std::io::Write;
use std::path::Path;

use ferrite::btree::check::TreeReport;
use ferrite::{CheckReport, LogReport};
use ferrite_bench::report::{bytes, thousands};

use crate::cli::{DbArgs, StatsArgs, TreesAction, TreesArgs};
use crate::common::{open, operate_then_close, Access, Change, CliError, Outcome};
use crate::encoding::field;

const PAGE_BYTES: u64 = 4096;

pub fn trees(args: &TreesArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let dir = &args.db.dir;
    match &args.action {
        TreesAction::List => {
            let db = open(&args.db, Access::ReadOnly)?;
            let names = operate_then_close(db, dir, |db| {
                Ok((db.tree_names()?, Change::Nothing("the listing".into())))
            })?;
            for name in names {
                writeln!(out, "{}", field(name.as_bytes(), false))?;
            }
            out.flush()?;
        }
        TreesAction::Create(name) => {
            let db = open(&args.db, Access::Create)?;
            operate_then_close(db, dir, |db| {
                db.create_tree(name)?;
                Ok(((), Change::Durable(format!("the creation of tree {name:?}"))))
            })?;
        }
        TreesAction::Drop(name) => {
            let db = open(&args.db, Access::Existing)?;
            operate_then_close(db, dir, |db| {
                db.drop_tree(name)?;
                Ok(((), Change::Durable(format!("the drop of tree {name:?}"))))
            })?;
        }
    }
    Ok(Outcome::Done)
}

pub fn stats(args: &StatsArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let db = open(&args.db, Access::ReadOnly)?;
    let (stats, report) = operate_then_close(db, &args.db.dir, |db| {
        let stats = db.stats()?;
        let report = if args.quick { None } else { Some(db.check()?) };
        Ok(((stats, report), Change::Nothing("stats".into())))
    })?;
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
        let faults = Faults::split(report.all_faults());
        if !faults.is_empty() {
            writeln!(
                out,
                "\n{} found while counting: run `ferrite check --db {}`",
                faults.counted(),
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
        Err(e @ ferrite::Error::LogCorrupt { .. }) => {
            // Without its log the pages cannot be known: the damage is the finding.
            writeln!(out, "checked {}", db_args.dir.display())?;
            writeln!(out, "pages: not checked (what they hold depends on the damaged log)")?;
            writeln!(out, "log: DAMAGED (see the fault below)")?;
            writeln!(out, "fault: {e}")?;
            writeln!(out, "FAILED: 1 fault found")?;
            out.flush()?;
            return Ok(Outcome::Faults);
        }
        Err(e) => return Err(e.into()),
    };
    let recovery = db.recovery_report().clone();
    let unclean = !recovery.closed_cleanly;
    if unclean {
        eprintln!(
            "ferrite: note: {} was not closed cleanly; it is checked as recovered in memory \
             ({} replayed from its log); nothing on disk changed (opening it for writing, as \
             put and del do, recovers it on disk)",
            db_args.dir.display(),
            count(recovery.records, "record")
        );
    }
    // Both results are judged below, after the close: neither ends the command here.
    let (checked, logged) = operate_then_close(db, &db_args.dir, |db| {
        Ok(((db.check(), db.check_log()), Change::Nothing("the check".into())))
    })?;
    let log = LogVerdict::judge(logged)?;
    let report = match checked {
        Ok(report) => report,
        Err(e) => {
            // The pages could not be walked; what the log holds still matters (for a
            // directory not closed cleanly, it is what recovery repairs the pages from).
            eprintln!("ferrite: note: {}", log.summary());
            return Err(e.into());
        }
    };
    writeln!(out, "checked {}", db_args.dir.display())?;
    write_tree_table(out, &report, true)?;
    writeln!(
        out,
        "pages: {} allocated (superblocks included), {} of them free",
        thousands(report.page_count),
        thousands(report.free_pages)
    )?;
    let objects = &report.objects;
    if objects.objects > 0 {
        writeln!(
            out,
            "objects: {}, in {} extents of {} pages ({}), {} blocks with fragments",
            thousands(objects.objects),
            thousands(objects.extents),
            thousands(objects.extent_pages),
            bytes(objects.extent_pages * PAGE_BYTES),
            thousands(objects.fragments)
        )?;
    }
    write_log_section(out, &db_args.dir.join(ferrite::LOG_DIR_NAME), &log, unclean)?;
    let mut faults = Faults::split(report.all_faults());
    if let LogVerdict::Damaged(damage) = &log {
        faults.causes.push(damage.clone());
    }
    for fault in &faults.causes {
        writeln!(out, "fault: {fault}")?;
    }
    if !faults.lost.is_empty() {
        writeln!(out, "fault: {}", faults.lost_line())?;
    }
    let outcome = if faults.is_empty() {
        writeln!(out, "ok: no faults found")?;
        Outcome::Done
    } else {
        writeln!(out, "FAILED: {} found", faults.counted())?;
        Outcome::Faults
    };
    out.flush()?;
    Ok(outcome)
}

/// The faults of a check, for printing. A node that cannot be read hides every page below it
/// from the walk, and each of those pages is then reported lost (neither in use nor free):
/// hundreds of lines that would bury the fault that caused them. They are printed after the
/// other faults, as one line of page ranges.
#[derive(Debug, Default, PartialEq, Eq)]
struct Faults {
    /// Every fault but the lost pages, in the order found.
    causes: Vec<String>,
    /// The lost pages, in increasing order.
    lost: Vec<u64>,
}

/// Longest list of lost page ranges printed, in characters.
const LOST_RANGES_CHARS: usize = 160;

impl Faults {
    fn split(faults: Vec<String>) -> Faults {
        let mut split = Faults::default();
        for fault in faults {
            match lost_page(&fault) {
                Some(id) => split.lost.push(id),
                None => split.causes.push(fault),
            }
        }
        split.lost.sort_unstable();
        split.lost.dedup();
        split
    }

    fn is_empty(&self) -> bool {
        self.causes.is_empty() && self.lost.is_empty()
    }

    /// `3 faults`, `3 faults and 724 lost pages`, `724 lost pages`.
    fn counted(&self) -> String {
        match (self.causes.len(), self.lost.len()) {
            (causes, 0) => count(causes as u64, "fault"),
            (0, lost) => count(lost as u64, "lost page"),
            (causes, lost) => {
                format!("{} and {}", count(causes as u64, "fault"), count(lost as u64, "lost page"))
            }
        }
    }

    /// `724 pages neither in use nor free (lost): 3-40, 57, 60-700, …`.
    fn lost_line(&self) -> String {
        let below = if self.causes.is_empty() {
            ""
        } else {
            " (a node the walk could not read loses every page below it)"
        };
        format!(
            "{} neither in use nor free (lost){below}: {}",
            count(self.lost.len() as u64, "page"),
            page_ranges(&self.lost, LOST_RANGES_CHARS)
        )
    }
}

/// The page of the engine's fault `page N is neither in use nor free (lost)`.
fn lost_page(fault: &str) -> Option<u64> {
    fault.strip_prefix("page ")?.strip_suffix(" is neither in use nor free (lost)")?.parse().ok()
}

/// Increasing page ids as ranges (`3-40, 57, 60-700`), at most about `max_chars` of them; the
/// rest as `… (N more ranges)`.
fn page_ranges(ids: &[u64], max_chars: usize) -> String {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &id in ids {
        match ranges.last_mut() {
            Some((_, last)) if *last + 1 == id => *last = id,
            _ => ranges.push((id, id)),
        }
    }
    let mut text = String::new();
    for (shown, &(first, last)) in ranges.iter().enumerate() {
        let range = if first == last { first.to_string() } else { format!("{first}-{last}") };
        if shown > 0 && text.len() + 2 + range.len() > max_chars {
            let left = ranges.len() - shown;
            text.push_str(&format!(", … ({} more range{})", thousands(left as u64), plural(left)));
            break;
        }
        if shown > 0 {
            text.push_str(", ");
        }
        text.push_str(&range);
    }
    text
}

/// What verifying the write-ahead log found.
#[derive(Debug)]
enum LogVerdict {
    /// The directory has no checkpoint yet, hence no log to verify.
    Absent,
    Intact(LogReport),
    /// `Error::LogCorrupt`'s message: the position and the segment file.
    Damaged(String),
}

impl LogVerdict {
    /// Damage is a fault `check` reports; any other error (I/O) fails the command.
    fn judge(result: ferrite::Result<Option<LogReport>>) -> Result<LogVerdict, CliError> {
        match result {
            Ok(None) => Ok(LogVerdict::Absent),
            Ok(Some(report)) => Ok(LogVerdict::Intact(report)),
            Err(e @ ferrite::Error::LogCorrupt { .. }) => Ok(LogVerdict::Damaged(e.to_string())),
            Err(e) => Err(e.into()),
        }
    }

    /// One line, for when the pages could not be checked.
    fn summary(&self) -> String {
        match self {
            LogVerdict::Absent => "the directory has no write-ahead log yet".to_owned(),
            LogVerdict::Intact(log) => format!(
                "the write-ahead log is intact: {} since its last checkpoint, up to position {}",
                count(log.commits, "commit"),
                log.end_lsn
            ),
            LogVerdict::Damaged(damage) => damage.clone(),
        }
    }
}

/// `n thing` or `n things`, `n` with thousands separators.
fn count(n: u64, thing: &str) -> String {
    format!("{} {thing}{}", thousands(n), plural(n as usize))
}

/// The `log:` lines of `check`: segments, checkpoint, records since, end, torn tail.
fn write_log_section(
    out: &mut dyn Write,
    wal_dir: &Path,
    log: &LogVerdict,
    unclean: bool,
) -> std::io::Result<()> {
    let log = match log {
        LogVerdict::Absent => {
            return writeln!(out, "log: none yet (the directory has no checkpoint)");
        }
        LogVerdict::Damaged(_) => return writeln!(out, "log: DAMAGED (see the fault below)"),
        LogVerdict::Intact(log) => log,
    };
    let unused = u64::from(log.slots).saturating_sub(log.segments as u64);
    writeln!(
        out,
        "log: {} in {}{}; last checkpoint at position {}, replay from {}",
        count(log.segments as u64, "segment"),
        wal_dir.display(),
        if unused > 0 {
            format!(" (and {} ready for reuse)", count(unused, "unused file"))
        } else {
            String::new()
        },
        log.checkpoint_lsn,
        log.redo_lsn
    )?;
    writeln!(
        out,
        "log: {} verified from there to the end (position {}): {}, {}",
        count(log.records, "record"),
        log.end_lsn,
        count(log.commits, "commit"),
        count(log.images, "page image")
    )?;
    if log.checkpoint_buffered + log.buffered_changes > 0 {
        writeln!(
            out,
            "log: change buffer: {} in the checkpoint, {} logged since (puts waiting for \
             their leaves; recovery rebuilds the buffer from them)",
            count(log.checkpoint_buffered, "buffered put"),
            count(log.buffered_changes, "buffered change")
        )?;
    }
    if log.torn_bytes > 0 {
        writeln!(
            out,
            "log: {} torn bytes after the end: a write a crash cut short (never acknowledged), \
             which recovery drops",
            thousands(log.torn_bytes)
        )?;
    }
    if unclean && log.commits + log.images > 0 {
        writeln!(
            out,
            "log: replayed into memory for this check, not on disk: opening the directory for \
             writing (put, del) replays it there"
        )?;
    }
    Ok(())
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
    fn lost_pages_become_ranges_after_the_other_faults() {
        assert_eq!(page_ranges(&[3, 4, 5, 7, 9, 10], 100), "3-5, 7, 9-10");
        assert_eq!(page_ranges(&[42], 100), "42");
        assert_eq!(page_ranges(&[], 100), "");
        let every_other: Vec<u64> = (0..1000).map(|i| i * 2).collect();
        let capped = page_ranges(&every_other, 30);
        assert_eq!(capped, "0, 2, 4, 6, 8, 10, 12, 14, 16, … (991 more ranges)");
        assert_eq!(page_ranges(&[1, 3], 1), "1, … (1 more range)");

        let lost = |id: u64| format!("page {id} is neither in use nor free (lost)");
        let mut faults: Vec<String> = (60..=700).rev().map(lost).collect();
        faults.insert(0, lost(57));
        faults.push("tree \"t\": page 59: checksum mismatch".to_owned());
        faults.extend((3..=40).map(lost));
        let split = Faults::split(faults);
        assert_eq!(split.causes, ["tree \"t\": page 59: checksum mismatch"]);
        assert_eq!(split.lost.len(), 38 + 1 + 641);
        assert_eq!(
            split.lost_line(),
            "680 pages neither in use nor free (lost) (a node the walk could not read loses \
             every page below it): 3-40, 57, 60-700"
        );
        assert_eq!(split.counted(), "1 fault and 680 lost pages");
        let only_lost = Faults::split(vec![lost(9)]);
        assert_eq!(only_lost.lost_line(), "1 page neither in use nor free (lost): 9");
        assert_eq!(only_lost.counted(), "1 lost page");
        let no_lost = Faults::split(vec!["a".into(), "b".into()]);
        assert_eq!((no_lost.counted(), no_lost.lost.len()), ("2 faults".to_owned(), 0));
        assert!(Faults::split(vec![]).is_empty());
        // Only the engine's exact wording is a lost page.
        assert_eq!(lost_page("page 12 is neither in use nor free (lost)"), Some(12));
        assert_eq!(lost_page("tree \"t\": page 12 is neither in use nor free (lost)"), None);
        assert_eq!(lost_page("page x is neither in use nor free (lost)"), None);
    }

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
    fn log_section_names_the_positions_and_a_torn_tail() {
        let report = LogReport {
            segments: 2,
            slots: 3,
            checkpoint_lsn: 1_638,
            redo_lsn: 1_435,
            end_lsn: 9_000,
            records: 1_204,
            commits: 1_000,
            images: 1,
            checkpoint_buffered: 1,
            buffered_changes: 2_500,
            torn_bytes: 77,
        };
        let mut out = Vec::new();
        let wal = Path::new("d/wal");
        write_log_section(&mut out, wal, &LogVerdict::Intact(report), true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "log: 2 segments in d/wal (and 1 unused file ready for reuse); last checkpoint at \
             position 1638, replay from 1435\n\
             log: 1,204 records verified from there to the end (position 9000): 1,000 commits, \
             1 page image\n\
             log: change buffer: 1 buffered put in the checkpoint, 2,500 buffered changes \
             logged since (puts waiting for their leaves; recovery rebuilds the buffer from them)\n\
             log: 77 torn bytes after the end: a write a crash cut short (never acknowledged), \
             which recovery drops\n\
             log: replayed into memory for this check, not on disk: opening the directory for writing (put, del) replays it there\n"
        );
        let mut out = Vec::new();
        let damaged = LogVerdict::Damaged("the write-ahead log in d/wal/000000.log ...".into());
        write_log_section(&mut out, wal, &damaged, false).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "log: DAMAGED (see the fault below)\n");
        let absent = LogVerdict::judge(Ok(None)).unwrap();
        assert!(matches!(absent, LogVerdict::Absent));
        let corrupt = ferrite::Error::LogCorrupt {
            path: "d/wal/000000.log".into(),
            offset: Some(4608),
            lsn: Some(12),
            reason: "sector checksum mismatch".into(),
        };
        let LogVerdict::Damaged(fault) = LogVerdict::judge(Err(corrupt)).unwrap() else {
            panic!("damage is a fault")
        };
        assert!(fault.contains("d/wal/000000.log at byte 4608 (log position 12)"), "{fault}");
        assert!(LogVerdict::judge(Err(ferrite::Error::Closed)).is_err());
    }

    #[test]
    fn tree_table_lists_the_catalog_and_every_tree() {
        let tree = TreeReport {
            inner_pages: 12,
            leaf_pages: 3_400,
            value_pages: 0,
            keys: 320_000,
            buffered: 0,
            depth: 3,
            faults: vec![],
        };
        let report = CheckReport {
            page_count: 3_500,
            free_pages: 10,
            catalog: TreeReport { leaf_pages: 1, keys: 1, depth: 1, ..TreeReport::default() },
            trees: vec![("bench\tx".to_owned(), tree)],
            faults: vec![],
            objects: Default::default(),
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
