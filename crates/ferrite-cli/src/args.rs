//! The command line, parsed by hand into a typed [`Command`].
//!
//! Options are `--name VALUE`, `--name=VALUE` or `--flag`, in any order and at most once
//! each; everything else is a positional argument, and everything after `--` is one (for
//! keys that begin with `-`). `-h` / `--help` anywhere before `--` asks for the command's
//! help. Arguments are `OsString`s: keys and values keep their exact bytes, even when they
//! are not UTF-8. Every error names the command, the problem and the usage.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use ferrite::io::EngineKind;
use ferrite_bench::io::{self as bench_io, IoBenchConfig, Pattern};
use ferrite_bench::lookup::{self, LookupConfig};
use ferrite_bench::recovery::{self, RecoveryConfig};
use ferrite_bench::workload::{RunConfig, StoreKind};
use ferrite_bench::ycsb::{Distribution, Workload};

use crate::encoding::decode_arg;
use crate::help;

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Print this help text on stdout.
    Help(String),
    Version,
    Put(PutArgs),
    Get(KeyArgs),
    Del(KeyArgs),
    Scan(ScanArgs),
    Trees(TreesArgs),
    Stats(StatsArgs),
    Check(DbArgs),
    BenchLookup(LookupConfig),
    BenchIo(IoBenchConfig),
    /// A comparison workload (`lookup --store PEER`, `fill`, `ycsb-a` .. `ycsb-f`).
    BenchWorkload(RunConfig),
    /// `bench compare SUITE`.
    BenchCompare(CompareArgs),
    /// `bench recovery`.
    BenchRecovery(RecoveryConfig),
}

/// `ferrite bench compare SUITE`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareArgs {
    pub suite: String,
    /// Where the markdown table, the JSON lines and the charts go.
    pub out: PathBuf,
    /// The template every run starts from (data directory root, sizes, seconds, ...).
    pub base: RunConfig,
    pub stores: Vec<StoreKind>,
    /// Times the whole suite runs (every step on every store per round).
    pub rounds: usize,
}

/// The options every data command takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbArgs {
    pub dir: PathBuf,
    pub pool_mib: u64,
    pub direct_io: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutArgs {
    pub db: DbArgs,
    pub tree: String,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// `get` and `del`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyArgs {
    pub db: DbArgs,
    pub tree: String,
    pub hex: bool,
    pub key: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanArgs {
    pub db: DbArgs,
    pub tree: String,
    pub hex: bool,
    /// Inclusive lower bound.
    pub from: Option<Vec<u8>>,
    /// Exclusive upper bound.
    pub to: Option<Vec<u8>>,
    pub limit: Option<u64>,
    pub reverse: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreesAction {
    List,
    Create(String),
    Drop(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreesArgs {
    pub db: DbArgs,
    pub action: TreesAction,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsArgs {
    pub db: DbArgs,
    /// Skip the per-tree walk.
    pub quick: bool,
}

/// A command line that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    /// The command's name (`get`, `bench lookup`), empty for the top level.
    pub command: &'static str,
    pub usage: &'static str,
    pub message: String,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let help = if self.command.is_empty() {
            "ferrite --help".to_owned()
        } else {
            format!("ferrite {} --help", self.command)
        };
        if !self.command.is_empty() {
            write!(f, "{}: ", self.command)?;
        }
        write!(
            f,
            "{}\n{}\nrun `{help}` for more",
            self.message,
            help::wrap_usage("usage: ", self.usage)
        )
    }
}

impl std::error::Error for UsageError {}

type Result<T> = std::result::Result<T, UsageError>;

/// A command: its name and usage, for errors.
#[derive(Debug, Clone, Copy)]
struct Cmd {
    name: &'static str,
    usage: &'static str,
}

impl Cmd {
    fn error(self, message: impl Into<String>) -> UsageError {
        UsageError { command: self.name, usage: self.usage, message: message.into() }
    }
}

const TOP: Cmd = Cmd { name: "", usage: help::TOP_USAGE };
const PUT: Cmd = Cmd { name: "put", usage: help::PUT_USAGE };
const GET: Cmd = Cmd { name: "get", usage: help::GET_USAGE };
const DEL: Cmd = Cmd { name: "del", usage: help::DEL_USAGE };
const SCAN: Cmd = Cmd { name: "scan", usage: help::SCAN_USAGE };
const TREES: Cmd = Cmd { name: "trees", usage: help::TREES_USAGE };
const STATS: Cmd = Cmd { name: "stats", usage: help::STATS_USAGE };
const CHECK: Cmd = Cmd { name: "check", usage: help::CHECK_USAGE };
const BENCH: Cmd = Cmd { name: "bench", usage: help::BENCH_USAGE };
const LOOKUP: Cmd = Cmd { name: "bench lookup", usage: help::LOOKUP_USAGE };
const IO: Cmd = Cmd { name: "bench io", usage: help::IO_USAGE };
const WORKLOAD: Cmd = Cmd { name: "bench WORKLOAD", usage: help::WORKLOAD_USAGE };
const COMPARE: Cmd = Cmd { name: "bench compare", usage: help::COMPARE_USAGE };
const RECOVERY: Cmd = Cmd { name: "bench recovery", usage: help::RECOVERY_USAGE };

/// An option: its name and, if it takes a value, the value's placeholder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Opt {
    name: &'static str,
    value: Option<&'static str>,
}

const fn valued(name: &'static str, placeholder: &'static str) -> Opt {
    Opt { name, value: Some(placeholder) }
}

const fn flag(name: &'static str) -> Opt {
    Opt { name, value: None }
}

const DB: Opt = valued("--db", "DIR");
const POOL_MIB: Opt = valued("--pool-mib", "M");
const NO_DIRECT: Opt = flag("--no-direct");
const TREE: Opt = valued("--tree", "TREE");
const HEX: Opt = flag("--hex");
const FROM: Opt = valued("--from", "KEY");
const TO: Opt = valued("--to", "KEY");
const LIMIT: Opt = valued("--limit", "N");
const REVERSE: Opt = flag("--reverse");
const CREATE: Opt = valued("--create", "NAME");
const DROP: Opt = valued("--drop", "NAME");
const QUICK: Opt = flag("--quick");
const KEYS: Opt = valued("--keys", "N");
const SECONDS: Opt = valued("--seconds", "S");
const THREADS: Opt = valued("--threads", "T");
const SEED: Opt = valued("--seed", "X");
const KEEP: Opt = flag("--keep");
const WORKERS: Opt = valued("--workers", "N");
const TASKS: Opt = valued("--tasks", "N");
const ENGINE: Opt = valued("--engine", "ENGINE");
const DEVICES: Opt = valued("--devices", "PATH[,PATH...]");
const DIRECT_API: Opt = flag("--direct-api");
const FILE: Opt = valued("--file", "PATH");
const PATTERN: Opt = valued("--pattern", "PATTERN");
const BS: Opt = valued("--bs", "BYTES");
const DEPTH: Opt = valued("--depth", "N");
const SIZE_MIB: Opt = valued("--size-mib", "M");
const DIRECT: Opt = flag("--direct");
const STORE: Opt = valued("--store", "STORE");
const STORES: Opt = valued("--stores", "STORE[,STORE...]");
const RECORDS: Opt = valued("--records", "N");
const CACHE_MIB: Opt = valued("--cache-mib", "M");
const CHANGE_BUFFER_MIB: Opt = valued("--change-buffer-mib", "M");
const DISTRIBUTION: Opt = valued("--distribution", "DIST");
const RATE: Opt = valued("--rate", "OPS");
const JSON: Opt = valued("--json", "FILE");
const NO_CEILING: Opt = flag("--no-ceiling");
const ORDER: Opt = valued("--order", "ORDER");
const OUT: Opt = valued("--out", "DIR");
const ROUNDS: Opt = valued("--rounds", "N");
const SYNC: Opt = flag("--sync");
const COMMITTERS: Opt = valued("--committers", "N");
const SECONDS_LIST: Opt = valued("--seconds", "S[,S...]");
const CHECKPOINT_MIB: Opt = valued("--checkpoint-mib", "M");

/// Most rounds of `bench compare`.
const MAX_ROUNDS: u64 = 100;

/// Most committers of `fill --sync` (each may be a thread).
const MAX_COMMITTERS: u64 = 4096;

/// Largest pool accepted, in MiB (16 TiB).
const MAX_POOL_MIB: u64 = 1 << 24;

/// Whether the arguments ask for help (`-h` or `--help` before any `--`).
fn wants_help(args: &[OsString]) -> bool {
    args.iter().take_while(|a| *a != "--").any(|a| a == "-h" || a == "--help")
}

/// The arguments of one command, split into options and positionals.
#[derive(Debug)]
struct Parsed<'a> {
    cmd: Cmd,
    values: Vec<(&'static str, &'a OsStr)>,
    flags: Vec<&'static str>,
    positionals: Vec<&'a OsStr>,
}

impl<'a> Parsed<'a> {
    fn new(cmd: Cmd, args: &'a [OsString], opts: &[Opt]) -> Result<Self> {
        let mut parsed =
            Parsed { cmd, values: Vec::new(), flags: Vec::new(), positionals: Vec::new() };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let text = arg.to_str().unwrap_or("");
            if text == "--" {
                parsed.positionals.extend(rest.map(|a| a.as_os_str()));
                break;
            }
            if !text.starts_with('-') || text == "-" {
                parsed.positionals.push(arg);
                continue;
            }
            let (name, inline) = match text.split_once('=') {
                Some((name, value)) => (name, Some(OsStr::new(value))),
                None => (text, None),
            };
            let Some(opt) = opts.iter().find(|o| o.name == name).copied() else {
                let hint = if text.starts_with("--") {
                    String::new()
                } else {
                    format!(" (to pass {text:?} as an argument, put `--` before it)")
                };
                return Err(cmd.error(format!("unknown option {text:?}{hint}")));
            };
            if parsed.flags.contains(&opt.name) || parsed.values.iter().any(|(n, _)| *n == opt.name)
            {
                return Err(cmd.error(format!("{} given twice", opt.name)));
            }
            match opt.value {
                None if inline.is_some() => {
                    return Err(cmd.error(format!("{} takes no value", opt.name)));
                }
                None => parsed.flags.push(opt.name),
                Some(placeholder) => {
                    let value = match inline {
                        Some(value) => value,
                        None => match rest.next() {
                            Some(next) if !next.as_bytes().starts_with(b"--") => next.as_os_str(),
                            _ => {
                                return Err(cmd.error(format!(
                                    "{} needs a value: {} {placeholder}",
                                    opt.name, opt.name
                                )))
                            }
                        },
                    };
                    parsed.values.push((opt.name, value));
                }
            }
        }
        Ok(parsed)
    }

    fn flag(&self, opt: Opt) -> bool {
        self.flags.contains(&opt.name)
    }

    fn value(&self, opt: Opt) -> Option<&'a OsStr> {
        self.values.iter().find(|(n, _)| *n == opt.name).map(|(_, v)| *v)
    }

    fn required(&self, opt: Opt) -> Result<&'a OsStr> {
        self.value(opt).ok_or_else(|| {
            self.cmd.error(format!("missing {} {}", opt.name, opt.value.unwrap_or("")))
        })
    }

    /// The value of `opt` as UTF-8 text.
    fn text(&self, opt: Opt) -> Result<Option<&'a str>> {
        self.value(opt)
            .map(|v| {
                v.to_str().ok_or_else(|| self.cmd.error(format!("{} must be UTF-8 text", opt.name)))
            })
            .transpose()
    }

    /// Exactly the positionals `names`, or an error naming the first missing or extra one.
    fn positionals<const N: usize>(&self, names: [&str; N]) -> Result<[&'a OsStr; N]> {
        if let Some(missing) = names.get(self.positionals.len()) {
            return Err(self.cmd.error(format!("missing {missing}")));
        }
        if let Some(extra) = self.positionals.get(N) {
            return Err(self.cmd.error(format!("unexpected argument {extra:?}")));
        }
        Ok(std::array::from_fn(|i| self.positionals[i]))
    }

    fn db(&self) -> Result<DbArgs> {
        self.db_or(None)
    }

    fn db_or(&self, default_dir: Option<&str>) -> Result<DbArgs> {
        let dir = match (self.value(DB), default_dir) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(default)) => PathBuf::from(default),
            (None, None) => return Err(self.required(DB).unwrap_err()),
        };
        if dir.as_os_str().is_empty() {
            return Err(self.cmd.error("--db must not be empty"));
        }
        let pool_mib = match self.text(POOL_MIB)? {
            Some(text) => self.number(POOL_MIB, text, 1, MAX_POOL_MIB)?,
            None => help::DEFAULT_POOL_MIB,
        };
        Ok(DbArgs { dir, pool_mib, direct_io: !self.flag(NO_DIRECT) })
    }

    fn tree(&self) -> Result<String> {
        self.required(TREE)?;
        Ok(self.text(TREE)?.unwrap_or_default().to_owned())
    }

    /// A whole number in `min..=max`, digits only (`_` allowed between them).
    fn number(&self, opt: Opt, text: &str, min: u64, max: u64) -> Result<u64> {
        let n = parse_whole(text, false).ok_or_else(|| {
            self.cmd.error(format!("{}: {text:?} is not a whole number", opt.name))
        })?;
        self.in_range(opt, n, min, max)
    }

    fn in_range(&self, opt: Opt, n: u64, min: u64, max: u64) -> Result<u64> {
        if n < min || n > max {
            return Err(self
                .cmd
                .error(format!("{}: {n} is out of range ({min} to {max})", opt.name)));
        }
        Ok(n)
    }

    /// Bytes from an argument, as text or hex.
    fn bytes(&self, what: &str, arg: &OsStr, hex: bool) -> Result<Vec<u8>> {
        decode_arg(arg, hex).map_err(|e| self.cmd.error(format!("{what}: {e}")))
    }
}

/// A whole number: digits with optional `_` separators, and with `suffixes` a k / M / G
/// multiplier (10^3, 10^6, 10^9) after a number that may have decimals (`3.2M`).
pub fn parse_whole(text: &str, suffixes: bool) -> Option<u64> {
    let (number, multiplier) = match text.as_bytes().last() {
        Some(b'k' | b'K') if suffixes => (&text[..text.len() - 1], 1_000u128),
        Some(b'm' | b'M') if suffixes => (&text[..text.len() - 1], 1_000_000),
        Some(b'g' | b'G') if suffixes => (&text[..text.len() - 1], 1_000_000_000),
        _ => (text, 1),
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) if multiplier > 1 => (whole, fraction),
        Some(_) => return None,
        None => (number, ""),
    };
    let digits = |s: &str| -> Option<u128> {
        if s.is_empty() || s.starts_with('_') || s.ends_with('_') {
            return None;
        }
        s.chars()
            .filter(|&c| c != '_')
            .try_fold(0u128, |n, c| n.checked_mul(10)?.checked_add(u128::from(c.to_digit(10)?)))
    };
    let mut n = digits(whole)?.checked_mul(multiplier)?;
    if !fraction.is_empty() {
        let scale = 10u128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
        let part = digits(fraction)?.checked_mul(multiplier)?;
        if part % scale != 0 {
            return None;
        }
        n = n.checked_add(part / scale)?;
    }
    u64::try_from(n).ok()
}

/// Parses the arguments after the program name.
pub fn parse(args: &[OsString]) -> Result<Command> {
    let Some(first) = args.first() else {
        return Err(TOP.error("no command given"));
    };
    let rest = &args[1..];
    match first.to_str() {
        Some("-h" | "--help") => Ok(Command::Help(help::top())),
        Some("help") => parse_help(rest),
        Some("-V" | "--version" | "version") => Ok(Command::Version),
        Some("put") => parse_put(rest),
        Some("get") => parse_key_command(GET, rest),
        Some("del") => parse_key_command(DEL, rest),
        Some("scan") => parse_scan(rest),
        Some("trees") => parse_trees(rest),
        Some("stats") => parse_stats(rest),
        Some("check") => parse_check(rest),
        Some("bench") => parse_bench(rest),
        _ => Err(TOP.error(format!("unknown command {first:?}"))),
    }
}

fn parse_help(rest: &[OsString]) -> Result<Command> {
    let words: Vec<&str> = rest.iter().map(|a| a.to_str().unwrap_or("?")).collect();
    let text = match words.as_slice() {
        [] => help::top(),
        ["put"] => help::put(),
        ["get"] => help::get(),
        ["del"] => help::del(),
        ["scan"] => help::scan(),
        ["trees"] => help::trees(),
        ["stats"] => help::stats(),
        ["check"] => help::check(),
        ["bench"] => help::bench(),
        ["bench", "lookup"] => help::bench_lookup(),
        ["bench", "io"] => help::bench_io(),
        ["bench", "compare"] => help::bench_compare(),
        ["bench", "recovery"] => help::bench_recovery(),
        ["bench", _] => help::bench_workload(),
        _ => return Err(TOP.error(format!("no help for {:?}", words.join(" ")))),
    };
    Ok(Command::Help(text))
}

fn parse_put(args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(help::put()));
    }
    let p = Parsed::new(PUT, args, &[DB, POOL_MIB, NO_DIRECT, TREE, HEX])?;
    let db = p.db()?;
    let tree = p.tree()?;
    let [key, value] = p.positionals(["KEY", "VALUE"])?;
    let hex = p.flag(HEX);
    Ok(Command::Put(PutArgs {
        db,
        tree,
        key: p.bytes("KEY", key, hex)?,
        value: p.bytes("VALUE", value, hex)?,
    }))
}

fn parse_key_command(cmd: Cmd, args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(if cmd.name == DEL.name { help::del() } else { help::get() }));
    }
    let p = Parsed::new(cmd, args, &[DB, POOL_MIB, NO_DIRECT, TREE, HEX])?;
    let db = p.db()?;
    let tree = p.tree()?;
    let [key] = p.positionals(["KEY"])?;
    let hex = p.flag(HEX);
    let key_args = KeyArgs { db, tree, hex, key: p.bytes("KEY", key, hex)? };
    Ok(if cmd.name == DEL.name { Command::Del(key_args) } else { Command::Get(key_args) })
}

fn parse_scan(args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(help::scan()));
    }
    let p =
        Parsed::new(SCAN, args, &[DB, POOL_MIB, NO_DIRECT, TREE, HEX, FROM, TO, LIMIT, REVERSE])?;
    let db = p.db()?;
    let tree = p.tree()?;
    p.positionals([])?;
    let hex = p.flag(HEX);
    let from = p.value(FROM).map(|k| p.bytes("--from", k, hex)).transpose()?;
    let to = p.value(TO).map(|k| p.bytes("--to", k, hex)).transpose()?;
    let limit = p.text(LIMIT)?.map(|n| p.number(LIMIT, n, 0, u64::MAX)).transpose()?;
    Ok(Command::Scan(ScanArgs { db, tree, hex, from, to, limit, reverse: p.flag(REVERSE) }))
}

fn parse_trees(args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(help::trees()));
    }
    let p = Parsed::new(TREES, args, &[DB, POOL_MIB, NO_DIRECT, CREATE, DROP])?;
    let db = p.db()?;
    p.positionals([])?;
    let action = match (p.text(CREATE)?, p.text(DROP)?) {
        (None, None) => TreesAction::List,
        (Some(name), None) => TreesAction::Create(name.to_owned()),
        (None, Some(name)) => TreesAction::Drop(name.to_owned()),
        (Some(_), Some(_)) => return Err(TREES.error("--create and --drop exclude each other")),
    };
    Ok(Command::Trees(TreesArgs { db, action }))
}

fn parse_stats(args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(help::stats()));
    }
    let p = Parsed::new(STATS, args, &[DB, POOL_MIB, NO_DIRECT, QUICK])?;
    let db = p.db()?;
    p.positionals([])?;
    Ok(Command::Stats(StatsArgs { db, quick: p.flag(QUICK) }))
}

fn parse_check(args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(help::check()));
    }
    let p = Parsed::new(CHECK, args, &[DB, POOL_MIB, NO_DIRECT])?;
    let db = p.db()?;
    p.positionals([])?;
    Ok(Command::Check(db))
}

fn parse_bench(args: &[OsString]) -> Result<Command> {
    let Some(workload) = args.first() else {
        return Err(BENCH.error("missing WORKLOAD"));
    };
    let rest = &args[1..];
    match workload.to_str() {
        Some("-h" | "--help") => Ok(Command::Help(help::bench())),
        Some("lookup") if has_peer_store(rest) => parse_bench_workload("lookup", rest),
        Some("lookup") => parse_bench_lookup(rest),
        Some("io") => parse_bench_io(rest),
        Some("compare") => parse_bench_compare(rest),
        Some("recovery") => parse_bench_recovery(rest),
        Some(name @ ("fill" | "fill-seq" | "fill-random" | "fill-sync")) => {
            parse_bench_workload(name, rest)
        }
        Some(name) if name.starts_with("ycsb-") && Workload::from_name(name).is_some() => {
            parse_bench_workload(name, rest)
        }
        _ => Err(BENCH.error(format!(
            "unknown workload {workload:?} (known: lookup, fill, fill-seq, fill-random, \
             fill-sync, ycsb-a .. ycsb-f, compare, io, recovery)"
        ))),
    }
}

fn parse_bench_lookup(args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(help::bench_lookup()));
    }
    let p = Parsed::new(
        LOOKUP,
        args,
        &[
            DB, POOL_MIB, NO_DIRECT, KEYS, SECONDS, THREADS, SEED, KEEP, WORKERS, TASKS, ENGINE,
            DEVICES, DIRECT_API, STORE, JSON,
        ],
    )?;
    // Another store runs the comparison workload instead (see `has_peer_store`).
    if let Some(store) = p.text(STORE)? {
        if store != "ferrite" {
            return Err(LOOKUP.error(format!(
                "--store: unknown store {store:?} (ferrite, rocksdb, wiredtiger, lmdb)"
            )));
        }
    }
    p.positionals([])?;
    let db = p.db_or(Some(lookup::DEFAULT_DIR))?;
    let mut config = LookupConfig {
        dir: db.dir,
        pool_mib: if p.value(POOL_MIB).is_some() { db.pool_mib } else { lookup::DEFAULT_POOL_MIB },
        direct_io: db.direct_io,
        keep: p.flag(KEEP),
        ..LookupConfig::default()
    };
    if let Some(text) = p.text(KEYS)? {
        let keys = parse_whole(text, true).ok_or_else(|| {
            LOOKUP.error(format!("--keys: {text:?} is not a whole number (like 20000, 20k, 3.2M)"))
        })?;
        config.keys = p.in_range(KEYS, keys, 1, u64::MAX / 2)?;
    }
    if let Some(text) = p.text(SECONDS)? {
        config.seconds = match text.parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 && s <= 1e6 => s,
            _ => {
                return Err(LOOKUP
                    .error(format!("--seconds: {text:?} is not a positive number of seconds")))
            }
        };
    }
    if let Some(text) = p.text(THREADS)? {
        config.threads = p.number(THREADS, text, 1, lookup::MAX_THREADS as u64)? as usize;
    }
    if let Some(text) = p.text(SEED)? {
        config.seed = parse_seed(text)
            .ok_or_else(|| LOOKUP.error(format!("--seed: {text:?} is not a 64-bit number")))?;
    }
    if let Some(text) = p.text(WORKERS)? {
        config.workers = p.number(WORKERS, text, 1, lookup::MAX_THREADS as u64)? as usize;
    }
    if let Some(text) = p.text(TASKS)? {
        config.tasks = p.number(TASKS, text, 0, u32::MAX.into())? as usize;
    }
    if let Some(text) = p.text(ENGINE)? {
        config.engine = EngineKind::from_name(text).ok_or_else(|| {
            LOOKUP.error(format!("--engine: unknown engine {text:?} (io_uring, aio, psync, mmap)"))
        })?;
    }
    if let Some(list) = p.value(DEVICES) {
        config.devices = split_paths(LOOKUP, list)?;
    }
    config.direct_api = p.flag(DIRECT_API);
    config.json = p.value(JSON).map(PathBuf::from);
    // The ranges that only the workload knows (tasks per worker, repeated devices).
    config.validate().map_err(|e| LOOKUP.error(e.to_string()))?;
    Ok(Command::BenchLookup(config))
}

/// Whether `bench lookup` is asked to run on another store than Ferrite (then it is the
/// comparison workload; on Ferrite it stays the lookup benchmark of its own options).
fn has_peer_store(args: &[OsString]) -> bool {
    args.windows(2).any(|w| w[0] == "--store" && w[1] != "ferrite")
        || args.iter().any(|a| {
            a.to_str().is_some_and(|a| a.starts_with("--store=") && a != "--store=ferrite")
        })
}

/// The options every comparison workload takes.
const WORKLOAD_OPTS: [Opt; 22] = [
    STORE,
    DB,
    RECORDS,
    KEYS,
    CACHE_MIB,
    POOL_MIB,
    CHANGE_BUFFER_MIB,
    SECONDS,
    THREADS,
    WORKERS,
    TASKS,
    DIRECT_API,
    DISTRIBUTION,
    RATE,
    SEED,
    KEEP,
    NO_DIRECT,
    NO_CEILING,
    JSON,
    ORDER,
    SYNC,
    COMMITTERS,
];

fn parse_bench_workload(name: &str, args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(help::bench_workload()));
    }
    let p = Parsed::new(WORKLOAD, args, &WORKLOAD_OPTS)?;
    p.positionals([])?;
    let workload = match (name, p.text(ORDER)?) {
        ("fill", None | Some("random")) => Workload::FillRandom,
        ("fill", Some("seq" | "sequential")) => Workload::FillSequential,
        ("fill", Some(other)) => {
            return Err(WORKLOAD.error(format!("--order: {other:?} is not seq or random")))
        }
        (_, Some(_)) => return Err(WORKLOAD.error("--order is for `fill` only")),
        (name, None) => Workload::from_name(name)
            .ok_or_else(|| WORKLOAD.error(format!("unknown workload {name:?}")))?,
    };
    let workload = sync_workload(&p, workload)?;
    let store = match p.text(STORE)? {
        None => StoreKind::Ferrite,
        Some(text) => StoreKind::from_name(text).ok_or_else(|| {
            WORKLOAD.error(format!(
                "--store: unknown store {text:?} (ferrite, rocksdb, wiredtiger, lmdb)"
            ))
        })?,
    };
    let mut config = workload_options(WORKLOAD, &p, RunConfig::new(workload, store))?;
    if let Some(text) = p.text(COMMITTERS)? {
        config.committers = p.number(COMMITTERS, text, 1, MAX_COMMITTERS)? as usize;
    }
    Ok(Command::BenchWorkload(config))
}

/// `--sync` turns a random-order fill into `fill-sync`, whose concurrency is `--committers`
/// (default 1). `--sync` and `--committers` mean nothing to the other workloads, and
/// `--threads` / `--tasks` nothing to `fill-sync`: each is refused where it does not apply.
fn sync_workload(p: &Parsed<'_>, workload: Workload) -> Result<Workload> {
    let workload = match (p.flag(SYNC), workload) {
        (false, w) => w,
        (true, Workload::FillRandom | Workload::FillSync) => Workload::FillSync,
        (true, Workload::FillSequential) => {
            return Err(WORKLOAD.error(
                "--sync inserts in random order: it does not go with --order seq (fill-seq)",
            ))
        }
        (true, _) => {
            return Err(WORKLOAD.error(
                "--sync is for `fill` only (the other workloads write without syncing, on \
                 every store alike)",
            ))
        }
    };
    if workload == Workload::FillSync {
        for opt in [THREADS, TASKS] {
            if p.value(opt).is_some() {
                return Err(WORKLOAD.error(format!(
                    "{} does not apply to `fill --sync`: its concurrency is --committers N \
                     (threads, or Ferrite's tasks spread over --workers)",
                    opt.name
                )));
            }
        }
    } else if p.value(COMMITTERS).is_some() {
        return Err(WORKLOAD.error(
            "--committers is for `fill --sync` (the other workloads: --threads, or Ferrite's \
             --workers and --tasks)",
        ));
    }
    Ok(workload)
}

/// Applies the options shared by the workloads and `compare` to `config`.
fn workload_options(cmd: Cmd, p: &Parsed<'_>, mut config: RunConfig) -> Result<RunConfig> {
    if let Some(dir) = p.value(DB) {
        config.dir = PathBuf::from(dir);
    }
    let records = match (p.text(RECORDS)?, p.text(KEYS)?) {
        (Some(_), Some(_)) => return Err(cmd.error("--records and --keys are the same option")),
        (Some(text), None) | (None, Some(text)) => Some(text),
        (None, None) => None,
    };
    if let Some(text) = records {
        let n = parse_whole(text, true).ok_or_else(|| {
            cmd.error(format!("--records: {text:?} is not a whole number (like 20000, 20k, 3.2M)"))
        })?;
        config.records = p.in_range(RECORDS, n, 1, u64::MAX / 4)?;
    }
    let cache = match (p.text(CACHE_MIB)?, p.text(POOL_MIB)?) {
        (Some(_), Some(_)) => {
            return Err(cmd.error("--cache-mib and --pool-mib are the same option"))
        }
        (Some(text), None) | (None, Some(text)) => Some(text),
        (None, None) => None,
    };
    if let Some(text) = cache {
        config.cache_mib = p.number(CACHE_MIB, text, 1, MAX_POOL_MIB)?;
    }
    if let Some(text) = p.text(CHANGE_BUFFER_MIB)? {
        let most = ferrite::MAX_CHANGE_BUFFER_BYTES >> 20;
        let mib = p.number(CHANGE_BUFFER_MIB, text, 0, most)?;
        if mib >= config.cache_mib {
            return Err(cmd.error(format!(
                "--change-buffer-mib: {mib} leaves nothing of the {} MiB cache for the pool's \
                 frames",
                config.cache_mib
            )));
        }
        config.change_buffer_mib = Some(mib);
    }
    if let Some(text) = p.text(SECONDS)? {
        config.seconds = parse_seconds(cmd, text)?;
    }
    if let Some(text) = p.text(THREADS)? {
        config.threads = p.number(THREADS, text, 1, 4096)? as usize;
    }
    if let Some(text) = p.text(WORKERS)? {
        config.workers = p.number(WORKERS, text, 1, 1024)? as usize;
    }
    if let Some(text) = p.text(TASKS)? {
        config.tasks = p.number(TASKS, text, 1, 1 << 16)? as usize;
    }
    config.direct_api = p.flag(DIRECT_API);
    if config.direct_api && config.store != StoreKind::Ferrite {
        return Err(cmd.error("--direct-api is for --store ferrite (the peers always use threads)"));
    }
    if config.change_buffer_mib.is_some() && config.store != StoreKind::Ferrite {
        return Err(cmd.error(
            "--change-buffer-mib is for --store ferrite (the peers' write buffers are theirs)",
        ));
    }
    if let Some(text) = p.text(DISTRIBUTION)? {
        config.distribution = Distribution::from_name(text).ok_or_else(|| {
            cmd.error(format!("--distribution: {text:?} is not uniform or zipfian"))
        })?;
    }
    if let Some(text) = p.text(RATE)? {
        let rate = parse_whole(text, true).filter(|&r| r > 0).ok_or_else(|| {
            cmd.error(format!(
                "--rate: {text:?} is not a positive whole number of operations per second"
            ))
        })?;
        config.rate = Some(rate as f64);
    }
    if let Some(text) = p.text(SEED)? {
        config.seed = parse_seed(text)
            .ok_or_else(|| cmd.error(format!("--seed: {text:?} is not a 64-bit number")))?;
    }
    config.keep = p.flag(KEEP);
    config.direct_io = !p.flag(NO_DIRECT);
    config.ceiling = !p.flag(NO_CEILING);
    if let Some(path) = p.value(JSON) {
        config.json = Some(PathBuf::from(path));
    }
    Ok(config)
}

fn parse_bench_compare(args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(help::bench_compare()));
    }
    let mut opts = WORKLOAD_OPTS.to_vec();
    opts.retain(|o| ![STORE, ORDER, JSON, SYNC, COMMITTERS].contains(o));
    opts.extend([STORES, OUT, ROUNDS]);
    let p = Parsed::new(COMPARE, args, &opts)?;
    let [suite] = p.positionals(["SUITE"])?;
    let suite = suite.to_str().unwrap_or("").to_owned();
    if ferrite_bench::compare::suite(&suite).is_none() {
        return Err(COMPARE.error(format!(
            "unknown suite {suite:?} (known: {})",
            ferrite_bench::compare::SUITES.join(", ")
        )));
    }
    let mut base = RunConfig::new(Workload::Lookup, StoreKind::Ferrite);
    base.dir = PathBuf::from("ferrite-data/compare");
    let base = workload_options(COMPARE, &p, base)?;
    let stores = match p.text(STORES)? {
        None => StoreKind::ALL.into_iter().filter(|s| s.built_in()).collect(),
        Some(list) => list
            .split(',')
            .map(|name| {
                StoreKind::from_name(name)
                    .ok_or_else(|| COMPARE.error(format!("--stores: unknown store {name:?}")))
            })
            .collect::<Result<Vec<_>>>()?,
    };
    let out = p.value(OUT).map_or_else(|| PathBuf::from("bench-results"), PathBuf::from);
    let rounds = match p.text(ROUNDS)? {
        None => 1,
        Some(text) => parse_whole(text, false)
            .filter(|&n| (1..=MAX_ROUNDS).contains(&n))
            .ok_or_else(|| {
                COMPARE.error(format!(
                    "--rounds: {text:?} is not a whole number from 1 to {MAX_ROUNDS}"
                ))
            })? as usize,
    };
    Ok(Command::BenchCompare(CompareArgs { suite, out, base, stores, rounds }))
}

fn parse_bench_recovery(args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(help::bench_recovery()));
    }
    let p = Parsed::new(
        RECOVERY,
        args,
        &[DB, SECONDS_LIST, COMMITTERS, WORKERS, CACHE_MIB, CHECKPOINT_MIB, KEEP, NO_DIRECT, JSON],
    )?;
    p.positionals([])?;
    let mut config = RecoveryConfig {
        keep: p.flag(KEEP),
        direct_io: !p.flag(NO_DIRECT),
        json: p.value(JSON).map(PathBuf::from),
        ..RecoveryConfig::default()
    };
    if let Some(dir) = p.value(DB) {
        if dir.is_empty() {
            return Err(RECOVERY.error("--db must not be empty"));
        }
        config.dir = PathBuf::from(dir);
    }
    if let Some(text) = p.text(SECONDS_LIST)? {
        config.seconds = parse_seconds_list(RECOVERY, text)?;
    }
    if let Some(text) = p.text(COMMITTERS)? {
        config.committers = p.number(COMMITTERS, text, 1, MAX_COMMITTERS)? as usize;
    }
    if let Some(text) = p.text(WORKERS)? {
        config.workers = p.number(WORKERS, text, 1, 1024)? as usize;
    }
    if let Some(text) = p.text(CACHE_MIB)? {
        config.cache_mib = p.number(CACHE_MIB, text, 1, MAX_POOL_MIB)?;
    }
    if let Some(text) = p.text(CHECKPOINT_MIB)? {
        config.checkpoint_bytes = p.number(CHECKPOINT_MIB, text, 1, 1 << 20)? << 20;
    }
    config.validate().map_err(|e| RECOVERY.error(e.to_string()))?;
    Ok(Command::BenchRecovery(config))
}

/// `--seconds 10,30,60`: one or more run lengths, fractions allowed, at least 1 ms each.
fn parse_seconds_list(cmd: Cmd, list: &str) -> Result<Vec<f64>> {
    let seconds = list
        .split(',')
        .map(|item| match parse_seconds(cmd, item)? {
            s if s < 1e-3 => Err(cmd.error(format!("--seconds: {item:?} is shorter than 1 ms"))),
            s => Ok(s),
        })
        .collect::<Result<Vec<f64>>>()?;
    if seconds.len() > recovery::MAX_RUNS {
        return Err(cmd.error(format!(
            "--seconds: {} run lengths, at most {} allowed",
            seconds.len(),
            recovery::MAX_RUNS
        )));
    }
    Ok(seconds)
}

/// `--devices a,b,c`: the paths in order; none may be empty.
fn split_paths(cmd: Cmd, list: &OsStr) -> Result<Vec<PathBuf>> {
    let paths: Vec<PathBuf> = list
        .as_bytes()
        .split(|&b| b == b',')
        .map(|part| PathBuf::from(OsStr::from_bytes(part)))
        .collect();
    if paths.iter().any(|p| p.as_os_str().is_empty()) {
        return Err(cmd.error(format!("--devices: {list:?} has an empty path")));
    }
    Ok(paths)
}

/// Seconds: a positive number, fractions allowed.
fn parse_seconds(cmd: Cmd, text: &str) -> Result<f64> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 1e6 => Ok(s),
        _ => Err(cmd.error(format!("--seconds: {text:?} is not a positive number of seconds"))),
    }
}

/// A byte count: digits, optionally followed by a binary unit (`k`/`KiB` = 1024, `m`/`MiB`
/// = 1024^2, `g`/`GiB` = 1024^3), as fio reads its block sizes.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '_').unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => return None,
    };
    parse_whole(digits, false)?.checked_mul(multiplier)
}

fn parse_bench_io(args: &[OsString]) -> Result<Command> {
    if wants_help(args) {
        return Ok(Command::Help(help::bench_io()));
    }
    let p = Parsed::new(
        IO,
        args,
        &[FILE, ENGINE, PATTERN, BS, DEPTH, THREADS, SECONDS, SIZE_MIB, DIRECT, NO_DIRECT, KEEP],
    )?;
    p.positionals([])?;
    if p.flag(DIRECT) && p.flag(NO_DIRECT) {
        return Err(IO.error("--direct and --no-direct exclude each other"));
    }
    let mut config = IoBenchConfig {
        direct: !p.flag(NO_DIRECT),
        keep: p.flag(KEEP),
        ..IoBenchConfig::default()
    };
    if let Some(file) = p.value(FILE) {
        if file.is_empty() {
            return Err(IO.error("--file must not be empty"));
        }
        config.file = PathBuf::from(file);
    }
    if let Some(text) = p.text(ENGINE)? {
        config.engines = match text {
            "all" => EngineKind::ALL.to_vec(),
            name => vec![EngineKind::from_name(name).ok_or_else(|| {
                IO.error(format!(
                    "--engine: unknown engine {name:?} (io_uring, aio, psync, mmap or all)"
                ))
            })?],
        };
    }
    if let Some(text) = p.text(PATTERN)? {
        config.pattern = Pattern::from_name(text).ok_or_else(|| {
            IO.error(format!(
                "--pattern: unknown pattern {text:?} (randread, seqread, randwrite, seqwrite)"
            ))
        })?;
    }
    if let Some(text) = p.text(BS)? {
        let bs = parse_bytes(text).ok_or_else(|| {
            IO.error(format!("--bs: {text:?} is not a size in bytes (like 4096, 4k, 64KiB, 1m)"))
        })?;
        if bs % 4096 != 0 {
            return Err(IO.error(format!("--bs: {bs} is not a multiple of 4096")));
        }
        config.bs = p.in_range(BS, bs, 4096, bench_io::MAX_BS as u64)? as usize;
    }
    if let Some(text) = p.text(DEPTH)? {
        config.depth = p.number(DEPTH, text, 1, bench_io::MAX_DEPTH as u64)? as usize;
    }
    if let Some(text) = p.text(THREADS)? {
        config.threads = p.number(THREADS, text, 1, bench_io::MAX_THREADS as u64)? as usize;
    }
    if let Some(text) = p.text(SECONDS)? {
        config.seconds = parse_seconds(IO, text)?;
    }
    if let Some(text) = p.text(SIZE_MIB)? {
        config.size_mib = p.number(SIZE_MIB, text, 1, bench_io::MAX_SIZE_MIB)?;
    }
    config.validate().map_err(|e| IO.error(e.to_string()))?;
    Ok(Command::BenchIo(config))
}

/// A seed: decimal, or hexadecimal after `0x`.
fn parse_seed(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16).ok(),
        None => parse_whole(text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Command> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        parse(&args)
    }

    fn db(dir: &str) -> DbArgs {
        DbArgs { dir: PathBuf::from(dir), pool_mib: 64, direct_io: true }
    }

    /// The error message of a command line that must fail, checked to contain `needle`.
    #[track_caller]
    fn fails(args: &[&str], needle: &str) -> UsageError {
        match parse_strs(args) {
            Err(e) => {
                assert!(e.message.contains(needle), "{:?}: {:?} lacks {needle:?}", args, e.message);
                e
            }
            Ok(cmd) => panic!("{args:?} parsed as {cmd:?}"),
        }
    }

    #[test]
    fn put_happy_paths() {
        let expected = Command::Put(PutArgs {
            db: db("d"),
            tree: "t".into(),
            key: b"k".to_vec(),
            value: b"v".to_vec(),
        });
        assert_eq!(parse_strs(&["put", "--db", "d", "--tree", "t", "k", "v"]).unwrap(), expected);
        assert_eq!(parse_strs(&["put", "k", "--tree=t", "v", "--db=d"]).unwrap(), expected);
        let hex = parse_strs(&["put", "--db", "d", "--tree", "t", "--hex", "00ff", "0x"]).unwrap();
        assert!(matches!(hex, Command::Put(PutArgs { ref key, ref value, .. })
            if key == &[0, 255] && value.is_empty()));
        let dashes = parse_strs(&["put", "--db", "d", "--tree", "t", "--", "-k", "--v"]).unwrap();
        assert!(matches!(dashes, Command::Put(PutArgs { ref key, ref value, .. })
            if key == b"-k" && value == b"--v"));
        let empty_value = parse_strs(&["put", "--db", "d", "--tree", "t", "k", ""]).unwrap();
        assert!(matches!(empty_value, Command::Put(PutArgs { ref value, .. }) if value.is_empty()));
    }

    #[test]
    fn put_errors() {
        fails(&["put", "--tree", "t", "k", "v"], "missing --db DIR");
        fails(&["put", "--db", "d", "k", "v"], "missing --tree TREE");
        fails(&["put", "--db", "d", "--tree", "t", "k"], "missing VALUE");
        fails(&["put", "--db", "d", "--tree", "t"], "missing KEY");
        fails(&["put", "--db", "d", "--tree", "t", "k", "v", "w"], "unexpected argument \"w\"");
        fails(&["put", "--db", "d", "--tree", "t", "--hex", "zz", "00"], "KEY: \"zz\" is not hex");
        fails(
            &["put", "--db", "d", "--tree", "t", "--hex", "00", "abc"],
            "VALUE: \"abc\" is not hex",
        );
        fails(&["put", "--db", "d", "--db", "e", "--tree", "t", "k", "v"], "--db given twice");
        fails(&["put", "--db", "d", "--tree", "t", "-k", "v"], "put `--` before it");
        fails(
            &["put", "--db", "d", "--tree", "t", "--bogus", "k", "v"],
            "unknown option \"--bogus\"",
        );
        fails(&["put", "--db", "--tree", "t", "k", "v"], "--db needs a value");
        fails(&["put", "--db", "d", "--tree", "t", "k", "v", "--tree"], "given twice");
        fails(&["put", "--db", "d", "--tree"], "--tree needs a value");
        fails(&["put", "--db", "", "--tree", "t", "k", "v"], "--db must not be empty");
        fails(&["put", "--db", "d", "--hex=1", "--tree", "t", "k", "v"], "--hex takes no value");
        let e = fails(&["put", "--db", "d", "k", "v"], "missing --tree");
        let text = e.to_string();
        assert!(
            text.starts_with("put: missing --tree TREE\nusage: ferrite put --db DIR"),
            "{text}"
        );
        assert!(text.ends_with("run `ferrite put --help` for more"), "{text}");
    }

    #[test]
    fn get_and_del() {
        let expected = KeyArgs { db: db("d"), tree: "t".into(), hex: false, key: b"k".to_vec() };
        assert_eq!(
            parse_strs(&["get", "--db", "d", "--tree", "t", "k"]).unwrap(),
            Command::Get(expected.clone())
        );
        assert_eq!(
            parse_strs(&["del", "--tree", "t", "--db", "d", "k"]).unwrap(),
            Command::Del(expected)
        );
        let hex = parse_strs(&["get", "--db", "d", "--tree", "t", "--hex", "6b"]).unwrap();
        assert!(matches!(hex, Command::Get(KeyArgs { hex: true, ref key, .. }) if key == b"k"));
        let tuned =
            parse_strs(&["get", "--db", "d", "--tree", "t", "--pool-mib", "1", "--no-direct", "k"])
                .unwrap();
        assert!(matches!(
            tuned,
            Command::Get(KeyArgs { db: DbArgs { pool_mib: 1, direct_io: false, .. }, .. })
        ));
        fails(&["get", "--db", "d", "--tree", "t"], "missing KEY");
        fails(&["get", "--db", "d", "--tree", "t", "a", "b"], "unexpected argument \"b\"");
        fails(&["del", "--db", "d", "k"], "missing --tree");
        fails(
            &["get", "--db", "d", "--tree", "t", "--pool-mib", "0", "k"],
            "--pool-mib: 0 is out of range",
        );
        fails(&["get", "--db", "d", "--tree", "t", "--pool-mib", "1.5", "k"], "not a whole number");
        fails(
            &["get", "--db", "d", "--tree", "t", "--pool-mib", "-3", "k"],
            "\"-3\" is not a whole number",
        );
        fails(
            &["get", "--db", "d", "--tree", "t", "--limit", "3", "k"],
            "unknown option \"--limit\"",
        );
        let e = fails(&["del", "--db", "d"], "missing --tree");
        assert_eq!(e.command, "del");
    }

    #[test]
    fn keys_keep_their_bytes_even_when_not_utf8() {
        use std::os::unix::ffi::OsStringExt;
        let args: Vec<OsString> = ["get", "--db", "d", "--tree", "t"]
            .iter()
            .map(OsString::from)
            .chain([OsString::from_vec(b"\xff\x00k".to_vec())])
            .collect();
        let cmd = parse(&args).unwrap();
        assert!(matches!(cmd, Command::Get(KeyArgs { ref key, .. }) if key == b"\xff\x00k"));
        let bad_tree: Vec<OsString> = ["get", "--db", "d", "k", "--tree"]
            .iter()
            .map(OsString::from)
            .chain([OsString::from_vec(b"\xff".to_vec())])
            .collect();
        let e = parse(&bad_tree).unwrap_err();
        assert!(e.message.contains("--tree must be UTF-8"), "{e}");
    }

    #[test]
    fn scan_options() {
        let all = parse_strs(&[
            "scan",
            "--db",
            "d",
            "--tree",
            "t",
            "--from",
            "a",
            "--to",
            "m",
            "--limit",
            "10",
            "--reverse",
        ])
        .unwrap();
        assert_eq!(
            all,
            Command::Scan(ScanArgs {
                db: db("d"),
                tree: "t".into(),
                hex: false,
                from: Some(b"a".to_vec()),
                to: Some(b"m".to_vec()),
                limit: Some(10),
                reverse: true,
            })
        );
        let bare = parse_strs(&["scan", "--db", "d", "--tree", "t"]).unwrap();
        assert!(matches!(
            bare,
            Command::Scan(ScanArgs { from: None, to: None, limit: None, reverse: false, .. })
        ));
        let hex =
            parse_strs(&["scan", "--db", "d", "--tree", "t", "--hex", "--from=0a", "--limit=0"])
                .unwrap();
        assert!(matches!(hex, Command::Scan(ScanArgs { ref from, limit: Some(0), hex: true, .. })
            if from.as_deref() == Some(&[10][..])));
        let dash_key = parse_strs(&["scan", "--db", "d", "--tree", "t", "--from=-x"]).unwrap();
        assert!(
            matches!(dash_key, Command::Scan(ScanArgs { ref from, .. }) if from.as_deref() == Some(&b"-x"[..]))
        );
        fails(
            &["scan", "--db", "d", "--tree", "t", "--limit", "ten"],
            "--limit: \"ten\" is not a whole number",
        );
        fails(
            &["scan", "--db", "d", "--tree", "t", "--limit", "-1"],
            "\"-1\" is not a whole number",
        );
        fails(
            &["scan", "--db", "d", "--tree", "t", "--hex", "--to", "xyz1"],
            "--to: \"xyz1\" is not hex",
        );
        fails(&["scan", "--db", "d", "--tree", "t", "extra"], "unexpected argument \"extra\"");
        fails(
            &["scan", "--db", "d", "--tree", "t", "--reverse", "--reverse"],
            "--reverse given twice",
        );
        fails(&["scan", "--db", "d"], "missing --tree");
    }

    #[test]
    fn trees_actions() {
        assert_eq!(
            parse_strs(&["trees", "--db", "d"]).unwrap(),
            Command::Trees(TreesArgs { db: db("d"), action: TreesAction::List })
        );
        assert_eq!(
            parse_strs(&["trees", "--db", "d", "--create", "x"]).unwrap(),
            Command::Trees(TreesArgs { db: db("d"), action: TreesAction::Create("x".into()) })
        );
        assert_eq!(
            parse_strs(&["trees", "--drop", "x", "--db", "d"]).unwrap(),
            Command::Trees(TreesArgs { db: db("d"), action: TreesAction::Drop("x".into()) })
        );
        fails(&["trees", "--db", "d", "--create", "x", "--drop", "y"], "exclude each other");
        fails(&["trees", "--db", "d", "x"], "unexpected argument");
        fails(&["trees"], "missing --db");
        fails(&["trees", "--db", "d", "--tree", "t"], "unknown option \"--tree\"");
    }

    #[test]
    fn stats_and_check() {
        assert_eq!(
            parse_strs(&["stats", "--db", "d"]).unwrap(),
            Command::Stats(StatsArgs { db: db("d"), quick: false })
        );
        assert_eq!(
            parse_strs(&["stats", "--db", "d", "--quick", "--pool-mib", "8"]).unwrap(),
            Command::Stats(StatsArgs { db: DbArgs { pool_mib: 8, ..db("d") }, quick: true })
        );
        assert_eq!(parse_strs(&["check", "--db", "d"]).unwrap(), Command::Check(db("d")));
        assert_eq!(
            parse_strs(&["check", "--db", "d", "--no-direct"]).unwrap(),
            Command::Check(DbArgs { direct_io: false, ..db("d") })
        );
        fails(&["stats"], "missing --db");
        fails(&["check", "--db", "d", "--quick"], "unknown option \"--quick\"");
        fails(&["check", "--db", "d", "now"], "unexpected argument");
    }

    #[test]
    fn bench_lookup_defaults_and_options() {
        let Command::BenchLookup(c) = parse_strs(&["bench", "lookup"]).unwrap() else { panic!() };
        assert_eq!(c.dir, PathBuf::from(lookup::DEFAULT_DIR));
        assert_eq!(c.keys, lookup::DEFAULT_KEYS);
        assert_eq!(
            (c.pool_mib, c.seconds, c.threads, c.keep, c.direct_io),
            (64, 20.0, 1, false, true)
        );
        let Command::BenchLookup(c) = parse_strs(&[
            "bench",
            "lookup",
            "--db",
            "x",
            "--keys",
            "20000",
            "--pool-mib",
            "1",
            "--seconds",
            "1",
            "--threads",
            "2",
            "--seed",
            "0x10",
            "--keep",
            "--no-direct",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(c.dir, PathBuf::from("x"));
        assert_eq!((c.keys, c.pool_mib, c.seconds, c.threads, c.seed), (20_000, 1, 1.0, 2, 16));
        assert!(c.keep && !c.direct_io);
        let Command::BenchLookup(c) =
            parse_strs(&["bench", "lookup", "--keys", "3.2M", "--seconds", "0.5"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((c.keys, c.seconds), (3_200_000, 0.5));
        fails(&["bench", "lookup", "--keys", "0"], "--keys: 0 is out of range");
        fails(&["bench", "lookup", "--keys", "lots"], "not a whole number (like 20000, 20k, 3.2M)");
        fails(&["bench", "lookup", "--seconds", "0"], "not a positive number of seconds");
        fails(&["bench", "lookup", "--seconds", "inf"], "not a positive number of seconds");
        fails(&["bench", "lookup", "--threads", "0"], "--threads: 0 is out of range (1 to 1024)");
        fails(&["bench", "lookup", "--seed", "0xg"], "--seed: \"0xg\" is not a 64-bit number");
        fails(&["bench", "lookup", "--tree", "t"], "unknown option \"--tree\"");
        fails(&["bench", "lookup", "now"], "unexpected argument");
        fails(&["bench"], "missing WORKLOAD");
        let e = fails(
            &["bench", "ycsb"],
            "unknown workload \"ycsb\" (known: lookup, fill, fill-seq, fill-random, fill-sync, \
             ycsb-a .. ycsb-f, compare, io, recovery)",
        );
        assert_eq!(e.command, "bench");
    }

    #[test]
    fn bench_lookup_worker_and_device_options() {
        let Command::BenchLookup(c) = parse_strs(&["bench", "lookup"]).unwrap() else { panic!() };
        assert_eq!((c.workers, c.tasks), (LookupConfig::default().workers, 64));
        assert!(c.workers >= 1);
        assert_eq!(
            (c.engine, c.devices.is_empty(), c.direct_api),
            (EngineKind::IoUring, true, false)
        );
        let Command::BenchLookup(c) = parse_strs(&[
            "bench",
            "lookup",
            "--workers",
            "3",
            "--tasks",
            "128",
            "--engine",
            "aio",
            "--devices",
            "/dev/nvme0n1,/dev/nvme1n1,data/file",
            "--direct-api",
            "--threads",
            "8",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!((c.workers, c.tasks, c.engine, c.threads), (3, 128, EngineKind::Aio, 8));
        assert!(c.direct_api);
        let devices: Vec<PathBuf> =
            ["/dev/nvme0n1", "/dev/nvme1n1", "data/file"].iter().map(PathBuf::from).collect();
        assert_eq!(c.devices, devices);
        fails(&["bench", "lookup", "--workers", "0"], "--workers: 0 is out of range");
        fails(&["bench", "lookup", "--tasks", "0"], "0 tasks per worker is out of range");
        fails(&["bench", "lookup", "--tasks", "100000"], "out of range (1 to 65536)");
        fails(&["bench", "lookup", "--engine", "all"], "unknown engine \"all\"");
        fails(&["bench", "lookup", "--devices", "a,,b"], "has an empty path");
        fails(&["bench", "lookup", "--devices", "a,b,a"], "device a is given twice");
        fails(&["bench", "lookup", "--direct-api=1"], "--direct-api takes no value");
    }

    #[test]
    fn bench_io_defaults_and_options() {
        let Command::BenchIo(c) = parse_strs(&["bench", "io"]).unwrap() else { panic!() };
        assert_eq!(c, IoBenchConfig::default());
        assert_eq!(c.file, PathBuf::from("./ferrite-data/bench-io.dat"));
        assert_eq!((c.engines.clone(), c.pattern), (vec![EngineKind::IoUring], Pattern::RandRead));
        assert_eq!((c.bs, c.depth, c.threads, c.seconds, c.size_mib), (4096, 64, 1, 10.0, 1024));
        assert!(c.direct && !c.keep && c.use_fio);
        let Command::BenchIo(c) = parse_strs(&[
            "bench",
            "io",
            "--file",
            "/dev/vdb",
            "--engine",
            "all",
            "--pattern",
            "seqwrite",
            "--bs",
            "64KiB",
            "--depth",
            "128",
            "--threads",
            "2",
            "--seconds",
            "5",
            "--size-mib",
            "512",
            "--no-direct",
            "--keep",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(c.file, PathBuf::from("/dev/vdb"));
        assert_eq!(c.engines, EngineKind::ALL.to_vec());
        assert_eq!(c.engines[0], EngineKind::IoUring, "io_uring first");
        assert_eq!(c.pattern, Pattern::SeqWrite);
        assert_eq!((c.bs, c.depth, c.threads, c.seconds, c.size_mib), (65536, 128, 2, 5.0, 512));
        assert!(!c.direct && c.keep);
        for (bs, bytes) in
            [("4096", 4096), ("4k", 4096), ("8K", 8192), ("1m", 1 << 20), ("2MiB", 2 << 20)]
        {
            let Command::BenchIo(c) = parse_strs(&["bench", "io", "--bs", bs]).unwrap() else {
                panic!()
            };
            assert_eq!(c.bs, bytes, "{bs}");
        }
        let Command::BenchIo(c) =
            parse_strs(&["bench", "io", "--direct", "--engine=mmap"]).unwrap()
        else {
            panic!()
        };
        assert!(c.direct);
        assert_eq!(c.engines, vec![EngineKind::Mmap]);
        fails(&["bench", "io", "--bs", "4000"], "--bs: 4000 is not a multiple of 4096");
        fails(&["bench", "io", "--bs", "4q"], "is not a size in bytes");
        fails(&["bench", "io", "--bs", "32m"], "--bs: 33554432 is out of range");
        fails(&["bench", "io", "--engine", "spdk"], "unknown engine \"spdk\"");
        fails(&["bench", "io", "--pattern", "rand"], "unknown pattern \"rand\"");
        fails(&["bench", "io", "--depth", "0"], "--depth: 0 is out of range");
        fails(&["bench", "io", "--threads", "1000"], "--threads: 1000 is out of range (1 to 256)");
        fails(&["bench", "io", "--seconds", "-1"], "not a positive number of seconds");
        fails(&["bench", "io", "--size-mib", "0"], "--size-mib: 0 is out of range");
        fails(&["bench", "io", "--size-mib", "1", "--bs", "2m"], "does not fit in 1 MiB");
        fails(&["bench", "io", "--direct", "--no-direct"], "exclude each other");
        fails(&["bench", "io", "--file", ""], "--file must not be empty");
        fails(&["bench", "io", "--db", "x"], "unknown option \"--db\"");
        fails(&["bench", "io", "extra"], "unexpected argument");
        assert_eq!(parse_bytes("1_024"), Some(1024));
        assert_eq!(parse_bytes("1g"), Some(1 << 30));
        assert_eq!(parse_bytes("k"), None);
        assert_eq!(parse_bytes("1kb"), None);
        assert_eq!(parse_bytes("99999999999999999999g"), None);
    }

    #[test]
    fn help_everywhere() {
        let help_of = |args: &[&str]| match parse_strs(args) {
            Ok(Command::Help(text)) => text,
            other => panic!("{args:?}: {other:?}"),
        };
        assert_eq!(help_of(&["--help"]), help::top());
        assert_eq!(help_of(&["-h"]), help::top());
        assert_eq!(help_of(&["help"]), help::top());
        for (command, text) in [
            ("put", help::put()),
            ("get", help::get()),
            ("del", help::del()),
            ("scan", help::scan()),
            ("trees", help::trees()),
            ("stats", help::stats()),
            ("check", help::check()),
        ] {
            assert_eq!(help_of(&[command, "--help"]), text, "{command}");
            assert_eq!(help_of(&[command, "--db", "d", "-h"]), text, "{command}");
            // Help wins over errors in the same command line.
            assert_eq!(help_of(&[command, "--bogus", "--help"]), text, "{command}");
            assert_eq!(help_of(&["help", command]), text, "{command}");
        }
        assert_eq!(help_of(&["bench", "--help"]), help::bench());
        assert_eq!(help_of(&["help", "bench"]), help::bench());
        assert_eq!(help_of(&["bench", "lookup", "--help"]), help::bench_lookup());
        assert_eq!(help_of(&["help", "bench", "lookup"]), help::bench_lookup());
        assert_eq!(help_of(&["bench", "io", "--help"]), help::bench_io());
        assert_eq!(help_of(&["help", "bench", "io"]), help::bench_io());
        assert_eq!(help_of(&["bench", "recovery", "--help"]), help::bench_recovery());
        assert_eq!(help_of(&["bench", "recovery", "--seconds", "x", "-h"]), help::bench_recovery());
        assert_eq!(help_of(&["help", "bench", "recovery"]), help::bench_recovery());
        // After `--`, "--help" is a key.
        let key = parse_strs(&["get", "--db", "d", "--tree", "t", "--", "--help"]).unwrap();
        assert!(matches!(key, Command::Get(KeyArgs { ref key, .. }) if key == b"--help"));
        fails(&["help", "nope"], "no help for \"nope\"");
    }

    #[test]
    fn top_level_errors_and_version() {
        let e = fails(&[], "no command given");
        assert!(e.to_string().contains("run `ferrite --help` for more"));
        fails(&["frobnicate"], "unknown command \"frobnicate\"");
        assert_eq!(parse_strs(&["--version"]).unwrap(), Command::Version);
    }

    #[test]
    fn whole_numbers() {
        assert_eq!(parse_whole("20000", false), Some(20_000));
        assert_eq!(parse_whole("3_200_000", false), Some(3_200_000));
        assert_eq!(parse_whole("20k", true), Some(20_000));
        assert_eq!(parse_whole("20k", false), None);
        assert_eq!(parse_whole("3.2M", true), Some(3_200_000));
        assert_eq!(parse_whole("1.5k", true), Some(1_500));
        assert_eq!(parse_whole("1G", true), Some(1_000_000_000));
        assert_eq!(parse_whole("1.0005k", true), None);
        assert_eq!(parse_whole("1.5", true), None);
        assert_eq!(parse_whole("", true), None);
        assert_eq!(parse_whole("k", true), None);
        assert_eq!(parse_whole("_1", false), None);
        assert_eq!(parse_whole("-1", false), None);
        assert_eq!(parse_whole("18446744073709551615", false), Some(u64::MAX));
        assert_eq!(parse_whole("18446744073709551616", false), None);
        assert_eq!(parse_seed("0xff"), Some(255));
        assert_eq!(parse_seed("42"), Some(42));
    }

    #[test]
    fn comparison_workloads_parse_and_refuse_bad_values() {
        let Command::BenchWorkload(c) = parse_strs(&[
            "bench",
            "ycsb-a",
            "--store",
            "rocksdb",
            "--records",
            "1M",
            "--threads",
            "64",
            "--rate",
            "50k",
            "--json",
            "runs.jsonl",
            "--cache-mib",
            "128",
            "--distribution",
            "uniform",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(c.workload, Workload::Ycsb('a'));
        assert_eq!(c.store, StoreKind::RocksDb);
        assert_eq!((c.records, c.threads, c.cache_mib), (1_000_000, 64, 128));
        assert_eq!(c.rate, Some(50_000.0));
        assert_eq!(c.distribution, Distribution::Uniform);
        assert_eq!(c.json.as_deref(), Some(std::path::Path::new("runs.jsonl")));
        let Command::BenchWorkload(c) = parse_strs(&["bench", "fill", "--order", "seq"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((c.workload, c.store), (Workload::FillSequential, StoreKind::Ferrite));
        assert_eq!(c.change_buffer_mib, None, "the engine's default");
        // Ferrite's change buffer: 0 to 128 MiB, below the cache, Ferrite only.
        let Command::BenchWorkload(c) =
            parse_strs(&["bench", "ycsb-c", "--change-buffer-mib", "0"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(c.change_buffer_mib, Some(0));
        let with = |mib: &str| {
            let mut c = RunConfig::new(Workload::Ycsb('c'), StoreKind::Ferrite);
            c.change_buffer_mib = mib.parse().ok();
            c.hash()
        };
        assert_ne!(with("0"), with(""), "the option changes the config hash");
        fails(&["bench", "fill", "--change-buffer-mib", "129"], "out of range");
        fails(
            &["bench", "fill", "--cache-mib", "16", "--change-buffer-mib", "16"],
            "leaves nothing of the 16 MiB cache",
        );
        fails(
            &["bench", "ycsb-a", "--store", "rocksdb", "--change-buffer-mib", "8"],
            "is for --store ferrite",
        );
        // `lookup` on a peer is the comparison workload; on Ferrite, the lookup benchmark.
        assert!(matches!(
            parse_strs(&["bench", "lookup", "--store", "lmdb"]).unwrap(),
            Command::BenchWorkload(RunConfig { store: StoreKind::Lmdb, .. })
        ));
        assert!(matches!(
            parse_strs(&["bench", "lookup", "--store", "ferrite", "--json", "x"]).unwrap(),
            Command::BenchLookup(LookupConfig { json: Some(_), .. })
        ));
        fails(&["bench", "ycsb-a", "--store", "mysql"], "--store: unknown store \"mysql\"");
        fails(&["bench", "ycsb-a", "--rate", "0"], "--rate: \"0\" is not a positive");
        fails(&["bench", "ycsb-a", "--order", "seq"], "--order is for `fill` only");
        fails(&["bench", "fill", "--order", "up"], "--order: \"up\" is not seq or random");
        fails(&["bench", "ycsb-b", "--distribution", "x"], "is not uniform or zipfian");
        fails(&["bench", "ycsb-c", "--store", "lmdb", "--direct-api"], "--direct-api is for");
        fails(&["bench", "ycsb-c", "--records", "1k", "--keys", "2k"], "the same option");
        let Command::BenchCompare(c) =
            parse_strs(&["bench", "compare", "quick", "--stores", "ferrite", "--records", "20k"])
                .unwrap()
        else {
            panic!()
        };
        assert_eq!((c.suite.as_str(), c.stores.as_slice()), ("quick", &[StoreKind::Ferrite][..]));
        assert_eq!(c.base.records, 20_000);
        assert_eq!(c.rounds, 1, "one round unless asked");
        let Command::BenchCompare(c) =
            parse_strs(&["bench", "compare", "sync", "--rounds", "3"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(c.rounds, 3);
        fails(&["bench", "compare", "huge"], "unknown suite \"huge\"");
        fails(&["bench", "compare", "quick", "--stores", "x"], "--stores: unknown store");
        for bad in ["0", "101", "x", "2.5"] {
            fails(&["bench", "compare", "sync", "--rounds", bad], "--rounds: ");
        }
    }

    #[test]
    fn sync_fill_parses_and_refuses_what_does_not_apply() {
        let sync = |args: &[&str]| match parse_strs(args).unwrap() {
            Command::BenchWorkload(c) => c,
            other => panic!("{args:?}: {other:?}"),
        };
        let c = sync(&["bench", "fill", "--sync", "--committers", "64", "--store", "rocksdb"]);
        assert_eq!(
            (c.workload, c.store, c.committers),
            (Workload::FillSync, StoreKind::RocksDb, 64)
        );
        assert_eq!(c.workload.name(), "fill-sync");
        let c = sync(&["bench", "fill", "--sync"]);
        assert_eq!(
            (c.workload, c.store, c.committers),
            (Workload::FillSync, StoreKind::Ferrite, 1)
        );
        let c = sync(&[
            "bench",
            "fill",
            "--sync",
            "--order",
            "random",
            "--committers=8",
            "--workers",
            "2",
            "--direct-api",
            "--seconds",
            "5",
        ]);
        assert_eq!(
            (c.workload, c.committers, c.workers, c.seconds),
            (Workload::FillSync, 8, 2, 5.0)
        );
        assert!(c.direct_api);
        assert_eq!(sync(&["bench", "fill-sync", "--committers", "4"]).committers, 4);
        assert_eq!(sync(&["bench", "fill-random", "--sync"]).workload, Workload::FillSync);
        // Without --sync a fill stays what it was.
        assert_eq!(sync(&["bench", "fill"]).workload, Workload::FillRandom);
        fails(&["bench", "fill", "--committers", "8"], "--committers is for `fill --sync`");
        fails(&["bench", "ycsb-a", "--committers", "8"], "--committers is for `fill --sync`");
        fails(&["bench", "ycsb-a", "--sync"], "--sync is for `fill` only");
        fails(&["bench", "lookup", "--store", "rocksdb", "--sync"], "--sync is for `fill` only");
        fails(&["bench", "fill", "--sync", "--order", "seq"], "does not go with --order seq");
        fails(&["bench", "fill-seq", "--sync"], "does not go with --order seq");
        fails(
            &["bench", "fill", "--sync", "--threads", "8"],
            "--threads does not apply to `fill --sync`",
        );
        fails(&["bench", "fill", "--sync", "--tasks", "8"], "--tasks does not apply");
        fails(
            &["bench", "fill", "--sync", "--committers", "0"],
            "--committers: 0 is out of range (1 to 4096)",
        );
        fails(&["bench", "fill", "--sync", "--committers", "many"], "is not a whole number");
        fails(&["bench", "fill", "--sync=1"], "--sync takes no value");
        fails(&["bench", "fill", "--committers"], "--committers needs a value");
        fails(
            &["bench", "compare", "sync", "--committers", "8"],
            "unknown option \"--committers\"",
        );
        fails(&["bench", "compare", "sync", "--sync"], "unknown option \"--sync\"");
        let Command::BenchCompare(c) =
            parse_strs(&["bench", "compare", "sync", "--stores", "ferrite,rocksdb"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((c.suite.as_str(), c.stores.len()), ("sync", 2));
    }
    #[test]
    fn bench_recovery_defaults_options_and_errors() {
        let recovery = |args: &[&str]| match parse_strs(args).unwrap() {
            Command::BenchRecovery(c) => c,
            other => panic!("{args:?}: {other:?}"),
        };
        let c = recovery(&["bench", "recovery"]);
        assert_eq!(c, RecoveryConfig::default());
        assert_eq!(c.dir, PathBuf::from(recovery::DEFAULT_DIR));
        assert_eq!(c.seconds, vec![5.0, 10.0, 20.0]);
        assert_eq!((c.committers, c.cache_mib), (16, 64));
        assert_eq!(c.checkpoint_bytes, ferrite::Options::default().checkpoint_log_bytes);
        assert!(!c.keep && c.direct_io && c.json.is_none());
        let c = recovery(&[
            "bench",
            "recovery",
            "--db",
            "/tmp/r",
            "--seconds",
            "10,30,60",
            "--committers",
            "64",
            "--workers=3",
            "--cache-mib",
            "8",
            "--checkpoint-mib",
            "4",
            "--keep",
            "--no-direct",
            "--json",
            "runs.jsonl",
        ]);
        assert_eq!(c.dir, PathBuf::from("/tmp/r"));
        assert_eq!(c.seconds, vec![10.0, 30.0, 60.0]);
        assert_eq!((c.committers, c.workers, c.cache_mib), (64, 3, 8));
        assert_eq!(c.checkpoint_bytes, 4 << 20);
        assert!(c.keep && !c.direct_io);
        assert_eq!(c.json.as_deref(), Some(std::path::Path::new("runs.jsonl")));
        assert_eq!(recovery(&["bench", "recovery", "--seconds", "0.3,0.6"]).seconds, [0.3, 0.6]);
        assert_eq!(recovery(&["bench", "recovery", "--seconds", "2"]).seconds, [2.0]);
        let e = fails(&["bench", "recovery", "--seconds", "10,,30"], "--seconds: \"\" is not a");
        assert_eq!(e.command, "bench recovery");
        assert!(e.to_string().contains("usage: ferrite bench recovery"), "{e}");
        fails(&["bench", "recovery", "--seconds", "10,x"], "--seconds: \"x\" is not a positive");
        fails(&["bench", "recovery", "--seconds", "0"], "is not a positive number of seconds");
        fails(&["bench", "recovery", "--seconds", "-5"], "--seconds: \"-5\" is not a positive");
        fails(&["bench", "recovery", "--seconds", "0.0001"], "shorter than 1 ms");
        let many = vec!["1"; recovery::MAX_RUNS + 1].join(",");
        fails(&["bench", "recovery", "--seconds", &many], "at most 64 allowed");
        fails(&["bench", "recovery", "--committers", "0"], "--committers: 0 is out of range");
        fails(&["bench", "recovery", "--committers", "4097"], "(1 to 4096)");
        fails(&["bench", "recovery", "--checkpoint-mib", "0"], "--checkpoint-mib: 0 is out of");
        fails(&["bench", "recovery", "--checkpoint-mib", "1.5"], "is not a whole number");
        fails(&["bench", "recovery", "--cache-mib", "0"], "--cache-mib: 0 is out of range");
        fails(&["bench", "recovery", "--workers", "0"], "--workers: 0 is out of range");
        fails(&["bench", "recovery", "--db", ""], "--db must not be empty");
        fails(&["bench", "recovery", "--keep=1"], "--keep takes no value");
        fails(&["bench", "recovery", "--store", "rocksdb"], "unknown option \"--store\"");
        fails(&["bench", "recovery", "--threads", "4"], "unknown option \"--threads\"");
        fails(&["bench", "recovery", "now"], "unexpected argument \"now\"");
        fails(&["bench", "recovery", "--seconds", "1", "--seconds", "2"], "given twice");
    }
}
