//! The commands about a data directory as a whole: `trees`, `stats` and `check`. `stats` and
//! `check` gather what they find once, then print it as text or (`--json`) as one JSON
//! object: the two cannot tell different stories.

use std::io::Write;
use std::path::{Path, PathBuf};

use ferrite::btree::check::TreeReport;
use ferrite::{CheckReport, DbStats, LogReport};
use ferrite_bench::report::{bytes, thousands};
use ferrite_bench::stores::TierCounters;
use serde::Serialize;

use crate::cli::{CheckArgs, DbArgs, StatsArgs, StatsSource, TreesAction, TreesArgs};
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
    let db_args = match &args.source {
        StatsSource::Dir(db) => db,
        StatsSource::Server(addr) => return server_stats(addr, args.json, out),
    };
    let db = open(db_args, Access::ReadOnly)?;
    let (stats, report) = operate_then_close(db, &db_args.dir, |db| {
        let stats = db.stats()?;
        let report = if args.quick { None } else { Some(db.check()?) };
        Ok(((stats, report), Change::Nothing("stats".into())))
    })?;
    let found = StatsFound {
        dir: &db_args.dir,
        direct_io: db_args.direct_io,
        stats,
        walked: report.map(|report| (Faults::split(report.all_faults()), report)),
    };
    if args.json {
        write_json(out, &found.json())?;
    } else {
        found.write_text(out)?;
    }
    out.flush()?;
    Ok(Outcome::Done)
}

/// How long `stats --server` waits for the server to connect and to answer.
const SERVER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// `ferrite stats --server ADDR`: the server's `stats` reply, read whole, printed as a
/// summary (or, with `json`, every counter).
fn server_stats(addr: &str, json: bool, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let failed = |reason: String| CliError::Server { addr: addr.to_owned(), reason };
    let stats = ask_stats(addr).map_err(failed)?;
    if json {
        let mut object = serde_json::Map::new();
        object.insert("server".into(), addr.into());
        for (name, value) in &stats {
            let value = match value.parse::<u64>() {
                Ok(n) => n.into(),
                Err(_) => match value.parse::<f64>() {
                    Ok(x) => x.into(),
                    Err(_) => value.as_str().into(),
                },
            };
            object.insert(name.clone(), value);
        }
        write_json(out, &object)?;
    } else {
        let get = |name: &str| stats.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let count = |name: &str| get(name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let mut lines = vec![
            (
                "server",
                format!(
                    "{addr}: version {}, process {}, up {} s",
                    get("version").unwrap_or("?"),
                    get("pid").unwrap_or("?"),
                    thousands(count("uptime"))
                ),
            ),
            (
                "connections",
                format!(
                    "{} open, {} since it started, {} refused",
                    thousands(count("curr_connections")),
                    thousands(count("total_connections")),
                    thousands(count("rejected_connections"))
                ),
            ),
            (
                "gets",
                format!(
                    "{} ({} hits, {} misses, {} expired)",
                    thousands(count("cmd_get")),
                    thousands(count("get_hits")),
                    thousands(count("get_misses")),
                    thousands(count("get_expired"))
                ),
            ),
            ("sets", thousands(count("cmd_set"))),
            (
                "deletes",
                format!(
                    "{} hits, {} misses",
                    thousands(count("delete_hits")),
                    thousands(count("delete_misses"))
                ),
            ),
            (
                "network",
                format!(
                    "{} read, {} written",
                    bytes(count("bytes_read")),
                    bytes(count("bytes_written"))
                ),
            ),
        ];
        match get("tier_slots") {
            None => lines.push(("tier", "none (the server runs without --tier)".to_owned())),
            Some(_) => {
                let tier = TierCounters {
                    lookups: count("tier_lookups"),
                    hits: count("tier_hits"),
                    inserts: count("tier_inserts"),
                    invalidations: count("tier_invalidations"),
                    evictions: count("tier_evictions"),
                    bytes_written: count("tier_bytes_written"),
                    refused: count("tier_refused"),
                    filtered: count("tier_filtered"),
                    windows: count("tier_obp_windows"),
                    windows_over: count("tier_obp_windows_over"),
                    window_obp: 0.0,
                    peak_window_obp: 0.0,
                };
                let admitting = match get("tier_admitting") {
                    Some("0") => "not admitting now",
                    _ => "admitting",
                };
                lines.push((
                    "tier",
                    format!(
                        "{} slots of 4 KiB ({}), {admitting}; highest window OBP {}",
                        thousands(count("tier_slots")),
                        bytes(count("tier_slots") * PAGE_BYTES),
                        get("tier_obp_max").unwrap_or("?")
                    ),
                ));
                lines.push(("tier use", tier.describe()));
            }
        }
        for (label, text) in lines {
            writeln!(out, "{label:<12}{text}")?;
        }
    }
    out.flush()?;
    Ok(Outcome::Done)
}

/// Sends `stats` to the memcached server at `addr` and reads its `STAT name value` lines up
/// to `END`.
fn ask_stats(addr: &str) -> Result<Vec<(String, String)>, String> {
    use std::io::BufReader;
    use std::net::{TcpStream, ToSocketAddrs};
    let targets: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr} is not a HOST:PORT this machine resolves: {e}"))?
        .collect();
    let mut last = None;
    let stream = targets
        .iter()
        .find_map(|target| match TcpStream::connect_timeout(target, SERVER_TIMEOUT) {
            Ok(stream) => Some(stream),
            Err(e) => {
                last = Some(e);
                None
            }
        })
        .ok_or_else(|| match last {
            Some(e) => format!("connecting failed: {e}"),
            None => format!("{addr} resolves to no address"),
        })?;
    let io = |e: std::io::Error| format!("talking to it failed: {e}");
    stream.set_read_timeout(Some(SERVER_TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(SERVER_TIMEOUT)).map_err(io)?;
    (&stream).write_all(b"stats\r\n").map_err(io)?;
    read_stats(BufReader::new(&stream))
}

/// A `stats` reply: `STAT name value` lines up to `END`.
fn read_stats(mut reader: impl std::io::BufRead) -> Result<Vec<(String, String)>, String> {
    let io = |e: std::io::Error| format!("talking to it failed: {e}");
    let mut stats = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).map_err(io)? == 0 {
            return Err("it closed the connection before its reply ended (END)".into());
        }
        let text = line.trim_end_matches(['\r', '\n']);
        if text == "END" {
            return Ok(stats);
        }
        match text.strip_prefix("STAT ").and_then(|rest| rest.split_once(' ')) {
            Some((name, value)) => stats.push((name.to_owned(), value.to_owned())),
            None => {
                return Err(format!(
                    "its reply is not memcached's stats: a line reads {:?}",
                    text.chars().take(80).collect::<String>()
                ))
            }
        }
    }
}

/// What `stats` found, printed as text or as JSON.
#[derive(Debug)]
struct StatsFound<'a> {
    dir: &'a Path,
    direct_io: bool,
    stats: DbStats,
    /// The walk of every tree and what it found wrong; `None` with `--quick`.
    walked: Option<(Faults, CheckReport)>,
}

impl StatsFound<'_> {
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let stats = &self.stats;
        let pool = &stats.pool;
        let mut lines = vec![
            ("directory", self.dir.display().to_string()),
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
                    if self.direct_io { "O_DIRECT" } else { "buffered I/O" }
                ),
            ),
            ("trees", thousands(stats.trees as u64)),
        ];
        if self.walked.is_none() {
            lines.push(("per tree", "skipped (--quick)".to_owned()));
        }
        for (label, text) in lines {
            writeln!(out, "{label:<12}{text}")?;
        }
        if let Some((faults, report)) = &self.walked {
            writeln!(
                out,
                "\nper tree (counted by walking every page of every tree, as check does):"
            )?;
            write_tree_table(out, report, false)?;
            if !faults.is_empty() {
                writeln!(
                    out,
                    "\n{} found while counting: run `ferrite check --db {}`",
                    faults.counted(),
                    self.dir.display()
                )?;
            }
        }
        Ok(())
    }

    fn json(&self) -> StatsJson<'_> {
        let stats = &self.stats;
        let pool = &stats.pool;
        StatsJson {
            directory: self.dir.display().to_string(),
            page_file: PageFileJson {
                bytes: stats.file_bytes,
                pages: stats.file_bytes / PAGE_BYTES,
            },
            pages: PagesJson::new(pool.page_count, pool.free_pages),
            pool: PoolJson {
                bytes: pool.pool_pages * PAGE_BYTES,
                pages: pool.pool_pages,
                resident_pages: pool.resident_pages,
                direct_io: self.direct_io,
            },
            tree_count: stats.trees as u64,
            trees: self.walked.as_ref().map(|(_, report)| TreeJson::every_tree(report)),
            fault_count: self.walked.as_ref().map(|(faults, _)| faults.causes.len() as u64),
            lost_page_count: self.walked.as_ref().map(|(faults, _)| faults.lost.len() as u64),
        }
    }
}

pub fn check(args: &CheckArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let db_args = &args.db;
    let found = match open(db_args, Access::ReadOnly) {
        Ok(db) => check_open(db, db_args)?,
        Err(e @ ferrite::Error::LogCorrupt { .. }) => {
            // Without its log the pages cannot be known: the damage is the finding.
            CheckFound::new(&db_args.dir, None, LogVerdict::Damaged(e.to_string()))
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        write_json(out, &found.json())?;
    } else {
        found.write_text(out)?;
    }
    out.flush()?;
    Ok(if found.faults.is_empty() { Outcome::Done } else { Outcome::Faults })
}

/// `check` of a directory whose log let it open: its pages, then its log.
fn check_open<'a>(db: ferrite::Db, db_args: &'a DbArgs) -> Result<CheckFound<'a>, CliError> {
    let recovery = db.recovery_report().clone();
    if !recovery.closed_cleanly {
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
    let pages = CheckedPages { report, closed_cleanly: recovery.closed_cleanly };
    Ok(CheckFound::new(&db_args.dir, Some(pages), log))
}

/// What `check` found, printed as text or as JSON.
#[derive(Debug)]
struct CheckFound<'a> {
    dir: &'a Path,
    /// `None` when the log is damaged: what the pages hold depends on it, so they are not
    /// checked.
    pages: Option<CheckedPages>,
    log: LogVerdict,
    /// Those of the pages, then the log's damage.
    faults: Faults,
}

/// The walk of a directory's pages.
#[derive(Debug)]
struct CheckedPages {
    report: CheckReport,
    /// Whether the directory had been closed cleanly; if not, the pages are checked as
    /// recovery leaves them in memory.
    closed_cleanly: bool,
}

impl<'a> CheckFound<'a> {
    fn new(dir: &'a Path, pages: Option<CheckedPages>, log: LogVerdict) -> Self {
        let mut faults = match &pages {
            Some(pages) => Faults::split(pages.report.all_faults()),
            None => Faults::default(),
        };
        if let LogVerdict::Damaged(damage) = &log {
            faults.causes.push(damage.clone());
        }
        CheckFound { dir, pages, log, faults }
    }

    /// Whether recovery replayed the log into memory for the check.
    fn unclean(&self) -> bool {
        self.pages.as_ref().is_some_and(|pages| !pages.closed_cleanly)
    }

    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out, "checked {}", self.dir.display())?;
        match &self.pages {
            Some(CheckedPages { report, .. }) => {
                write_tree_table(out, report, true)?;
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
            }
            None => {
                writeln!(out, "pages: not checked (what they hold depends on the damaged log)")?
            }
        }
        write_log_section(out, &self.wal_dir(), &self.log, self.unclean())?;
        for fault in self.faults.lines() {
            writeln!(out, "fault: {fault}")?;
        }
        if self.faults.is_empty() {
            writeln!(out, "ok: no faults found")
        } else {
            writeln!(out, "FAILED: {} found", self.faults.counted())
        }
    }

    fn wal_dir(&self) -> PathBuf {
        self.dir.join(ferrite::LOG_DIR_NAME)
    }

    fn json(&self) -> CheckJson<'_> {
        let report = self.pages.as_ref().map(|pages| &pages.report);
        CheckJson {
            directory: self.dir.display().to_string(),
            ok: self.faults.is_empty(),
            closed_cleanly: self.pages.as_ref().map(|pages| pages.closed_cleanly),
            catalog: report.map(|report| TreeJson::new(None, &report.catalog)),
            trees: report.map(TreeJson::every_tree),
            pages: report.map(|report| PagesJson::new(report.page_count, report.free_pages)),
            objects: report.map(|report| {
                let objects = &report.objects;
                ObjectsJson {
                    objects: objects.objects,
                    extents: objects.extents,
                    extent_pages: objects.extent_pages,
                    extent_bytes: objects.extent_pages * PAGE_BYTES,
                    blocks_with_fragments: objects.fragments,
                }
            }),
            log: LogJson::new(&self.log, &self.wal_dir(), self.unclean()),
            fault_count: self.faults.causes.len() as u64,
            lost_page_count: self.faults.lost.len() as u64,
            faults: self.faults.lines(),
            lost_page_ranges: ranges(&self.faults.lost)
                .into_iter()
                .map(|(first, last)| [first, last])
                .collect(),
        }
    }
}

/// `value` as one JSON document, pretty-printed, ending with a newline.
fn write_json(out: &mut dyn Write, value: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

/// `ferrite stats --json`.
#[derive(Debug, Serialize)]
struct StatsJson<'a> {
    directory: String,
    page_file: PageFileJson,
    pages: PagesJson,
    pool: PoolJson,
    tree_count: u64,
    /// `None` (null) with `--quick`, as the two counts below.
    trees: Option<Vec<TreeJson<'a>>>,
    fault_count: Option<u64>,
    lost_page_count: Option<u64>,
}

#[derive(Debug, Serialize)]
struct PageFileJson {
    bytes: u64,
    pages: u64,
}

/// Pages allocated (superblocks included) and free.
#[derive(Debug, Serialize)]
struct PagesJson {
    allocated: u64,
    allocated_bytes: u64,
    free: u64,
}

impl PagesJson {
    fn new(allocated: u64, free: u64) -> Self {
        PagesJson { allocated, allocated_bytes: allocated * PAGE_BYTES, free }
    }
}

#[derive(Debug, Serialize)]
struct PoolJson {
    bytes: u64,
    pages: u64,
    resident_pages: u64,
    direct_io: bool,
}

/// One row of the trees' table (the catalog's has no name).
#[derive(Debug, Serialize)]
struct TreeJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    keys: u64,
    /// Entries waiting in the change buffer, not in `keys` yet (not in the text).
    buffered: u64,
    depth: u16,
    inner_pages: u64,
    leaf_pages: u64,
    value_pages: u64,
    fault_count: u64,
}

impl<'a> TreeJson<'a> {
    fn new(name: Option<&'a str>, tree: &TreeReport) -> Self {
        TreeJson {
            name,
            keys: tree.keys,
            buffered: tree.buffered,
            depth: tree.depth,
            inner_pages: tree.inner_pages,
            leaf_pages: tree.leaf_pages,
            value_pages: tree.value_pages,
            fault_count: tree.faults.len() as u64,
        }
    }

    /// Every user tree of `report`, in its order (the table's).
    fn every_tree(report: &'a CheckReport) -> Vec<Self> {
        report.trees.iter().map(|(name, tree)| TreeJson::new(Some(name), tree)).collect()
    }
}

/// `ferrite check --json`.
#[derive(Debug, Serialize)]
struct CheckJson<'a> {
    directory: String,
    ok: bool,
    /// `None` (null) when the pages were not checked (a damaged log), as the four below.
    closed_cleanly: Option<bool>,
    catalog: Option<TreeJson<'a>>,
    trees: Option<Vec<TreeJson<'a>>>,
    pages: Option<PagesJson>,
    objects: Option<ObjectsJson>,
    log: LogJson,
    fault_count: u64,
    lost_page_count: u64,
    /// The text's `fault:` lines.
    faults: Vec<String>,
    /// Every lost page, as ranges `[first, last]`.
    lost_page_ranges: Vec<[u64; 2]>,
}

#[derive(Debug, Serialize)]
struct ObjectsJson {
    objects: u64,
    extents: u64,
    extent_pages: u64,
    extent_bytes: u64,
    blocks_with_fragments: u64,
}

/// The text's `log:` lines.
#[derive(Debug, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum LogJson {
    /// No checkpoint yet, hence no log.
    None,
    Intact {
        directory: String,
        segments: u64,
        unused_files: u64,
        checkpoint_position: u64,
        replay_position: u64,
        end_position: u64,
        records: u64,
        commits: u64,
        page_images: u64,
        checkpoint_buffered_puts: u64,
        buffered_changes: u64,
        torn_bytes: u64,
        replayed_in_memory: bool,
    },
    Damaged {
        fault: String,
    },
}

impl LogJson {
    fn new(log: &LogVerdict, wal_dir: &Path, unclean: bool) -> Self {
        match log {
            LogVerdict::Absent => LogJson::None,
            LogVerdict::Damaged(damage) => LogJson::Damaged { fault: damage.clone() },
            LogVerdict::Intact(log) => LogJson::Intact {
                directory: wal_dir.display().to_string(),
                segments: log.segments as u64,
                unused_files: unused_log_files(log),
                checkpoint_position: log.checkpoint_lsn,
                replay_position: log.redo_lsn,
                end_position: log.end_lsn,
                records: log.records,
                commits: log.commits,
                page_images: log.images,
                checkpoint_buffered_puts: log.checkpoint_buffered,
                buffered_changes: log.buffered_changes,
                torn_bytes: log.torn_bytes,
                replayed_in_memory: replayed_in_memory(log, unclean),
            },
        }
    }
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

    /// The `fault:` lines: every fault but the lost pages, then the lost pages' line.
    fn lines(&self) -> Vec<String> {
        let mut lines = self.causes.clone();
        if !self.lost.is_empty() {
            lines.push(self.lost_line());
        }
        lines
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
    let ranges = ranges(ids);
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

/// Increasing page ids as runs of consecutive ids: `(first, last)`.
fn ranges(ids: &[u64]) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &id in ids {
        match ranges.last_mut() {
            Some((_, last)) if *last + 1 == id => *last = id,
            _ => ranges.push((id, id)),
        }
    }
    ranges
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
    let unused = unused_log_files(log);
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
    if replayed_in_memory(log, unclean) {
        writeln!(
            out,
            "log: replayed into memory for this check, not on disk: opening the directory for \
             writing (put, del) replays it there"
        )?;
    }
    Ok(())
}

/// Segment files ready for reuse, beyond those holding the log.
fn unused_log_files(log: &LogReport) -> u64 {
    u64::from(log.slots).saturating_sub(log.segments as u64)
}

/// Whether the check replayed what the log holds into memory (the directory was not closed
/// cleanly and its log has changes after the checkpoint).
fn replayed_in_memory(log: &LogReport, unclean: bool) -> bool {
    unclean && log.commits + log.images > 0
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
        // (The engine's reports are `#[non_exhaustive]`: built from their default.)
        let mut report = LogReport::default();
        (report.segments, report.slots) = (2, 3);
        (report.checkpoint_lsn, report.redo_lsn, report.end_lsn) = (1_638, 1_435, 9_000);
        (report.records, report.commits, report.images) = (1_204, 1_000, 1);
        (report.checkpoint_buffered, report.buffered_changes) = (1, 2_500);
        report.torn_bytes = 77;
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
        let tree = tree_report(12, 3_400, 320_000, 3);
        let mut report = CheckReport::default();
        (report.page_count, report.free_pages) = (3_500, 10);
        report.catalog = tree_report(0, 1, 1, 1);
        report.trees = vec![("bench\tx".to_owned(), tree)];
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

    /// A tree's report of `inner` inner pages, `leaves` leaf pages, `keys` keys and depth
    /// `depth`, without faults (the engine's reports are `#[non_exhaustive]`: built from
    /// their default).
    fn tree_report(inner: u64, leaves: u64, keys: u64, depth: u16) -> TreeReport {
        let mut tree = TreeReport::default();
        (tree.inner_pages, tree.leaf_pages, tree.keys, tree.depth) = (inner, leaves, keys, depth);
        tree
    }

    /// A report with one tree, a lost page and a fault, over a log with changes to replay.
    fn found_with_faults(dir: &Path) -> CheckFound<'_> {
        let mut tree = tree_report(1, 40, 1_200, 2);
        tree.buffered = 3;
        tree.faults = vec!["page 9: checksum mismatch".to_owned()];
        let mut report = CheckReport::default();
        (report.page_count, report.free_pages) = (50, 2);
        report.catalog = tree_report(0, 1, 1, 1);
        report.trees = vec![("t\tx".to_owned(), tree)];
        report.faults = vec!["page 44 is neither in use nor free (lost)".to_owned()];
        let mut log = LogReport::default();
        (log.segments, log.slots) = (1, 2);
        (log.checkpoint_lsn, log.redo_lsn, log.end_lsn) = (100, 80, 900);
        (log.records, log.commits, log.buffered_changes) = (9, 7, 3);
        let pages = CheckedPages { report, closed_cleanly: false };
        CheckFound::new(dir, Some(pages), LogVerdict::Intact(log))
    }

    /// The JSON of `check`: every field named, numbers as numbers, the tree's name as it is;
    /// the text of the same findings.
    #[test]
    fn check_json_holds_what_the_text_says() {
        let found = found_with_faults(Path::new("d"));
        let json = serde_json::to_value(found.json()).unwrap();
        let expected = serde_json::json!({
            "directory": "d",
            "ok": false,
            "closed_cleanly": false,
            "catalog": {
                "keys": 1, "buffered": 0, "depth": 1, "inner_pages": 0, "leaf_pages": 1,
                "value_pages": 0, "fault_count": 0
            },
            "trees": [{
                "name": "t\tx", "keys": 1200, "buffered": 3, "depth": 2, "inner_pages": 1,
                "leaf_pages": 40, "value_pages": 0, "fault_count": 1
            }],
            "pages": {"allocated": 50, "allocated_bytes": 50 * 4096, "free": 2},
            "objects": {
                "objects": 0, "extents": 0, "extent_pages": 0, "extent_bytes": 0,
                "blocks_with_fragments": 0
            },
            "log": {
                "state": "intact", "directory": "d/wal", "segments": 1, "unused_files": 1,
                "checkpoint_position": 100, "replay_position": 80, "end_position": 900,
                "records": 9, "commits": 7, "page_images": 0, "checkpoint_buffered_puts": 0,
                "buffered_changes": 3, "torn_bytes": 0, "replayed_in_memory": true
            },
            "fault_count": 1,
            "lost_page_count": 1,
            "faults": [
                "tree \"t\\tx\": page 9: checksum mismatch",
                "1 page neither in use nor free (lost) (a node the walk could not read loses \
                 every page below it): 44"
            ],
            "lost_page_ranges": [[44, 44]]
        });
        assert_eq!(json, expected, "{json:#}");

        let mut out = Vec::new();
        found.write_text(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "checked d");
        assert!(lines[2].starts_with("  (catalog)") && lines[3].starts_with("  t\\tx"), "{text}");
        assert_eq!(lines[4], "pages: 50 allocated (superblocks included), 2 of them free");
        let tail = &lines[lines.len() - 3..];
        assert_eq!(
            tail,
            [
                "fault: tree \"t\\tx\": page 9: checksum mismatch",
                "fault: 1 page neither in use nor free (lost) (a node the walk could not read \
                 loses every page below it): 44",
                "FAILED: 1 fault and 1 lost page found",
            ],
            "{text}"
        );
        assert!(text.contains("log: replayed into memory for this check"), "{text}");
    }

    /// A log damaged at open: the pages unchecked (null in JSON), the damage the one fault.
    #[test]
    fn a_damaged_log_leaves_the_pages_unchecked() {
        let damage = "the write-ahead log is damaged: d/wal/000000.log at byte 4608".to_owned();
        let found = CheckFound::new(Path::new("d"), None, LogVerdict::Damaged(damage.clone()));
        let mut out = Vec::new();
        found.write_text(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "checked d\n\
                 pages: not checked (what they hold depends on the damaged log)\n\
                 log: DAMAGED (see the fault below)\n\
                 fault: {damage}\n\
                 FAILED: 1 fault found\n"
            )
        );
        let json = serde_json::to_value(found.json()).unwrap();
        assert_eq!(json["ok"], false);
        assert_eq!(json["log"], serde_json::json!({"state": "damaged", "fault": damage}));
        assert_eq!(json["faults"], serde_json::json!([damage]));
        assert_eq!((&json["fault_count"], &json["lost_page_count"]), (&1.into(), &0.into()));
        for unchecked in ["closed_cleanly", "catalog", "trees", "pages", "objects"] {
            assert!(json[unchecked].is_null(), "{unchecked}: {json}");
        }
        let none = LogJson::new(&LogVerdict::Absent, Path::new("d/wal"), false);
        assert_eq!(serde_json::to_value(none).unwrap(), serde_json::json!({"state": "none"}));
    }

    /// The JSON of `stats`: the numbers behind each text line, `null` for what `--quick`
    /// skips.
    #[test]
    fn a_stats_reply_is_read_to_its_end_and_anything_else_is_refused() {
        let read = |reply: &[u8]| read_stats(reply);
        assert_eq!(
            read(b"STAT pid 7\r\nSTAT tier_obp 0.090\r\nSTAT version 1.6 ferrite\r\nEND\r\n"),
            Ok(vec![
                ("pid".into(), "7".into()),
                ("tier_obp".into(), "0.090".into()),
                ("version".into(), "1.6 ferrite".into()),
            ])
        );
        assert_eq!(read(b"END\r\n"), Ok(vec![]));
        let cut = read(b"STAT pid 7\r\n").unwrap_err();
        assert!(cut.contains("before its reply ended"), "{cut}");
        let other = read(b"ERROR\r\n").unwrap_err();
        assert!(other.contains("not memcached's stats") && other.contains("ERROR"), "{other}");
        let binary = read(&[0xff, 0xfe, b'\n']).unwrap_err();
        assert!(binary.contains("failed"), "{binary}");
    }

    #[test]
    fn stats_json_holds_what_the_text_says() {
        let mut stats = DbStats::default();
        let pool = &mut stats.pool;
        (pool.pool_pages, pool.resident_pages, pool.page_count, pool.free_pages) = (256, 9, 50, 2);
        (stats.trees, stats.file_bytes) = (1, 1 << 20);
        let quick = StatsFound { dir: Path::new("d"), direct_io: false, stats, walked: None };
        let json = serde_json::to_value(quick.json()).unwrap();
        let expected = serde_json::json!({
            "directory": "d",
            "page_file": {"bytes": 1 << 20, "pages": 256},
            "pages": {"allocated": 50, "allocated_bytes": 50 * 4096, "free": 2},
            "pool": {"bytes": 1 << 20, "pages": 256, "resident_pages": 9, "direct_io": false},
            "tree_count": 1,
            "trees": null,
            "fault_count": null,
            "lost_page_count": null
        });
        assert_eq!(json, expected, "{json:#}");

        let report = found_with_faults(Path::new("d")).pages.unwrap().report;
        let walked = StatsFound {
            walked: Some((Faults::split(report.all_faults()), report)),
            direct_io: true,
            ..quick
        };
        let json = serde_json::to_value(walked.json()).unwrap();
        assert_eq!(json["trees"][0]["name"], "t\tx");
        assert_eq!(json["trees"][0]["keys"], 1200);
        assert_eq!((&json["fault_count"], &json["lost_page_count"]), (&1.into(), &1.into()));
        assert_eq!(json["pool"]["direct_io"], true);
        let mut out = Vec::new();
        walked.write_text(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("\npool        1.0 MiB (256 pages), 9 resident, O_DIRECT\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "\n1 fault and 1 lost page found while counting: run `ferrite check --db d`\n"
            ),
            "{text}"
        );
    }
}
